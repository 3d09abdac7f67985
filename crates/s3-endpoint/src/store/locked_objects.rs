//! Object lock where the store writes and removes objects: the lock a new object gets, the
//! refusal of removing or overwriting a protected one (by any key, the operator credential
//! included), retention and legal hold changes, and who may bypass governance retention. The
//! decisions themselves are `object_lock`'s; this file reads what they need under the key's
//! commit lock, so that no write comes between a decision and what it allows.
//!
//! A bucket created with object lock is versioned (and stays so): a lock belongs to one
//! version, an overwrite makes a new version and a delete without a version id a delete marker,
//! both allowed; what object lock refuses is removing a protected version for good, which every
//! such removal asks through `version_write`'s choke point. In a bucket that is not versioned
//! (made with lock before buckets had versions), overwriting a protected object is refused like
//! removing it, since it would destroy the protected bytes.

use std::time::SystemTime;

use super::names::validate_key;
use super::object_lock::{
    BucketLock, Bypass, LockReason, LockRefusal, ObjectLock, Retention, check_new_retention,
    lock_of_new_object, removal_refusal, retention_change_refusal, unix_ms,
};
use super::object_meta::ObjectAttrs;
use super::version_write::check_version_id;
use super::versions::NULL_VERSION;
use super::{BucketStore, ListQuery, ObjectInfo, StoreError};

/// The error S3 gives a lock asked of a bucket created without object lock.
const NO_LOCK_CONFIG: &str = "Bucket is missing Object Lock Configuration";

/// Objects read per page when a bucket deletion looks for protected ones.
const SCAN_PAGE: usize = 1000;

fn now_ms() -> u64 {
    unix_ms(SystemTime::now())
}

fn locked(key: &str, reason: LockReason) -> StoreError {
    StoreError::ObjectLocked(LockRefusal { key: key.to_owned(), reason })
}

impl BucketStore {
    /// Completes the lock `attrs` asks for from `bucket`'s default retention, before the
    /// object is committed; a lock asked of a bucket without object lock is
    /// [`StoreError::InvalidRequest`]. Answers the bucket's configuration, for the overwrite
    /// check under the key's lock.
    pub(super) fn lock_new_object(
        &self,
        bucket: &str,
        attrs: &mut ObjectAttrs,
    ) -> Result<Option<BucketLock>, StoreError> {
        let config = self.bucket_object_lock_blocking(bucket)?;
        match &config {
            None if !attrs.lock.is_none() => {
                return Err(StoreError::InvalidRequest(NO_LOCK_CONFIG.into()));
            }
            None => {}
            Some(config) => attrs.lock = lock_of_new_object(attrs.lock, config, now_ms()),
        }
        Ok(config)
    }

