//! Bucket administration with the operator credential.
//!
//! A bucket the operator creates is an ordinary static bucket: a directory under the root that
//! claims can be granted, recorded with [`OPERATOR_OWNER`] as its owner and
//! `created_by_provisioner: false`, so that no provisioner identity ever adopts or deletes it.
//! The operator may delete any bucket, but only an empty one that no claim key reaches.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};

use super::durable::{fsync_dir, remove_tree, unix_now};
use super::{BUCKETS_DIR, BucketRecord, BucketStore, StoreError, validate_bucket_name};
use crate::admin::AdminCredentials;

/// Owner recorded on buckets created with the operator credential.
pub const OPERATOR_OWNER: &str = "operator";

impl BucketStore {
    /// Sets (or, with `None`, removes) the operator credential. Takes effect for the next
    /// request, so a rotated key can be swapped in without a restart. Without one, which is
    /// the default, only claim keys exist.
    pub fn set_admin(&self, admin: Option<AdminCredentials>) {
        *self.inner.admin.write().unwrap_or_else(PoisonError::into_inner) = admin.map(Arc::new);
    }

    /// The operator credential, if one is set.
    pub fn admin(&self) -> Option<AdminCredentials> {
        self.admin_ref().map(|a| (*a).clone())
    }

    /// Whether `access_key_id` is the operator's.
    pub fn is_admin(&self, access_key_id: &str) -> bool {
        self.admin_ref().is_some_and(|a| a.access_key_id() == access_key_id)
    }

    fn admin_ref(&self) -> Option<Arc<AdminCredentials>> {
        self.inner.admin.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Names of every bucket directory under the root, sorted, whoever created it. Entries
    /// that are not directories or not valid bucket names are not buckets and are skipped.
    pub async fn bucket_names(&self) -> Result<Vec<String>, StoreError> {
        self.blocking(|store| store.bucket_names_blocking()).await
    }

    pub(super) fn bucket_names_blocking(&self) -> Result<Vec<String>, StoreError> {
        let mut names = Vec::new();
        for entry in fs::read_dir(self.inner.root.join(BUCKETS_DIR))? {
            let entry = entry?;
            // `file_type` does not follow symlinks, so a link is never listed as a bucket.
            if !entry.file_type()?.is_dir() {
                continue;
            }
            if let Ok(name) = entry.file_name().into_string()
                && validate_bucket_name(&name).is_ok()
            {
                names.push(name);
            }
        }
        names.sort_unstable();
        Ok(names)
    }

    /// Creates `bucket` for the operator as a static bucket, recording the region it was
    /// created for (`None`: the default one). Any existing bucket of that name, whoever made it,
    /// is [`StoreError::BucketAlreadyOwnedByYou`].
    pub async fn create_operator_bucket(
        &self,
        bucket: &str,
        location: Option<&str>,
    ) -> Result<BucketRecord, StoreError> {
        let (bucket, location) = (bucket.to_owned(), location.map(str::to_owned));
        self.blocking(move |store| {
            store.create_operator_bucket_blocking(&bucket, location.as_deref())
        })
        .await
    }

    /// Deletes `bucket` for the operator, whoever created it, when it holds no objects and no
    /// claim key reaches it. Multipart uploads in progress are discarded with it.
    ///
    /// Fails with [`StoreError::NoSuchBucket`], [`StoreError::BucketInUse`] (naming the claims'
    /// user ids) or [`StoreError::BucketNotEmpty`], in that order of precedence.
    pub async fn delete_empty_bucket(&self, bucket: &str) -> Result<(), StoreError> {
        let bucket = bucket.to_owned();
        self.blocking(move |store| store.delete_empty_bucket_blocking(&bucket)).await
    }

    fn create_operator_bucket_blocking(
        &self,
        bucket: &str,
        location: Option<&str>,
    ) -> Result<BucketRecord, StoreError> {
        let path = self.bucket_path(bucket)?;
        let exists = || StoreError::BucketAlreadyOwnedByYou(bucket.to_owned());
        // Under the writer lock, so that two creates of one name cannot both succeed.
        let record = self.inner.mutate(|tx| {
            let present = match fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() => true,
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(StoreError::Symlink(path.display().to_string()));
                }
                Ok(_) => {
                    return Err(StoreError::Io(io::Error::other(format!(
                        "{} is in the way of bucket {bucket:?} and is not a directory",
                        path.display()
                    ))));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => false,
                Err(e) => return Err(e.into()),
            };
            match tx.state.buckets.get(bucket) {
                // An operator bucket whose directory was removed by hand is simply made again.
                Some(r) if !present && r.owner == OPERATOR_OWNER && !r.created_by_provisioner => {}
                Some(_) => return Err(exists()),
                None if present => return Err(exists()),
                None => {}
            }
            match fs::create_dir(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Err(exists()),
                Err(e) => return Err(e.into()),
            }
            fsync_dir(path.parent().unwrap_or(&path))?;
            // A crash before the record is saved leaves a directory without a record: still a
            // static bucket, just one without a recorded owner.
            let record = BucketRecord {
                name: bucket.to_owned(),
                owner: OPERATOR_OWNER.to_owned(),
                created_by_provisioner: false,
                creator: None,
                delete_with_claim: false,
                created_unix: unix_now(),
                quota: Default::default(),
                location: location.map(str::to_owned),
                settable: None,
            };
            tx.put_bucket(record.clone());
            Ok(record)
        })?;
        self.meter(bucket)?;
        tracing::info!(bucket, "bucket created with the operator credential");
        Ok(record)
    }

