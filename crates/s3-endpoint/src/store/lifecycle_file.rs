//! Where a bucket's lifecycle rules are kept: one file, `.provisioner/meta/<bucket>/
//! lifecycle.json`, replaced atomically and synced before PutBucketLifecycleConfiguration
//! answers, and removed with the bucket's other metadata when the bucket goes. The lifecycle
//! pass reads them from there every time, so that nothing it does depends on memory a restart
//! loses.

use std::path::PathBuf;

use super::config_file::{read_config, replace_config};
use super::lifecycle::LifecycleConfig;
use super::{BucketStore, StoreError};

/// The file's name in the bucket's metadata directory, beside the two-hex-digit directories of
/// object metadata, `side` and `cors.json`, which it can never be mistaken for.
pub(super) const LIFECYCLE_FILE: &str = "lifecycle.json";

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

    /// Sets (`Some`) or removes (`None`) the lifecycle configuration of `bucket`, which must
    /// exist; durable once it returns. A configuration [`LifecycleConfig::check`] refuses is
    /// [`StoreError::InvalidArgument`] and changes nothing (the S3 front checks first, to answer
    /// with S3's own error codes). The next lifecycle pass acts on it.
    pub async fn set_bucket_lifecycle(
        &self,
        bucket: &str,
        config: Option<LifecycleConfig>,
    ) -> Result<(), StoreError> {
        if let Some(config) = &config {
            config.check().map_err(|e| StoreError::InvalidArgument(e.message))?;
        }
        let bucket = bucket.to_owned();
        self.blocking(move |store| {
            store.bucket_dir(&bucket)?;
            replace_config(&store.lifecycle_path(&bucket), config.as_ref())
        })
        .await
    }
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
        store.set_bucket_lifecycle("b-1", Some(config)).await.unwrap();
        assert!(store.delete_bucket("b-1", "obc-1").await.unwrap());
        store.create_bucket("b-1", creator).await.unwrap();
        assert_eq!(store.bucket_lifecycle("b-1").await.unwrap(), None, "a new bucket of the name");
        let missing = store.bucket_lifecycle("missing").await;
        assert!(matches!(missing, Err(StoreError::NoSuchBucket(_))));
    }
}
