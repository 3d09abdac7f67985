//! What the store keeps of an object besides its bytes: the attributes a client sets, the
//! metadata file that records them with the ETag and checksums, and the checks a write or a
//! copy carries.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::SystemTime;

use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};

use super::attached::{DataFile, attached};
use super::checksum::{Checksum, ChecksumCheck};
use super::durable::{create_dir_all_durably, write_atomic};
use super::object_lock::ObjectLock;
use super::temp::Spooled;
use super::usage_change::Change;
use super::version_stamp::VersionStamp;
use super::{BucketStore, StoreError};

/// An object's tags, `(key, value)` in the order the client set them; at most ten, checked by
/// the S3 front before they reach the store.
pub type Tags = Vec<(String, String)>;

/// What a client sets on an object besides its bytes: the standard headers it is served with,
/// its user metadata and its tags.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectAttrs {
    /// `Content-Type` to serve it with.
    pub content_type: Option<String>,
    /// User metadata (`x-amz-meta-*`), names without the prefix.
    pub metadata: BTreeMap<String, String>,
    /// `Cache-Control`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<String>,
    /// `Content-Disposition`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_disposition: Option<String>,
    /// `Content-Encoding`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_encoding: Option<String>,
    /// `Content-Language`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_language: Option<String>,
    /// `Expires`, as the HTTP date the client sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    /// Its tags (`x-amz-tagging`, PutObjectTagging): kept with the rest of its metadata, so
    /// that they reach the disk with it and go when it goes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Tags,
    /// Its object lock retention and legal hold (see `object_lock`): asked for by its write,
    /// completed from the bucket's default when it is committed, kept with the rest.
    #[serde(default, skip_serializing_if = "ObjectLock::is_none")]
    pub lock: ObjectLock,
}

/// What a copy sets on its destination instead of taking it from the source.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CopyReplace {
    /// Headers and user metadata (`x-amz-metadata-directive: REPLACE`); their tags are not
    /// used.
    pub attrs: Option<ObjectAttrs>,
    /// Tags (`x-amz-tagging-directive: REPLACE`).
    pub tags: Option<Tags>,
    /// The copy's object lock: never the source's, only what the copy request asks for (the
    /// bucket's default completes it).
    pub lock: ObjectLock,
}

/// A precondition on replacing an object, checked atomically with the write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteCondition {
    /// `If-None-Match: *`: only if no object has the key.
    IfNoneMatchAny,
    /// `If-Match: <etag>`: only if the current object has this ETag (without quotes).
    IfMatch(String),
    /// `If-None-Match: <etag>`: only if no object has the key or it has another ETag.
    IfNoneMatch(String),
}

/// Integrity checks and preconditions on an uploaded body.
#[derive(Debug, Default)]
pub struct PutCheck {
    /// The declared `Content-Length`.
    pub length: Option<u64>,
    /// The binary `Content-MD5`.
    pub md5: Option<[u8; 16]>,
    /// An additional checksum to compute, verify and keep.
    pub checksum: Option<ChecksumCheck>,
    /// Only write if this holds.
    pub condition: Option<WriteCondition>,
}

/// A body received and verified, not yet synced nor visible: whoever puts it in place writes
/// it out if it is still in memory, and syncs it with what it adds to the file (see
/// `attached`).
pub(super) struct Received {
    pub body: Spooled,
    pub md5: [u8; 16],
    pub size: u64,
    pub checksum: Option<Checksum>,
}

/// What is recorded about an object when it is committed.
#[derive(Debug, Default)]
pub(super) struct NewObject {
    pub etag: String,
    pub attrs: ObjectAttrs,
    pub checksum: Option<Checksum>,
    /// Sizes of the parts, for objects from a multipart upload.
    pub part_sizes: Vec<u64>,
    /// The parts' checksums (base64), when the upload had an algorithm.
    pub part_checksums: Vec<String>,
    /// The multipart upload the object came from.
    pub upload_id: Option<String>,
    /// The claim user it counts for (see `usage`); `None` for the operator's.
    pub writer: Option<String>,
    /// What else changes in the bucket's usage when it is committed (the parts it is made of).
    pub also: Change,
}

