//! Objects whose key cannot be a plain file path: kept beside the bucket, named by a hash.
//!
//! Most keys are stored as the file of the same path under the bucket directory. Some keys
//! S3 accepts cannot be: a key that is also a prefix of other keys (`a` beside `a/b`, when
//! the path `a` is already a directory or the other way round), and keys with empty, `.` or
//! `..` segments, a leading `/`, or a segment longer than a file name may be. Those objects go
//! to `.provisioner/meta/<bucket>/side/<hh>/<md5 of key>.{json,data}` instead, written the same
//! way (temporary file, then rename; metadata first) and found by the same lookups.
//!
//! A key lives in one place at a time: writing it plainly removes its side copy afterwards,
//! and it goes to the side only when its plain path is taken, so no plain copy exists. Should
//! a crash leave both, the plain file wins and the side copy is ignored until overwritten or
//! deleted.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use md5::{Digest, Md5};

use super::durable::{create_dir_all_durably, fsync_dir, write_atomic};
use super::object_meta::{MetaFile, mtime_ns};
use super::temp::TempFile;
use super::usage_change::Existing;
use super::{BucketStore, ObjectInfo, StoreError};

/// Name of the side area inside a bucket's metadata directory (hash directories are two hex
/// digits, so it never collides with one).
const SIDE_DIR: &str = "side";

impl BucketStore {
    fn side_root(&self, bucket: &str) -> PathBuf {
        self.inner.state_dir().join("meta").join(bucket).join(SIDE_DIR)
    }

    /// The metadata and data files of `key`'s side copy.
    fn side_paths(&self, bucket: &str, key: &str) -> (PathBuf, PathBuf) {
        let hash = hex::encode(Md5::digest(key.as_bytes()));
        let dir = self.side_root(bucket).join(&hash[..2]);
        (dir.join(format!("{hash}.json")), dir.join(format!("{hash}.data")))
    }

    /// Where the bytes of `key`'s side copy are (whether or not it has one).
    pub(super) fn side_data_path(&self, bucket: &str, key: &str) -> PathBuf {
        self.side_paths(bucket, key).1
    }

    /// Opens the side copy of `key`.
    pub(super) fn open_side(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<(ObjectInfo, Option<File>), StoreError> {
        let (json, data) = self.side_paths(bucket, key);
        let missing = || StoreError::NoSuchKey(key.to_owned());
        let meta = read_side_meta(&json)?.filter(|m| m.key == key).ok_or_else(missing)?;
        let file = match OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(&data) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(missing()),
            Err(e) => return Err(e.into()),
        };
        let stat = file.metadata()?;
        if !stat.is_file() {
            return Err(missing());
        }
        Ok((side_info(meta, &stat), Some(file)))
    }

    /// Moves a complete temporary file into place as the side copy of `meta.key`, metadata
    /// first, as for plain objects; `moved` says whether the data reached its place.
    pub(super) fn write_side(
        &self,
        bucket: &str,
        meta: &MetaFile,
        temp: TempFile,
        moved: &mut bool,
    ) -> Result<(), StoreError> {
        let (json, data) = self.side_paths(bucket, &meta.key);
        let dir = json.parent().unwrap_or(&json).to_owned();
        create_dir_all_durably(&dir)?;
        let bytes = serde_json::to_vec(meta).map_err(io::Error::other)?;
        write_atomic(&json, &bytes, 0o600)?;
        temp.rename_to(&data)?;
        *moved = true;
        fsync_dir(&dir)?;
        Ok(())
    }

