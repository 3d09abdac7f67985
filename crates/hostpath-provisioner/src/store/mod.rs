//! Buckets as directories under one root, with durable bookkeeping of owners and access keys.
//!
//! # Layout
//!
//! ```text
//! <root>/buckets/<bucket>/<key>          object data; a key's '/' are directories
//! <root>/.provisioner/              0700 bookkeeping, never served
//!     records/<bucket>.json         0600 who created a bucket, and under which policy
//!     keys/<access-key-id>.json     0600 one access key (a secret) and the bucket it reaches
//!     meta/<bucket>/<hh>/<md5>.json      ETag, headers, checksums of one object
//!     meta/<bucket>/side/<hh>/<md5>.{json,data}  objects whose key cannot be a path (see below)
//!     uploads/<bucket>/<upload-id>/      multipart uploads in progress
//!     usage/<bucket>.json                what the bucket holds, in total and by claim (`usage`)
//!     tmp/                               temporary files, renamed into place when complete
//! ```
//!
//! Object data keeps its key as its path, so an operator sees plain files under the bucket
//! directory. Metadata lives outside the bucket, named by a hash of the key, so that no key can
//! collide with it. A metadata file records the size and modification time of the data it
//! describes: data changed behind the store's back (or a crash between the two renames) makes it
//! stale, and the object is then served with a derived ETag instead of a wrong one.
//!
//! Every write goes to `tmp/` first and is renamed into place, so readers never see a partial
//! object. Records and keys are a file each, replaced atomically (temp file, fsync, rename, fsync
//! directory), so provisioning one claim writes what concerns that claim and nothing else, however
//! many buckets there are. A `state.json` from earlier versions (everything in one file) is split
//! into these files when the store opens.
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

mod checksum;
mod list;
mod multipart;
mod names;
mod objects;
mod operator;
mod side;
mod usage;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use md5::{Digest, Md5};
use rand::Rng;
use serde::{Deserialize, Serialize};

pub use checksum::{Checksum, ChecksumAlgorithm, ChecksumCheck, ChecksumType, ExpectedChecksum};
pub use list::{ListPage, ListQuery};
pub use multipart::{CompleteRequest, CompletedPartSpec, PartInfo, UploadInfo};
pub use names::{KeyPath, MAX_KEY_LEN, parse_key, validate_bucket_name, validate_key};
pub use objects::{
    CopySourceCheck, ObjectAttrs, ObjectInfo, PutCheck, WriteCondition, etag_matches,
};
pub use operator::OPERATOR_OWNER;
pub use usage::{Quota, SETTLE_INTERVAL, Usage, Writer};

use crate::admin::AdminCredentials;

