//! Buckets as directories under one root, with durable bookkeeping of owners and access keys.
//!
//! # Layout
//!
//! ```text
//! <root>/buckets/<bucket>/<key>          object data; a key's '/' are directories
//! <root>/.provisioner/              0700 bookkeeping, never served
//!     state.json                    0600 bucket records and access keys (secrets)
//!     meta/<bucket>/<hh>/<md5>.json      ETag, headers, checksums of one object
//!     meta/<bucket>/side/<hh>/<md5>.{json,data}  objects whose key cannot be a path (see below)
//!     uploads/<bucket>/<upload-id>/      multipart uploads in progress
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
//! object, and `state.json` is replaced atomically (temp file, fsync, rename, fsync directory).
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

use std::collections::BTreeMap;
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

use crate::admin::AdminCredentials;

/// Name of the bookkeeping directory under the root.
const STATE_DIR: &str = ".provisioner";
/// Name of the directory holding bucket directories under the root.
const BUCKETS_DIR: &str = "buckets";
const STATE_FILE: &str = "state.json";
const STATE_VERSION: u32 = 1;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The bucket name breaks the S3 naming rules.
    #[error("invalid bucket name {0}")]
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
    /// A bucket directory exists that this store did not create.
    #[error("bucket {0:?} already exists and was not created by this provisioner")]
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
}

impl std::fmt::Debug for AccessKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessKey")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field("buckets", &self.buckets)
            .field("user_id", &self.user_id)
            .finish()
    }
}

impl AccessKey {
    /// Whether this key may use `bucket`.
    pub fn allows(&self, bucket: &str) -> bool {
        self.buckets.iter().any(|b| b == bucket)
    }
}

