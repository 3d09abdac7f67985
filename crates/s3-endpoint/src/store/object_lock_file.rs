//! Where a bucket's object lock configuration is kept: one file, `.provisioner/meta/<bucket>/
//! object-lock.json`, present only in a bucket created with object lock (its presence is what
//! "object lock enabled" means, for life), holding the default retention new objects get. It
//! is written atomically and synced before an answer acknowledges it, and goes with the
//! bucket's other metadata. Writes look it up in memory, so that a bucket without object lock
//! pays nothing for it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{PoisonError, RwLock};

use super::config_file::{read_config, replace_config};
use super::object_lock::{BucketLock, DefaultRetention, RetentionCeiling};
use super::versioning::Versioning;
use super::{BucketStore, StoreError};

/// The file's name in the bucket's metadata directory, beside the two-hex-digit directories of
/// object metadata, `side` and the other configuration files, which it can never be mistaken
/// for.
pub(super) const OBJECT_LOCK_FILE: &str = "object-lock.json";

/// Why a bucket created without object lock cannot have it.
const NOT_AT_CREATION: &str = "Object lock can only be enabled when a bucket is created: this \
                               bucket was created without it, and holds objects written \
                               without protection";

/// The object lock configuration of each bucket looked up so far (`None`: created without).
#[derive(Default)]
pub(super) struct ObjectLockCache(RwLock<HashMap<String, Option<BucketLock>>>);

impl ObjectLockCache {
    /// Forgets `bucket`, which is going (a bucket made again under its name starts without).
    pub(super) fn forget(&self, bucket: &str) {
        self.0.write().unwrap_or_else(PoisonError::into_inner).remove(bucket);
    }
}

impl BucketStore {
    fn object_lock_path(&self, bucket: &str) -> PathBuf {
        self.inner.state_dir().join("meta").join(bucket).join(OBJECT_LOCK_FILE)
    }

    /// The object lock configuration of `bucket`: `None` when it was created without object
    /// lock (`NoSuchBucket` if it does not exist).
    pub async fn bucket_object_lock(&self, bucket: &str) -> Result<Option<BucketLock>, StoreError> {
        let bucket = bucket.to_owned();
        self.blocking(move |store| store.bucket_object_lock_blocking(&bucket)).await
    }

    /// [`BucketStore::bucket_object_lock`], for callers already off the async threads.
    pub fn bucket_object_lock_blocking(
        &self,
        bucket: &str,
    ) -> Result<Option<BucketLock>, StoreError> {
        self.bucket_dir(bucket)?;
        self.lock_config(bucket)
    }

    /// The object lock configuration of `bucket` (which the caller knows exists), from memory
    /// once read.
    pub(super) fn lock_config(&self, bucket: &str) -> Result<Option<BucketLock>, StoreError> {
        let cache = &self.inner.object_locks.0;
        if let Some(config) = cache.read().unwrap_or_else(PoisonError::into_inner).get(bucket) {
            return Ok(*config);
        }
        let mut cached = cache.write().unwrap_or_else(PoisonError::into_inner);
        let config = read_config(self.object_lock_path(bucket))?;
        cached.insert(bucket.to_owned(), config);
        Ok(config)
    }

    /// Writes `config` for `bucket`, durably, and remembers it; held across the write, so
    /// that no reader caches the configuration being replaced.
    fn write_lock_config(&self, bucket: &str, config: BucketLock) -> Result<(), StoreError> {
        let mut cached = self.inner.object_locks.0.write().unwrap_or_else(PoisonError::into_inner);
        replace_config(&self.object_lock_path(bucket), Some(&config))?;
        cached.insert(bucket.to_owned(), Some(config));
        Ok(())
    }

    /// Enables object lock on `bucket` as part of creating it, and with it versioning, which
    /// can then never be suspended: the bucket must hold no object
    /// yet (an enabled one may hold some: enabling again changes nothing, so that a creation
    /// retried after a crash succeeds). Anything else is [`StoreError::InvalidBucketState`]:
    /// object lock is never turned on for objects written without it, nor ever turned off.
    /// Durable once it returns.
    pub async fn enable_object_lock(&self, bucket: &str) -> Result<(), StoreError> {
        let bucket = bucket.to_owned();
        self.blocking(move |store| {
            let dir = store.bucket_dir(&bucket)?;
            // Under the record writer's lock, so that two creations do not race.
            let _writer = store.inner.writer.lock().unwrap_or_else(|e| e.into_inner());
            if store.bucket_object_lock_blocking(&bucket)?.is_some() {
                return Ok(());
            }
            let holds_objects = store.has_side_objects(&bucket)?
                || store.has_versions(&bucket)?
                || !store.only_empty_dirs(&bucket, &dir, "", &mut Vec::new())?;
            if holds_objects {
                return Err(StoreError::InvalidBucketState(NOT_AT_CREATION.into()));
            }
            // Versioning first: a bucket with lock is always versioned, and a crash between the
            // two leaves an empty versioned bucket, which a retry locks.
            store.set_versioning_blocking(&bucket, Versioning::Enabled)?;
            store.write_lock_config(&bucket, BucketLock::default())
        })
        .await
    }

