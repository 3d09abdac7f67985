//! Why a store operation fails.

use std::io;
use std::path::PathBuf;

use super::{ChecksumAlgorithm, LockRefusal, MAX_KEY_LEN};

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
    /// No version of that id exists for the key (the version id is well formed).
    #[error("version {version_id:?} of object {key:?} does not exist")]
    NoSuchVersion {
        /// The key.
        key: String,
        /// The version id asked for.
        version_id: String,
    },
    /// The version read is a delete marker: the key reads as deleted (`by_id: false`), or the
    /// marker itself was asked for by its id (`by_id: true`), which has nothing to serve.
    #[error("object {key:?} is a delete marker (version {version_id:?})")]
    DeleteMarker {
        /// The key.
        key: String,
        /// The marker's version id.
        version_id: String,
        /// Whether the request named the marker's version id.
        by_id: bool,
    },
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
    /// Object lock protects an object (a retention until its date, or a legal hold) from
    /// what was asked: removing or overwriting it, weakening its retention, or deleting the
    /// bucket that holds it. Nothing was changed; [`LockRefusal::until`] says until when.
    #[error("{0}")]
    ObjectLocked(LockRefusal),
    /// A claim's key set a retention past what the bucket's StorageClass allows (see
    /// [`RetentionCeiling`](super::RetentionCeiling)); nothing was changed.
    #[error("{0}")]
    OverCeiling(String),
    /// The bucket's state forbids the request (object lock asked of a bucket created without
    /// it).
    #[error("{0}")]
    InvalidBucketState(String),
    /// A file system call failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}