/// The whole of `state.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct State {
    version: u32,
    buckets: BTreeMap<String, BucketRecord>,
    /// By access key id.
    keys: BTreeMap<String, AccessKey>,
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
    identity: String,
    /// In-memory copy of `state.json`, read on every request by authentication.
    state: RwLock<Arc<State>>,
    /// Serializes read-modify-write cycles of `state.json`.
    writer: Mutex<()>,
    /// The operator credential; configuration, never persisted.
    admin: RwLock<Option<Arc<AdminCredentials>>>,
    /// Serializes commits of one key (striped by a hash of bucket and key), so that
    /// conditional writes are checked and applied atomically.
    key_locks: Vec<Mutex<()>>,
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
        for dir in ["", "meta", "uploads", "tmp"] {
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
        let state = load_state(&state_dir.join(STATE_FILE))?;
        Ok(Self {
            inner: Arc::new(Inner {
                root,
                identity,
                state: RwLock::new(Arc::new(state)),
                writer: Mutex::new(()),
                admin: RwLock::new(None),
                key_locks: (0..KEY_LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            }),
        })
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
        self.inner.snapshot().buckets.get(bucket).cloned()
    }

    /// The key with this access key id, if it exists.
    pub fn lookup_key(&self, access_key_id: &str) -> Option<AccessKey> {
        self.inner.snapshot().keys.get(access_key_id).cloned()
    }

    /// All keys issued for `user_id`.
    pub fn keys_for_user(&self, user_id: &str) -> Vec<AccessKey> {
        self.inner.snapshot().keys.values().filter(|k| k.user_id == user_id).cloned().collect()
    }

    /// Creates `bucket` owned by our identity. Idempotent: succeeds when an earlier call created
    /// it (and recreates a directory that went missing since). Fails when the directory exists
    /// without being ours or the record names another owner.
    pub async fn create_bucket(&self, bucket: &str) -> Result<BucketRecord, StoreError> {
        let bucket = bucket.to_owned();
        self.blocking(move |store| store.create_bucket_blocking(&bucket)).await
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
            store.inner.mutate(|state| {
                let before = state.keys.len();
                state.keys.retain(|_, k| k.user_id != user_id);
                Ok(before - state.keys.len())
            })
        })
        .await
    }

    /// Deletes `bucket`, its objects, uploads and keys, only when its record names our
    /// identity. Already gone counts as done; a bucket that is not ours is
    /// [`StoreError::NotOurs`] and is left untouched.
    pub async fn delete_bucket(&self, bucket: &str) -> Result<(), StoreError> {
        let bucket = bucket.to_owned();
        self.blocking(move |store| store.delete_bucket_blocking(&bucket)).await
    }

    /// The commit lock of `key` in `bucket`.
    fn key_lock(&self, bucket: &str, key: &str) -> std::sync::MutexGuard<'_, ()> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (bucket, key).hash(&mut hasher);
        let stripe = usize::try_from(hasher.finish() % KEY_LOCK_STRIPES as u64).unwrap_or(0);
        self.inner.key_locks[stripe].lock().unwrap_or_else(PoisonError::into_inner)
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

    fn create_bucket_blocking(&self, bucket: &str) -> Result<BucketRecord, StoreError> {
        let path = self.bucket_path(bucket)?;
        let ours = self.identity().to_owned();
        let record = self.inner.mutate(|state| {
            if let Some(record) = state.buckets.get(bucket) {
                // An operator bucket is never adopted, even under an identity that happens to
                // equal the operator's owner name.
                if record.owner != ours || !record.created_by_provisioner {
                    return Err(StoreError::NotOurs {
                        bucket: bucket.to_owned(),
                        owner: record.owner.clone(),
                        ours: ours.clone(),
                    });
                }
                return Ok(record.clone());
            }
            // No record: an existing directory belongs to someone else (the record is always
            // written before the directory is made).
            if fs::symlink_metadata(&path).is_ok() {
                return Err(StoreError::BucketAlreadyExists(bucket.to_owned()));
            }
            let record = BucketRecord {
                name: bucket.to_owned(),
                owner: ours.clone(),
                created_by_provisioner: true,
                created_unix: unix_now(),
            };
            state.buckets.insert(bucket.to_owned(), record.clone());
            Ok(record)
        })?;
        match fs::create_dir(&path) {
            Ok(()) => fsync_dir(path.parent().unwrap_or(&path))?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e.into()),
        }
        ensure_real_dir(&path)?;
        Ok(record)
    }

    fn issue_key_blocking(&self, user_id: &str, bucket: &str) -> Result<AccessKey, StoreError> {
        if user_id.is_empty() {
            return Err(StoreError::InvalidArgument("user id must not be empty".into()));
        }
        let access_key_id = derive_access_key_id(user_id, bucket);
        self.inner.mutate(|state| {
            // Checked under the writer lock, so that an operator's DeleteBucket (which checks
            // for keys under the same lock) cannot slip in between.
            if !self.bucket_exists(bucket)? {
                return Err(StoreError::NoSuchBucket(bucket.to_owned()));
            }
            if let Some(key) = state.keys.get(&access_key_id) {
                return Ok(key.clone());
            }
            let key = AccessKey {
                access_key_id: access_key_id.clone(),
                secret_access_key: random_secret(),
                buckets: vec![bucket.to_owned()],
                user_id: user_id.to_owned(),
            };
            state.keys.insert(access_key_id.clone(), key.clone());
            Ok(key)
        })
    }

    fn delete_bucket_blocking(&self, bucket: &str) -> Result<(), StoreError> {
        let path = self.bucket_path(bucket)?;
        let ours = self.identity().to_owned();
        let snapshot = self.inner.snapshot();
        let not_ours = |owner: &str| StoreError::NotOurs {
            bucket: bucket.to_owned(),
            owner: owner.to_owned(),
            ours: ours.clone(),
        };
        match snapshot.buckets.get(bucket) {
            Some(record) if record.owner == ours && record.created_by_provisioner => {}
            Some(record) => return Err(not_ours(&record.owner)),
            None if fs::symlink_metadata(&path).is_ok() => return Err(not_ours("")),
            None => return Ok(()),
        }
        // Keys first, so that clients stop writing while the data goes.
        self.inner.mutate(|state| {
            state.keys.retain(|_, k| !k.allows(bucket));
            Ok(())
        })?;
        let state_dir = self.inner.state_dir();
        for dir in
            [path, state_dir.join("meta").join(bucket), state_dir.join("uploads").join(bucket)]
        {
            remove_tree(&dir)?;
        }
        // The record goes last: until then a retry knows the bucket is ours.
        self.inner.mutate(|state| {
            state.buckets.remove(bucket);
            Ok(())
        })
    }
}

impl Inner {
    fn snapshot(&self) -> Arc<State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn state_dir(&self) -> PathBuf {
        self.root.join(STATE_DIR)
    }

