//! Buckets as directories under one root, with durable bookkeeping of owners and access keys.
//!
//! # Layout
//!
//! ```text
//! <root>/buckets/<bucket>/<key>          object data; a key's '/' are directories
//! <root>/.provisioner/              0700 bookkeeping, never served
//!     records/<bucket>.json         0600 who created a bucket, and under which policy
//!     keys/<access-key-id>.json     0600 one access key (a secret) and the bucket it reaches
//!     meta/<bucket>/<hh>/<md5>.json      ETag, headers, checksums, tags of one object, when they
//!                                        cannot be attached to its data file (`attached`)
//!     meta/<bucket>/side/<hh>/<md5>.{json,data}  objects whose key cannot be a path (see below)
//!     meta/<bucket>/cors.json            the bucket's CORS rules (`cors`)
//!     meta/<bucket>/lifecycle.json       the bucket's lifecycle rules (`lifecycle_file`)
//!     meta/<bucket>/lifecycle-walk.json  where an unfinished lifecycle walk stopped
//!                                        (`lifecycle_walk`)
//!     meta/<bucket>/object-lock.json     only in a bucket created with object lock: its default
//!                                        retention and retention ceiling (`object_lock_file`)
//!     meta/<bucket>/public-access-block.json  its public access block (`public_access_block`)
//!     meta/<bucket>/tagging.json         the bucket's tags (`bucket_tags`)
//!     meta/<bucket>/versioning.json      the bucket's versioning state (`versioning`)
//!     meta/<bucket>/versions/<hh>/<md5>/<order>.{json,data}  noncurrent versions and delete
//!                                        markers of one key (`versions`)
//!     uploads/<bucket>/<upload-id>/      multipart uploads in progress
//!     usage/<bucket>.json                what the bucket holds, in total and by claim (`usage`)
//!     tmp/00 … tmp/3f                    temporary files, renamed into place when complete
//! ```
//!
//! Object data keeps its key as its path, so an operator sees plain files under the bucket
//! directory. An object's metadata travels attached to its data file (an extended attribute,
//! module `attached`), so that one sync and one rename put both in place. Where the file system
//! cannot hold the attribute, it is a file outside the bucket, named by a hash of the key so that
//! no key can collide with it, written before the data is renamed into place. Metadata records
//! the size and modification time of the data it describes: data changed behind the store's back
//! (or a crash between writing a metadata file and renaming the data) makes it stale, and the
//! object is then served with a derived ETag instead of a wrong one.
//!
//! Every write goes to a file of `tmp/` first (one of 64 directories, so that concurrent writes
//! do not queue on one directory's lock) and is renamed into place, so readers never see a
//! partial object. Records and keys are a file each, replaced atomically (temp file, fsync,
//! rename, fsync directory), so provisioning one claim writes what concerns that claim and
//! nothing else, however many buckets there are.
//!
//! # Versions
//!
//! In a bucket whose versioning was set (`versioning`), the current version of a key stays where
//! an unversioned object is, and every other version and delete marker is a record (with a hard
//! link to its bytes) in the key's versions directory, named by a time-ordered id (`versions`).
//! What is in place is always the key's newest version; a crash can only leave a duplicate record
//! of it (ignored) or its newest version recorded with nothing in place (put back in place when
//! the store opens, or by a read of the key). Every permanent removal of a version goes through
//! `remove_version_permanently`, which asks `check_permanent_removal` first (`version_write`).
//! Usage counts every version as an object with its bytes; delete markers count for nothing.
//!
//! # Keys that cannot be paths
//!
//! S3 keys are not all file paths: a key may be both an object and a prefix of others (`a` and
//! `a/b`), or hold empty, `.` or `..` segments, a leading `/` or a segment over 255 bytes. Such
//! an object is kept "on the side", under the bucket's metadata directory by a hash of its key
//! (module `side`), whenever its plain path is impossible or taken; lookups try the plain path
//! first, listings merge both in key order. A key ending in `/` is an empty "folder" marker,
//! stored as a directory plus metadata where it can be. Empty keys, keys over 1024 bytes and
//! NUL are refused. Symlinks under a bucket are never followed: they are not listed, and
//! reading, writing or deleting through one is refused.
//!
//! # Object lock
//!
//! A bucket created with object lock (`object_lock_file`, enabled only while it holds nothing)
//! gives every new object its default retention unless the write names its own; an object's
//! retention and legal hold travel in its metadata with the rest (`ObjectAttrs::lock`). What
//! they allow is decided by pure functions (`object_lock`) and enforced under the key's commit
//! lock wherever an object would go (`locked_objects`): a removal, an overwrite (buckets are not
//! versioned), a lifecycle expiration, the deletion of a claim's bucket. A refusal is
//! [`StoreError::ObjectLocked`], for every key and the operator's own paths alike. The
//! retentions claim keys set stay within the ceiling the provisioner recorded in the same file
//! (`retention_ceiling`), else [`StoreError::OverCeiling`].