/// Name of the bookkeeping directory under the root.
const STATE_DIR: &str = ".provisioner";
/// Name of the directory holding bucket directories under the root.
const BUCKETS_DIR: &str = "buckets";
/// The single bookkeeping file of earlier versions, split up when found.
const LEGACY_STATE_FILE: &str = "state.json";
const LEGACY_STATE_VERSION: u32 = 1;
const RECORDS_DIR: &str = "records";
const KEYS_DIR: &str = "keys";

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The bucket name breaks the S3 naming rules.
    #[error("{0}")]
    InvalidBucketName(String),
    /// The object key cannot be stored safely.
    #[error("invalid object key {0}")]
    InvalidKey(String),
    /// The object key is longer than [`MAX_KEY_LEN`].
    #[error("object key is longer than {MAX_KEY_LEN} bytes")]
    KeyTooLong,
    /// No bucket directory of that name exists.
    #[error("bucket {0:?} does not exist")]
    NoSuchBucket(String),
    /// No object of that key exists.
    #[error("object {0:?} does not exist")]
    NoSuchKey(String),
    /// The bucket exists and was not created for the claim asking (or nothing records who
    /// created it). Names nobody else.
    #[error("bucket {0:?} already exists and was not created for this claim")]
    BucketAlreadyExists(String),
    /// The operator asked to create a bucket that already exists (whoever made it).
    #[error("bucket {0:?} already exists")]
    BucketAlreadyOwnedByYou(String),
    /// The operator asked to delete a bucket that still holds objects.
    #[error("bucket {0:?} is not empty; delete its objects first")]
    BucketNotEmpty(String),
    /// The operator asked to delete a bucket that claims still have keys for.
    #[error(
        "bucket {bucket:?} is bound to claim(s) {}; delete those claims (which revokes their \
         keys) before deleting the bucket",
        users.join(", ")
    )]
    BucketInUse {
        /// The bucket.
        bucket: String,
        /// User ids of the claims whose keys reach it.
        users: Vec<String>,
    },
    /// Only the claim that created a bucket may set the bucket's quota.
    #[error("bucket {0:?} was not created by this claim")]
    NotCreator(String),
    /// The bucket was created under another identity; it was left alone.
    #[error(
        "bucket {bucket:?} belongs to {owner:?}, not to this provisioner ({ours:?}); it was left \
         alone"
    )]
    NotOurs {
        /// The bucket.
        bucket: String,
        /// Its recorded owner, empty when it has no record (created outside the provisioner).
        owner: String,
        /// Our identity.
        ours: String,
    },
    /// The key's plain path is a directory that holds other objects, or runs through an
    /// object. Writes answer it by keeping the object beside the bucket; it reaches clients
    /// only where that cannot be done.
    #[error("object key {0:?} conflicts with another object's path")]
    KeyConflict(String),
    /// A symbolic link was found where the store expected a file or directory; it is never
    /// followed.
    #[error("refusing to follow the symbolic link at {0:?}")]
    Symlink(String),
    /// No multipart upload with that id exists for this bucket and key.
    #[error("multipart upload {0:?} does not exist")]
    NoSuchUpload(String),
    /// A part named in CompleteMultipartUpload is missing or has another ETag.
    #[error("invalid part: {0}")]
    InvalidPart(String),
    /// CompleteMultipartUpload listed parts out of ascending order.
    #[error("parts must be listed in ascending order")]
    InvalidPartOrder,
    /// A part other than the last is smaller than the S3 minimum of 5 MiB.
    #[error("part {0} is smaller than 5 MiB and is not the last part")]
    EntityTooSmall(u32),
    /// The body's MD5 differs from the Content-MD5 sent with it.
    #[error("the body does not match its Content-MD5")]
    BadDigest,
    /// The body's checksum differs from the one the client sent; nothing was stored.
    #[error("the {} you specified did not match the calculated checksum", .0.header())]
    BadChecksum(ChecksumAlgorithm),
    /// A precondition of the request (`If-Match`, `If-None-Match`) does not hold.
    #[error("at least one of the pre-conditions you specified did not hold")]
    PreconditionFailed,
    /// The request is well-formed but asks for something S3 refuses.
    #[error("{0}")]
    InvalidRequest(String),
    /// The write would pass a quota of the bucket or of the writing claim; nothing was stored.
    #[error("{0}")]
    QuotaExceeded(String),
    /// A byte range outside the object.
    #[error("{0}")]
    InvalidRange(String),
    /// A request body that is not the XML S3 expects.
    #[error("{0}")]
    MalformedXml(String),
    /// The body is shorter or longer than its declared length.
    #[error("body length {actual} differs from the declared {expected}")]
    IncompleteBody {
        /// Declared length.
        expected: u64,
        /// Bytes received.
        actual: u64,
    },
    /// The request body failed while it was read.
    #[error("reading the request body failed: {0}")]
    Body(String),
    /// A request parameter is malformed.
    #[error("{0}")]
    InvalidArgument(String),
    /// The bookkeeping file cannot be understood.
    #[error("corrupt state file {path:?}: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A file system call failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// What the store knows about a bucket it created.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketRecord {
    /// The bucket name (and directory name).
    pub name: String,
    /// Identity of the provisioner that created it; only that identity may delete it.
    pub owner: String,
    /// Whether the provisioner created the directory (rather than adopting one).
    pub created_by_provisioner: bool,
    /// When the record was written, in seconds since the Unix epoch.
    pub created_unix: u64,
    /// User id of the claim the bucket was created for: only that claim may provision it again
    /// or have it deleted. `None` for operator buckets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creator: Option<String>,
    /// Whether deleting the creating claim deletes the bucket (it was created under `Delete`).
    #[serde(default)]
    pub delete_with_claim: bool,
    /// Limits on everything the bucket holds, set by the claim that created it.
    #[serde(default, skip_serializing_if = "Quota::is_unlimited")]
    pub quota: Quota,
}

/// The claim a bucket is created for, as the store records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Creator<'a> {
    /// The claim's user id.
    pub user_id: &'a str,
    /// Whether deleting the claim deletes the bucket.
    pub delete_with_claim: bool,
}