    /// Applies `f` to a copy of the state and persists it before anyone can see it; nothing is
    /// written when `f` changed nothing.
    fn mutate<R>(
        &self,
        f: impl FnOnce(&mut State) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        let _guard = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let current = self.snapshot();
        let mut next = (*current).clone();
        let out = f(&mut next)?;
        if next != *current {
            next.version = STATE_VERSION;
            let bytes = serde_json::to_vec_pretty(&next).map_err(io::Error::other)?;
            write_atomic(&self.state_dir().join(STATE_FILE), &bytes, 0o600)?;
            *self.state.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
        }
        Ok(out)
    }
}

fn load_state(path: &Path) -> Result<State, StoreError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(State { version: STATE_VERSION, ..State::default() });
        }
        Err(e) => return Err(e.into()),
    };
    let state: State = serde_json::from_slice(&bytes)
        .map_err(|e| StoreError::Corrupt { path: path.to_owned(), message: e.to_string() })?;
    if state.version > STATE_VERSION {
        return Err(StoreError::Corrupt {
            path: path.to_owned(),
            message: format!("written by a newer version (format {})", state.version),
        });
    }
    Ok(state)
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

    fn open(dir: &Path, identity: &str) -> BucketStore {
        BucketStore::open(dir.to_owned(), identity).unwrap()
    }

    #[tokio::test]
    async fn provision_issue_revoke_delete_are_idempotent() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path(), "ours");

        let first = store.create_bucket("photos").await.unwrap();
        let again = store.create_bucket("photos").await.unwrap();
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

        store.delete_bucket("photos").await.unwrap();
        assert!(!store.bucket_exists("photos").unwrap());
        assert!(store.lookup_key(&other.access_key_id).is_none(), "bucket keys go with it");
        assert!(store.bucket_record("photos").is_none());
        store.delete_bucket("photos").await.unwrap();

        // Provisioning again after a delete works.
        store.create_bucket("photos").await.unwrap();
    }

    #[tokio::test]
    async fn buckets_of_others_are_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let theirs = open(tmp.path(), "theirs");
        theirs.create_bucket("shared").await.unwrap();
        let key = theirs.issue_key("obc-9", "shared").await.unwrap();
        drop(theirs);

        let ours = open(tmp.path(), "ours");
        let err = ours.delete_bucket("shared").await.unwrap_err();
        assert!(matches!(&err, StoreError::NotOurs { owner, .. } if owner == "theirs"), "{err}");
        assert!(err.to_string().contains("left alone"));
        assert!(ours.bucket_exists("shared").unwrap());
        assert!(ours.lookup_key(&key.access_key_id).is_some());
        assert!(matches!(ours.create_bucket("shared").await, Err(StoreError::NotOurs { .. })));

        // A directory made by an operator has no record: never adopted, never deleted.
        fs::create_dir(ours.bucket_path("handmade").unwrap()).unwrap();
        assert!(matches!(
            ours.create_bucket("handmade").await,
            Err(StoreError::BucketAlreadyExists(_))
        ));
        assert!(matches!(ours.delete_bucket("handmade").await, Err(StoreError::NotOurs { .. })));
        assert!(ours.bucket_exists("handmade").unwrap());
        // ...but it can be granted.
        ours.issue_key("obc-3", "handmade").await.unwrap();
        assert!(matches!(
            ours.issue_key("obc-3", "missing").await,
            Err(StoreError::NoSuchBucket(_))
        ));
    }

    #[tokio::test]
    async fn secrets_are_private() {
        let tmp = tempfile::tempdir().unwrap();
        let store = open(tmp.path(), "ours");
        store.create_bucket("abc").await.unwrap();
        store.issue_key("u", "abc").await.unwrap();
        let dir = fs::metadata(tmp.path().join(STATE_DIR)).unwrap();
        assert_eq!(dir.permissions().mode() & 0o777, 0o700);
        let file = fs::metadata(tmp.path().join(STATE_DIR).join(STATE_FILE)).unwrap();
        assert_eq!(file.permissions().mode() & 0o777, 0o600);
        assert!(
            !format!("{:?}", store.keys_for_user("u"))
                .contains(&store.keys_for_user("u")[0].secret_access_key)
        );
    }
}