mod attached;
mod body_writer;
mod bucket_settings;
mod bucket_tags;
mod checksum;
mod commit;
mod config_file;
mod cors;
mod cors_json;
mod crash_point;
mod dir_cache;
mod dir_sync;
mod durable;
mod error;
mod key_mode;
mod lifecycle;
mod lifecycle_file;
mod lifecycle_match;
mod lifecycle_pass;
mod lifecycle_slice;
mod lifecycle_versions;
mod lifecycle_walk;
mod list;
mod locked_objects;
mod multipart;
mod names;
mod object_lock;
mod object_lock_file;
mod object_meta;
mod object_tags;
mod objects;
mod operator;
mod own_key;
mod parts;
mod public_access_block;
mod records;
mod retention_ceiling;
mod sessions;
mod side;
mod temp;
mod upload_file;
mod usage;
mod usage_change;
mod version_index;
mod version_list;
mod version_stamp;
mod version_write;
mod versioning;
mod versions;
mod web_identity;

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

pub use bucket_settings::{BucketSetting, Settable, refusal as bucket_setting_refusal};
pub use checksum::{Checksum, ChecksumAlgorithm, ChecksumCheck, ChecksumType, ExpectedChecksum};
pub use cors::{
    CORS_METHODS, CorsConfig, CorsRefusal, CorsRule, InvalidCors, MAX_CORS_BYTES,
    MAX_CORS_ID_CHARS, MAX_CORS_RULES,
};
pub use error::StoreError;
pub use key_mode::KeyMode;
pub use lifecycle::{
    Expiration, FilterForm, InvalidLifecycle, LifecycleConfig, LifecycleFilter, LifecycleRefusal,
    LifecycleRule, MAX_LIFECYCLE_ID_CHARS, MAX_LIFECYCLE_RULES, MAX_NEWER_NONCURRENT_VERSIONS,
    NoncurrentExpiration,
};
pub use lifecycle_pass::LifecyclePassReport;
pub use list::{ListPage, ListQuery};
pub use multipart::{CompleteRequest, CompletedPartSpec, UploadInfo};
pub use names::{KeyPath, MAX_KEY_LEN, parse_key, validate_bucket_name, validate_key};
pub use object_lock::{
    BucketLock, Bypass, DefaultRetention, LockMode, LockReason, LockRefusal,
    MAX_DEFAULT_RETENTION_DAYS, MAX_DEFAULT_RETENTION_YEARS, ObjectLock, Retention,
    RetentionCeiling, RetentionPeriod, check_new_retention, unix_ms,
};
pub use object_meta::{
    CopyReplace, CopySourceCheck, ObjectAttrs, ObjectInfo, PutCheck, Tags, WriteCondition,
    etag_matches,
};
pub use operator::OPERATOR_OWNER;
pub use own_key::OwnKey;
pub use parts::PartInfo;
pub use public_access_block::PublicAccessBlock;
pub use records::{AccessKey, BucketRecord, Creator};
pub use sessions::{MAX_SESSIONS, Session};
pub use usage::SETTLE_INTERVAL;
pub use usage_change::{Quota, Usage, Writer};
pub use version_list::{VersionEntry, VersionPage, VersionQuery};
pub use version_write::Deleted;
pub use versioning::Versioning;
pub use versions::{NULL_VERSION, valid_version_id};
pub use web_identity::{DEFAULT_MAX_SESSION_SECS, WebIdentityAccess};