/// An object as listed or served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Its key.
    pub key: String,
    /// Size in bytes.
    pub size: u64,
    /// ETag without quotes: hex MD5 for simple uploads, `<md5>-<n>` for multipart ones.
    pub etag: String,
    /// Modification time of the data.
    pub last_modified: SystemTime,
    /// Content type and user metadata.
    pub attrs: ObjectAttrs,
    /// Number of parts, for objects from a multipart upload.
    pub parts: Option<u32>,
    /// The additional checksum kept with it, if it was uploaded with one.
    pub checksum: Option<Checksum>,
    /// Sizes of its parts, for objects from a multipart upload.
    pub part_sizes: Vec<u64>,
    /// Checksums (base64) of its parts, when its upload had a checksum algorithm.
    pub part_checksums: Vec<String>,
    /// Its version id, in a bucket whose versioning was ever set (`"null"` for the null
    /// version); `None` where versioning was never set.
    pub version_id: Option<String>,
}

impl ObjectInfo {
    pub(super) fn plain(key: &str, size: u64, etag: String, last_modified: SystemTime) -> Self {
        Self {
            key: key.to_owned(),
            size,
            etag,
            last_modified,
            attrs: ObjectAttrs::default(),
            parts: None,
            checksum: None,
            part_sizes: Vec::new(),
            part_checksums: Vec::new(),
            version_id: None,
        }
    }
}

/// What is kept of an object: attached to its data file (see `attached`), or where that cannot
/// be, in a metadata file under `.provisioner/meta` (always for folder markers).
///
/// It is also the record of one version in a versioned bucket (see `versions`): fields added
/// later take `#[serde(default)]`, so that records written before them still read.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct MetaFile {
    pub key: String,
    pub size: u64,
    /// Data file mtime in ns when the metadata was written; a mismatch means stale metadata.
    pub mtime_ns: u64,
    pub etag: String,
    #[serde(default)]
    pub attrs: ObjectAttrs,
    #[serde(default)]
    pub parts: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<Checksum>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub part_sizes: Vec<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub part_checksums: Vec<String>,
    /// The multipart upload that produced it, so that a repeated completion is recognised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_id: Option<String>,
    /// The claim user it counts for; absent for the operator's objects and files made by hand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer: Option<String>,
    /// Which version of its key this is; absent for objects written while the bucket's
    /// versioning was never set (they are the `null` version, older than any other).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<VersionStamp>,
}

impl MetaFile {
    /// The record of `object`, just written to a file with `data` as its metadata, stamped
    /// `version` in a versioned bucket; and the other usage change its write brings.
    pub(super) fn written(
        key: &str,
        data: &fs::Metadata,
        object: NewObject,
        version: Option<VersionStamp>,
    ) -> (MetaFile, Change) {
        let meta = MetaFile {
            key: key.to_owned(),
            size: data.len(),
            mtime_ns: mtime_ns(data),
            etag: object.etag,
            attrs: object.attrs,
            parts: (!object.part_sizes.is_empty())
                .then(|| u32::try_from(object.part_sizes.len()).unwrap_or(u32::MAX)),
            checksum: object.checksum,
            part_sizes: object.part_sizes,
            part_checksums: object.part_checksums,
            upload_id: object.upload_id,
            writer: object.writer,
            version,
        };
        (meta, object.also)
    }

    /// Whether this is the metadata of `key` and, given the status of its data file, still
    /// describes it: a file rewritten in place by hand, or renamed to another key, has none.
    pub(super) fn describes(&self, key: &str, data: Option<&fs::Metadata>) -> bool {
        self.key == key
            && data.is_none_or(|data| self.size == data.len() && self.mtime_ns == mtime_ns(data))
    }

    pub(super) fn info(self, last_modified: SystemTime) -> ObjectInfo {
        ObjectInfo {
            key: self.key,
            size: self.size,
            etag: self.etag,
            last_modified,
            attrs: self.attrs,
            parts: self.parts,
            checksum: self.checksum,
            part_sizes: self.part_sizes,
            part_checksums: self.part_checksums,
            version_id: self.version.map(|v| v.id),
        }
    }
}

