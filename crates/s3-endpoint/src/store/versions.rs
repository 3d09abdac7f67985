//! The versions of one key in a versioned bucket: where they are kept, how they are named and
//! ordered, and how the history of a key is read back.
//!
//! The current version stays where an unversioned object is (its plain path, or beside the
//! bucket, see `side`), so that reading it costs what it always did. Every other version, and
//! every delete marker, is a record (a [`MetaFile`] carrying its [`VersionStamp`]) in
//! `.provisioner/meta/<bucket>/versions/<hh>/<md5 of key>/<order>.json`, with its bytes beside
//! it as `<order>.data` (a hard link to the inode that was the current version, so archiving
//! copies nothing). A marker has no bytes.
//!
//! Versions are ordered by their `order`, time-ordered hex that only grows, so which version is
//! newest is decided from the disk alone after a crash. A record whose order is that of the
//! version in place is a duplicate left by a crash between archiving a version and replacing
//! it, and is ignored. A record whose bytes are missing was never acknowledged, and is ignored
//! too.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use md5::{Digest, Md5};

use super::attached::DataFile;
use super::durable::{create_dir_all_durably, entries_of, write_atomic};
use super::object_meta::{MetaFile, ObjectAttrs, mtime_ns};
pub(super) use super::version_stamp::VersionStamp;
pub use super::version_stamp::{NULL_VERSION, valid_version_id};
use super::{BucketStore, ObjectInfo, StoreError, parse_key};

/// Name of the versions area inside a bucket's metadata directory.
pub(super) const VERSIONS_DIR: &str = "versions";

/// One version of a key, as found on the disk.
#[derive(Clone, Debug)]
pub(super) struct Version {
    /// Its record; `meta.version` is always set.
    pub meta: MetaFile,
    /// Its bytes, when it has a file (not for markers and empty folder markers).
    pub data: Option<PathBuf>,
    /// Whether it is the one at the key's own place (plain path or beside the bucket).
    pub in_place: bool,
    /// When it was written.
    pub modified: SystemTime,
}

impl Version {
    pub(super) fn stamp(&self) -> &VersionStamp {
        self.meta.version.as_ref().expect("a version always has a stamp")
    }

    pub(super) fn is_marker(&self) -> bool {
        self.stamp().delete_marker
    }

    /// What a client sees of it.
    pub(super) fn info(&self) -> ObjectInfo {
        self.meta.clone().info(self.modified)
    }
}

impl BucketStore {
    /// The directory of the versions of `key` other than the one in place.
    pub(super) fn versions_dir(&self, bucket: &str, key: &str) -> PathBuf {
        let hash = hex::encode(Md5::digest(key.as_bytes()));
        self.versions_root(bucket).join(&hash[..2]).join(hash)
    }

    pub(super) fn versions_root(&self, bucket: &str) -> PathBuf {
        self.inner.state_dir().join("meta").join(bucket).join(VERSIONS_DIR)
    }

    /// Every version of `key`, newest first.
    pub(super) fn versions_of(
        &self,
        bucket: &str,
        dir: &Path,
        key: &str,
    ) -> Result<Vec<Version>, StoreError> {
        let current = self.version_in_place(bucket, dir, key)?;
        let mut versions = self.archived_versions(&self.versions_dir(bucket, key), Some(key))?;
        if let Some(current) = current {
            versions.retain(|v| v.stamp().order != current.stamp().order);
            versions.push(current);
        }
        versions.sort_by(|a, b| b.stamp().order.cmp(&a.stamp().order));
        Ok(versions)
    }

    /// The versions recorded in `vdir` (of `key` only, when given), unsorted.
    pub(super) fn archived_versions(
        &self,
        vdir: &Path,
        key: Option<&str>,
    ) -> Result<Vec<Version>, StoreError> {
        let mut versions = Vec::new();
        for entry in entries_of(vdir)? {
            let path = entry?.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let Some(meta) = read_record(&path)? else { continue };
            if key.is_some_and(|key| key != meta.key) {
                continue;
            }
            let Some(stamp) = meta.version.clone() else { continue };
            if stamp.delete_marker {
                let modified = stamp.made();
                versions.push(Version { meta, data: None, in_place: false, modified });
                continue;
            }
            let data = path.with_extension("data");
            match fs::symlink_metadata(&data) {
                Ok(stat) if stat.is_file() => {
                    let modified = stat.modified().unwrap_or(UNIX_EPOCH);
                    versions.push(Version { meta, data: Some(data), in_place: false, modified });
                }
                // Bytes missing: an archive a crash interrupted, never acknowledged.
                _ if meta.size == 0 => {
                    let modified = stamp.made();
                    versions.push(Version { meta, data: None, in_place: false, modified });
                }
                _ => {}
            }
        }
        Ok(versions)
    }

