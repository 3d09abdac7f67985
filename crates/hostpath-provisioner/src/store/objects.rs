//! Objects: safe path resolution, streamed atomic writes, reads, copies and deletes.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncWriteExt, BufWriter};

use super::checksum::{self, Checksum, ChecksumCheck, ChecksumType, ExpectedChecksum, Hasher};
use super::durable::{fsync_dir, random_hex, write_atomic};
use super::names::validate_key;
use super::usage::{Change, Existing, Writer};
use super::{BucketStore, KeyPath, StoreError, parse_key};

/// Chunk size for copies done by the store itself: bounds memory per request.
pub(super) const COPY_BUF: usize = 1 << 20;

/// What a client sets on an object besides its bytes: the standard headers it is served with
/// and its user metadata.
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

/// A body received into a temporary file, verified, not yet visible.
pub(super) struct Received {
    pub temp: TempFile,
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
        }
    }
}

/// The metadata file kept for an object under `.provisioner/meta`.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
}

impl MetaFile {
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
        }
    }
}

/// A file in `.provisioner/tmp` that is removed unless it was renamed into place.
pub(super) struct TempFile {
    pub path: PathBuf,
    pub keep: bool,
}

impl TempFile {
    /// Renames the file to `target`; from then on it is no longer removed on drop.
    pub fn rename_to(mut self, target: &Path) -> io::Result<()> {
        fs::rename(&self.path, target)?;
        self.keep = true;
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_file(&self.path);
        }
    }
}