    fn delete_empty_bucket_blocking(&self, bucket: &str) -> Result<(), StoreError> {
        // Under the writer lock: keys are issued under it too (after checking that the bucket
        // exists), so no claim can be granted the bucket while it goes.
        self.inner.mutate(|tx| {
            let dir = self.bucket_dir(bucket)?;
            let mut users: Vec<String> =
                tx.state.keys_of_bucket(bucket).map(|k| k.user_id.clone()).collect();
            if !users.is_empty() {
                users.sort_unstable();
                users.dedup();
                return Err(StoreError::BucketInUse { bucket: bucket.to_owned(), users });
            }
            let mut dirs = Vec::new();
            if self.has_side_objects(bucket)?
                || self.has_versions(bucket)?
                || !self.only_empty_dirs(bucket, &dir, "", &mut dirs)?
            {
                return Err(StoreError::BucketNotEmpty(bucket.to_owned()));
            }
            // Children first. `remove_dir` never removes a file, so an object written meanwhile
            // stops the deletion instead of being lost.
            for dir in &dirs {
                match fs::remove_dir(dir) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::DirectoryNotEmpty => {
                        return Err(StoreError::BucketNotEmpty(bucket.to_owned()));
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            fsync_dir(dir.parent().unwrap_or(&dir))?;
            let state_dir = self.inner.state_dir();
            remove_tree(&state_dir.join("meta").join(bucket))?;
            self.inner.versioning.forget(bucket);
            self.inner.object_locks.forget(bucket);
            self.inner.lifecycle_walks.forget(bucket);
            self.inner.lifecycle_cache.forget(bucket);
            remove_tree(&state_dir.join("uploads").join(bucket))?;
            self.drop_meter(bucket)?;
            tx.remove_bucket(bucket);
            Ok(())
        })?;
        tracing::info!(bucket, "bucket deleted with the operator credential");
        Ok(())
    }

    /// Whether the tree at `dir` holds nothing but directories that are not folder markers;
    /// if so, `dirs` receives them all, deepest first. Any other entry (file, symlink, device)
    /// counts as content: only S3-visible content can be deleted over S3, and nothing else may
    /// be destroyed by a DeleteBucket.
    pub(super) fn only_empty_dirs(
        &self,
        bucket: &str,
        dir: &Path,
        key_prefix: &str,
        dirs: &mut Vec<PathBuf>,
    ) -> Result<bool, StoreError> {
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            if !entry.file_type()?.is_dir() {
                return Ok(false);
            }
            let key = format!("{key_prefix}{}/", entry.file_name().to_string_lossy());
            if self.read_meta(bucket, &key, None).is_some() {
                return Ok(false);
            }
            if !self.only_empty_dirs(bucket, &entry.path(), &key, dirs)? {
                return Ok(false);
            }
        }
        dirs.push(dir.to_owned());
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path, identity: &str) -> BucketStore {
        BucketStore::open(dir.to_owned(), identity).unwrap()
    }

    #[tokio::test]
    async fn operator_buckets_are_static_and_never_adopted() {
        let tmp = tempfile::tempdir().unwrap();
        // Even an identity spelled like the operator owner cannot adopt or delete one.
        let store = open(tmp.path(), OPERATOR_OWNER);
        let record = store.create_operator_bucket("brown", None).await.unwrap();
        assert_eq!(record.owner, OPERATOR_OWNER);
        assert!(!record.created_by_provisioner);
        assert!(matches!(
            store.create_operator_bucket("brown", None).await,
            Err(StoreError::BucketAlreadyOwnedByYou(_))
        ));
        let claim = super::super::Creator { user_id: "obc-1", delete_with_claim: true };
        assert!(store.create_bucket("brown", claim).await.is_err());
        assert!(!store.delete_bucket("brown", "obc-1").await.unwrap());
        assert!(store.bucket_exists("brown").unwrap());

        // Removed by hand: created again.
        fs::remove_dir(store.bucket_path("brown").unwrap()).unwrap();
        store.create_operator_bucket("brown", None).await.unwrap();
        assert!(store.bucket_exists("brown").unwrap());

        // Survives a restart.
        drop(store);
        let store = open(tmp.path(), "node-1");
        assert_eq!(store.bucket_record("brown").unwrap().owner, OPERATOR_OWNER);
        assert!(store.admin().is_none(), "the operator credential is never persisted");
    }

    #[tokio::test]
    async fn delete_empty_bucket_checks_keys_then_content() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path(), "node-1");
        store.create_operator_bucket("shared", None).await.unwrap();
        store.issue_key("obc-b", "shared").await.unwrap();
        store.issue_key("obc-a", "shared").await.unwrap();
        let err = store.delete_empty_bucket("shared").await.unwrap_err();
        assert!(
            matches!(&err, StoreError::BucketInUse { users, .. } if users == &["obc-a", "obc-b"]),
            "{err}"
        );
        assert!(err.to_string().contains("bound to claim(s) obc-a, obc-b"), "{err}");
        store.revoke_keys("obc-a").await.unwrap();
        store.revoke_keys("obc-b").await.unwrap();