    /// The version at `key`'s own place, if any.
    pub(super) fn version_in_place(
        &self,
        bucket: &str,
        dir: &Path,
        key: &str,
    ) -> Result<Option<Version>, StoreError> {
        let stamped = |mut meta: MetaFile| {
            meta.key = key.to_owned();
            if meta.version.is_none() {
                meta.version = Some(VersionStamp::legacy());
            }
            meta
        };
        if let Ok(path) = parse_key(key) {
            match self.resolve_existing(dir, key, &path) {
                Ok((_, stat)) if path.dir_marker => {
                    if let Some(meta) = self.read_meta(bucket, key, None) {
                        let modified = stat.modified().unwrap_or(UNIX_EPOCH);
                        let meta = stamped(meta);
                        return Ok(Some(Version { meta, data: None, in_place: true, modified }));
                    }
                }
                Ok((target, stat)) => {
                    let at = DataFile::Path(&target);
                    let meta = self
                        .object_meta(bucket, key, at, &stat)
                        .unwrap_or_else(|| derived_meta(key, &stat));
                    let modified = stat.modified().unwrap_or(UNIX_EPOCH);
                    let meta = stamped(meta);
                    return Ok(Some(Version {
                        meta,
                        data: Some(target),
                        in_place: true,
                        modified,
                    }));
                }
                Err(StoreError::NoSuchKey(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let Some(meta) = self.side_meta(bucket, key)? else { return Ok(None) };
        let data = self.side_data_path(bucket, key);
        let modified = fs::symlink_metadata(&data)?.modified().unwrap_or(UNIX_EPOCH);
        Ok(Some(Version { meta: stamped(meta), data: Some(data), in_place: true, modified }))
    }

    /// Keeps `version` (the one in place) as a noncurrent version: its bytes linked and its
    /// record written, both synced, before whatever replaces it moves in.
    pub(super) fn archive(&self, bucket: &str, version: &Version) -> Result<(), StoreError> {
        let vdir = self.versions_dir(bucket, &version.meta.key);
        self.note_archived(bucket, &version.meta.key);
        create_dir_all_durably(&vdir)?;
        let order = &version.stamp().order;
        if let Some(data) = &version.data {
            match fs::hard_link(data, vdir.join(format!("{order}.data"))) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e.into()),
            }
        }
        // The record's rename and the directory sync after it make the link last too.
        self.write_record(&vdir, &version.meta)
    }

    /// Writes the record of a version (a marker, or one whose bytes are linked already) into
    /// `vdir`, durably.
    pub(super) fn write_record(&self, vdir: &Path, meta: &MetaFile) -> Result<(), StoreError> {
        create_dir_all_durably(vdir)?;
        let order = &meta.version.as_ref().expect("a version record has a stamp").order;
        let bytes = serde_json::to_vec(meta).map_err(io::Error::other)?;
        write_atomic(&vdir.join(format!("{order}.json")), &bytes, 0o600)?;
        Ok(())
    }

    /// Opens the bytes of `version`, wherever they are.
    pub(super) fn open_version_data(
        &self,
        version: &Version,
    ) -> Result<(ObjectInfo, Option<File>), StoreError> {
        let Some(data) = &version.data else { return Ok((version.info(), None)) };
        let file = OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(data)?;
        Ok((version.info(), Some(file)))
    }
}

/// The metadata served for a file written outside the store.
fn derived_meta(key: &str, stat: &fs::Metadata) -> MetaFile {
    MetaFile {
        key: key.to_owned(),
        size: stat.len(),
        mtime_ns: mtime_ns(stat),
        etag: hex::encode(Md5::digest(format!("{}:{}", stat.len(), mtime_ns(stat)))),
        attrs: ObjectAttrs::default(),
        ..MetaFile::default()
    }
}

fn read_record(path: &Path) -> Result<Option<MetaFile>, StoreError> {
    match fs::read(path) {
        Ok(bytes) => Ok(serde_json::from_slice(&bytes).ok()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}
