//! Putting a complete object in place: its temporary file (see `temp`) synced with its metadata
//! attached (or a metadata file written first), the write's condition and quota checked under
//! the key's lock, then the data renamed into place and its directory synced, so that a crash
//! never shows a partial object nor loses the previous one.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use md5::{Digest, Md5};

use super::attached::{DataFile, attach};
use super::durable::fsync_dir;
use super::names::validate_key;
use super::object_lock::Bypass;
use super::object_meta::{
    MetaFile, NewObject, ObjectAttrs, ObjectInfo, WriteCondition, etag_matches,
};
use super::temp::TempFile;
use super::usage_change::{Change, Existing, Writer};
use super::{BucketStore, StoreError, parse_key};

/// Where [`BucketStore::commit`] puts an object: its plain path (`None`: beside the bucket, see
/// `side`), and whether its metadata is attached to its data file.
pub(super) struct Placed {
    pub target: Option<PathBuf>,
    pub attached: bool,
}

impl BucketStore {
    /// Moves a complete temporary file (written, not yet synced) into place as `key`. Its
    /// metadata goes with it, attached to the file where the file system allows (see
    /// `attached`), so that one sync makes both last; otherwise into a metadata file first, so
    /// that the data never appears without it. `condition` is checked under the key's lock, so
    /// that no other write of the key can come between the check and the rename, and so is the
    /// quota, for `actor`: the object counts for `object.writer` in place of the one it
    /// replaces.
    pub(super) fn commit(
        &self,
        bucket: &str,
        key: &str,
        (temp, file): (TempFile, File),
        mut object: NewObject,
        condition: Option<&WriteCondition>,
        actor: &Writer,
    ) -> Result<ObjectInfo, StoreError> {
        let lock_config = self.lock_new_object(bucket, &mut object.attrs)?;
        if let Some(mode) = self.versioning(bucket)? {
            let file = (temp, file);
            return self.commit_versioned(bucket, key, file, object, condition, actor, mode);
        }
        let dir = self.bucket_dir(bucket)?;
        validate_key(key)?;
        let data = file.metadata()?;
        let (meta, also) = MetaFile::written(key, &data, object, None);
        // Setting an attribute leaves the mtime recorded in it as it is. One sync for the bytes
        // and what is attached to them, outside the key's lock.
        let attached = attach(&file, &meta)?;
        file.sync_all()?;
        drop(file);
        let _guard = self.key_lock(bucket, key);
        self.check_condition(bucket, key, condition)?;
        // Not versioned: replacing a protected object would destroy it.
        self.check_removable(bucket, key, lock_config.as_ref(), Bypass::No)?;
        let old = self.existing(bucket, &dir, key)?;
        let change = Change::store(meta.writer.as_deref(), data.len(), old.as_ref());
        let ticket = self.meter(bucket)?.begin(change.and(also), actor)?;
        // Nothing has moved before the rename: an error drops the ticket, and its reservation.
        let target = self.plain_target(&dir, key)?;
        let mut moved = false;
        let placed = Placed { target, attached };
        match self.move_into_place(bucket, key, &dir, placed, &meta, temp, &mut moved) {
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

    /// The data's rename of [`commit`](Self::commit), preceded by the metadata file's where the
    /// metadata is not attached (always for an object beside the bucket); `moved` says whether
    /// the data reached its place.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn move_into_place(
        &self,
        bucket: &str,
        key: &str,
        dir: &Path,
        placed: Placed,
        meta: &MetaFile,
        mut temp: TempFile,
        moved: &mut bool,
    ) -> Result<(), StoreError> {
        let Some(target) = placed.target else {
            self.write_side(bucket, meta, temp, moved)?;
            return self.drop_folder_marker(bucket, key, dir);
        };
        if !placed.attached {
            self.write_meta(bucket, meta)?;
        }
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
                if !placed.attached {
                    let _ = remove_if_exists(&self.meta_path(bucket, key));
                }
                return self.write_side(bucket, meta, temp, moved);
            }
            Err(e) => return Err(e.into()),
        }
        // Shared with the other writes renamed into the same directory meanwhile.
        self.inner.dir_syncs.sync(target.parent().unwrap_or(dir), fsync_dir)?;
        // Only now, so that a crash never loses the key's current object. A metadata file the
        // replaced object may have had is no longer read (the attached metadata wins), so its
        // removal needs no sync.
        if placed.attached {
            remove_if_exists(&self.meta_path(bucket, key))?;
        }
        self.remove_side(bucket, key)?;
        Ok(())
    }

    /// Takes the folder marker of `key` (a key ending in '/') out of the way of the bytes just
    /// written beside the bucket, which reads would otherwise never reach: its metadata goes,
    /// and its directory too unless other keys run through it.
    fn drop_folder_marker(&self, bucket: &str, key: &str, dir: &Path) -> Result<(), StoreError> {
        let Ok(path) = parse_key(key) else { return Ok(()) };
        if !path.dir_marker {
            return Ok(());
        }
        let Ok((marker, _)) = self.resolve_existing(dir, key, &path) else { return Ok(()) };
        remove_if_exists(&self.meta_path(bucket, key))?;
        self.prune_empty(bucket, dir, &marker);
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
                Ok((path, data)) => {
                    let at = DataFile::Path(&path);
                    let writer = self.object_meta(bucket, key, at, &data).and_then(|m| m.writer);
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
    pub(super) fn plain_target(
        &self,
        dir: &Path,
        key: &str,
    ) -> Result<Option<PathBuf>, StoreError> {
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
    pub(super) fn check_condition(
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

    pub(super) fn commit_marker(
        &self,
        bucket: &str,
        key: &str,
        mut attrs: ObjectAttrs,
        condition: Option<&WriteCondition>,
        actor: &Writer,
    ) -> Result<ObjectInfo, StoreError> {
        let dir = self.bucket_dir(bucket)?;
        let path = parse_key(key)?;
        let lock_config = self.lock_new_object(bucket, &mut attrs)?;
        // Versions of a folder marker keep their own records: it is kept beside the bucket.
        if self.versioning(bucket)?.is_some() {
            let temp = self.temp_file()?;
            let object = NewObject {
                etag: hex::encode(Md5::digest(b"")),
                attrs,
                writer: actor.user().map(str::to_owned),
                ..NewObject::default()
            };
            return self.commit(bucket, key, temp, object, condition, actor);
        }
        let plain = match self.prepare_path(&dir, key, &path) {
            Ok(target) => target,
            // `a/` where `a` is an object: kept beside the bucket like any other such key.
            Err(StoreError::KeyConflict(_)) => {
                let temp = self.temp_file()?;
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
        self.check_removable(bucket, key, lock_config.as_ref(), Bypass::No)?;
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
            version: None,
        };
        self.write_meta(bucket, &meta)?;
        // The marker exists from here on, whatever fails after.
        ticket.applied();
        self.remove_side(bucket, key)?;
        let data = fs::symlink_metadata(&plain)?;
        Ok(meta.info(data.modified().unwrap_or(SystemTime::UNIX_EPOCH)))
    }
}

pub(super) fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::super::{Creator, ListQuery, ObjectAttrs, PutCheck};
    use super::*;

    async fn put(store: &BucketStore, key: &str, data: &'static [u8]) {
        let body = futures::stream::iter([Ok::<_, io::Error>(bytes::Bytes::from_static(data))]);
        let (attrs, check) = (ObjectAttrs::default(), PutCheck::default());
        store.put_object("b-1", key, attrs, body, check, &Writer::Operator).await.unwrap();
    }

    async fn read(store: &BucketStore, key: &str) -> Result<(u64, Vec<u8>), StoreError> {
        let (info, file) = store.open_object("b-1", key).await?;
        let mut data = Vec::new();
        if let Some(mut file) = file {
            file.read_to_end(&mut data)?;
        }
        Ok((info.size, data))
    }

    #[tokio::test]
    async fn bytes_written_over_a_folder_marker_replace_it() {
        let tmp = tempfile::tempdir().unwrap();
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        let creator = Creator { user_id: "obc-1", delete_with_claim: true };
        store.create_bucket("b-1", creator).await.unwrap();
        for below in [None, Some("d/x")] {
            if let Some(key) = below {
                put(&store, key, b"x").await;
            }
            put(&store, "d/", b"").await;
            assert_eq!(read(&store, "d/").await.unwrap(), (0, Vec::new()));
            put(&store, "d/", b"bytes").await;
            assert_eq!(read(&store, "d/").await.unwrap(), (5, b"bytes".to_vec()), "{below:?}");
            let all = ListQuery { max_keys: 10, ..ListQuery::default() };
            let page = store.list_objects("b-1", all).await.unwrap();
            let listed: Vec<_> = page.objects.iter().map(|o| (o.key.as_str(), o.size)).collect();
            let mut expected = vec![("d/", 5)];
            expected.extend(below.map(|key| (key, 1)));
            assert_eq!(listed, expected, "{below:?}");
            let (bucket, _) = store.usage("b-1", None).unwrap();
            assert_eq!(bucket.bytes, 5 + below.map_or(0, |_| 1), "{below:?}");

            store.delete_object("b-1", "d/").await.unwrap();
            assert!(matches!(read(&store, "d/").await, Err(StoreError::NoSuchKey(_))));
            if let Some(key) = below {
                store.delete_object("b-1", key).await.unwrap();
            }
            let (bucket, _) = store.usage("b-1", None).unwrap();
            assert_eq!((bucket.objects, bucket.bytes), (0, 0), "{below:?}");
            assert!(!store.bucket_dir("b-1").unwrap().join("d").exists(), "{below:?}");
        }
    }
}
