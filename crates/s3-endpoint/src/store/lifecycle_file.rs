//! Where a bucket's lifecycle rules are kept: one file, `.provisioner/meta/<bucket>/
//! lifecycle.json`, replaced atomically and synced before PutBucketLifecycleConfiguration
//! answers, and removed with the bucket's other metadata when the bucket goes. The lifecycle
//! pass reads them from there every time, so that nothing it does depends on memory a restart
//! loses; reads and writes of objects, which name the rule that will expire them
//! (`x-amz-expiration`), read a copy kept in memory, replaced with the file.
//!
//! A rule sent without an `ID` is given one, as S3 does, so that it can be named (in
//! `x-amz-expiration`, in GetBucketLifecycleConfiguration) and told apart from the others.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};

use base64::Engine as _;

use super::config_file::{read_config, replace_config};
use super::lifecycle::LifecycleConfig;
use super::{BucketStore, StoreError};

/// The file's name in the bucket's metadata directory, beside the two-hex-digit directories of
/// object metadata, `side` and `cors.json`, which it can never be mistaken for.
pub(super) const LIFECYCLE_FILE: &str = "lifecycle.json";

/// The lifecycle configurations read so far, by bucket (`None`: the bucket has none).
#[derive(Debug, Default)]
pub(super) struct LifecycleCache(RwLock<HashMap<String, Option<Arc<LifecycleConfig>>>>);

impl LifecycleCache {
    /// Forgets `bucket`, which is going (a bucket made again under its name has no rules).
    pub(super) fn forget(&self, bucket: &str) {
        self.0.write().unwrap_or_else(PoisonError::into_inner).remove(bucket);
    }

    fn get(&self, bucket: &str) -> Option<Option<Arc<LifecycleConfig>>> {
        self.0.read().unwrap_or_else(PoisonError::into_inner).get(bucket).cloned()
    }
}

impl BucketStore {
    pub(super) fn lifecycle_path(&self, bucket: &str) -> PathBuf {
        self.inner.state_dir().join("meta").join(bucket).join(LIFECYCLE_FILE)
    }

    /// The lifecycle configuration of `bucket`, if it has one (`NoSuchBucket` if it does not
    /// exist).
    pub async fn bucket_lifecycle(
        &self,
        bucket: &str,
    ) -> Result<Option<LifecycleConfig>, StoreError> {
        let bucket = bucket.to_owned();
        self.blocking(move |store| store.bucket_lifecycle_blocking(&bucket)).await
    }

    /// [`BucketStore::bucket_lifecycle`], for callers already off the async threads.
    pub fn bucket_lifecycle_blocking(
        &self,
        bucket: &str,
    ) -> Result<Option<LifecycleConfig>, StoreError> {
        self.bucket_dir(bucket)?;
        read_config(self.lifecycle_path(bucket))
    }

    /// [`BucketStore::bucket_lifecycle`] from memory once read: for the answers to object
    /// requests, which must not read a file each.
    pub async fn bucket_lifecycle_cached(
        &self,
        bucket: &str,
    ) -> Result<Option<Arc<LifecycleConfig>>, StoreError> {
        if let Some(known) = self.inner.lifecycle_cache.get(bucket) {
            return Ok(known);
        }
        let bucket = bucket.to_owned();
        self.blocking(move |store| {
            let cache = &store.inner.lifecycle_cache;
            // Under the lock, so that no replacement of the file comes between read and keep.
            let mut configs = cache.0.write().unwrap_or_else(PoisonError::into_inner);
            let config = store.bucket_lifecycle_blocking(&bucket)?.map(Arc::new);
            configs.insert(bucket, config.clone());
            Ok(config)
        })
        .await
    }

    /// Sets (`Some`) or removes (`None`) the lifecycle configuration of `bucket`, which must
    /// exist; durable once it returns. A configuration [`LifecycleConfig::check`] refuses is
    /// [`StoreError::InvalidArgument`] and changes nothing (the S3 front checks first, to answer
    /// with S3's own error codes). Rules without an `ID` are given one. The next lifecycle pass
    /// acts on it.
    pub async fn set_bucket_lifecycle(
        &self,
        bucket: &str,
        config: Option<LifecycleConfig>,
    ) -> Result<(), StoreError> {
        if let Some(config) = &config {
            config.check().map_err(|e| StoreError::InvalidArgument(e.message))?;
        }
        let config = config.map(with_ids);
        let bucket = bucket.to_owned();
        self.blocking(move |store| {
            store.bucket_dir(&bucket)?;
            let cache = &store.inner.lifecycle_cache;
            let mut configs = cache.0.write().unwrap_or_else(PoisonError::into_inner);
            let written = replace_config(&store.lifecycle_path(&bucket), config.as_ref());
            // Read again next time, whatever the outcome: the file is the truth.
            configs.remove(&bucket);
            written
        })
        .await
    }
}

