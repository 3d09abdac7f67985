//! Writes and deletes in a versioned bucket: new versions, delete markers, and the removal of a
//! version's bytes or marker for good. Every such removal is first put to
//! [`BucketStore::check_permanent_removal`], which may refuse it before anything changes: the
//! removals by version id and by the lifecycle pass, through
//! [`BucketStore::remove_version_permanently`], and the `null` versions a suspended bucket's
//! write or delete replaces.
//!
//! Crash order: the version in place is archived (linked and recorded, synced) before anything
//! replaces or removes it, and a marker is recorded only once the version in place is gone, so
//! that whatever is at a key's place is always its newest version. A crash can at most leave
//! the newest version (bytes) in the versions area with nothing in place: reads find it there
//! and put it back in place, and so does the store when it opens after the crash.

use std::fs::{self, File};
use std::path::Path;
use std::time::SystemTime;

use super::attached::attach;
use super::commit::{Placed, remove_if_exists};
use super::crash_point::crash_point;
use super::durable::fsync_dir;
use super::names::validate_key;
use super::object_lock::Bypass;
use super::object_meta::{MetaFile, NewObject, ObjectInfo, WriteCondition, mtime_ns};
use super::temp::TempFile;
use super::usage_change::{Change, Existing, Writer};
use super::versioning::Versioning;
use super::versions::{NULL_VERSION, Version, VersionStamp, valid_version_id};
use super::{BucketStore, StoreError, parse_key};

/// What a delete did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deleted {
    /// The version removed, or the marker made; `None` in a bucket whose versioning was never
    /// set.
    pub version_id: Option<String>,
    /// Whether that version is a delete marker (made now, or removed by its id).
    pub delete_marker: bool,
}