/// An access key pair and what it may reach. `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessKey {
    /// The access key id the client signs with.
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
    /// Buckets this key may use; every other bucket is access denied.
    pub buckets: Vec<String>,
    /// The claim's user id the key was issued for.
    pub user_id: String,
    /// Limits on what this claim's user stores in the key's bucket.
    #[serde(default, skip_serializing_if = "Quota::is_unlimited")]
    pub quota: Quota,
}

impl std::fmt::Debug for AccessKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessKey")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field("buckets", &self.buckets)
            .field("user_id", &self.user_id)
            .field("quota", &self.quota)
            .finish()
    }
}

impl AccessKey {
    /// Whether this key may use `bucket`.
    pub fn allows(&self, bucket: &str) -> bool {
        self.buckets.iter().any(|b| b == bucket)
    }
}

/// The whole of a legacy `state.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct LegacyState {
    version: u32,
    buckets: BTreeMap<String, BucketRecord>,
    keys: BTreeMap<String, AccessKey>,
}

/// Every record and key, in memory, with indexes so that no operation on one claim looks at
/// every key.
#[derive(Debug, Default)]
struct State {
    buckets: BTreeMap<String, BucketRecord>,
    /// By access key id.
    keys: BTreeMap<String, AccessKey>,
    /// User id → its access key ids.
    by_user: Index,
    /// Bucket → access key ids reaching it.
    by_bucket: Index,
}

/// Access key ids by user or bucket. Almost every entry holds one id, kept without a list.
#[derive(Debug, Default)]
struct Index(HashMap<String, Ids>);

#[derive(Debug)]
enum Ids {
    One(String),
    /// Sorted.
    Many(Vec<String>),
}

impl Ids {
    fn as_slice(&self) -> &[String] {
        match self {
            Self::One(id) => std::slice::from_ref(id),
            Self::Many(ids) => ids,
        }
    }

    fn from_sorted(mut ids: Vec<String>) -> Option<Self> {
        match ids.len() {
            0 => None,
            1 => ids.pop().map(Self::One),
            _ => Some(Self::Many(ids)),
        }
    }
}

impl Index {
    fn insert(&mut self, entry: &str, id: &str) {
        let Some(ids) = self.0.get_mut(entry) else {
            self.0.insert(entry.to_owned(), Ids::One(id.to_owned()));
            return;
        };
        let mut list = ids.as_slice().to_vec();
        if let Err(at) = list.binary_search_by(|i| i.as_str().cmp(id)) {
            list.insert(at, id.to_owned());
            *ids = Ids::Many(list);
        }
    }

    fn remove(&mut self, entry: &str, id: &str) {
        let Some(ids) = self.0.get_mut(entry) else { return };
        let rest: Vec<String> = ids.as_slice().iter().filter(|i| *i != id).cloned().collect();
        match Ids::from_sorted(rest) {
            Some(rest) => *ids = rest,
            None => {
                self.0.remove(entry);
            }
        }
    }

    fn get(&self, entry: &str) -> &[String] {
        self.0.get(entry).map(Ids::as_slice).unwrap_or_default()
    }
}

impl State {
    fn insert_key(&mut self, key: AccessKey) {
        self.by_user.insert(&key.user_id, &key.access_key_id);
        for bucket in &key.buckets {
            self.by_bucket.insert(bucket, &key.access_key_id);
        }
        self.keys.insert(key.access_key_id.clone(), key);
    }

    fn remove_key(&mut self, id: &str) {
        let Some(key) = self.keys.remove(id) else { return };
        self.by_user.remove(&key.user_id, id);
        for bucket in &key.buckets {
            self.by_bucket.remove(bucket, id);
        }
    }

    /// The ids of `user_id`'s keys.
    fn keys_of_user(&self, user_id: &str) -> Vec<String> {
        self.by_user.get(user_id).to_vec()
    }

    /// The keys reaching `bucket`.
    fn keys_of_bucket(&self, bucket: &str) -> impl Iterator<Item = &AccessKey> {
        self.by_bucket.get(bucket).iter().filter_map(|id| self.keys.get(id))
    }
}

/// Changes decided under the writer lock, persisted before anyone can see them.
struct Tx<'a> {
    state: &'a State,
    buckets: BTreeMap<String, Option<BucketRecord>>,
    keys: BTreeMap<String, Option<AccessKey>>,
}