/// `config` with an `ID` for each rule sent without one: random, as S3 makes them (the base64
/// of a UUID's text), and so unlike any `ID` a client chose.
fn with_ids(mut config: LifecycleConfig) -> LifecycleConfig {
    for rule in config.rules.iter_mut().filter(|r| r.id.is_none()) {
        let bytes: [u8; 16] = rand::random();
        let hex = hex::encode(bytes);
        let uuid = format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        );
        rule.id = Some(base64::engine::general_purpose::STANDARD.encode(uuid));
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Creator, Expiration, LifecycleRule};

    #[tokio::test]
    async fn rules_survive_a_reopen_and_go_with_the_bucket() {
        let tmp = tempfile::tempdir().unwrap();
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        let creator = Creator { user_id: "obc-1", delete_with_claim: true };
        store.create_bucket("b-1", creator).await.unwrap();
        assert_eq!(store.bucket_lifecycle("b-1").await.unwrap(), None);
        let rule = LifecycleRule {
            id: Some("tmp".into()),
            status: "Enabled".into(),
            expiration: Some(Expiration { days: Some(3), ..Expiration::default() }),
            ..LifecycleRule::default()
        };
        let config = LifecycleConfig { rules: vec![rule.clone()] };
        store.set_bucket_lifecycle("b-1", Some(config.clone())).await.unwrap();
        drop(store);
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        assert_eq!(store.bucket_lifecycle("b-1").await.unwrap(), Some(config.clone()));

        let refused =
            LifecycleConfig { rules: vec![LifecycleRule { status: "On".into(), ..rule }] };
        let err = store.set_bucket_lifecycle("b-1", Some(refused)).await.unwrap_err();
        assert!(matches!(&err, StoreError::InvalidArgument(m) if m.contains("Status")), "{err}");
        assert_eq!(store.bucket_lifecycle("b-1").await.unwrap(), Some(config.clone()));

        store.set_bucket_lifecycle("b-1", None).await.unwrap();
        store.set_bucket_lifecycle("b-1", None).await.unwrap();
        assert_eq!(store.bucket_lifecycle("b-1").await.unwrap(), None);
        store.set_bucket_lifecycle("b-1", Some(config.clone())).await.unwrap();
        let cached = store.bucket_lifecycle_cached("b-1").await.unwrap();
        assert_eq!(cached.as_deref(), Some(&config));
        assert!(store.delete_bucket("b-1", "obc-1").await.unwrap());
        store.create_bucket("b-1", creator).await.unwrap();
        assert_eq!(store.bucket_lifecycle("b-1").await.unwrap(), None, "a new bucket of the name");
        assert_eq!(store.bucket_lifecycle_cached("b-1").await.unwrap(), None);
        let missing = store.bucket_lifecycle("missing").await;
        assert!(matches!(missing, Err(StoreError::NoSuchBucket(_))));
    }

    /// A rule without an `ID` gets one, kept and answered; `ID`s given stay as they were.
    #[tokio::test]
    async fn rules_without_an_id_are_given_one() {
        let tmp = tempfile::tempdir().unwrap();
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        let creator = Creator { user_id: "obc-1", delete_with_claim: true };
        store.create_bucket("b-1", creator).await.unwrap();
        let rule = LifecycleRule {
            status: "Enabled".into(),
            expiration: Some(Expiration { days: Some(3), ..Expiration::default() }),
            ..LifecycleRule::default()
        };
        let named = LifecycleRule { id: Some("mine".into()), ..rule.clone() };
        let config = LifecycleConfig { rules: vec![rule.clone(), rule, named] };
        store.set_bucket_lifecycle("b-1", Some(config)).await.unwrap();
        let kept = store.bucket_lifecycle("b-1").await.unwrap().unwrap();
        let ids: Vec<_> = kept.rules.iter().map(|r| r.id.clone().unwrap()).collect();
        assert_eq!(ids[0].len(), 48, "{ids:?}");
        assert_ne!(ids[0], ids[1], "each its own");
        assert_eq!(ids[2], "mine");
        assert_eq!(kept.check(), Ok(()));
    }
}