impl BucketStore {
    /// [`commit`](Self::commit) in a versioned bucket: the new object gets a fresh stamp (the
    /// `null` one when suspended), the version in place is archived first, and null versions
    /// it replaces go for good.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn commit_versioned(
        &self,
        bucket: &str,
        key: &str,
        (temp, file): (TempFile, File),
        object: NewObject,
        condition: Option<&WriteCondition>,
        actor: &Writer,
        mode: Versioning,
    ) -> Result<ObjectInfo, StoreError> {
        let dir = self.bucket_dir(bucket)?;
        validate_key(key)?;
        // The stamp must be newer than every version of the key: decided under its lock.
        let _guard = self.key_lock(bucket, key);
        self.check_condition(bucket, key, condition)?;
        let history = self.versions_of(bucket, &dir, key)?;
        let null = mode == Versioning::Suspended;
        let stamp = VersionStamp::fresh(null, history.first().map(|v| v.stamp().order.as_str()));
        let data = file.metadata()?;
        let (meta, also) = MetaFile::written(key, &data, object, Some(stamp));
        let attached = attach(&file, &meta)?;
        file.sync_all()?;
        drop(file);
        let replaced: Vec<&Version> =
            history.iter().filter(|v| null && v.stamp().id == NULL_VERSION).collect();
        let mut change = Change::store(meta.writer.as_deref(), data.len(), None);
        for victim in &replaced {
            self.check_permanent_removal(bucket, victim, Bypass::No)?;
            change = change.and(removal_change(victim));
        }
        let ticket = self.meter(bucket)?.begin(change.and(also), actor)?;
        let in_place = history.iter().find(|v| v.in_place);
        let result = (|| {
            if let Some(current) = in_place
                && !replaced.iter().any(|v| v.in_place)
            {
                self.archive(bucket, current)?;
                crash_point("version:archived");
            }
            for victim in replaced.iter().filter(|v| !v.in_place) {
                self.remove_archived(bucket, victim)?;
            }
            let target = self.plain_target(&dir, key)?;
            let mut moved = false;
            let placed = Placed { target, attached };
            self.move_into_place(bucket, key, &dir, placed, &meta, temp, &mut moved)?;
            // A crash's duplicate of a null version just replaced would show it again.
            for victim in replaced.iter().filter(|v| v.in_place) {
                self.remove_archived(bucket, victim)?;
            }
            Ok::<_, StoreError>(())
        })();
        match result {
            Ok(()) => ticket.applied(),
            Err(e) => {
                ticket.uncertain();
                return Err(e);
            }
        }
        Ok(meta.info(data.modified().unwrap_or(SystemTime::UNIX_EPOCH)))
    }

    /// DeleteObject without a version id in a versioned bucket: a delete marker becomes the
    /// newest version (the `null` one when suspended, replacing the null version). With `due`,
    /// only if it holds for the object the key reads as now. Answers `None` when `due` did not
    /// hold.
    pub(super) fn delete_versioned(
        &self,
        bucket: &str,
        key: &str,
        mode: Versioning,
        due: Option<&dyn Fn(&ObjectInfo) -> bool>,
    ) -> Result<Option<Deleted>, StoreError> {
        let dir = self.bucket_dir(bucket)?;
        validate_key(key)?;
        let _guard = self.key_lock(bucket, key);
        let history = self.versions_of(bucket, &dir, key)?;
        if let Some(due) = due {
            match history.first() {
                Some(latest) if !latest.is_marker() && due(&latest.info()) => {}
                _ => return Ok(None),
            }
        }
        let null = mode == Versioning::Suspended;
        let mut stamp =
            VersionStamp::fresh(null, history.first().map(|v| v.stamp().order.as_str()));
        stamp.delete_marker = true;
        let replaced: Vec<&Version> =
            history.iter().filter(|v| null && v.stamp().id == NULL_VERSION).collect();
        let mut change = Change::default();
        for victim in &replaced {
            self.check_permanent_removal(bucket, victim, Bypass::No)?;
            change = change.and(removal_change(victim));
        }
        let ticket = self.meter(bucket)?.begin(change, &Writer::Operator)?;
        let result = (|| {
            if let Some(current) = history.iter().find(|v| v.in_place) {
                if !replaced.iter().any(|v| v.in_place) {
                    self.archive(bucket, current)?;
                }
                self.delete_located(bucket, key, &dir)?;
                self.sync_removal(bucket, key, &dir)?;
                crash_point("version:unplaced");
            }
            for victim in &replaced {
                self.remove_archived(bucket, victim)?;
            }
            let marker = MetaFile {
                key: key.to_owned(),
                etag: String::new(),
                version: Some(stamp.clone()),
                ..MetaFile::default()
            };
            self.note_archived(bucket, key);
            self.write_record(&self.versions_dir(bucket, key), &marker)
        })();
        match result {
            Ok(()) => ticket.applied(),
            Err(e) => {
                ticket.uncertain();
                return Err(e);
            }
        }
        Ok(Some(Deleted { version_id: Some(stamp.id), delete_marker: true }))
    }

    /// DeleteObject with a version id: that version (or marker) goes for good; a missing one
    /// counts as done, as in S3.
    pub(super) fn delete_version_blocking(
        &self,
        bucket: &str,
        key: &str,
        version_id: &str,
        bypass: Bypass,
    ) -> Result<Deleted, StoreError> {
        let dir = self.bucket_dir(bucket)?;
        validate_key(key)?;
        check_version_id(version_id)?;
        let _guard = self.key_lock(bucket, key);
        let history = self.versions_of(bucket, &dir, key)?;
        let Some(index) = history.iter().position(|v| v.stamp().id == version_id) else {
            return Ok(Deleted { version_id: Some(version_id.to_owned()), delete_marker: false });
        };
        let delete_marker = history[index].is_marker();
        self.remove_version_permanently(bucket, &dir, &history, index, bypass)?;
        Ok(Deleted { version_id: Some(version_id.to_owned()), delete_marker })
    }

    /// Whether `victim` may be removed for good. Every permanent removal of a version or a
    /// delete marker asks here first, and nothing is removed when it refuses: in a bucket with
    /// object lock, a version its retention or legal hold protects is
    /// [`StoreError::ObjectLocked`] (given the request's governance `bypass`).
    pub(super) fn check_permanent_removal(
        &self,
        bucket: &str,
        victim: &Version,
        bypass: Bypass,
    ) -> Result<(), StoreError> {
        if victim.is_marker() {
            return Ok(());
        }
        self.check_version_removable(bucket, &victim.meta.key, &victim.meta.attrs.lock, bypass)
    }

    /// The choke point of every permanent removal of one version (or delete marker) of a key
    /// whose history, newest first, is `history`: asks
    /// [`check_permanent_removal`](Self::check_permanent_removal), counts it out of the usage,
    /// and, when it was the newest, puts the next newest version in place (a marker leaves
    /// the key reading as deleted). The caller holds the key's lock.
    pub(super) fn remove_version_permanently(
        &self,
        bucket: &str,
        dir: &Path,
        history: &[Version],
        index: usize,
        bypass: Bypass,
    ) -> Result<(), StoreError> {
        let victim = &history[index];
        let key = victim.meta.key.as_str();
        self.check_permanent_removal(bucket, victim, bypass)?;
        let ticket = self.meter(bucket)?.begin(removal_change(victim), &Writer::Operator)?;
        let result = (|| {
            if victim.in_place {
                match history.get(index + 1) {
                    Some(next) if index == 0 && !next.is_marker() => {
                        self.promote(bucket, dir, next)?;
                    }
                    _ => {
                        self.delete_located(bucket, key, dir)?;
                        self.sync_removal(bucket, key, dir)?;
                    }
                }
                // A crash's duplicate of it would show it again.
                return self.remove_archived(bucket, victim);
            }
            self.remove_archived(bucket, victim)?;
            crash_point("version:unrecorded");
            // The newest gone: the next newest is put in place, unless it is a marker.
            if index == 0
                && let Some(next) = history.get(1)
                && !next.is_marker()
                && !next.in_place
            {
                self.promote(bucket, dir, next)?;
            }
            Ok::<_, StoreError>(())
        })();
        match result {
            Ok(()) => ticket.applied(),
            Err(e) => {
                ticket.uncertain();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Puts the archived `version` back in place, replacing whatever is there, then drops its
    /// archived copy (a duplicate from then on).
    fn promote(&self, bucket: &str, dir: &Path, version: &Version) -> Result<(), StoreError> {
        let key = version.meta.key.as_str();
        let path = self.temp_path();
        match &version.data {
            Some(data) => fs::hard_link(data, &path)?,
            None => drop(File::create(&path)?),
        }
        let temp = TempFile { path: path.clone(), keep: false };
        let file = File::open(&path)?;
        let mut meta = version.meta.clone();
        let stat = file.metadata()?;
        meta.mtime_ns = mtime_ns(&stat);
        let attached = attach(&file, &meta)?;
        file.sync_all()?;
        drop(file);
        let target = self.plain_target(dir, key)?;
        let mut moved = false;
        let placed = Placed { target, attached };
        self.move_into_place(bucket, key, dir, placed, &meta, temp, &mut moved)?;
        self.remove_archived(bucket, version)
    }

    /// Removes the record and bytes of an archived version: record first, so that bytes
    /// never remain described by nothing but a record.
    fn remove_archived(&self, bucket: &str, version: &Version) -> Result<(), StoreError> {
        let vdir = self.versions_dir(bucket, &version.meta.key);
        let order = &version.stamp().order;
        let record = vdir.join(format!("{order}.json"));
        if fs::symlink_metadata(&record).is_err() {
            return Ok(());
        }
        remove_if_exists(&record)?;
        crash_point("version:record-removed");
        remove_if_exists(&vdir.join(format!("{order}.data")))?;
        fsync_dir(&vdir)?;
        // The key's directory goes with its last version.
        if fs::remove_dir(&vdir).is_ok()
            && let Some(parent) = vdir.parent()
        {
            let _ = fs::remove_dir(parent);
        }
        Ok(())
    }

    /// Puts back in place the newest version of every key of `bucket` that a crash left
    /// archived with nothing in place: run when the store opens on a bucket written since its
    /// usage was last saved.
    pub(super) fn settle_versions(&self, bucket: &str) -> Result<(), StoreError> {
        if !self.versions_root(bucket).exists() {
            return Ok(());
        }
        self.drop_unrecorded_bytes(bucket)?;
        for key in self.archived_keys(bucket, "")? {
            self.settle_key(bucket, &key)?;
        }
        Ok(())
    }

    /// Removes the archived bytes a crash left without their record: an archive stopped
    /// before its record was written (the version is still in place), or a removal stopped
    /// after its record went. Nothing serves or counts them, so they would hold their disk
    /// space for good. Only when the store opens: a write in flight links the bytes first.
    fn drop_unrecorded_bytes(&self, bucket: &str) -> Result<(), StoreError> {
        for shard in super::durable::entries_of(&self.versions_root(bucket))? {
            let shard = shard?.path();
            for vdir in super::durable::entries_of(&shard)? {
                let vdir = vdir?.path();
                let mut dropped = false;
                for entry in super::durable::entries_of(&vdir)? {
                    let data = entry?.path();
                    if data.extension().is_none_or(|e| e != "data") {
                        continue;
                    }
                    match fs::symlink_metadata(data.with_extension("json")) {
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                            tracing::info!(bucket, path = %data.display(), "dropping bytes a crash left without their record");
                            remove_if_exists(&data)?;
                            dropped = true;
                        }
                        Err(e) => return Err(e.into()),
                        Ok(_) => {}
                    }
                }
                if dropped {
                    fsync_dir(&vdir)?;
                    // The key's directory goes with its last version, as in `remove_archived`.
                    if fs::remove_dir(&vdir).is_ok() {
                        let _ = fs::remove_dir(&shard);
                    }
                }
            }
        }
        Ok(())
    }

    /// Makes the removal of `key`'s version in place last: a version that came back after a
    /// power cut would read as newer than the marker or older version recorded after it.
    fn sync_removal(&self, bucket: &str, key: &str, dir: &Path) -> Result<(), StoreError> {
        if let Ok(path) = parse_key(key) {
            // The nearest directory still there holds the entry of the topmost one pruned.
            let mut at = dir.join(path.segments.join("/"));
            while at.pop() && at.starts_with(dir) {
                if at.is_dir() {
                    fsync_dir(&at)?;
                    break;
                }
            }
        }
        if let Some(side) = self.side_data_path(bucket, key).parent()
            && side.is_dir()
        {
            fsync_dir(side)?;
        }
        Ok(())
    }

    /// Puts the newest version of `key` back in place when a crash left it archived with
    /// nothing in place (see the module's rustdoc), so that listings show it again.
    pub(super) fn settle_key(&self, bucket: &str, key: &str) -> Result<(), StoreError> {
        let dir = self.bucket_dir(bucket)?;
        let _guard = self.key_lock(bucket, key);
        let history = self.versions_of(bucket, &dir, key)?;
        match history.first() {
            Some(newest) if !newest.in_place && !newest.is_marker() => {
                self.promote(bucket, &dir, newest)
            }
            _ => Ok(()),
        }
    }

    /// Whether `bucket` keeps any noncurrent version or delete marker.
    pub(super) fn has_versions(&self, bucket: &str) -> Result<bool, StoreError> {
        let root = self.versions_root(bucket);
        for shard in super::durable::entries_of(&root)? {
            for key_dir in super::durable::entries_of(&shard?.path())? {
                if !self.archived_versions(&key_dir?.path(), None)?.is_empty() {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// Opens `key` in a versioned bucket: the version `version_id`, or the newest one when
    /// `None` (a delete marker there is [`StoreError::DeleteMarker`]).
    pub(super) fn open_versioned(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
    ) -> Result<(ObjectInfo, Option<File>), StoreError> {
        let dir = self.bucket_dir(bucket)?;
        validate_key(key)?;
        if let Some(id) = version_id {
            check_version_id(id)?;
        }
        let history = self.versions_of(bucket, &dir, key)?;
        let found = match version_id {
            Some(id) => history.iter().find(|v| v.stamp().id == id).ok_or_else(|| {
                StoreError::NoSuchVersion { key: key.to_owned(), version_id: id.to_owned() }
            })?,
            None => history.first().ok_or_else(|| StoreError::NoSuchKey(key.to_owned()))?,
        };
        if found.is_marker() {
            return Err(StoreError::DeleteMarker {
                key: key.to_owned(),
                version_id: found.stamp().id.clone(),
                by_id: version_id.is_some(),
            });
        }
        if found.in_place {
            let (mut info, file) = self.open_blocking(bucket, key)?;
            info.version_id = Some(found.stamp().id.clone());
            return Ok((info, file));
        }
        self.open_version_data(found)
    }
}

/// Refuses what cannot be a version id, as S3 does.
pub(super) fn check_version_id(id: &str) -> Result<(), StoreError> {
    if valid_version_id(id) {
        Ok(())
    } else {
        Err(StoreError::InvalidArgument("Invalid version id specified".into()))
    }
}

/// What removing `version` takes out of the usage: markers count for nothing.
fn removal_change(version: &Version) -> Change {
    if version.is_marker() {
        return Change::default();
    }
    let size = version.data.as_ref().map_or(0, |_| version.meta.size);
    Change::remove(&Existing { size, writer: version.meta.writer.clone() })
}