impl Tx<'_> {
    fn put_bucket(&mut self, record: BucketRecord) {
        self.buckets.insert(record.name.clone(), Some(record));
    }

    fn remove_bucket(&mut self, name: &str) {
        self.buckets.insert(name.to_owned(), None);
    }

    fn put_key(&mut self, key: AccessKey) {
        self.keys.insert(key.access_key_id.clone(), Some(key));
    }

    fn remove_key(&mut self, id: &str) {
        self.keys.insert(id.to_owned(), None);
    }
}

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
        for dir in ["", "meta", "uploads", "tmp", RECORDS_DIR, KEYS_DIR, usage::USAGE_DIR] {
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
        let tmp = state_dir.join("tmp");
        for entry in fs::read_dir(&tmp)? {
            let path = entry?.path();
            let _ = fs::remove_file(&path).or_else(|_| fs::remove_dir_all(&path));
        }
        split_legacy_state(&state_dir)?;
        let state = load_state(&state_dir)?;
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

    /// The key with this access key id, if it exists.
    pub fn lookup_key(&self, access_key_id: &str) -> Option<AccessKey> {
        self.inner.read().keys.get(access_key_id).cloned()
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
    /// under another identity is [`StoreError::NotOurs`] and is left untouched.
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
                let record = tx.state.buckets.get(&bucket).filter(|r| {
                    r.created_by_provisioner && r.creator.as_deref() == Some(user_id.as_str())
                });
                let Some(record) = record else {
                    return Err(StoreError::NotCreator(bucket.clone()));
                };
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
            let id = derive_access_key_id(&user_id, &bucket);
            store.inner.mutate(|tx| {
                let Some(key) = tx.state.keys.get(&id) else {
                    return Err(StoreError::InvalidArgument(format!(
                        "{user_id} has no key for bucket {bucket:?}"
                    )));
                };
                if key.quota != quota {
                    tx.put_key(AccessKey { quota, ..key.clone() });
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
        self.inner.read().keys.get(access_key_id).map(|k| k.user_id.clone())
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
        let state_dir = self.inner.state_dir();
        for dir in
            [path, state_dir.join("meta").join(bucket), state_dir.join("uploads").join(bucket)]
        {
            remove_tree(&dir)?;
        }
        self.drop_meter(bucket)?;
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

    /// Lets `f` decide changes against the current state, then persists each changed record and
    /// key (a file each) before anyone can see them. Writers take turns; readers never wait on a
    /// file system write.
    fn mutate<R>(
        &self,
        f: impl FnOnce(&mut Tx<'_>) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        let _guard = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let (out, buckets, keys) = {
            let state = self.read();
            let mut tx = Tx { state: &state, buckets: BTreeMap::new(), keys: BTreeMap::new() };
            let out = f(&mut tx)?;
            (out, tx.buckets, tx.keys)
        };
        if buckets.is_empty() && keys.is_empty() {
            return Ok(out);
        }
        let dir = self.state_dir();
        let mut files = Vec::with_capacity(buckets.len() + keys.len());
        for (name, record) in &buckets {
            files.push(file_change(&dir.join(RECORDS_DIR), name, record.as_ref())?);
        }
        for (id, key) in &keys {
            files.push(file_change(&dir.join(KEYS_DIR), id, key.as_ref())?);
        }
        persist_all(&files)?;
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        for (name, record) in buckets {
            match record {
                Some(record) => state.buckets.insert(name, record),
                None => state.buckets.remove(&name),
            };
        }
        for (id, key) in keys {
            state.remove_key(&id);
            if let Some(key) = key {
                state.insert_key(key);
            }
        }
        Ok(out)
    }
}

/// The entries of `dir`; a directory that does not exist has none.
fn entries_of(dir: &Path) -> io::Result<impl Iterator<Item = io::Result<fs::DirEntry>>> {
    let read = match fs::read_dir(dir) {
        Ok(read) => Some(read),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    Ok(read.into_iter().flatten())
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

/// The key of `user_id` for `bucket`: the one issued before (a retry gets the same pair), or a new
/// one recorded in `tx`.
fn issue_in(tx: &mut Tx<'_>, user_id: &str, bucket: &str) -> AccessKey {
    let access_key_id = derive_access_key_id(user_id, bucket);
    if let Some(key) = tx.state.keys.get(&access_key_id) {
        return key.clone();
    }
    let key = AccessKey {
        access_key_id,
        secret_access_key: random_secret(),
        buckets: vec![bucket.to_owned()],
        user_id: user_id.to_owned(),
        quota: Quota::default(),
    };
    tx.put_key(key.clone());
    key
}

/// Makes a bucket's directory (durably) unless it is there.
fn make_bucket_dir(path: &Path) -> Result<(), StoreError> {
    match fs::create_dir(path) {
        Ok(()) => fsync_dir(path.parent().unwrap_or(path))?,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e.into()),
    }
    ensure_real_dir(path)
}

/// One record or key file to write (`Some` bytes) or remove (`None`).
struct FileChange {
    path: PathBuf,
    bytes: Option<Vec<u8>>,
}

fn file_change<T: Serialize>(
    dir: &Path,
    name: &str,
    value: Option<&T>,
) -> Result<FileChange, StoreError> {
    let bytes = value.map(serde_json::to_vec).transpose().map_err(io::Error::other)?;
    Ok(FileChange { path: dir.join(format!("{name}.json")), bytes })
}

/// Writes `value` as `<dir>/<name>.json` (0600, atomically), or removes the file for `None`.
fn persist<T: Serialize>(dir: &Path, name: &str, value: Option<&T>) -> Result<(), StoreError> {
    persist_all(&[file_change(dir, name, value)?])
}

/// Makes every change durable with as few syncs as crash safety allows: each new file is written
/// and synced beside its place, then all are renamed (and removals done), then each directory
/// involved is synced once.
fn persist_all(files: &[FileChange]) -> Result<(), StoreError> {
    let mut staged = Vec::new();
    let result = (|| {
        for change in files {
            if let Some(bytes) = &change.bytes {
                let tmp = change.path.with_extension(format!("tmp-{}", random_hex(8)));
                staged.push(tmp.clone());
                let mut file =
                    OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
                file.write_all(bytes)?;
                file.sync_all()?;
            }
        }
        let mut tmps = staged.iter();
        let mut dirs = BTreeSet::new();
        for change in files {
            match &change.bytes {
                Some(_) => fs::rename(tmps.next().expect("one per written file"), &change.path)?,
                None => match fs::remove_file(&change.path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                },
            }
            dirs.insert(change.path.parent().unwrap_or(&change.path).to_owned());
        }
        dirs.iter().try_for_each(|dir| fsync_dir(dir))
    })();
    if result.is_err() {
        for tmp in &staged {
            let _ = fs::remove_file(tmp);
        }
    }
    Ok(result?)
}

/// Reads every `*.json` file of `dir`, when the store opens. A `*.tmp-*` file is a write a crash
/// interrupted before its rename: nothing refers to it, but it may hold a key's secret, so it is
/// removed.
fn read_all<T: serde::de::DeserializeOwned>(dir: &Path) -> Result<Vec<T>, StoreError> {
    let mut values = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let extension = path.extension().and_then(|e| e.to_str()).unwrap_or_default();
        if extension.starts_with("tmp-") {
            if let Err(e) = fs::remove_file(&path) {
                tracing::warn!(path = %path.display(), error = %e,
                    "could not remove the file of an interrupted write");
            }
            continue;
        }
        if extension != "json" {
            continue;
        }
        let bytes = fs::read(&path)?;
        let value = serde_json::from_slice(&bytes)
            .map_err(|e| StoreError::Corrupt { path: path.clone(), message: e.to_string() })?;
        values.push(value);
    }
    Ok(values)
}

fn load_state(state_dir: &Path) -> Result<State, StoreError> {
    let mut state = State::default();
    for record in read_all::<BucketRecord>(&state_dir.join(RECORDS_DIR))? {
        state.buckets.insert(record.name.clone(), record);
    }
    for key in read_all::<AccessKey>(&state_dir.join(KEYS_DIR))? {
        state.insert_key(key);
    }
    Ok(state)
}

/// Splits a `state.json` of earlier versions into a file per record and key, adopting creators
/// for records that predate them; the old file goes only once everything is written, so a crash
/// midway splits it again.
fn split_legacy_state(state_dir: &Path) -> Result<(), StoreError> {
    let path = state_dir.join(LEGACY_STATE_FILE);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let mut legacy: LegacyState = serde_json::from_slice(&bytes)
        .map_err(|e| StoreError::Corrupt { path: path.clone(), message: e.to_string() })?;
    if legacy.version > LEGACY_STATE_VERSION {
        return Err(StoreError::Corrupt {
            path,
            message: format!("written by a newer version (format {})", legacy.version),
        });
    }
    adopt_creators(&mut legacy);
    for record in legacy.buckets.values() {
        persist(&state_dir.join(RECORDS_DIR), &record.name, Some(record))?;
    }
    for key in legacy.keys.values() {
        persist(&state_dir.join(KEYS_DIR), &key.access_key_id, Some(key))?;
    }
    fs::remove_file(&path)?;
    fsync_dir(state_dir)?;
    Ok(())
}

/// Records written before creators were recorded: a bucket the provisioner created whose keys
/// all belong to one claim was that claim's (provision issues the creator's key right after
/// creating the bucket); with any other key holders nobody is recorded, and the bucket can only
/// lose keys, never be deleted or provisioned again.
fn adopt_creators(state: &mut LegacyState) {
    for record in state.buckets.values_mut() {
        if !record.created_by_provisioner || record.creator.is_some() {
            continue;
        }
        let holders: BTreeSet<&str> = state
            .keys
            .values()
            .filter(|k| k.allows(&record.name))
            .map(|k| k.user_id.as_str())
            .collect();
        if let [only] = holders.into_iter().collect::<Vec<_>>()[..] {
            record.creator = Some(only.to_owned());
            // Its ObjectBucket decided deletion until now; it still does.
            record.delete_with_claim = true;
        }
    }
}

/// A stable access key id for `user_id` on `bucket`, so that a retried issue finds the first.
fn derive_access_key_id(user_id: &str, bucket: &str) -> String {
    let mut hash = Md5::new();
    hash.update(user_id.as_bytes());
    hash.update([0]);
    hash.update(bucket.as_bytes());
    let digest = hash.finalize();
    // 20 characters like AWS key ids: a fixed prefix and 16 upper-case hex digits.
    format!("HPAK{}", hex::encode_upper(&digest[..8]))
}

/// 40 random alphanumeric characters from a cryptographically secure generator.
fn random_secret() -> String {
    rand::rng().sample_iter(rand::distr::Alphanumeric).take(40).map(char::from).collect()
}

/// A random name for temporary files and upload ids.
fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::rng().fill(&mut buf[..]);
    hex::encode(buf)
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Replaces `path` with `bytes` atomically: a temporary file beside it is written, fsynced and
/// renamed over it, then the directory is fsynced so the rename survives a crash.
fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let dir = path.parent().ok_or_else(|| io::Error::other("path has no parent"))?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp-{}", random_hex(8)));
    let result = (|| {
        let mut file = OpenOptions::new().write(true).create_new(true).mode(mode).open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        fsync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Fails unless `path` is a directory reached without a final symlink.
fn ensure_real_dir(path: &Path) -> Result<(), StoreError> {
    let meta = fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Err(StoreError::Symlink(path.display().to_string()));
    }
    if !meta.is_dir() {
        return Err(StoreError::Io(io::Error::other(format!(
            "{} is not a directory",
            path.display()
        ))));
    }
    Ok(())
}

/// Removes a directory tree if present. `remove_dir_all` does not follow symlinks inside it.
fn remove_tree(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        // A symlink or file in place of the directory: remove the entry, never its target.
        Ok(_) => fs::remove_file(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_index_keeps_ids_sorted_and_drops_empty_entries() {
        let mut index = Index::default();
        index.insert("user", "K2");
        assert_eq!(index.get("user"), ["K2"]);
        index.insert("user", "K1");
        index.insert("user", "K2");
        assert_eq!(index.get("user"), ["K1", "K2"]);
        index.remove("user", "K2");
        assert_eq!(index.get("user"), ["K1"]);
        index.remove("user", "K1");
        assert!(index.get("user").is_empty() && index.0.is_empty());
        index.remove("nobody", "K1");
    }

    fn open(dir: &Path, identity: &str) -> BucketStore {
        BucketStore::open(dir.to_owned(), identity).unwrap()
    }

    const ONE: Creator<'static> = Creator { user_id: "obc-1", delete_with_claim: true };

    #[tokio::test]
    async fn provision_issue_revoke_delete_are_idempotent() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path(), "ours");

        let first = store.create_bucket("photos", ONE).await.unwrap();
        let again = store.create_bucket("photos", ONE).await.unwrap();
        assert_eq!(first, again);
        assert!(first.created_by_provisioner);
        assert_eq!(first.owner, "ours");
        assert!(store.bucket_exists("photos").unwrap());

        let key = store.issue_key("obc-1", "photos").await.unwrap();
        let retry = store.issue_key("obc-1", "photos").await.unwrap();
        assert_eq!(key, retry, "a retry returns the same key pair");
        let other = store.issue_key("obc-2", "photos").await.unwrap();
        assert_ne!(key.access_key_id, other.access_key_id);
        assert_eq!(key.secret_access_key.len(), 40);

        // Survives a restart.
        drop(store);
        let store = open(tmp.path(), "ours");
        assert_eq!(store.lookup_key(&key.access_key_id), Some(key.clone()));
        assert_eq!(store.issue_key("obc-1", "photos").await.unwrap(), key);

        assert_eq!(store.revoke_keys("obc-1").await.unwrap(), 1);
        assert_eq!(store.revoke_keys("obc-1").await.unwrap(), 0);
        assert!(store.lookup_key(&key.access_key_id).is_none());
        assert!(store.lookup_key(&other.access_key_id).is_some());

        assert!(store.delete_bucket("photos", "obc-1").await.unwrap());
        assert!(!store.bucket_exists("photos").unwrap());
        assert!(store.lookup_key(&other.access_key_id).is_none(), "bucket keys go with it");
        assert!(store.bucket_record("photos").is_none());
        assert!(store.delete_bucket("photos", "obc-1").await.unwrap());

        // Provisioning again after a delete works, for anyone.
        store.create_bucket("photos", Creator { user_id: "obc-2", ..ONE }).await.unwrap();
    }

    #[tokio::test]
    async fn only_the_creating_claim_provisions_or_deletes_a_bucket() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path(), "ours");
        store.create_bucket("victim", ONE).await.unwrap();
        let victim = store.issue_key("obc-1", "victim").await.unwrap();
        let thief = Creator { user_id: "obc-2", delete_with_claim: true };
        assert!(matches!(
            store.create_bucket("victim", thief).await,
            Err(StoreError::BucketAlreadyExists(_))
        ));
        // A key the thief got some other way (a grant) goes; the bucket stays.
        let granted = store.issue_key("obc-2", "victim").await.unwrap();
        assert!(!store.delete_bucket("victim", "obc-2").await.unwrap());
        assert!(store.bucket_exists("victim").unwrap());
        assert!(store.lookup_key(&granted.access_key_id).is_none());
        assert!(store.lookup_key(&victim.access_key_id).is_some());

        // Retained: even its creator's deletion only takes its key, and nobody takes it over.
        let keeper = Creator { user_id: "obc-3", delete_with_claim: false };
        store.create_bucket("kept", keeper).await.unwrap();
        assert!(!store.delete_bucket("kept", "obc-3").await.unwrap());
        assert!(store.bucket_exists("kept").unwrap());
        assert!(store.create_bucket("kept", thief).await.is_err());
    }

    #[test]
    fn records_from_before_creators_adopt_their_only_key_holder() {
        let key = |user: &str, bucket: &str| AccessKey {
            access_key_id: format!("{user}-{bucket}"),
            secret_access_key: "s".into(),
            buckets: vec![bucket.into()],
            user_id: user.into(),
            quota: Quota::default(),
        };
        let record = |name: &str| BucketRecord {
            name: name.into(),
            owner: "ours".into(),
            created_by_provisioner: true,
            created_unix: 0,
            creator: None,
            delete_with_claim: false,
            quota: Quota::default(),
        };
        let mut state = LegacyState {
            version: 1,
            buckets: [("solo".into(), record("solo")), ("shared".into(), record("shared"))].into(),
            keys: [key("a", "solo"), key("b", "shared"), key("c", "shared")]
                .into_iter()
                .map(|k| (k.access_key_id.clone(), k))
                .collect(),
        };
        adopt_creators(&mut state);
        assert_eq!(state.buckets["solo"].creator.as_deref(), Some("a"));
        assert!(state.buckets["solo"].delete_with_claim);
        assert_eq!(state.buckets["shared"].creator, None);
    }

    #[tokio::test]
    async fn buckets_of_others_are_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let theirs = open(tmp.path(), "theirs");
        theirs.create_bucket("shared", ONE).await.unwrap();
        let key = theirs.issue_key("obc-9", "shared").await.unwrap();
        drop(theirs);

        let ours = open(tmp.path(), "ours");
        let err = ours.delete_bucket("shared", "obc-1").await.unwrap_err();
        assert!(matches!(&err, StoreError::NotOurs { owner, .. } if owner == "theirs"), "{err}");
        assert!(err.to_string().contains("left alone"));
        assert!(ours.bucket_exists("shared").unwrap());
        assert!(ours.lookup_key(&key.access_key_id).is_some());
        assert!(matches!(ours.create_bucket("shared", ONE).await, Err(StoreError::NotOurs { .. })));

        // A directory made by an operator has no record: never adopted, never deleted.
        fs::create_dir(ours.bucket_path("handmade").unwrap()).unwrap();
        assert!(matches!(
            ours.create_bucket("handmade", ONE).await,
            Err(StoreError::BucketAlreadyExists(_))
        ));
        assert!(!ours.delete_bucket("handmade", "obc-1").await.unwrap());
        assert!(ours.bucket_exists("handmade").unwrap());
        // ...but it can be granted.
        ours.issue_key("obc-3", "handmade").await.unwrap();
        assert!(matches!(
            ours.issue_key("obc-3", "missing").await,
            Err(StoreError::NoSuchBucket(_))
        ));
    }

    #[tokio::test]
    async fn a_legacy_state_file_is_split_into_a_file_per_record_and_key() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join(STATE_DIR)).unwrap();
        fs::create_dir_all(tmp.path().join(BUCKETS_DIR).join("old")).unwrap();
        let legacy = r#"{"version":1,
            "buckets":{"old":{"name":"old","owner":"ours","created_by_provisioner":true,
                "created_unix":1}},
            "keys":{"HPAK1":{"access_key_id":"HPAK1","secret_access_key":"s","buckets":["old"],
                "user_id":"obc-a"}}}"#;
        fs::write(tmp.path().join(STATE_DIR).join(LEGACY_STATE_FILE), legacy).unwrap();

        let store = open(tmp.path(), "ours");
        assert!(!tmp.path().join(STATE_DIR).join(LEGACY_STATE_FILE).exists());
        assert_eq!(store.bucket_record("old").unwrap().creator.as_deref(), Some("obc-a"));
        assert_eq!(store.lookup_key("HPAK1").unwrap().user_id, "obc-a");
        drop(store);
        let store = open(tmp.path(), "ours");
        assert_eq!(store.keys_for_user("obc-a").len(), 1);
        assert!(store.delete_bucket("old", "obc-a").await.unwrap(), "its only key holder made it");
        let records = fs::read_dir(tmp.path().join(STATE_DIR).join(RECORDS_DIR)).unwrap().count();
        let keys = fs::read_dir(tmp.path().join(STATE_DIR).join(KEYS_DIR)).unwrap().count();
        assert_eq!((records, keys), (0, 0));
    }

    #[tokio::test]
    async fn writes_a_crash_interrupted_are_removed_when_the_store_opens() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path(), "ours");
        store.create_bucket("abc", ONE).await.unwrap();
        let key = store.issue_key("u", "abc").await.unwrap();
        drop(store);
        let keys = tmp.path().join(STATE_DIR).join(KEYS_DIR);
        let interrupted = keys.join(format!("{}.tmp-0123456789abcdef", key.access_key_id));
        fs::write(&interrupted, b"{\"secret_access_key\":\"half-writ").unwrap();

        let store = open(tmp.path(), "ours");
        assert!(!interrupted.exists(), "left behind with a secret in it");
        assert_eq!(fs::read_dir(&keys).unwrap().count(), 1);
        assert_eq!(store.lookup_key(&key.access_key_id).unwrap().user_id, "u");
    }

    #[tokio::test]
    async fn secrets_are_private() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path(), "ours");
        store.create_bucket("abc", ONE).await.unwrap();
        store.issue_key("u", "abc").await.unwrap();
        let dir = fs::metadata(tmp.path().join(STATE_DIR)).unwrap();
        assert_eq!(dir.permissions().mode() & 0o777, 0o700);
        let key_id = &store.keys_for_user("u")[0].access_key_id;
        let file = tmp.path().join(STATE_DIR).join(KEYS_DIR).join(format!("{key_id}.json"));
        assert_eq!(fs::metadata(file).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(
            !format!("{:?}", store.keys_for_user("u"))
                .contains(&store.keys_for_user("u")[0].secret_access_key)
        );
    }
}