pub(super) fn mtime_ns(meta: &fs::Metadata) -> u64 {
    let secs = u64::try_from(meta.mtime()).unwrap_or(0);
    let nanos = u64::try_from(meta.mtime_nsec()).unwrap_or(0);
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// A test of the source object of a copy, run on the object actually opened.
pub type SourceTest = Box<dyn FnOnce(&ObjectInfo) -> Result<(), StoreError> + Send>;

/// Preconditions on the source of a copy (`x-amz-copy-source-if-*`), checked on the object
/// actually opened.
pub struct CopySourceCheck {
    /// Fails with the error to return when the source does not qualify.
    pub check: SourceTest,
    /// The version of the source to copy (`None`: its newest).
    pub version_id: Option<String>,
}

impl Default for CopySourceCheck {
    fn default() -> Self {
        Self { check: Box::new(|_| Ok(())), version_id: None }
    }
}

impl std::fmt::Debug for CopySourceCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CopySourceCheck")
    }
}

/// Whether an `If-Match` value (quoted or not, or `*`) names `etag`.
pub fn etag_matches(wanted: &str, etag: &str) -> bool {
    let wanted = wanted.trim();
    wanted == "*" || wanted.trim_matches('"') == etag
}

impl BucketStore {
    pub(super) fn meta_path(&self, bucket: &str, key: &str) -> PathBuf {
        let hash = hex::encode(Md5::digest(key.as_bytes()));
        self.inner
            .state_dir()
            .join("meta")
            .join(bucket)
            .join(&hash[..2])
            .join(format!("{hash}.json"))
    }

    /// The metadata of the object `key` whose data file is `at` with status `data`: attached to
    /// the file, or else in its metadata file, if either still describes the file.
    pub(super) fn object_meta(
        &self,
        bucket: &str,
        key: &str,
        at: DataFile<'_>,
        data: &fs::Metadata,
    ) -> Option<MetaFile> {
        let fresh = attached::<MetaFile>(at).filter(|meta| meta.describes(key, Some(data)));
        fresh.or_else(|| self.read_meta(bucket, key, Some(data)))
    }

    /// Reads the metadata file of `key`, if present and still describing `data`.
    pub(super) fn read_meta(
        &self,
        bucket: &str,
        key: &str,
        data: Option<&fs::Metadata>,
    ) -> Option<MetaFile> {
        let bytes = fs::read(self.meta_path(bucket, key)).ok()?;
        let meta: MetaFile = serde_json::from_slice(&bytes).ok()?;
        meta.describes(key, data).then_some(meta)
    }

    pub(super) fn write_meta(&self, bucket: &str, meta: &MetaFile) -> Result<(), StoreError> {
        let path = self.meta_path(bucket, &meta.key);
        if let Some(dir) = path.parent() {
            create_dir_all_durably(dir)?;
        }
        let bytes = serde_json::to_vec(meta).map_err(io::Error::other)?;
        write_atomic(&path, &bytes, 0o600)?;
        Ok(())
    }

    /// What a client sees of the file at `key`: its metadata, or a derived ETag when the
    /// metadata is missing or stale (the file was written outside the store).
    pub(super) fn object_info(
        &self,
        bucket: &str,
        key: &str,
        at: DataFile<'_>,
        data: &fs::Metadata,
    ) -> ObjectInfo {
        let last_modified = data.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        match self.object_meta(bucket, key, at, data) {
            Some(meta) => meta.info(last_modified),
            None => ObjectInfo::plain(
                key,
                data.len(),
                hex::encode(Md5::digest(format!("{}:{}", data.len(), mtime_ns(data)))),
                last_modified,
            ),
        }
    }

    /// The info of a folder marker (`key` ends with '/'), which exists only with metadata.
    pub(super) fn marker_info(
        &self,
        bucket: &str,
        key: &str,
        dir: &fs::Metadata,
    ) -> Option<ObjectInfo> {
        let meta = self.read_meta(bucket, key, None)?;
        Some(meta.info(dir.modified().unwrap_or(SystemTime::UNIX_EPOCH)))
    }
}