        // Empty directories are not content; files, symlinks and folder markers are.
        let dir = store.bucket_path("shared").unwrap();
        fs::create_dir_all(dir.join("a/b/c")).unwrap();
        std::os::unix::fs::symlink("/etc", dir.join("a/link")).unwrap();
        assert!(matches!(
            store.delete_empty_bucket("shared").await,
            Err(StoreError::BucketNotEmpty(_))
        ));
        fs::remove_file(dir.join("a/link")).unwrap();
        let marker = crate::store::ObjectAttrs::default();
        store
            .put_object(
                "shared",
                "a/b/",
                marker,
                futures::stream::empty::<Result<bytes::Bytes, io::Error>>(),
                crate::store::PutCheck::default(),
                &crate::store::Writer::Operator,
            )
            .await
            .unwrap();
        assert!(matches!(
            store.delete_empty_bucket("shared").await,
            Err(StoreError::BucketNotEmpty(_))
        ));
        store.delete_object("shared", "a/b/").await.unwrap();
        fs::create_dir_all(dir.join("a/b/c")).unwrap();

        store.delete_empty_bucket("shared").await.unwrap();
        assert!(!store.bucket_exists("shared").unwrap());
        assert!(store.bucket_record("shared").is_none());
        assert!(matches!(
            store.delete_empty_bucket("shared").await,
            Err(StoreError::NoSuchBucket(_))
        ));
    }
}
