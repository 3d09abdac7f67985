//! A key issued whole for a holder that is not a claim (a COSI access): its mode and quota are
//! written with it in one transaction, so that a retry after a crash finds the key exactly as
//! asked, and any other key of the holder tells a different request apart.

use super::key_mode::KeyMode;
use super::records::{AccessKey, issue_in};
use super::{BucketStore, Quota, StoreError, WebIdentityAccess};

/// What [`BucketStore::issue_own_key`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnKey {
    /// The holder's key on the bucket with the mode and quota asked: new, or issued before.
    Issued(AccessKey),
    /// The holder has a key with another bucket, mode or quota; nothing was changed.
    Differs,
}

impl BucketStore {
    /// Issues `user_id`'s only key, on `bucket` (which must exist) with `mode`, `quota` and the
    /// web identities it lets in (see [`WebIdentityAccess`]), or answers the key it has already
    /// when that one is the same.
    pub async fn issue_own_key(
        &self,
        user_id: &str,
        bucket: &str,
        (mode, quota): (KeyMode, Quota),
        web_identity: Option<WebIdentityAccess>,
    ) -> Result<OwnKey, StoreError> {
        if user_id.is_empty() {
            return Err(StoreError::InvalidArgument("user id must not be empty".into()));
        }
        let (user_id, bucket) = (user_id.to_owned(), bucket.to_owned());
        self.blocking(move |store| {
            let answer = store.inner.mutate(|tx| {
                let held: Vec<AccessKey> = tx
                    .state
                    .keys_of_user(&user_id)
                    .iter()
                    .filter_map(|id| tx.state.keys.get(id).cloned())
                    .collect();
                let same = |k: &AccessKey| {
                    k.buckets == [bucket.clone()]
                        && k.mode == mode
                        && k.quota == quota
                        && k.web_identity == web_identity
                };
                if let Some(key) = held.iter().max_by_key(|k| k.generation) {
                    return Ok(if held.iter().all(same) {
                        OwnKey::Issued(key.clone())
                    } else {
                        OwnKey::Differs
                    });
                }
                if !store.bucket_exists(&bucket)? {
                    return Err(StoreError::NoSuchBucket(bucket.clone()));
                }
                let key = AccessKey {
                    mode,
                    quota,
                    web_identity: web_identity.clone(),
                    ..issue_in(tx, &user_id, &bucket)
                };
                tx.put_key(key.clone());
                Ok(OwnKey::Issued(key))
            })?;
            if let OwnKey::Issued(_) = answer {
                store.meter(&bucket)?.set_user_quota(&user_id, quota);
            }
            Ok(answer)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Creator;

    fn quota(objects: u64) -> Quota {
        Quota { max_objects: Some(objects), max_bytes: None }
    }

    #[tokio::test]
    async fn a_key_is_issued_once_whole_and_found_again_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let store = BucketStore::open(dir.path().to_owned(), "node").unwrap();
        let creator = Creator { user_id: "cosi-b-1", delete_with_claim: true };
        store.create_bucket("bucket-a", creator).await.unwrap();
        store.create_bucket("bucket-b", creator).await.unwrap();
        let issue = |store: &BucketStore, bucket: &'static str, mode, q| {
            let store = store.clone();
            async move { store.issue_own_key("cosi-a-1", bucket, (mode, q), None).await.unwrap() }
        };
        let OwnKey::Issued(key) = issue(&store, "bucket-a", KeyMode::ReadOnly, quota(5)).await
        else {
            panic!("the first request issues a key")
        };
        assert_eq!(
            (key.mode, key.quota, key.buckets.clone()),
            (KeyMode::ReadOnly, quota(5), vec!["bucket-a".to_owned()])
        );
        assert_eq!(
            issue(&store, "bucket-a", KeyMode::ReadOnly, quota(5)).await,
            OwnKey::Issued(key.clone())
        );
        for (bucket, mode, q) in [
            ("bucket-a", KeyMode::ReadWrite, quota(5)),
            ("bucket-a", KeyMode::ReadOnly, quota(6)),
            ("bucket-b", KeyMode::ReadOnly, quota(5)),
        ] {
            assert_eq!(issue(&store, bucket, mode, q).await, OwnKey::Differs, "{bucket} {mode:?}");
        }
        assert_eq!(store.keys_for_user("cosi-a-1").len(), 1, "nothing else was issued");
        drop(store);
        let reopened = BucketStore::open(dir.path().to_owned(), "node").unwrap();
        assert_eq!(
            issue(&reopened, "bucket-a", KeyMode::ReadOnly, quota(5)).await,
            OwnKey::Issued(key)
        );
        let missing = reopened.issue_own_key(
            "cosi-a-2",
            "no-bucket",
            (KeyMode::ReadWrite, Quota::default()),
            None,
        );
        assert!(matches!(missing.await, Err(StoreError::NoSuchBucket(_))));
        assert!(
            reopened
                .issue_own_key("", "bucket-a", (KeyMode::ReadWrite, Quota::default()), None)
                .await
                .is_err()
        );
    }
}