    /// Refuses, with [`StoreError::ObjectLocked`], to remove or replace the object now at
    /// `key` when its lock protects it. Call it under the key's commit lock, only for buckets
    /// with object lock (`config`).
    pub(super) fn check_removable(
        &self,
        bucket: &str,
        key: &str,
        config: Option<&BucketLock>,
        bypass: Bypass,
    ) -> Result<(), StoreError> {
        if config.is_none() {
            return Ok(());
        }
        let info = match self.open_blocking(bucket, key) {
            Ok((info, _)) => info,
            Err(StoreError::NoSuchKey(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        match removal_refusal(&info.attrs.lock, now_ms(), bypass) {
            Some(reason) => Err(locked(key, reason)),
            None => Ok(()),
        }
    }

    /// Refuses, with [`StoreError::ObjectLocked`], the permanent removal of a version of `key`
    /// whose `lock` protects it, in a bucket with object lock. The choke point of versioned
    /// removals (`version_write`) asks it, under the key's lock.
    pub(super) fn check_version_removable(
        &self,
        bucket: &str,
        key: &str,
        lock: &ObjectLock,
        bypass: Bypass,
    ) -> Result<(), StoreError> {
        if lock.is_none() || self.lock_config(bucket)?.is_none() {
            return Ok(());
        }
        match removal_refusal(lock, now_ms(), bypass) {
            Some(reason) => Err(locked(key, reason)),
            None => Ok(()),
        }
    }

    /// Whether the key `access_key_id` may bypass governance retention in `bucket`: the key of
    /// the claim that created the bucket, and the operator credential, which administers every
    /// bucket (GOVERNANCE is the mode an operator can still lift). No other claim's key,
    /// however it reaches the bucket.
    pub fn may_bypass_governance(&self, bucket: &str, access_key_id: &str) -> bool {
        if self.is_admin(access_key_id) {
            return true;
        }
        let record = self.bucket_record(bucket);
        let creator = record.as_ref().and_then(|r| r.creator.as_deref());
        match (self.lookup_key(access_key_id), creator) {
            (Some(key), Some(creator)) => key.user_id == creator && key.allows(bucket),
            _ => false,
        }
    }

    /// Sets (`Some`) or removes (`None`) the retention of the version `version_id` of `key`
    /// (`None`: the newest), as PutObjectRetention does: refused with
    /// [`StoreError::ObjectLocked`] when it would weaken an active retention without a
    /// permitted `bypass`, with [`StoreError::InvalidArgument`] when the new date is not in the
    /// future, and with [`StoreError::InvalidRequest`] in a bucket without object lock. Durable
    /// once it returns.
    pub async fn set_object_retention(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        retention: Option<Retention>,
        bypass: Bypass,
    ) -> Result<ObjectInfo, StoreError> {
        let (bucket, key) = (bucket.to_owned(), key.to_owned());
        let version_id = version_id.map(str::to_owned);
        self.blocking(move |store| {
            store.require_lock_config(&bucket)?;
            let now = now_ms();
            if let Some(new) = &retention {
                check_new_retention(new, now).map_err(StoreError::InvalidArgument)?;
            }
            store.update_version_attrs(&bucket, &key, version_id.as_deref(), &mut |attrs| {
                let old = attrs.lock.retention;
                if let Some(reason) =
                    retention_change_refusal(old.as_ref(), retention.as_ref(), now, bypass)
                {
                    return Err(locked(&key, reason));
                }
                attrs.lock.retention = retention;
                Ok(())
            })
        })
        .await
    }

    /// Puts a legal hold on the version `version_id` of `key` (`None`: the newest) or clears
    /// it, as PutObjectLegalHold does; [`StoreError::InvalidRequest`] in a bucket without
    /// object lock. Durable once it returns.
    pub async fn set_object_legal_hold(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        on: bool,
    ) -> Result<ObjectInfo, StoreError> {
        let (bucket, key) = (bucket.to_owned(), key.to_owned());
        let version_id = version_id.map(str::to_owned);
        self.blocking(move |store| {
            store.require_lock_config(&bucket)?;
            store.update_version_attrs(&bucket, &key, version_id.as_deref(), &mut |attrs| {
                attrs.lock.legal_hold = on;
                attrs.lock.legal_hold_set = true;
                Ok(())
            })
        })
        .await
    }

    /// The lock of the version `version_id` of `key` (`None`: the newest; `NoSuchKey` or
    /// `NoSuchVersion` if there is none); in a bucket without object lock,
    /// [`StoreError::InvalidRequest`] as S3 answers.
    pub async fn object_lock(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
    ) -> Result<ObjectLock, StoreError> {
        let (bucket, key) = (bucket.to_owned(), key.to_owned());
        let version_id = version_id.map(str::to_owned);
        self.blocking(move |store| {
            store.require_lock_config(&bucket)?;
            validate_key(&key)?;
            let (info, _) = match store.versioning(&bucket)? {
                Some(_) => store.open_versioned(&bucket, &key, version_id.as_deref())?,
                None => {
                    unversioned_id(&key, version_id.as_deref())?;
                    store.open_blocking(&bucket, &key)?
                }
            };
            Ok(info.attrs.lock)
        })
        .await
    }

    /// Rewrites the attributes of one version of `key` with `change`, under the key's lock
    /// from reading it to writing it back, so that no write of the key makes another version
    /// the one changed.
    fn update_version_attrs(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        change: &mut dyn FnMut(&mut ObjectAttrs) -> Result<(), StoreError>,
    ) -> Result<ObjectInfo, StoreError> {
        let dir = self.bucket_dir(bucket)?;
        validate_key(key)?;
        let _guard = self.key_lock(bucket, key);
        if self.versioning(bucket)?.is_none() {
            unversioned_id(key, version_id)?;
            return self.update_attrs_locked(bucket, key, change);
        }
        if let Some(id) = version_id {
            check_version_id(id)?;
        }
        let history = self.versions_of(bucket, &dir, key)?;
        let mut found = match version_id {
            Some(id) => history.into_iter().find(|v| v.stamp().id == id).ok_or_else(|| {
                StoreError::NoSuchVersion { key: key.to_owned(), version_id: id.to_owned() }
            })?,
            None => {
                history.into_iter().next().ok_or_else(|| StoreError::NoSuchKey(key.to_owned()))?
            }
        };
        if found.is_marker() {
            return Err(StoreError::DeleteMarker {
                key: key.to_owned(),
                version_id: found.stamp().id.clone(),
                by_id: version_id.is_some(),
            });
        }
        if found.in_place {
            let mut info = self.update_attrs_locked(bucket, key, change)?;
            info.version_id = Some(found.stamp().id.clone());
            return Ok(info);
        }
        change(&mut found.meta.attrs)?;
        self.write_record(&self.versions_dir(bucket, key), &found.meta)?;
        Ok(found.info())
    }

    fn require_lock_config(&self, bucket: &str) -> Result<BucketLock, StoreError> {
        self.bucket_object_lock_blocking(bucket)?
            .ok_or_else(|| StoreError::InvalidRequest(NO_LOCK_CONFIG.into()))
    }

    /// The first object (or version) of `bucket` its lock protects now, if any: a bucket
    /// holding one is never deleted with its data, whoever asks.
    pub(super) fn first_locked_object(
        &self,
        bucket: &str,
    ) -> Result<Option<StoreError>, StoreError> {
        if self.bucket_object_lock_blocking(bucket)?.is_none() {
            return Ok(None);
        }
        let now = now_ms();
        let protected = |info: &ObjectInfo| {
            removal_refusal(&info.attrs.lock, now, Bypass::No).map(|r| locked(&info.key, r))
        };
        // Noncurrent versions first: they are where protected data outlives its key.
        let dir = self.bucket_dir(bucket)?;
        for key in self.archived_keys(bucket, "")? {
            for version in self.versions_of(bucket, &dir, &key)? {
                if let Some(refusal) = protected(&version.info()).filter(|_| !version.is_marker()) {
                    return Ok(Some(refusal));
                }
            }
        }
        let mut after = None;
        loop {
            let query =
                ListQuery { prefix: String::new(), delimiter: None, after, max_keys: SCAN_PAGE };
            let page = self.list_blocking(bucket, &query)?;
            for listed in &page.objects {
                match self.open_blocking(bucket, &listed.key) {
                    Ok((info, _)) => {
                        if let Some(refusal) = protected(&info) {
                            return Ok(Some(refusal));
                        }
                    }
                    Err(StoreError::NoSuchKey(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            if !page.is_truncated {
                return Ok(None);
            }
            after = page.next_after;
        }
    }
}

/// In a bucket that was never versioned, the one version of a key is `null`.
fn unversioned_id(key: &str, version_id: Option<&str>) -> Result<(), StoreError> {
    match version_id {
        Some(id) if id != NULL_VERSION => {
            check_version_id(id)?;
            Err(StoreError::NoSuchVersion { key: key.to_owned(), version_id: id.to_owned() })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
#[path = "locked_objects_tests.rs"]
mod tests;
