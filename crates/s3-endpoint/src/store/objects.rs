//! Object operations: safe path resolution, streamed writes (put in place by `commit`), reads,
//! copies and deletes.

use std::fmt::Display;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use md5::{Digest, Md5};

use super::attached::DataFile;
use super::body_writer::{BodyHashes, BodyWriter};
use super::checksum::{self, Checksum, ChecksumCheck, ChecksumType, ExpectedChecksum, Hasher};
use super::commit::remove_if_exists;
use super::durable::{create_dir_durably, settle_dir};
use super::names::validate_key;
use super::object_lock::Bypass;
use super::object_meta::{
    CopyReplace, CopySourceCheck, NewObject, ObjectAttrs, ObjectInfo, PutCheck, Received,
};
use super::temp::{IN_MEMORY, Spooled, TempFile};
use super::usage_change::{Change, Writer};
use super::{BucketStore, Deleted, KeyPath, StoreError, parse_key};

/// Chunk size for copies done by the store itself: bounds memory per request.
pub(super) const COPY_BUF: usize = 1 << 20;

/// Where a PUT's body is while it arrives.
enum Receiving {
    /// Small so far: in memory, hashed here.
    Memory(Vec<u8>, Box<BodyHashes>),
    /// Past [`IN_MEMORY`]: in a temporary file, hashed and written by its writer's thread.
    Spilled(TempFile, BodyWriter),
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
    pub(super) fn prepare_path(
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
            drop(received.body);
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
            let temp = store.spooled_file(received.body)?;
            store.commit(&bucket, &key, temp, object, condition.as_ref(), &writer)
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
    /// checksum; returns the file (written, not yet synced), its MD5 and the verified checksum.
    pub(super) async fn receive<S, E>(
        &self,
        mut body: S,
        check: PutCheck,
    ) -> Result<Received, StoreError>
    where
        S: Stream<Item = Result<Bytes, E>> + Send + Unpin,
        E: Display,
    {
        // In memory while it is small; then a temporary file, written by a thread of its own.
        let declared = check.length.and_then(|n| usize::try_from(n).ok());
        let memory = Vec::with_capacity(declared.unwrap_or(0).min(IN_MEMORY));
        let extra = check.checksum.as_ref().map(|c| Hasher::new(c.algorithm));
        let mut state = Receiving::Memory(memory, Box::new(BodyHashes { md5: Md5::new(), extra }));
        let mut size = 0u64;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| StoreError::Body(e.to_string()))?;
            size += chunk.len() as u64;
            if let Some(expected) = check.length
                && size > expected
            {
                return Err(StoreError::IncompleteBody { expected, actual: size });
            }
            state = match state {
                Receiving::Spilled(temp, mut writer) => {
                    writer.push(chunk).await?;
                    Receiving::Spilled(temp, writer)
                }
                Receiving::Memory(mut memory, mut hashes)
                    if memory.len() + chunk.len() <= IN_MEMORY =>
                {
                    hashes.update(&chunk);
                    memory.extend_from_slice(&chunk);
                    Receiving::Memory(memory, hashes)
                }
                Receiving::Memory(memory, hashes) => {
                    let (temp, file) = self.blocking(|store| store.temp_file()).await?;
                    let mut writer = BodyWriter::start(file, *hashes, memory);
                    writer.push(chunk).await?;
                    Receiving::Spilled(temp, writer)
                }
            };
        }
        if let Some(expected) = check.length
            && size != expected
        {
            return Err(StoreError::IncompleteBody { expected, actual: size });
        }
        let (body, hashes) = match state {
            Receiving::Memory(memory, hashes) => (Spooled::Memory(memory), *hashes),
            Receiving::Spilled(temp, writer) => {
                let (file, hashes) = writer.finish().await?;
                (Spooled::File(temp, file), hashes)
            }
        };
        let md5: [u8; 16] = hashes.md5.finalize().into();
        if check.md5.is_some_and(|sent| sent != md5) {
            return Err(StoreError::BadDigest);
        }
        let checksum = match (check.checksum, hashes.extra) {
            (Some(wanted), Some(extra)) => Some(verify(wanted, extra.finalize())?),
            _ => None,
        };
        Ok(Received { body, md5, size, checksum })
    }

    /// Opens `key` for reading: its info and, unless it is an empty folder marker, the open
    /// file. The file is opened with `O_NOFOLLOW`, and its info comes from the open handle.
    pub async fn open_object(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<(ObjectInfo, Option<File>), StoreError> {
        self.open_version(bucket, key, None).await
    }

    /// The info of `key`, as [`open_object`](Self::open_object) without the file.
    pub async fn head_object(&self, bucket: &str, key: &str) -> Result<ObjectInfo, StoreError> {
        self.open_version(bucket, key, None).await.map(|(info, _)| info)
    }

    /// [`open_object`](Self::open_object) of the version `version_id` of `key` (`None`: the
    /// newest). A delete marker is [`StoreError::DeleteMarker`]; an id that names no version
    /// is [`StoreError::NoSuchVersion`], one that cannot be a version id `InvalidArgument`.
    pub async fn open_version(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
    ) -> Result<(ObjectInfo, Option<File>), StoreError> {
        let (bucket, key) = (bucket.to_owned(), key.to_owned());
        let version_id = version_id.map(str::to_owned);
        self.blocking(move |store| store.open_current(&bucket, &key, version_id.as_deref())).await
    }

    /// The version `version_id` of `key`, or the newest; as an unversioned bucket reads it
    /// while nothing calls for more.
    pub(super) fn open_current(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
    ) -> Result<(ObjectInfo, Option<File>), StoreError> {
        if version_id.is_some() {
            return self.open_versioned(bucket, key, version_id);
        }
        match self.open_blocking(bucket, key) {
            // What is in place is always the newest version; with nothing there, the newest
            // may be a delete marker.
            Err(StoreError::NoSuchKey(_)) if self.versioning(bucket)?.is_some() => {
                let found = self.open_versioned(bucket, key, None)?;
                // Served from the versions area: a crash interrupted a delete; repaired now.
                self.settle_key(bucket, key)?;
                Ok(found)
            }
            Ok((mut info, file)) => {
                if info.version_id.is_none() && self.versioning(bucket)?.is_some() {
                    info.version_id = Some(super::NULL_VERSION.to_owned());
                }
                Ok((info, file))
            }
            other => other,
        }
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

    pub(super) fn open_plain(
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
        let info = self.object_info(bucket, key, DataFile::Open(&file), &data);
        Ok((info, Some(file)))
    }

    /// Removes `key`. A missing key counts as done; directories left empty are removed up to
    /// the bucket directory.
    pub async fn delete_object(&self, bucket: &str, key: &str) -> Result<(), StoreError> {
        let (bucket, key) = (bucket.to_owned(), key.to_owned());
        self.blocking(move |store| store.delete_blocking(&bucket, &key)).await
    }

    pub(super) fn delete_blocking(&self, bucket: &str, key: &str) -> Result<(), StoreError> {
        self.delete_if(bucket, key, None, Bypass::No).map(|_| ())
    }

    /// DeleteObject: without `version_id`, removes `key` (in a versioned bucket, makes a
    /// delete marker its newest version); with it, removes that version for good.
    pub async fn delete_object_version(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
    ) -> Result<Deleted, StoreError> {
        self.delete_object_version_with(bucket, key, version_id, Bypass::No).await
    }

    /// [`delete_object_version`](Self::delete_object_version) with a request's governance
    /// `bypass`: what object lock protects stays, and the answer is
    /// [`StoreError::ObjectLocked`]. A delete marker (no version id, versioned bucket) is
    /// always allowed: it removes nothing.
    pub async fn delete_object_version_with(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        bypass: Bypass,
    ) -> Result<Deleted, StoreError> {
        let (bucket, key) = (bucket.to_owned(), key.to_owned());
        let version_id = version_id.map(str::to_owned);
        self.blocking(move |store| match (version_id, store.versioning(&bucket)?) {
            (Some(id), _) => store.delete_version_blocking(&bucket, &key, &id, bypass),
            (None, Some(mode)) => {
                Ok(store.delete_versioned(&bucket, &key, mode, None)?.unwrap_or_default())
            }
            (None, None) => {
                store.delete_if(&bucket, &key, None, bypass).map(|_| Deleted::default())
            }
        })
        .await
    }

    /// Removes `key` as DeleteObject does, but with `due`, only if `due` holds for the object
    /// as it stands under its commit lock (an object replaced since `due` was decided is a new
    /// one, and stays); answers whether an object was there to remove. An object its lock
    /// protects (given the request's governance `bypass`) stays: [`StoreError::ObjectLocked`].
    pub(super) fn delete_if(
        &self,
        bucket: &str,
        key: &str,
        due: Option<&dyn Fn(&ObjectInfo) -> bool>,
        bypass: Bypass,
    ) -> Result<bool, StoreError> {
        if let Some(mode) = self.versioning(bucket)? {
            return Ok(self.delete_versioned(bucket, key, mode, due)?.is_some());
        }
        let dir = self.bucket_dir(bucket)?;
        validate_key(key)?;
        let lock_config = self.bucket_object_lock_blocking(bucket)?;
        let _guard = self.key_lock(bucket, key);
        if let Some(due) = due {
            match self.open_blocking(bucket, key) {
                Ok((info, _)) if due(&info) => {}
                Ok(_) | Err(StoreError::NoSuchKey(_)) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        self.check_removable(bucket, key, lock_config.as_ref(), bypass)?;
        // Never refused by a quota: it only frees. Counted only once the object is surely gone.
        let ticket = match self.existing(bucket, &dir, key)? {
            Some(old) => Some(self.meter(bucket)?.begin(Change::remove(&old), &Writer::Operator)?),
            None => None, // only leftovers of a crash, if anything
        };
        let result = self.delete_located(bucket, key, &dir);
        let found = ticket.is_some();
        match (ticket, &result) {
            (Some(ticket), Ok(())) => ticket.applied(),
            (Some(ticket), Err(_)) => ticket.uncertain(),
            (None, _) => {}
        }
        result.map(|()| found)
    }

    pub(super) fn delete_located(
        &self,
        bucket: &str,
        key: &str,
        dir: &Path,
    ) -> Result<(), StoreError> {
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
    pub(super) fn prune_empty(&self, bucket: &str, bucket_dir: &Path, from: &Path) {
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
    /// in bounded chunks. What `replace` gives replaces the source's attributes or tags.
    #[allow(clippy::too_many_arguments)]
    pub async fn copy_object(
        &self,
        src_bucket: &str,
        src_key: &str,
        dst_bucket: &str,
        dst_key: &str,
        replace: CopyReplace,
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
            let source_version = source.version_id.as_deref();
            let (info, mut file) = store.open_current(&src_bucket, &src_key, source_version)?;
            (source.check)(&info)?;
            if src_bucket == dst_bucket && src_key == dst_key && replace.attrs.is_none() {
                return Err(StoreError::InvalidRequest(
                    "This copy request is illegal because it is trying to copy an object to \
                     itself without changing the object's metadata, storage class, website \
                     redirect location or encryption attributes."
                        .into(),
                ));
            }
            let keep_checksum =
                info.checksum.clone().filter(|c| c.kind == ChecksumType::FullObject);
            let source_tags = info.attrs.tags.clone();
            let mut attrs = replace.attrs.unwrap_or(info.attrs);
            attrs.tags = replace.tags.unwrap_or(source_tags);
            attrs.lock = replace.lock;
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
            // The copy has the same bytes, so a whole-object checksum still holds.
            let object = NewObject {
                etag: hex::encode(hash.finalize()),
                attrs,
                checksum: keep_checksum,
                writer: writer.user().map(str::to_owned),
                ..NewObject::default()
            };
            store.commit(&dst_bucket, &dst_key, (temp, out), object, None, &writer)
        })
        .await
    }
}

/// Makes one directory on the way to `key` (its name synced, see `durable`), refusing a symlink
/// or a file in its place.
pub(super) fn make_dir_checked(path: &Path, key: &str) -> Result<(), StoreError> {
    for _ in 0..2 {
        match fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => return Ok(settle_dir(path)?),
            Ok(m) if m.file_type().is_symlink() => {
                return Err(StoreError::Symlink(key.to_owned()));
            }
            Ok(_) => return Err(StoreError::KeyConflict(key.to_owned())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => match create_dir_durably(path) {
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

/// Compares a computed checksum with the client's, refusing a mismatch or a missing trailer.
pub(super) fn verify(wanted: ChecksumCheck, raw: Vec<u8>) -> Result<Checksum, StoreError> {
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