use crate::admin::AdminCredentials;
use durable::{ensure_real_dir, make_bucket_dir, remove_tree, unix_now};
use records::{State, Tx, claim_keys, issue_in, load_state};

/// Name of the bookkeeping directory under the root.
const STATE_DIR: &str = ".provisioner";
/// Name of the directory holding bucket directories under the root.
const BUCKETS_DIR: &str = "buckets";
const RECORDS_DIR: &str = "records";
const KEYS_DIR: &str = "keys";
const SESSIONS_DIR: &str = "sessions";

/// Buckets, objects and access keys under one root directory. Cheap to clone.
#[derive(Clone)]
pub struct BucketStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for BucketStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BucketStore")
            .field("root", &self.inner.root)
            .field("identity", &self.inner.identity)
            .finish_non_exhaustive()
    }
}

struct Inner {
    root: PathBuf,
    /// Where the usage files are, shared by every meter.
    usage_dir: Arc<Path>,
    identity: String,
    /// In-memory copy of the records and keys, read on every request by authentication.
    state: RwLock<State>,
    /// Serializes read-decide-persist cycles of the records and keys.
    writer: Mutex<()>,
    /// The operator credential; configuration, never persisted.
    admin: RwLock<Option<Arc<AdminCredentials>>>,
    /// Serializes commits of one key (striped by a hash of bucket and key), so that
    /// conditional writes are checked and applied atomically.
    key_locks: Vec<Mutex<()>>,
    /// Serializes the changes of one multipart upload (its parts, completion, abort), striped
    /// like the keys, so that what its parts take is counted exactly once.
    upload_locks: Vec<Mutex<()>>,
    /// Usage and quotas of every bucket, by bucket name.
    meters: RwLock<HashMap<String, Arc<usage::Meter>>>,
    /// Sorted entries of large directories, so that listing pages need not read them again.
    dir_cache: dir_cache::DirCache,
    /// Directory syncs shared by the writes renamed into one directory at once.
    dir_syncs: dir_sync::DirSyncs,
    /// Versioning state of the buckets looked up so far.
    versioning: versioning::VersioningCache,
    /// Keys with archived versions, by bucket, for ListObjectVersions.
    archive_index: version_index::ArchiveIndex,
    /// Object lock configuration of the buckets looked up so far.
    object_locks: object_lock_file::ObjectLockCache,
    /// Session keys minted for web identities.
    sessions: sessions::Sessions,
    /// Where each bucket's lifecycle walk stands between passes.
    lifecycle_walks: lifecycle_walk::WalkProgress,
    /// Lifecycle configurations of the buckets looked up so far, for object answers.
    lifecycle_cache: lifecycle_file::LifecycleCache,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Nothing is in flight any more: every bucket's usage can be saved as settled.
        self.settle_usage();
    }
}

/// Number of stripes of [`Inner::key_locks`]; keys sharing one only wait for each other's
/// rename, never for a body upload.
const KEY_LOCK_STRIPES: usize = 64;