    /// The metadata of `key`'s side copy, when it has one that still describes its data.
    pub(super) fn side_meta(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<Option<MetaFile>, StoreError> {
        let (json, data) = self.side_paths(bucket, key);
        let Some(meta) = read_side_meta(&json)?.filter(|m| m.key == key) else { return Ok(None) };
        match fs::symlink_metadata(&data) {
            Ok(stat)
                if stat.is_file()
                    && meta.size == stat.len()
                    && meta.mtime_ns == mtime_ns(&stat) =>
            {
                Ok(Some(meta))
            }
            Ok(_) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Replaces the metadata of `meta.key`'s side copy (its data stays), durably.
    pub(super) fn write_side_meta(&self, bucket: &str, meta: &MetaFile) -> Result<(), StoreError> {
        let (json, _) = self.side_paths(bucket, &meta.key);
        let bytes = serde_json::to_vec(meta).map_err(io::Error::other)?;
        write_atomic(&json, &bytes, 0o600)?;
        Ok(())
    }

    /// Size and writer of the side copy of `key`, if there is one.
    pub(super) fn existing_side(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<Option<Existing>, StoreError> {
        let (json, data) = self.side_paths(bucket, key);
        let Some(meta) = read_side_meta(&json)?.filter(|m| m.key == key) else { return Ok(None) };
        match fs::symlink_metadata(&data) {
            Ok(stat) if stat.is_file() => {
                Ok(Some(Existing { size: stat.len(), writer: meta.writer }))
            }
            Ok(_) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Key, size and writer of every side object of `bucket`, for counting its usage.
    pub(super) fn side_entries(
        &self,
        bucket: &str,
    ) -> Result<Vec<(String, u64, Option<String>)>, StoreError> {
        let mut entries = Vec::new();
        for info in self.side_objects(bucket, "", "")? {
            if let Some(found) = self.existing_side(bucket, &info.key)? {
                entries.push((info.key, found.size, found.writer));
            }
        }
        Ok(entries)
    }

    /// Removes the side copy of `key`, if any: data first, so that metadata never outlives a
    /// listing of the data it describes.
    pub(super) fn remove_side(&self, bucket: &str, key: &str) -> Result<(), StoreError> {
        let (json, data) = self.side_paths(bucket, key);
        for path in [data, json] {
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Every side object of `bucket` under `prefix` and after `after`, sorted by key.
    pub(super) fn side_objects(
        &self,
        bucket: &str,
        prefix: &str,
        after: &str,
    ) -> Result<Vec<ObjectInfo>, StoreError> {
        let root = self.side_root(bucket);
        let mut objects = Vec::new();
        let dirs = match fs::read_dir(&root) {
            Ok(dirs) => dirs,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(objects),
            Err(e) => return Err(e.into()),
        };
        for dir in dirs {
            let dir = dir?.path();
            let entries = match fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            };
            for entry in entries {
                let path = entry?.path();
                if path.extension().is_none_or(|e| e != "json") {
                    continue;
                }
                let Some(meta) = read_side_meta(&path)? else { continue };
                if !meta.key.starts_with(prefix) || meta.key.as_str() <= after {
                    continue;
                }
                // Data missing (a crash between the two writes): not an object.
                let Ok(stat) = fs::symlink_metadata(path.with_extension("data")) else {
                    continue;
                };
                if stat.is_file() {
                    objects.push(side_info(meta, &stat));
                }
            }
        }
        objects.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(objects)
    }

    /// Whether `bucket` has any side object.
    pub(super) fn has_side_objects(&self, bucket: &str) -> Result<bool, StoreError> {
        Ok(!self.side_objects(bucket, "", "")?.is_empty())
    }
}

fn read_side_meta(path: &Path) -> Result<Option<MetaFile>, StoreError> {
    match fs::read(path) {
        Ok(bytes) => Ok(serde_json::from_slice(&bytes).ok()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The info of a side object; metadata that no longer describes the data (a crash between the
/// two renames of a replacement) gives way to a derived ETag, as for plain files.
fn side_info(meta: MetaFile, stat: &fs::Metadata) -> ObjectInfo {
    let modified = stat.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    if meta.size == stat.len() && meta.mtime_ns == mtime_ns(stat) {
        return meta.info(modified);
    }
    let etag = hex::encode(Md5::digest(format!("{}:{}", stat.len(), mtime_ns(stat))));
    ObjectInfo::plain(&meta.key, stat.len(), etag, modified)
}