    /// Sets (`Some`) or removes (`None`) the default retention of `bucket`, which must have
    /// been created with object lock ([`StoreError::InvalidBucketState`] otherwise, changing
    /// nothing). A default [`DefaultRetention::check`] refuses is
    /// [`StoreError::InvalidArgument`]. Durable once it returns; objects written from then on
    /// follow it, those already written keep what they have.
    pub async fn set_object_lock_default(
        &self,
        bucket: &str,
        default: Option<DefaultRetention>,
    ) -> Result<(), StoreError> {
        if let Some(default) = &default {
            default.check().map_err(StoreError::InvalidArgument)?;
        }
        let bucket = bucket.to_owned();
        self.blocking(move |store| {
            let _writer = store.inner.writer.lock().unwrap_or_else(|e| e.into_inner());
            let Some(config) = store.bucket_object_lock_blocking(&bucket)? else {
                return Err(StoreError::InvalidBucketState(
                    "Object Lock configuration cannot be enabled on existing buckets: this \
                     bucket was created without object lock"
                        .into(),
                ));
            };
            // The ceiling is the operator's: kept whoever sets the default.
            store.write_lock_config(&bucket, BucketLock { default_retention: default, ..config })
        })
        .await
    }

    /// Records (`Some`) or clears (`None`) the limits on the retentions claim keys set in
    /// `bucket`, which must have been created with object lock
    /// ([`StoreError::InvalidBucketState`] otherwise). For the provisioner, from the bucket's
    /// class: no S3 request writes it. Durable once it returns.
    pub async fn set_retention_ceiling(
        &self,
        bucket: &str,
        ceiling: Option<RetentionCeiling>,
    ) -> Result<(), StoreError> {
        let bucket = bucket.to_owned();
        self.blocking(move |store| {
            let _writer = store.inner.writer.lock().unwrap_or_else(|e| e.into_inner());
            let Some(config) = store.bucket_object_lock_blocking(&bucket)? else {
                return Err(StoreError::InvalidBucketState(
                    "this bucket was created without object lock".into(),
                ));
            };
            if config.ceiling != ceiling {
                store.write_lock_config(&bucket, BucketLock { ceiling, ..config })?;
            }
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;
    use crate::store::{Creator, LockMode, ObjectAttrs, PutCheck, RetentionPeriod, Writer};

    #[tokio::test]
    async fn lock_is_enabled_only_at_creation_and_its_default_survives_a_reopen() {
        let tmp = tempfile::tempdir().unwrap();
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        let creator = Creator { user_id: "obc-1", delete_with_claim: true };
        store.create_bucket("b-1", creator).await.unwrap();
        store.create_bucket("b-2", creator).await.unwrap();
        assert_eq!(store.bucket_object_lock("b-1").await.unwrap(), None);
        store.enable_object_lock("b-1").await.unwrap();
        assert_eq!(store.bucket_object_lock("b-1").await.unwrap(), Some(BucketLock::default()));

        let default =
            DefaultRetention { mode: LockMode::Compliance, period: RetentionPeriod::Days(1) };
        store.set_object_lock_default("b-1", Some(default)).await.unwrap();
        let zero = DefaultRetention { period: RetentionPeriod::Years(0), ..default };
        let err = store.set_object_lock_default("b-1", Some(zero)).await.unwrap_err();
        assert!(matches!(err, StoreError::InvalidArgument(_)), "{err}");
        // A bucket without lock keeps none, with or without objects.
        let err = store.set_object_lock_default("b-2", Some(default)).await.unwrap_err();
        assert!(matches!(err, StoreError::InvalidBucketState(_)), "{err}");
        let body = futures::stream::iter([Ok::<_, io::Error>(bytes::Bytes::from_static(b"x"))]);
        let (attrs, check) = (ObjectAttrs::default(), PutCheck::default());
        store.put_object("b-2", "k", attrs, body, check, &Writer::Operator).await.unwrap();
        let err = store.enable_object_lock("b-2").await.unwrap_err();
        assert!(
            matches!(&err, StoreError::InvalidBucketState(m) if m.contains("created")),
            "{err}"
        );
        assert_eq!(store.bucket_object_lock("b-2").await.unwrap(), None);

        drop(store);
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        let kept = BucketLock { default_retention: Some(default), ceiling: None };
        assert_eq!(store.bucket_object_lock("b-1").await.unwrap(), Some(kept));
        // Enabling again (a retried creation) keeps the default.
        store.enable_object_lock("b-1").await.unwrap();
        assert_eq!(store.bucket_object_lock("b-1").await.unwrap(), Some(kept));
        store.set_object_lock_default("b-1", None).await.unwrap();
        assert_eq!(store.bucket_object_lock("b-1").await.unwrap(), Some(BucketLock::default()));
        let missing = store.bucket_object_lock("missing").await;
        assert!(matches!(missing, Err(StoreError::NoSuchBucket(_))));
        // The configuration, in memory too, goes with the bucket.
        assert!(store.delete_bucket("b-1", "obc-1").await.unwrap());
        store.create_bucket("b-1", creator).await.unwrap();
        assert_eq!(
            store.bucket_object_lock("b-1").await.unwrap(),
            None,
            "a new bucket of the name"
        );
    }
}