impl BucketStore {
    /// Opens (creating if needed) the store under `root`. `identity` names this provisioner
    /// instance: it is recorded on every bucket it creates, and only buckets recorded with the
    /// same identity are ever deleted.
    ///
    /// Blocking; call it before the runtime gets busy or from `spawn_blocking`.
    pub fn open(root: PathBuf, identity: impl Into<String>) -> Result<Self, StoreError> {
        let identity = identity.into();
        if identity.is_empty() {
            return Err(StoreError::InvalidArgument("the store identity must not be empty".into()));
        }
        fs::create_dir_all(&root)?;
        // Resolve the root once so that later symlink checks only concern paths below it.
        let root = fs::canonicalize(&root)?;
        fs::create_dir_all(root.join(BUCKETS_DIR))?;
        let state_dir = root.join(STATE_DIR);
        let dirs = ["", "meta", "uploads", temp::TEMP_DIR, RECORDS_DIR, KEYS_DIR, SESSIONS_DIR];
        for dir in dirs.into_iter().chain([usage::USAGE_DIR]) {
            let dir = state_dir.join(dir);
            match fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e.into()),
            }
            ensure_real_dir(&dir)?;
        }
        // The state directory holds secrets: tighten it even if someone loosened it.
        fs::set_permissions(&state_dir, fs::Permissions::from_mode(0o700))?;
        // Leftovers of writes interrupted by a crash; nothing references them.
        for entry in fs::read_dir(state_dir.join(temp::TEMP_DIR))? {
            let path = entry?.path();
            let _ = fs::remove_file(&path).or_else(|_| fs::remove_dir_all(&path));
        }
        for shard in temp::temp_shards(&state_dir) {
            fs::DirBuilder::new().mode(0o700).create(&shard)?;
        }
        let state = load_state(&state_dir)?;
        let sessions = sessions::Sessions::load(&state_dir.join(SESSIONS_DIR))?;
        let store = Self {
            inner: Arc::new(Inner {
                usage_dir: usage::usage_dir(&root.join(STATE_DIR)).into(),
                root,
                identity,
                state: RwLock::new(state),
                writer: Mutex::new(()),
                admin: RwLock::new(None),
                key_locks: stripes(),
                upload_locks: stripes(),
                meters: RwLock::default(),
                dir_cache: dir_cache::DirCache::new(dir_cache::settle_window(
                    &state_dir.join(temp::TEMP_DIR),
                )),
                dir_syncs: dir_sync::DirSyncs::default(),
                versioning: versioning::VersioningCache::default(),
                object_locks: object_lock_file::ObjectLockCache::default(),
                archive_index: version_index::ArchiveIndex::default(),
                sessions,
                lifecycle_walks: lifecycle_walk::WalkProgress::default(),
                lifecycle_cache: lifecycle_file::LifecycleCache::default(),
            }),
        };
        store.load_meters()?;
        usage::spawn_settler(Arc::downgrade(&store.inner));
        Ok(store)
    }

    /// The (canonical) root directory.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// This provisioner's identity, recorded as the owner of the buckets it creates.
    pub fn identity(&self) -> &str {
        &self.inner.identity
    }

    /// Directory of `bucket`'s data (whether or not it exists).
    pub fn bucket_path(&self, bucket: &str) -> Result<PathBuf, StoreError> {
        validate_bucket_name(bucket)?;
        Ok(self.inner.root.join(BUCKETS_DIR).join(bucket))
    }

    /// Whether `bucket` exists as a real directory (not a symlink) under the root, whoever
    /// created it.
    pub fn bucket_exists(&self, bucket: &str) -> Result<bool, StoreError> {
        let path = self.bucket_path(bucket)?;
        match fs::symlink_metadata(&path) {
            Ok(m) => Ok(m.is_dir()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// The record of `bucket`, if this store (under any identity) created it.
    pub fn bucket_record(&self, bucket: &str) -> Option<BucketRecord> {
        self.inner.read().buckets.get(bucket).cloned()
    }

    /// The key with this access key id, if it exists: a claim's key, or a session's key as its
    /// role's current key stands now (see [`Session`]).
    pub fn lookup_key(&self, access_key_id: &str) -> Option<AccessKey> {
        if let Some(key) = self.inner.read().keys.get(access_key_id) {
            return Some(key.clone());
        }
        self.session_key(access_key_id)
    }

    /// All keys issued for `user_id`.
    pub fn keys_for_user(&self, user_id: &str) -> Vec<AccessKey> {
        let state = self.inner.read();
        state.keys_of_user(user_id).iter().filter_map(|id| state.keys.get(id).cloned()).collect()
    }

    /// Creates `bucket` owned by our identity for `creator`. Idempotent for the same creator:
    /// succeeds when an earlier call created it (and recreates a directory that went missing
    /// since). Any other existing bucket, whoever made it, is
    /// [`StoreError::BucketAlreadyExists`] (or [`StoreError::NotOurs`] under another identity).
    pub async fn create_bucket(
        &self,
        bucket: &str,
        creator: Creator<'_>,
    ) -> Result<BucketRecord, StoreError> {
        let (bucket, user_id) = (bucket.to_owned(), creator.user_id.to_owned());
        let delete_with_claim = creator.delete_with_claim;
        self.blocking(move |store| {
            store.create_bucket_blocking(&bucket, Creator { user_id: &user_id, delete_with_claim })
        })
        .await
    }

    /// [`BucketStore::create_bucket`] and [`BucketStore::issue_key`] for the creator in one
    /// transaction, the way a claim's bucket is provisioned: both records reach the disk together.
    pub async fn provision_bucket(
        &self,
        bucket: &str,
        creator: Creator<'_>,
    ) -> Result<(BucketRecord, AccessKey), StoreError> {
        let (bucket, user_id) = (bucket.to_owned(), creator.user_id.to_owned());
        let delete_with_claim = creator.delete_with_claim;
        self.blocking(move |store| {
            store.provision_bucket_blocking(
                &bucket,
                Creator { user_id: &user_id, delete_with_claim },
            )
        })
        .await
    }

    /// Returns the key of `user_id` for `bucket`, creating it on the first call. A retry returns
    /// the same key pair. The bucket directory must exist.
    pub async fn issue_key(&self, user_id: &str, bucket: &str) -> Result<AccessKey, StoreError> {
        let (user_id, bucket) = (user_id.to_owned(), bucket.to_owned());
        self.blocking(move |store| store.issue_key_blocking(&user_id, &bucket)).await
    }

    /// Removes every key of `user_id`. Idempotent; returns how many were removed.
    pub async fn revoke_keys(&self, user_id: &str) -> Result<usize, StoreError> {
        let user_id = user_id.to_owned();
        self.blocking(move |store| {
            store.inner.mutate(|tx| {
                let ids = tx.state.keys_of_user(&user_id);
                for id in &ids {
                    tx.remove_key(id);
                }
                Ok(ids.len())
            })
        })
        .await
    }

    /// Deletes `bucket`, its objects, uploads and keys when its record says `user_id` created
    /// it to go with its claim, and answers `true`; for any other bucket of ours only removes
    /// `user_id`'s keys and answers `false`. Already gone counts as deleted; a bucket recorded
    /// under another identity is [`StoreError::NotOurs`] and is left untouched. A bucket with
    /// object lock that still holds a protected object keeps all its data (its keys are
    /// revoked): [`StoreError::ObjectLocked`], until the last protection ends.
    pub async fn delete_bucket(&self, bucket: &str, user_id: &str) -> Result<bool, StoreError> {
        let (bucket, user_id) = (bucket.to_owned(), user_id.to_owned());
        self.blocking(move |store| store.delete_bucket_blocking(&bucket, &user_id)).await
    }

    /// Sets the limits on everything `bucket` holds. Only the claim that created it may:
    /// anyone else is [`StoreError::NotCreator`]. Writes the record only when they change.
    pub async fn set_bucket_quota(
        &self,
        bucket: &str,
        user_id: &str,
        quota: Quota,
    ) -> Result<(), StoreError> {
        let (bucket, user_id) = (bucket.to_owned(), user_id.to_owned());
        self.blocking(move |store| {
            store.inner.mutate(|tx| {
                let record = tx.state.created_by(&bucket, &user_id)?;
                if record.quota != quota {
                    tx.put_bucket(BucketRecord { quota, ..record.clone() });
                }
                Ok(())
            })?;
            store.meter(&bucket)?.set_bucket_quota(quota);
            Ok(())
        })
        .await
    }

    /// Sets the limits on what `user_id` stores in `bucket` with its key, which must exist.
    /// Writes the key's record only when they change.
    pub async fn set_user_quota(
        &self,
        user_id: &str,
        bucket: &str,
        quota: Quota,
    ) -> Result<(), StoreError> {
        let (user_id, bucket) = (user_id.to_owned(), bucket.to_owned());
        self.blocking(move |store| {
            store.inner.mutate(|tx| {
                for key in claim_keys(tx, &user_id, &bucket)? {
                    if key.quota != quota {
                        tx.put_key(AccessKey { quota, ..key });
                    }
                }
                Ok(())
            })?;
            store.meter(&bucket)?.set_user_quota(&user_id, quota);
            Ok(())
        })
        .await
    }

    /// The claim user id of the key `access_key_id`, if it exists.
    pub fn user_of_key(&self, access_key_id: &str) -> Option<String> {
        if let Some(key) = self.inner.read().keys.get(access_key_id) {
            return Some(key.user_id.clone());
        }
        self.session_key(access_key_id).map(|k| k.user_id)
    }

    /// The commit lock of `key` in `bucket`.
    fn key_lock(&self, bucket: &str, key: &str) -> std::sync::MutexGuard<'_, ()> {
        stripe_of(&self.inner.key_locks, bucket, key)
    }

    /// The lock of the multipart upload `upload_id` in `bucket`.
    fn upload_lock(&self, bucket: &str, upload_id: &str) -> std::sync::MutexGuard<'_, ()> {
        stripe_of(&self.inner.upload_locks, bucket, upload_id)
    }

    /// Runs blocking file system work off the async threads.
    async fn blocking<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&BucketStore) -> Result<R, StoreError> + Send + 'static,
    {
        let store = self.clone();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| StoreError::Io(io::Error::other(e)))?
    }

    fn create_bucket_blocking(
        &self,
        bucket: &str,
        creator: Creator<'_>,
    ) -> Result<BucketRecord, StoreError> {
        let path = self.bucket_path(bucket)?;
        let record = self.inner.mutate(|tx| self.record_creation(tx, bucket, &path, creator))?;
        crash_point::crash_point("bucket:recorded");
        make_bucket_dir(&path)?;
        // Metered from the start, so that its usage is reported before its first write.
        self.meter(bucket)?;
        Ok(record)
    }

    fn provision_bucket_blocking(
        &self,
        bucket: &str,
        creator: Creator<'_>,
    ) -> Result<(BucketRecord, AccessKey), StoreError> {
        let path = self.bucket_path(bucket)?;
        // One transaction: the record and the creator's key are written (and synced) together.
        let (record, key) = self.inner.mutate(|tx| {
            let record = self.record_creation(tx, bucket, &path, creator)?;
            Ok((record, issue_in(tx, creator.user_id, bucket)))
        })?;
        make_bucket_dir(&path)?;
        self.meter(bucket)?;
        Ok((record, key))
    }

    /// Records `bucket` as created for `creator`, or finds the record of an earlier attempt of
    /// the same creator. Decided under the writer lock: of two claims racing for one name, the
    /// second finds the first's record.
    fn record_creation(
        &self,
        tx: &mut Tx<'_>,
        bucket: &str,
        path: &Path,
        creator: Creator<'_>,
    ) -> Result<BucketRecord, StoreError> {
        let ours = self.identity();
        if let Some(record) = tx.state.buckets.get(bucket) {
            if record.owner != ours {
                return Err(StoreError::NotOurs {
                    bucket: bucket.to_owned(),
                    owner: record.owner.clone(),
                    ours: ours.to_owned(),
                });
            }
            // Only a retry of the creating claim; never an operator bucket, never one kept
            // after its claim went, never another claim's.
            if !record.created_by_provisioner || record.creator.as_deref() != Some(creator.user_id)
            {
                return Err(StoreError::BucketAlreadyExists(bucket.to_owned()));
            }
            return Ok(record.clone());
        }
        // No record: an existing directory belongs to someone else (the record is always
        // written before the directory is made).
        if fs::symlink_metadata(path).is_ok() {
            return Err(StoreError::BucketAlreadyExists(bucket.to_owned()));
        }
        let record = BucketRecord {
            name: bucket.to_owned(),
            owner: ours.to_owned(),
            created_by_provisioner: true,
            created_unix: unix_now(),
            creator: Some(creator.user_id.to_owned()),
            delete_with_claim: creator.delete_with_claim,
            quota: Quota::default(),
            location: None,
            settable: None,
        };
        tx.put_bucket(record.clone());
        Ok(record)
    }

    fn issue_key_blocking(&self, user_id: &str, bucket: &str) -> Result<AccessKey, StoreError> {
        if user_id.is_empty() {
            return Err(StoreError::InvalidArgument("user id must not be empty".into()));
        }
        self.inner.mutate(|tx| {
            // Checked under the writer lock, so that an operator's DeleteBucket (which checks
            // for keys under the same lock) cannot slip in between.
            if !self.bucket_exists(bucket)? {
                return Err(StoreError::NoSuchBucket(bucket.to_owned()));
            }
            Ok(issue_in(tx, user_id, bucket))
        })
    }

    fn delete_bucket_blocking(&self, bucket: &str, user_id: &str) -> Result<bool, StoreError> {
        let path = self.bucket_path(bucket)?;
        let ours = self.identity().to_owned();
        let record = self.bucket_record(bucket);
        let revoke_only = || {
            self.inner.mutate(|tx| {
                for id in tx.state.keys_of_user(user_id) {
                    tx.remove_key(&id);
                }
                Ok(false)
            })
        };
        match &record {
            // An operator's bucket is never a claim's to delete, whoever runs this store.
            Some(record) if !record.created_by_provisioner => return revoke_only(),
            Some(record) if record.owner != ours => {
                return Err(StoreError::NotOurs {
                    bucket: bucket.to_owned(),
                    owner: record.owner.clone(),
                    ours,
                });
            }
            Some(record)
                if record.delete_with_claim && record.creator.as_deref() == Some(user_id) => {}
            Some(_) => return revoke_only(),
            None if fs::symlink_metadata(&path).is_ok() => return revoke_only(),
            None => return Ok(true),
        }
        // Keys first, so that clients stop writing while the data goes.
        self.inner.mutate(|tx| {
            let ids: Vec<String> =
                tx.state.keys_of_bucket(bucket).map(|k| k.access_key_id.clone()).collect();
            for id in ids {
                tx.remove_key(&id);
            }
            Ok(())
        })?;
        crash_point::crash_point("bucket:keys-removed");
        // Once no claim key can write: protected data outlives its claim (none after a crash).
        let locked = if path.exists() { self.first_locked_object(bucket)? } else { None };
        locked.map_or(Ok(()), Err)?;
        let state_dir = self.inner.state_dir();
        for dir in
            [path, state_dir.join("meta").join(bucket), state_dir.join("uploads").join(bucket)]
        {
            remove_tree(&dir)?;
        }
        self.inner.versioning.forget(bucket);
        self.inner.object_locks.forget(bucket);
        self.inner.lifecycle_walks.forget(bucket);
        self.inner.lifecycle_cache.forget(bucket);
        self.drop_meter(bucket)?;
        crash_point::crash_point("bucket:data-removed");
        // The record goes last: until then a retry knows the bucket is ours.
        self.inner.mutate(|tx| {
            tx.remove_bucket(bucket);
            Ok(true)
        })
    }
}

impl Inner {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn state_dir(&self) -> PathBuf {
        self.root.join(STATE_DIR)
    }
}

fn stripes() -> Vec<Mutex<()>> {
    (0..KEY_LOCK_STRIPES).map(|_| Mutex::new(())).collect()
}

/// The stripe of `locks` that `(bucket, name)` hashes to, locked.
fn stripe_of<'a>(
    locks: &'a [Mutex<()>],
    bucket: &str,
    name: &str,
) -> std::sync::MutexGuard<'a, ()> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (bucket, name).hash(&mut hasher);
    let stripe = usize::try_from(hasher.finish() % locks.len() as u64).unwrap_or(0);
    locks[stripe].lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