pub(super) fn mtime_ns(meta: &fs::Metadata) -> u64 {
    let secs = u64::try_from(meta.mtime()).unwrap_or(0);
    let nanos = u64::try_from(meta.mtime_nsec()).unwrap_or(0);
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

impl BucketStore {
    /// The bucket's data directory, which must exist as a real directory.
    pub(super) fn bucket_dir(&self, bucket: &str) -> Result<PathBuf, StoreError> {
        let path = self.bucket_path(bucket)?;
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => Ok(path),
            Ok(m) if m.file_type().is_symlink() => Err(StoreError::Symlink(bucket.to_owned())),
            Ok(_) => Err(StoreError::NoSuchBucket(bucket.to_owned())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Err(StoreError::NoSuchBucket(bucket.to_owned()))
            }
            Err(e) => Err(e.into()),
        }
    }

    fn meta_path(&self, bucket: &str, key: &str) -> PathBuf {
        let hash = hex::encode(Md5::digest(key.as_bytes()));
        self.inner
            .state_dir()
            .join("meta")
            .join(bucket)
            .join(&hash[..2])
            .join(format!("{hash}.json"))
    }

    /// Reads the metadata of `key`, if present and still describing `data`.
    pub(super) fn read_meta(
        &self,
        bucket: &str,
        key: &str,
        data: Option<&fs::Metadata>,
    ) -> Option<MetaFile> {
        let bytes = fs::read(self.meta_path(bucket, key)).ok()?;
        let meta: MetaFile = serde_json::from_slice(&bytes).ok()?;
        if meta.key != key {
            return None;
        }
        match data {
            Some(data) if meta.size != data.len() || meta.mtime_ns != mtime_ns(data) => None,
            _ => Some(meta),
        }
    }

    fn write_meta(&self, bucket: &str, meta: &MetaFile) -> Result<(), StoreError> {
        let path = self.meta_path(bucket, &meta.key);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        let bytes = serde_json::to_vec(meta).map_err(io::Error::other)?;
        write_atomic(&path, &bytes, 0o600)?;
        Ok(())
    }

    /// What a client sees of the file at `key`: its metadata, or a derived ETag when the
    /// metadata is missing or stale (the file was written outside the store).
    pub(super) fn object_info(&self, bucket: &str, key: &str, data: &fs::Metadata) -> ObjectInfo {
        let last_modified = data.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        match self.read_meta(bucket, key, Some(data)) {
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

    /// Finds the existing file (or marker directory) of `key` without following any symlink.
    pub(super) fn resolve_existing(
        &self,
        dir: &Path,
        key: &str,
        path: &KeyPath<'_>,
    ) -> Result<(PathBuf, fs::Metadata), StoreError> {
        let mut current = dir.to_owned();
        let last = path.segments.len() - 1;
        for (i, segment) in path.segments.iter().enumerate() {
            current.push(segment);
            let meta = match fs::symlink_metadata(&current) {
                Ok(m) => m,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(StoreError::NoSuchKey(key.to_owned()));
                }
                Err(e) => return Err(e.into()),
            };
            if meta.file_type().is_symlink() {
                return Err(StoreError::Symlink(key.to_owned()));
            }
            let wanted_dir = i < last || path.dir_marker;
            if (wanted_dir && !meta.is_dir()) || (!wanted_dir && !meta.is_file()) {
                return Err(StoreError::NoSuchKey(key.to_owned()));
            }
            if i == last {
                return Ok((current, meta));
            }
        }
        unreachable!("a parsed key has at least one segment")
    }

    /// Creates the directories leading to `key` (refusing symlinks and files in the way) and
    /// returns where its data goes.
    fn prepare_path(
        &self,
        dir: &Path,
        key: &str,
        path: &KeyPath<'_>,
    ) -> Result<PathBuf, StoreError> {
        let mut current = dir.to_owned();
        let dirs = if path.dir_marker { path.segments.len() } else { path.segments.len() - 1 };
        for segment in &path.segments[..dirs] {
            current.push(segment);
            make_dir_checked(&current, key)?;
        }
        if !path.dir_marker {
            current.push(path.segments[dirs]);
            match fs::symlink_metadata(&current) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(StoreError::Symlink(key.to_owned()));
                }
                Ok(m) if m.is_dir() => return Err(StoreError::KeyConflict(key.to_owned())),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(current)
    }

    /// A new empty file in `.provisioner/tmp`, on the same file system as the buckets so that
    /// a rename moves it into place atomically.
    pub(super) fn temp_file(&self) -> Result<(TempFile, File), StoreError> {
        let path = self.inner.state_dir().join("tmp").join(random_hex(16));
        let file = OpenOptions::new().write(true).create_new(true).mode(0o644).open(&path)?;
        Ok((TempFile { path, keep: false }, file))
    }

    /// A new file in `.provisioner/tmp` with no name: removed as soon as it is opened, so that
    /// its space comes back when it is closed, even after a crash.
    pub async fn scratch_file(&self) -> Result<File, StoreError> {
        self.blocking(|store| {
            let path = store.inner.state_dir().join("tmp").join(random_hex(16));
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)?;
            fs::remove_file(&path)?;
            Ok(file)
        })
        .await
    }

    /// Moves a complete temporary file into place as `key`, metadata first so that the data
    /// never appears without it. `condition` is checked under the key's lock, so that no
    /// other write of the key can come between the check and the rename, and so is the
    /// quota, for `actor`: the object counts for `object.writer` in place of the one it
    /// replaces.
    pub(super) fn commit(
        &self,
        bucket: &str,
        key: &str,
        temp: TempFile,
        object: NewObject,
        condition: Option<&WriteCondition>,
        actor: &Writer,
    ) -> Result<ObjectInfo, StoreError> {
        let dir = self.bucket_dir(bucket)?;
        validate_key(key)?;
        let _guard = self.key_lock(bucket, key);
        self.check_condition(bucket, key, condition)?;
        let data = fs::symlink_metadata(&temp.path)?;
        let old = self.existing(bucket, &dir, key)?;
        let change = Change::store(object.writer.as_deref(), data.len(), old.as_ref());
        let ticket = self.meter(bucket)?.begin(change.and(object.also.clone()), actor)?;
        // Nothing has moved before the renames: an error drops the ticket, and its reservation.
        let target = self.plain_target(&dir, key)?;
        let meta = MetaFile {
            key: key.to_owned(),
            size: data.len(),
            mtime_ns: mtime_ns(&data),
            etag: object.etag,
            attrs: object.attrs,
            parts: (!object.part_sizes.is_empty())
                .then(|| u32::try_from(object.part_sizes.len()).unwrap_or(u32::MAX)),
            checksum: object.checksum,
            part_sizes: object.part_sizes,
            part_checksums: object.part_checksums,
            upload_id: object.upload_id,
            writer: object.writer,
        };
        let mut moved = false;
        match self.move_into_place(bucket, key, &dir, target, &meta, temp, &mut moved) {
            Ok(()) => ticket.applied(),
            // Failed before the data moved: nothing changed. After: the object is in place but
            // what it replaced may or may not be gone.
            Err(e) if moved => {
                ticket.uncertain();
                return Err(e);
            }
            Err(e) => return Err(e),
        }
        Ok(meta.info(data.modified().unwrap_or(SystemTime::UNIX_EPOCH)))
    }

    /// The renames of [`commit`](Self::commit); `moved` says whether the data reached its
    /// place.
    #[allow(clippy::too_many_arguments)]
    fn move_into_place(
        &self,
        bucket: &str,
        key: &str,
        dir: &Path,
        target: Option<PathBuf>,
        meta: &MetaFile,
        mut temp: TempFile,
        moved: &mut bool,
    ) -> Result<(), StoreError> {
        let Some(target) = target else {
            return self.write_side(bucket, meta, temp, moved);
        };
        self.write_meta(bucket, meta)?;
        match fs::rename(&temp.path, &target) {
            Ok(()) => {
                temp.keep = true;
                *moved = true;
            }
            // Another key made the path a directory (or a file in its way) since it was
            // prepared: this object goes beside the bucket after all.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::IsADirectory
                        | io::ErrorKind::NotADirectory
                        | io::ErrorKind::DirectoryNotEmpty
                        | io::ErrorKind::NotFound
                ) =>
            {
                let _ = remove_if_exists(&self.meta_path(bucket, key));
                return self.write_side(bucket, meta, temp, moved);
            }
            Err(e) => return Err(e.into()),
        }
        fsync_dir(target.parent().unwrap_or(dir))?;
        // Only now, so that a crash never loses the key's current object.
        self.remove_side(bucket, key)?;
        Ok(())
    }

    /// Size and writer of the object now at `key`, plain or beside the bucket, as a read
    /// would find it.
    pub(super) fn existing(
        &self,
        bucket: &str,
        dir: &Path,
        key: &str,
    ) -> Result<Option<Existing>, StoreError> {
        if let Ok(path) = parse_key(key) {
            match self.resolve_existing(dir, key, &path) {
                Ok(_) if path.dir_marker => {
                    if let Some(meta) = self.read_meta(bucket, key, None) {
                        return Ok(Some(Existing { size: 0, writer: meta.writer }));
                    }
                }
                Ok((_, data)) => {
                    let writer = self.read_meta(bucket, key, Some(&data)).and_then(|m| m.writer);
                    return Ok(Some(Existing { size: data.len(), writer }));
                }
                Err(StoreError::NoSuchKey(_)) => {}
                Err(e) => return Err(e),
            }
        }
        self.existing_side(bucket, key)
    }

    /// Where `key` is stored as a plain file (its directories made), or `None` when it
    /// cannot be: its path is taken by a directory or runs through a file, or it is not a
    /// safe relative path at all. Those keys are kept beside the bucket (see `side`).
    fn plain_target(&self, dir: &Path, key: &str) -> Result<Option<PathBuf>, StoreError> {
        let Ok(path) = parse_key(key) else { return Ok(None) };
        // A key ending in '/' is a directory where it can be, which holds no bytes: one with
        // content is kept beside the bucket.
        if path.dir_marker {
            return Ok(None);
        }
        match self.prepare_path(dir, key, &path) {
            Ok(target) => Ok(Some(target)),
            Err(StoreError::KeyConflict(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Fails with [`StoreError::PreconditionFailed`] (or `NoSuchKey` for `If-Match` on a
    /// missing key) unless `condition` holds for the current object at `key`.
    fn check_condition(
        &self,
        bucket: &str,
        key: &str,
        condition: Option<&WriteCondition>,
    ) -> Result<(), StoreError> {
        let Some(condition) = condition else { return Ok(()) };
        let current = match self.open_blocking(bucket, key) {
            Ok((info, _)) => Some(info),
            Err(StoreError::NoSuchKey(_)) => None,
            Err(e) => return Err(e),
        };
        match (condition, current) {
            (WriteCondition::IfNoneMatchAny, None) => Ok(()),
            (WriteCondition::IfNoneMatchAny, Some(_)) => Err(StoreError::PreconditionFailed),
            (WriteCondition::IfMatch(_), None) => Err(StoreError::NoSuchKey(key.to_owned())),
            (WriteCondition::IfMatch(etag), Some(info)) if etag_matches(etag, &info.etag) => Ok(()),
            (WriteCondition::IfMatch(_), Some(_)) => Err(StoreError::PreconditionFailed),
            (WriteCondition::IfNoneMatch(etag), Some(info)) if etag_matches(etag, &info.etag) => {
                Err(StoreError::PreconditionFailed)
            }
            (WriteCondition::IfNoneMatch(_), _) => Ok(()),
        }
    }

    fn commit_marker(
        &self,
        bucket: &str,
        key: &str,
        attrs: ObjectAttrs,
        condition: Option<&WriteCondition>,
        actor: &Writer,
    ) -> Result<ObjectInfo, StoreError> {
        let dir = self.bucket_dir(bucket)?;
        let path = parse_key(key)?;
        let plain = match self.prepare_path(&dir, key, &path) {
            Ok(target) => target,
            // `a/` where `a` is an object: kept beside the bucket like any other such key.
            Err(StoreError::KeyConflict(_)) => {
                let (temp, file) = self.temp_file()?;
                file.sync_all()?;
                drop(file);
                let object = NewObject {
                    etag: hex::encode(Md5::digest(b"")),
                    attrs,
                    writer: actor.user().map(str::to_owned),
                    ..NewObject::default()
                };
                return self.commit(bucket, key, temp, object, condition, actor);
            }
            Err(e) => return Err(e),
        };
        let _guard = self.key_lock(bucket, key);
        self.check_condition(bucket, key, condition)?;
        let old = self.existing(bucket, &dir, key)?;
        let change = Change::store(actor.user(), 0, old.as_ref());
        let ticket = self.meter(bucket)?.begin(change, actor)?;
        let etag = hex::encode(Md5::digest(b""));
        let meta = MetaFile {
            key: key.to_owned(),
            size: 0,
            mtime_ns: 0,
            etag,
            attrs,
            parts: None,
            checksum: None,
            part_sizes: Vec::new(),
            part_checksums: Vec::new(),
            upload_id: None,
            writer: actor.user().map(str::to_owned),
        };
        self.write_meta(bucket, &meta)?;
        // The marker exists from here on, whatever fails after.
        ticket.applied();
        self.remove_side(bucket, key)?;
        let data = fs::symlink_metadata(&plain)?;
        Ok(meta.info(data.modified().unwrap_or(SystemTime::UNIX_EPOCH)))
    }

    /// Stores `body` as `key` for `writer`, streaming it to a temporary file (never holding it
    /// in memory) and renaming it into place only once it is complete, verified and within the
    /// quotas. A declared length that cannot fit is refused before the body is read.
    pub async fn put_object<S, E>(
        &self,
        bucket: &str,
        key: &str,
        attrs: ObjectAttrs,
        body: S,
        check: PutCheck,
        writer: &Writer,
    ) -> Result<ObjectInfo, StoreError>
    where
        S: Stream<Item = Result<Bytes, E>> + Send + Unpin,
        E: Display,
    {
        validate_key(key)?;
        let (bucket, key) = (bucket.to_owned(), key.to_owned());
        {
            let (bucket, key, writer, length) =
                (bucket.clone(), key.clone(), writer.clone(), check.length);
            self.blocking(move |store| {
                let dir = store.bucket_dir(&bucket)?;
                match length {
                    Some(length) => {
                        let also = Change::default();
                        store.precheck(&bucket, &dir, &key, length, writer.user(), also, &writer)
                    }
                    None => Ok(()),
                }
            })
            .await?;
        }
        let condition = check.condition.clone();
        let received = self.receive(body, check).await?;
        let writer = writer.clone();
        if received.size == 0 && parse_key(&key).is_ok_and(|path| path.dir_marker) {
            // An empty "folder" object: a directory, where the path allows one.
            drop(received.temp);
            return self
                .blocking(move |store| {
                    store.commit_marker(&bucket, &key, attrs, condition.as_ref(), &writer)
                })
                .await;
        }
        let object = NewObject {
            etag: hex::encode(received.md5),
            attrs,
            checksum: received.checksum,
            writer: writer.user().map(str::to_owned),
            ..NewObject::default()
        };
        self.blocking(move |store| {
            store.commit(&bucket, &key, received.temp, object, condition.as_ref(), &writer)
        })
        .await
    }

    /// Refuses ahead of its body an object of `size` counting for `counts_for` at `key` (with
    /// `also`) that could not fit the quotas as they stand for `actor`; the commit checks again,
    /// exactly. Costs nothing where no quota applies.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn precheck(
        &self,
        bucket: &str,
        dir: &Path,
        key: &str,
        size: u64,
        counts_for: Option<&str>,
        also: Change,
        actor: &Writer,
    ) -> Result<(), StoreError> {
        let meter = self.meter(bucket)?;
        if !meter.limits(actor) {
            return Ok(());
        }
        let old = self.existing(bucket, dir, key)?;
        meter.check(&Change::store(counts_for, size, old.as_ref()).and(also), actor)
    }

    /// Streams `body` into a new temporary file, verifying length, MD5 and the additional
    /// checksum; returns the file (synced), its MD5 and the verified checksum.
    pub(super) async fn receive<S, E>(
        &self,
        mut body: S,
        check: PutCheck,
    ) -> Result<Received, StoreError>
    where
        S: Stream<Item = Result<Bytes, E>> + Send + Unpin,
        E: Display,
    {
        let (temp, file) = self.blocking(|store| store.temp_file()).await?;
        // A bounded write buffer: memory per upload stays constant whatever the object size.
        let mut out = BufWriter::with_capacity(256 * 1024, tokio::fs::File::from_std(file));
        let mut hash = Md5::new();
        let mut extra = check.checksum.as_ref().map(|c| Hasher::new(c.algorithm));
        let mut size = 0u64;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| StoreError::Body(e.to_string()))?;
            hash.update(&chunk);
            if let Some(extra) = &mut extra {
                extra.update(&chunk);
            }
            size += chunk.len() as u64;
            if let Some(expected) = check.length
                && size > expected
            {
                return Err(StoreError::IncompleteBody { expected, actual: size });
            }
            out.write_all(&chunk).await?;
        }
        if let Some(expected) = check.length
            && size != expected
        {
            return Err(StoreError::IncompleteBody { expected, actual: size });
        }
        let md5: [u8; 16] = hash.finalize().into();
        if check.md5.is_some_and(|sent| sent != md5) {
            return Err(StoreError::BadDigest);
        }
        let checksum = match (check.checksum, extra) {
            (Some(wanted), Some(extra)) => Some(verify(wanted, extra.finalize())?),
            _ => None,
        };
        out.flush().await?;
        let file = out.into_inner();
        file.sync_all().await?;
        Ok(Received { temp, md5, size, checksum })
    }

    /// Opens `key` for reading: its info and, unless it is an empty folder marker, the open
    /// file. The file is opened with `O_NOFOLLOW`, and its info comes from the open handle.
    pub async fn open_object(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<(ObjectInfo, Option<File>), StoreError> {
        let (bucket, key) = (bucket.to_owned(), key.to_owned());
        self.blocking(move |store| store.open_blocking(&bucket, &key)).await
    }

    /// The info of `key`, as [`open_object`](Self::open_object) without the file.
    pub async fn head_object(&self, bucket: &str, key: &str) -> Result<ObjectInfo, StoreError> {
        let (bucket, key) = (bucket.to_owned(), key.to_owned());
        self.blocking(move |store| store.open_blocking(&bucket, &key).map(|(info, _)| info)).await
    }

    pub(super) fn open_blocking(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<(ObjectInfo, Option<File>), StoreError> {
        let dir = self.bucket_dir(bucket)?;
        validate_key(key)?;
        match parse_key(key) {
            Ok(path) => match self.open_plain(bucket, key, &dir, &path) {
                Err(StoreError::NoSuchKey(_)) => self.open_side(bucket, key),
                found => found,
            },
            Err(_) => self.open_side(bucket, key),
        }
    }

    fn open_plain(
        &self,
        bucket: &str,
        key: &str,
        dir: &Path,
        path: &KeyPath<'_>,
    ) -> Result<(ObjectInfo, Option<File>), StoreError> {
        let (target, meta) = self.resolve_existing(dir, key, path)?;
        if path.dir_marker {
            let info = self
                .marker_info(bucket, key, &meta)
                .ok_or_else(|| StoreError::NoSuchKey(key.to_owned()))?;
            return Ok((info, None));
        }
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&target)
        {
            Ok(file) => file,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(StoreError::Symlink(key.to_owned()));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(StoreError::NoSuchKey(key.to_owned()));
            }
            Err(e) => return Err(e.into()),
        };
        let data = file.metadata()?;
        if !data.is_file() {
            return Err(StoreError::NoSuchKey(key.to_owned()));
        }
        Ok((self.object_info(bucket, key, &data), Some(file)))
    }

    /// Removes `key`. A missing key counts as done; directories left empty are removed up to
    /// the bucket directory.
    pub async fn delete_object(&self, bucket: &str, key: &str) -> Result<(), StoreError> {
        let (bucket, key) = (bucket.to_owned(), key.to_owned());
        self.blocking(move |store| store.delete_blocking(&bucket, &key)).await
    }

    fn delete_blocking(&self, bucket: &str, key: &str) -> Result<(), StoreError> {
        let dir = self.bucket_dir(bucket)?;
        validate_key(key)?;
        let _guard = self.key_lock(bucket, key);
        // Never refused: it only frees. Counted only once the object is surely gone.
        let ticket = match self.existing(bucket, &dir, key)? {
            Some(old) => Some(self.meter(bucket)?.begin(Change::remove(&old), &Writer::Operator)?),
            None => None, // only leftovers of a crash, if anything
        };
        let result = self.delete_located(bucket, key, &dir);
        match (ticket, &result) {
            (Some(ticket), Ok(())) => ticket.applied(),
            (Some(ticket), Err(_)) => ticket.uncertain(),
            (None, _) => {}
        }
        result
    }

    fn delete_located(&self, bucket: &str, key: &str, dir: &Path) -> Result<(), StoreError> {
        self.remove_side(bucket, key)?;
        let Ok(path) = parse_key(key) else { return Ok(()) };
        let target = match self.resolve_existing(dir, key, &path) {
            Ok((target, _)) => target,
            Err(StoreError::NoSuchKey(_)) => {
                let _ = fs::remove_file(self.meta_path(bucket, key));
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        if path.dir_marker {
            remove_if_exists(&self.meta_path(bucket, key))?;
            self.prune_empty(bucket, dir, &target);
            return Ok(());
        }
        match fs::remove_file(&target) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        remove_if_exists(&self.meta_path(bucket, key))?;
        if let Some(parent) = target.parent() {
            self.prune_empty(bucket, dir, parent);
        }
        Ok(())
    }

    /// Removes empty directories from `from` up to (not including) the bucket directory, so a
    /// prefix disappears with its last object, except where a folder marker keeps it.
    fn prune_empty(&self, bucket: &str, bucket_dir: &Path, from: &Path) {
        let mut current = from.to_owned();
        while current != bucket_dir && current.starts_with(bucket_dir) {
            let Ok(relative) = current.strip_prefix(bucket_dir) else { break };
            let Some(relative) = relative.to_str() else { break };
            if self.read_meta(bucket, &format!("{relative}/"), None).is_some() {
                break;
            }
            if fs::remove_dir(&current).is_err() {
                break;
            }
            if !current.pop() {
                break;
            }
        }
    }

    /// Copies `src_key` of `src_bucket` to `dst_key` of `dst_bucket` through a temporary file,
    /// in bounded chunks. `attrs` replaces the source's attributes when given.
    #[allow(clippy::too_many_arguments)]
    pub async fn copy_object(
        &self,
        src_bucket: &str,
        src_key: &str,
        dst_bucket: &str,
        dst_key: &str,
        attrs: Option<ObjectAttrs>,
        source: CopySourceCheck,
        writer: &Writer,
    ) -> Result<ObjectInfo, StoreError> {
        let args =
            (src_bucket.to_owned(), src_key.to_owned(), dst_bucket.to_owned(), dst_key.to_owned());
        let writer = writer.clone();
        self.blocking(move |store| {
            let (src_bucket, src_key, dst_bucket, dst_key) = args;
            let dst_dir = store.bucket_dir(&dst_bucket)?;
            validate_key(&dst_key)?;
            let dst_marker = dst_key.ends_with('/');
            let (info, mut file) = store.open_blocking(&src_bucket, &src_key)?;
            (source.check)(&info)?;
            if src_bucket == dst_bucket && src_key == dst_key && attrs.is_none() {
                return Err(StoreError::InvalidRequest(
                    "This copy request is illegal because it is trying to copy an object to \
                     itself without changing the object's metadata, storage class, website \
                     redirect location or encryption attributes."
                        .into(),
                ));
            }
            let keep_checksum =
                info.checksum.clone().filter(|c| c.kind == ChecksumType::FullObject);
            let attrs = attrs.unwrap_or(info.attrs);
            // An empty object copied to a key ending in '/' is a folder marker; anything else
            // is copied byte by byte (a plain folder marker has no file: no bytes).
            if dst_marker && info.size == 0 {
                return store.commit_marker(&dst_bucket, &dst_key, attrs, None, &writer);
            }
            let (size, counts_for) = (info.size, writer.user());
            store.precheck(
                &dst_bucket,
                &dst_dir,
                &dst_key,
                size,
                counts_for,
                Change::default(),
                &writer,
            )?;
            let (temp, mut out) = store.temp_file()?;
            let mut hash = Md5::new();
            let mut buf = vec![0u8; COPY_BUF];
            while let Some(src) = &mut file {
                let n = src.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                hash.update(&buf[..n]);
                out.write_all(&buf[..n])?;
            }
            out.sync_all()?;
            drop(out);
            // The copy has the same bytes, so a whole-object checksum still holds.
            let object = NewObject {
                etag: hex::encode(hash.finalize()),
                attrs,
                checksum: keep_checksum,
                writer: writer.user().map(str::to_owned),
                ..NewObject::default()
            };
            store.commit(&dst_bucket, &dst_key, temp, object, None, &writer)
        })
        .await
    }
}

/// Makes one directory on the way to `key`, refusing a symlink or a file in its place.
fn make_dir_checked(path: &Path, key: &str) -> Result<(), StoreError> {
    for _ in 0..2 {
        match fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => return Ok(()),
            Ok(m) if m.file_type().is_symlink() => {
                return Err(StoreError::Symlink(key.to_owned()));
            }
            Ok(_) => return Err(StoreError::KeyConflict(key.to_owned())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => match fs::create_dir(path) {
                Ok(()) => return Ok(()),
                // Made concurrently: look again at what it is.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e.into()),
            },
            Err(e) => return Err(e.into()),
        }
    }
    Err(StoreError::KeyConflict(key.to_owned()))
}

/// A test of the source object of a copy, run on the object actually opened.
pub type SourceTest = Box<dyn FnOnce(&ObjectInfo) -> Result<(), StoreError> + Send>;

/// Preconditions on the source of a copy (`x-amz-copy-source-if-*`), checked on the object
/// actually opened.
pub struct CopySourceCheck {
    /// Fails with the error to return when the source does not qualify.
    pub check: SourceTest,
}

impl Default for CopySourceCheck {
    fn default() -> Self {
        Self { check: Box::new(|_| Ok(())) }
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

/// Compares a computed checksum with the client's, refusing a mismatch or a missing trailer.
fn verify(wanted: ChecksumCheck, raw: Vec<u8>) -> Result<Checksum, StoreError> {
    let algorithm = wanted.algorithm;
    let value = checksum::encode(&raw);
    let sent = match wanted.expected {
        ExpectedChecksum::Compute => None,
        ExpectedChecksum::Value(sent) => Some(sent),
        ExpectedChecksum::Trailer(read) => Some(read().ok_or_else(|| {
            StoreError::InvalidRequest(format!(
                "the trailer {} announced in x-amz-trailer was not sent",
                algorithm.header()
            ))
        })?),
    };
    if let Some(sent) = sent {
        match algorithm.decode(&sent) {
            Some(sent) if sent == raw => {}
            Some(_) => return Err(StoreError::BadChecksum(algorithm)),
            None => {
                return Err(StoreError::InvalidRequest(format!(
                    "Value for {} header is invalid.",
                    algorithm.header()
                )));
            }
        }
    }
    Ok(Checksum { algorithm, value, kind: ChecksumType::FullObject })
}

fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
