//! A bucket's versioning state (PutBucketVersioning, GetBucketVersioning): one file,
//! `.provisioner/meta/<bucket>/versioning.json`, replaced atomically and synced before the
//! answer, and removed with the bucket's other metadata when the bucket goes. Writes look the
//! state up in memory, so that a bucket whose versioning was never set pays nothing for it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{PoisonError, RwLock};

use serde::{Deserialize, Serialize};

use super::config_file::{read_config, replace_config};
use super::{BucketStore, StoreError};

/// The file's name in the bucket's metadata directory.
const VERSIONING_FILE: &str = "versioning.json";

/// What a bucket's versioning says; once set, it can be suspended but never unset, as in S3.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Versioning {
    /// Every write makes a new version; deletes make delete markers.
    Enabled,
    /// Writes and deletes replace the `null` version, keeping the others.
    Suspended,
}

impl Versioning {
    /// The S3 name of the state.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enabled => "Enabled",
            Self::Suspended => "Suspended",
        }
    }
}

#[derive(Serialize, Deserialize)]
struct VersioningFile {
    status: Versioning,
}

/// The versioning state of each bucket looked up so far (`None`: never set).
#[derive(Default)]
pub(super) struct VersioningCache(RwLock<HashMap<String, Option<Versioning>>>);

impl VersioningCache {
    /// Forgets `bucket`, which is going (a bucket made again under its name starts unset).
    pub(super) fn forget(&self, bucket: &str) {
        self.0.write().unwrap_or_else(PoisonError::into_inner).remove(bucket);
    }
}

impl BucketStore {
    fn versioning_path(&self, bucket: &str) -> PathBuf {
        self.inner.state_dir().join("meta").join(bucket).join(VERSIONING_FILE)
    }

    /// The versioning state of `bucket`; `None` when it was never set (`NoSuchBucket` if it
    /// does not exist).
    pub async fn bucket_versioning(&self, bucket: &str) -> Result<Option<Versioning>, StoreError> {
        let bucket = bucket.to_owned();
        self.blocking(move |store| {
            store.bucket_dir(&bucket)?;
            store.versioning(&bucket)
        })
        .await
    }

    /// Sets the versioning state of `bucket`, which must exist; durable once it returns.
    pub async fn set_bucket_versioning(
        &self,
        bucket: &str,
        status: Versioning,
    ) -> Result<(), StoreError> {
        let bucket = bucket.to_owned();
        self.blocking(move |store| {
            if status == Versioning::Suspended
                && store.bucket_object_lock_blocking(&bucket)?.is_some()
            {
                return Err(StoreError::InvalidBucketState(
                    "An Object Lock configuration is present on this bucket, so the versioning \
                     state cannot be changed"
                        .into(),
                ));
            }
            store.set_versioning_blocking(&bucket, status)
        })
        .await
    }

    /// [`set_bucket_versioning`](Self::set_bucket_versioning) without the object lock check,
    /// for callers already off the async threads.
    pub(super) fn set_versioning_blocking(
        &self,
        bucket: &str,
        status: Versioning,
    ) -> Result<(), StoreError> {
        self.bucket_dir(bucket)?;
        let cache = &self.inner.versioning.0;
        // Held across the write, so that no reader caches the state being replaced.
        let mut cached = cache.write().unwrap_or_else(PoisonError::into_inner);
        replace_config(&self.versioning_path(bucket), Some(&VersioningFile { status }))?;
        cached.insert(bucket.to_owned(), Some(status));
        Ok(())
    }

    /// The versioning state of `bucket`, from memory once read.
    pub(super) fn versioning(&self, bucket: &str) -> Result<Option<Versioning>, StoreError> {
        let cache = &self.inner.versioning.0;
        if let Some(state) = cache.read().unwrap_or_else(PoisonError::into_inner).get(bucket) {
            return Ok(*state);
        }
        let mut cached = cache.write().unwrap_or_else(PoisonError::into_inner);
        let file: Option<VersioningFile> = read_config(self.versioning_path(bucket))?;
        let state = file.map(|f| f.status);
        cached.insert(bucket.to_owned(), state);
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Creator;

    #[tokio::test]
    async fn the_state_survives_a_reopen_and_goes_with_the_bucket() {
        let tmp = tempfile::tempdir().unwrap();
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        let creator = Creator { user_id: "obc-1", delete_with_claim: true };
        store.create_bucket("b-1", creator).await.unwrap();
        assert_eq!(store.bucket_versioning("b-1").await.unwrap(), None);
        store.set_bucket_versioning("b-1", Versioning::Enabled).await.unwrap();
        assert_eq!(store.bucket_versioning("b-1").await.unwrap(), Some(Versioning::Enabled));
        drop(store);
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        assert_eq!(store.bucket_versioning("b-1").await.unwrap(), Some(Versioning::Enabled));
        store.set_bucket_versioning("b-1", Versioning::Suspended).await.unwrap();
        assert_eq!(store.bucket_versioning("b-1").await.unwrap(), Some(Versioning::Suspended));
        assert!(store.delete_bucket("b-1", "obc-1").await.unwrap());
        store.create_bucket("b-1", creator).await.unwrap();
        assert_eq!(store.bucket_versioning("b-1").await.unwrap(), None, "a new bucket");
        let missing = store.bucket_versioning("missing").await;
        assert!(matches!(missing, Err(StoreError::NoSuchBucket(_))));
    }
}
