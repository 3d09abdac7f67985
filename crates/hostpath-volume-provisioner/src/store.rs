//! The volumes on this node: a directory each under the root, and the provisioner's own record
//! of each in `<root>/.provisioner/volumes/<pv name>.json`, written before the directory is made.
//! Only a directory a record names is ever removed, and only by the identity that recorded it.
//!
//! Paths are resolved beneath the root without following any symbolic link (`openat2` with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`), so nothing a pod writes into its volume can send a
//! later mkdir or delete elsewhere.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use crate::backing_kind::Backing;
use crate::tools::{ToolError, crash_point};

/// The provisioner's record of one volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The directory, relative to the root.
    pub path: PathBuf,
    /// The identity (node) that made it.
    pub identity: String,
    /// `namespace/name` of the claim it was made for.
    pub claim: String,
    /// What the volume is made of (older records, without it, are plain directories).
    #[serde(default)]
    pub backing: Backing,
    /// The capacity its backing holds it to, in bytes, where one does; raised on expansion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<u64>,
}

/// How the directory is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ownership {
    /// Permission bits, applied as given (no umask).
    pub mode: u32,
    /// Owner and group, when set.
    pub owner: Option<(u32, u32)>,
}

/// What can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file system failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The path is another volume's, or inside or around one.
    #[error("{path:?} {how} volume {other}; choose a pathPattern that gives each claim its own")]
    PathTaken {
        /// The path asked for.
        path: PathBuf,
        /// How it clashes.
        how: &'static str,
        /// The other volume.
        other: String,
    },
    /// A directory exists at the path and no record names it.
    #[error("{0:?} exists and was not made for this claim; it is left as it is")]
    Unrecorded(PathBuf),
    /// A symbolic link stands where a directory of the path should be.
    #[error(
        "{0:?} has a symbolic link (or something else that is not a directory) on its way; nothing is made or removed through it"
    )]
    NotADirectory(PathBuf),
    /// A record names a path without a last segment (the root, `..`): nothing to remove.
    #[error(
        "the record of volume {volume} names {path:?}, which has no last segment to remove; the \
         record is left as it is"
    )]
    NoLastSegment {
        /// The PV.
        volume: String,
        /// The path recorded.
        path: PathBuf,
    },
    /// A filesystem program (btrfs, mkfs, mount, ...) failed.
    #[error(transparent)]
    Tool(#[from] ToolError),
    /// The claim asks for what the volume's backing cannot give.
    #[error("{0}")]
    Refused(String),
    /// The volume cannot grow while mounted on this node, and retrying will not change that.
    #[error("{0}")]
    CannotGrow(String),
    /// The record belongs to another identity.
    #[error("volume {volume} was made by {recorded:?}, not by {ours:?}; it was left alone")]
    NotOurs {
        /// The PV.
        volume: String,
        /// Who made it.
        recorded: String,
        /// Who we are.
        ours: String,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> StoreError {
    move |source| StoreError::Io { what: what.into(), source }
}

fn errno(what: impl Into<String>) -> impl FnOnce(Errno) -> StoreError {
    move |e| StoreError::Io { what: what.into(), source: e.into() }
}

const RECORDS: &str = ".provisioner/volumes";

/// The volumes under one root, made by one identity.
#[derive(Debug)]
pub struct VolumeStore {
    root: PathBuf,
    identity: String,
    records: Mutex<BTreeMap<String, Record>>,
}

/// Opens the directory `path` beneath `dir` without following any link; `None` if it is absent.
fn open_beneath(dir: impl AsFd, path: &Path) -> Result<Option<OwnedFd>, Errno> {
    let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    match rustix::fs::openat2(dir, path, flags, Mode::empty(), resolve) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

impl VolumeStore {
    /// Opens (making it if needed) the root and reads every record there.
    pub fn open(root: PathBuf, identity: String) -> Result<Self, StoreError> {
        let records_dir = root.join(RECORDS);
        std::fs::create_dir_all(&records_dir)
            .map_err(io(format!("making {}", records_dir.display())))?;
        let mut records = BTreeMap::new();
        for entry in std::fs::read_dir(&records_dir)
            .map_err(io(format!("reading {}", records_dir.display())))?
        {
            let entry = entry.map_err(io(format!("reading {}", records_dir.display())))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(volume) = name.strip_suffix(".json") else { continue };
            let text = std::fs::read(entry.path())
                .map_err(io(format!("reading {}", entry.path().display())))?;
            match serde_json::from_slice::<Record>(&text) {
                Ok(record) => {
                    records.insert(volume.to_owned(), record);
                }
                Err(e) => tracing::warn!(record = %entry.path().display(), error = %e,
                    "ignoring an unreadable volume record"),
            }
        }
        Ok(Self { root, identity, records: Mutex::new(records) })
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Who we are.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The record of `volume`, if there is one.
    pub fn record(&self, volume: &str) -> Option<Record> {
        self.records.lock().unwrap_or_else(|e| e.into_inner()).get(volume).cloned()
    }

    fn open_root(&self) -> Result<OwnedFd, StoreError> {
        let flags = OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::RDONLY;
        rustix::fs::open(&self.root, flags, Mode::empty())
            .map_err(errno(format!("opening {}", self.root.display())))
    }

    /// The record of the volume `volume` at `path` (relative to the root) with `backing` and
    /// `capacity`, written now, or the one an earlier call wrote (which keeps its path, backing
    /// and capacity). [`VolumeStore::make`] writes it before anything else.
    pub(crate) fn record_intent(
        &self,
        volume: &str,
        path: &Path,
        claim: &str,
        backing: Backing,
        capacity: Option<u64>,
    ) -> Result<Record, StoreError> {
        let record = match self.record(volume) {
            Some(record) if record.identity != self.identity => {
                return Err(StoreError::NotOurs {
                    volume: volume.to_owned(),
                    recorded: record.identity,
                    ours: self.identity.clone(),
                });
            }
            Some(record) => record,
            None => {
                self.check_free(volume, path)?;
                let record = Record {
                    path: path.to_owned(),
                    identity: self.identity.clone(),
                    claim: claim.to_owned(),
                    backing,
                    capacity,
                };
                let root = self.open_root()?;
                if open_beneath(&root, path).map_err(|e| self.refusal(path, e))?.is_some() {
                    return Err(StoreError::Unrecorded(path.to_owned()));
                }
                self.write_record(volume, &record)?;
                crash_point("provision:recorded");
                record
            }
        };
        Ok(record)
    }

    /// Every record, by volume.
    pub fn records(&self) -> BTreeMap<String, Record> {
        self.records.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Records `capacity` as the one `volume`'s backing now holds it to.
    pub fn set_capacity(&self, volume: &str, capacity: u64) -> Result<(), StoreError> {
        let Some(mut record) = self.record(volume) else { return Ok(()) };
        record.capacity = Some(capacity);
        self.write_record(volume, &record)
    }

    /// The absolute path of `path` (relative to the root) after checking that every directory
    /// on its way exists beneath the root and is no link: for the programs that take paths.
    pub fn checked_path(&self, path: &Path) -> Result<PathBuf, StoreError> {
        let root = self.open_root()?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
            && open_beneath(&root, parent).map_err(|e| self.refusal(path, e))?.is_none()
        {
            return Err(StoreError::Io {
                what: format!("opening {}", self.root.join(parent).display()),
                source: std::io::ErrorKind::NotFound.into(),
            });
        }
        Ok(self.root.join(path))
    }

    /// Whether `path` (relative to the root) exists, looked up beneath the root without links.
    pub fn exists(&self, path: &Path) -> Result<bool, StoreError> {
        let root = self.open_root()?;
        Ok(open_beneath(&root, path).map_err(|e| self.refusal(path, e))?.is_some())
    }

    /// Fails unless `path` is clear of every other recorded volume.
    fn check_free(&self, volume: &str, path: &Path) -> Result<(), StoreError> {
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        for (other, record) in records.iter().filter(|(other, _)| *other != volume) {
            let how = if record.path == path {
                "is the directory of"
            } else if path.starts_with(&record.path) {
                "lies inside"
            } else if record.path.starts_with(path) {
                "holds"
            } else {
                continue;
            };
            return Err(StoreError::PathTaken { path: path.to_owned(), how, other: other.clone() });
        }
        Ok(())
    }

    fn refusal(&self, path: &Path, e: Errno) -> StoreError {
        match e {
            Errno::LOOP | Errno::XDEV | Errno::NOTDIR => StoreError::NotADirectory(path.to_owned()),
            e => errno(format!("opening {}", self.root.join(path).display()))(e),
        }
    }

    /// Writes the record of `volume` durably (temporary file, sync, rename, sync).
    pub(crate) fn write_record(&self, volume: &str, record: &Record) -> Result<(), StoreError> {
        let dir = self.root.join(RECORDS);
        let file = dir.join(format!("{volume}.json"));
        let temporary = dir.join(format!(".{volume}.json.tmp"));
        let text = serde_json::to_vec_pretty(record).expect("a record serializes");
        let write = || -> std::io::Result<()> {
            let mut out = std::fs::File::create(&temporary)?;
            out.write_all(&text)?;
            out.sync_all()?;
            std::fs::rename(&temporary, &file)?;
            std::fs::File::open(&dir)?.sync_all()
        };
        write().map_err(io(format!("writing {}", file.display())))?;
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(volume.to_owned(), record.clone());
        Ok(())
    }

    /// Makes every directory of `path` beneath the root, never through a link, and gives the
    /// last one its mode and owner.
    pub(crate) fn make_dirs(&self, path: &Path, ownership: Ownership) -> Result<(), StoreError> {
        let mut dir = self.open_root()?;
        for segment in path.iter() {
            match rustix::fs::mkdirat(&dir, segment, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(errno(format!("making {}", path.display()))(e)),
            }
            dir = open_beneath(&dir, Path::new(segment))
                .map_err(|e| self.refusal(path, e))?
                .ok_or_else(|| StoreError::Io {
                    what: format!("making {}", path.display()),
                    source: std::io::Error::other("removed while it was being made"),
                })?;
        }
        self.own(&dir, path, ownership)
    }

    /// Gives the directory at `path` (relative to the root; a volume's, once made) its mode and
    /// owner: for what a mount or a subvolume put there.
    pub(crate) fn apply_ownership(
        &self,
        path: &Path,
        ownership: Ownership,
    ) -> Result<(), StoreError> {
        let root = self.open_root()?;
        let dir =
            open_beneath(&root, path).map_err(|e| self.refusal(path, e))?.ok_or_else(|| {
                StoreError::Io {
                    what: format!("opening {}", path.display()),
                    source: std::io::ErrorKind::NotFound.into(),
                }
            })?;
        self.own(&dir, path, ownership)
    }

    fn own(&self, dir: &OwnedFd, path: &Path, ownership: Ownership) -> Result<(), StoreError> {
        if let Some((uid, gid)) = ownership.owner {
            let (uid, gid) = (rustix::fs::Uid::from_raw(uid), rustix::fs::Gid::from_raw(gid));
            rustix::fs::fchown(dir, Some(uid), Some(gid))
                .map_err(errno(format!("changing the owner of {}", path.display())))?;
        }
        rustix::fs::fchmod(dir, Mode::from_raw_mode(ownership.mode))
            .map_err(errno(format!("changing the mode of {}", path.display())))?;
        Ok(())
    }

    /// The record of `volume` when this identity may remove it: `None` without one, refused when
    /// another identity recorded it or it names no directory of its own.
    pub(crate) fn removable(&self, volume: &str) -> Result<Option<Record>, StoreError> {
        let Some(record) = self.record(volume) else { return Ok(None) };
        if record.identity != self.identity {
            return Err(StoreError::NotOurs {
                volume: volume.to_owned(),
                recorded: record.identity,
                ours: self.identity.clone(),
            });
        }
        // A record is a file anyone with the node's root can edit: one naming the root itself
        // (or `..`) is refused before anything is removed.
        if record.path.file_name().is_none() {
            return Err(StoreError::NoLastSegment { volume: volume.to_owned(), path: record.path });
        }
        Ok(Some(record))
    }

    /// Removes the directory `record` names for `volume` with everything in it, then empty
    /// directories above it that the path pattern made, then the record.
    pub(crate) fn remove_recorded(&self, volume: &str, record: &Record) -> Result<(), StoreError> {
        let Some(name) = record.path.file_name() else {
            return Err(StoreError::NoLastSegment {
                volume: volume.to_owned(),
                path: record.path.clone(),
            });
        };
        let root = self.open_root()?;
        let parent_path = record.path.parent().unwrap_or(Path::new(""));
        let parent = if parent_path.as_os_str().is_empty() {
            Some(root.try_clone().map_err(io("opening the root again"))?)
        } else {
            open_beneath(&root, parent_path).map_err(|e| self.refusal(&record.path, e))?
        };
        if let Some(parent) = parent {
            // Through the descriptor of the parent: the path is never resolved again, and
            // remove_dir_all follows no link inside it.
            let target = PathBuf::from(format!("/proc/self/fd/{}", parent.as_raw_fd())).join(name);
            match std::fs::symlink_metadata(&target) {
                Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&target)
                    .map_err(io(format!("removing {}", self.root.join(&record.path).display())))?,
                Ok(_) => return Err(StoreError::NotADirectory(record.path.clone())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(format!("looking at {}", record.path.display()))(e)),
            }
        }
        // Directories above it that are empty now; another volume's keeps its parents.
        let mut above = parent_path;
        while let (Some(up), Some(name)) = (above.parent(), above.file_name()) {
            let up_fd = if up.as_os_str().is_empty() {
                root.try_clone().ok()
            } else {
                open_beneath(&root, up).ok().flatten()
            };
            let Some(up_fd) = up_fd else { break };
            if rustix::fs::unlinkat(&up_fd, name, rustix::fs::AtFlags::REMOVEDIR).is_err() {
                break;
            }
            above = up;
        }
        let file = self.root.join(RECORDS).join(format!("{volume}.json"));
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(format!("removing {}", file.display()))(e)),
        }
        crash_point("delete:unrecorded");
        self.records.lock().unwrap_or_else(|e| e.into_inner()).remove(volume);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use super::*;

    const OPEN: Ownership = Ownership { mode: 0o777, owner: None };
    const DIR: Backing = Backing::Directory;

    fn store(root: &Path, identity: &str) -> VolumeStore {
        VolumeStore::open(root.to_owned(), identity.to_owned()).unwrap()
    }

    #[test]
    fn a_volume_is_made_once_and_removed_with_its_record() {
        let root = tempfile::tempdir().unwrap();
        let volumes = store(root.path(), "node-a");
        let path = Path::new("app/data");
        let made = volumes.make("pvc-1", path, "app/data", OPEN, DIR, None).unwrap();
        assert_eq!(made.path, path);
        std::fs::write(root.path().join("app/data/file"), "x").unwrap();
        let meta = std::fs::metadata(root.path().join("app/data")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o777, "no umask");
        // Again (a retry), even with another pattern's path: the recorded path wins.
        let again =
            volumes.make("pvc-1", Path::new("elsewhere"), "app/data", OPEN, DIR, None).unwrap();
        assert_eq!(again.path, path);
        assert!(root.path().join("app/data/file").exists(), "a retry keeps the data");
        // Reopened, the records are still there.
        let reopened = store(root.path(), "node-a");
        assert_eq!(reopened.record("pvc-1").unwrap().path, path);
        reopened.remove("pvc-1").unwrap();
        assert!(!root.path().join("app").exists(), "the pattern's empty parent went too");
        assert!(reopened.record("pvc-1").is_none());
        reopened.remove("pvc-1").unwrap();
        assert!(root.path().join(RECORDS).is_dir());
    }

    #[test]
    fn paths_of_other_volumes_and_unrecorded_directories_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let volumes = store(root.path(), "node-a");
        volumes.make("pvc-1", Path::new("app/data"), "app/data", OPEN, DIR, None).unwrap();
        for (path, how) in
            [("app/data", "is the directory of"), ("app/data/x", "lies inside"), ("app", "holds")]
        {
            let error =
                volumes.make("pvc-2", Path::new(path), "app/x", OPEN, DIR, None).unwrap_err();
            assert!(matches!(&error, StoreError::PathTaken { how: h, .. } if *h == how), "{error}");
        }
        std::fs::create_dir(root.path().join("operator-data")).unwrap();
        let error = volumes
            .make("pvc-3", Path::new("operator-data"), "app/y", OPEN, DIR, None)
            .unwrap_err();
        assert!(matches!(error, StoreError::Unrecorded(_)), "{error}");
        // The other volume's sibling directory keeps the shared parent.
        volumes.make("pvc-4", Path::new("app/other"), "app/other", OPEN, DIR, None).unwrap();
        volumes.remove("pvc-1").unwrap();
        assert!(root.path().join("app/other").is_dir());
    }

    #[test]
    fn links_planted_on_the_way_lead_nowhere() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let volumes = store(root.path(), "node-a");
        std::os::unix::fs::symlink(outside.path(), root.path().join("app")).unwrap();
        let error =
            volumes.make("pvc-1", Path::new("app/data"), "app/data", OPEN, DIR, None).unwrap_err();
        assert!(matches!(error, StoreError::NotADirectory(_)), "{error}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0, "nothing made outside");

        // A volume whose directory is swapped for a link is not removed through it.
        volumes.make("pvc-2", Path::new("ns/vol"), "ns/vol", OPEN, DIR, None).unwrap();
        std::fs::write(outside.path().join("precious"), "keep").unwrap();
        std::fs::remove_dir(root.path().join("ns/vol")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("ns/vol")).unwrap();
        let error = volumes.remove("pvc-2").unwrap_err();
        assert!(matches!(error, StoreError::NotADirectory(_)), "{error}");
        std::fs::remove_file(root.path().join("ns/vol")).unwrap();
        std::fs::rename(root.path().join("ns"), root.path().join("ns-real")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("ns")).unwrap();
        let error = volumes.remove("pvc-2").unwrap_err();
        assert!(matches!(error, StoreError::NotADirectory(_)), "{error}");
        assert!(outside.path().join("precious").exists());
    }

    #[test]
    fn another_identity_neither_reuses_nor_removes_a_volume() {
        let root = tempfile::tempdir().unwrap();
        store(root.path(), "node-a")
            .make("pvc-1", Path::new("pvc-1"), "a/b", OPEN, DIR, None)
            .unwrap();
        let other = store(root.path(), "node-b");
        assert!(matches!(other.remove("pvc-1"), Err(StoreError::NotOurs { .. })));
        assert!(matches!(
            other.make("pvc-1", Path::new("pvc-1"), "a/b", OPEN, DIR, None),
            Err(StoreError::NotOurs { .. })
        ));
        assert!(root.path().join("pvc-1").is_dir());
    }

    #[test]
    fn a_record_whose_path_has_no_last_segment_is_refused_and_kept() {
        let root = tempfile::tempdir().unwrap();
        let volumes = store(root.path(), "node-a");
        volumes.make("pvc-kept", Path::new("kept"), "kept", OPEN, DIR, None).unwrap();
        for (volume, path) in [("pvc-a", ""), ("pvc-b", ".."), ("pvc-c", "/"), ("pvc-d", "kept/..")]
        {
            let record = format!(r#"{{"path":"{path}","identity":"node-a","claim":"ns/c"}}"#);
            std::fs::write(root.path().join(RECORDS).join(format!("{volume}.json")), record)
                .unwrap();
        }
        let reopened = store(root.path(), "node-a");
        for volume in ["pvc-a", "pvc-b", "pvc-c", "pvc-d"] {
            let error = reopened.remove(volume).unwrap_err().to_string();
            assert!(error.contains("no last segment"), "{volume}: {error}");
            assert!(
                reopened.record(volume).is_some(),
                "{volume}: the record stays to be looked at"
            );
        }
        assert!(root.path().join("kept").is_dir(), "nothing else is removed");
        reopened.remove("pvc-kept").unwrap();
    }

    #[test]
    fn mode_and_owner_are_applied() {
        let root = tempfile::tempdir().unwrap();
        let volumes = store(root.path(), "node-a");
        let me = std::fs::metadata(root.path()).unwrap();
        let owner = Ownership { mode: 0o2770, owner: Some((me.uid(), me.gid())) };
        volumes.make("pvc-1", Path::new("pvc-1"), "a/b", owner, DIR, None).unwrap();
        let meta = std::fs::metadata(root.path().join("pvc-1")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o2770);
        assert_eq!((meta.uid(), meta.gid()), (me.uid(), me.gid()));
    }
}
