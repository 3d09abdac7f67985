//! The sorted entries of large bucket directories, kept between listing pages so that a page
//! costs what it returns rather than a read and sort of the whole directory.
//!
//! Entries are trusted only while the directory is the same one (device, inode) with the same
//! modification and change times, which every entry added, removed or renamed moves, whoever
//! makes the change. File system timestamps are coarse (a clock tick, not a nanosecond), so a
//! directory changed within the last ticks is read but not kept: a later change in the same
//! tick could not be told apart. How long that is depends on the file system: two ticks of the
//! kernel's coarse clock where it keeps nanoseconds (ext4, xfs, btrfs), two seconds where it
//! does not or where that cannot be told (see [`settle_window`]).

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

/// A directory's entries by the key text they stand for (a directory `a` as `a/`), sorted, with
/// whether each is a directory.
pub(super) type Entries = Arc<[(String, bool)]>;

/// Smaller directories are read again for each page: that costs little.
const MIN_ENTRIES: usize = 1024;
/// Most entries kept, over all directories (some tens of MiB at most).
const MAX_KEPT_ENTRIES: usize = 512 * 1024;
/// How old a directory's last change must be for its entries to be kept, on a file system
/// whose timestamps may be as coarse as a second or two.
const SETTLED_COARSE: Duration = Duration::from_secs(2);
/// The least wait on a file system that keeps nanoseconds, whatever the clock's tick.
const SETTLED_FINE_MIN: Duration = Duration::from_millis(10);

/// What identifies one state of a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &fs::Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

struct Kept {
    stamp: Stamp,
    entries: Entries,
    /// When it was last used, for evicting the least recently used.
    used: u64,
}

/// Sorted entries of the large directories listed lately.
pub(super) struct DirCache {
    kept: Mutex<(HashMap<PathBuf, Kept>, u64)>,
    /// How old a directory's last change must be for its entries to be kept.
    settled: Duration,
}

/// How long after a change the file system's timestamps surely tell a later change apart, for
/// files under `probe_dir`. A file's times are the kernel's coarse clock (one tick, a few
/// milliseconds), cut to what the file system keeps: a time with nanoseconds is set on a probe
/// file and read back, and only if they survive is the wait two ticks rather than two seconds.
pub(super) fn settle_window(probe_dir: &Path) -> Duration {
    let probe = probe_dir.join(format!(".timestamps-{}", super::durable::random_hex(8)));
    let set = SystemTime::UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
    let kept = fs::File::create(&probe)
        .and_then(|file| {
            file.set_modified(set)?;
            file.metadata()?.modified()
        })
        .ok();
    let _ = fs::remove_file(&probe);
    if kept != Some(set) {
        return SETTLED_COARSE;
    }
    let tick = rustix::time::clock_getres(rustix::time::ClockId::RealtimeCoarse);
    let tick = Duration::try_from(tick).unwrap_or(SETTLED_COARSE);
    (tick * 2).clamp(SETTLED_FINE_MIN, SETTLED_COARSE)
}

impl DirCache {
    /// A cache that keeps a directory's entries once its last change is `settled` old.
    pub(super) fn new(settled: Duration) -> Self {
        Self { kept: Mutex::default(), settled }
    }

    /// The entries of `dir`, from memory when it has not changed since they were read; `None`
    /// when it does not exist (removed while listing).
    pub(super) fn entries(&self, dir: &Path) -> io::Result<Option<Entries>> {
        let meta = match fs::symlink_metadata(dir) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let stamp = Stamp::of(&meta);
        {
            let mut guard = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
            let (kept, clock) = &mut *guard;
            *clock += 1;
            if let Some(hit) = kept.get_mut(dir).filter(|k| k.stamp == stamp) {
                hit.used = *clock;
                return Ok(Some(hit.entries.clone()));
            }
        }
        // Read after the stamp was taken: a change in between gives a new stamp next time.
        let Some(entries) = read_sorted(dir)? else { return Ok(None) };
        let settled = meta
            .modified()
            .ok()
            .and_then(|m| SystemTime::now().duration_since(m).ok())
            .is_some_and(|age| age >= self.settled);
        if entries.len() >= MIN_ENTRIES && settled {
            self.keep(dir, stamp, entries.clone());
        }
        Ok(Some(entries))
    }

    fn keep(&self, dir: &Path, stamp: Stamp, entries: Entries) {
        let mut guard = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let (kept, clock) = &mut *guard;
        kept.insert(dir.to_owned(), Kept { stamp, entries, used: *clock });
        while kept.values().map(|k| k.entries.len()).sum::<usize>() > MAX_KEPT_ENTRIES {
            let Some(oldest) = kept.iter().min_by_key(|(_, k)| k.used).map(|(p, _)| p.clone())
            else {
                break;
            };
            kept.remove(&oldest);
        }
    }
}

/// Reads and sorts `dir`'s entries; `None` when it does not exist. Entries whose names are not
/// UTF-8 cannot be keys; symlinks and special files are never objects.
fn read_sorted(dir: &Path) -> io::Result<Option<Entries>> {
    let read = match fs::read_dir(dir) {
        Ok(read) => read,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut entries = Vec::new();
    for entry in read {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else { continue };
        let file_type = entry.file_type()?;
        if file_type.is_dir() {
            entries.push((format!("{name}/"), true));
        } else if file_type.is_file() {
            entries.push((name, false));
        }
    }
    entries.sort_unstable();
    Ok(Some(entries.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_entries_follow_every_change_of_the_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        fs::create_dir(&dir).unwrap();
        for i in 0..MIN_ENTRIES {
            fs::write(dir.join(format!("{i:05}")), b"").unwrap();
        }
        fs::create_dir(dir.join("sub")).unwrap();
        // Settled long ago, so that the entries are kept.
        let old = SystemTime::now() - Duration::from_secs(60);
        fs::File::open(&dir).unwrap().set_modified(old).unwrap();
        let cache = DirCache::new(SETTLED_COARSE);
        let first = cache.entries(&dir).unwrap().unwrap();
        assert_eq!(first.len(), MIN_ENTRIES + 1);
        assert_eq!(first.last().unwrap(), &("sub/".to_owned(), true));
        assert!(Arc::ptr_eq(&first, &cache.entries(&dir).unwrap().unwrap()), "kept");

        // A file added behind the cache's back is seen, however close in time.
        fs::write(dir.join("new"), b"").unwrap();
        let after = cache.entries(&dir).unwrap().unwrap();
        assert!(after.iter().any(|(name, _)| name == "new"));
        // Just changed: read, not kept, so that a change in the same tick is not missed.
        fs::write(dir.join("newer"), b"").unwrap();
        assert!(cache.entries(&dir).unwrap().unwrap().iter().any(|(name, _)| name == "newer"));

        fs::remove_dir_all(&dir).unwrap();
        assert!(cache.entries(&dir).unwrap().is_none());
    }

    #[test]
    fn a_file_system_that_keeps_nanoseconds_settles_within_ticks() {
        let tmp = tempfile::tempdir().unwrap();
        let window = settle_window(tmp.path());
        // The machines this runs on keep nanoseconds (ext4, xfs, btrfs, tmpfs).
        assert!(window >= SETTLED_FINE_MIN && window < SETTLED_COARSE, "{window:?}");
        assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 0, "the probe is removed");
        // Where nanoseconds are not kept, or the probe cannot be made, two seconds.
        assert_eq!(settle_window(&tmp.path().join("missing")), SETTLED_COARSE);

        // A listing just after a burst of writes keeps the entries once the window is over,
        // so that its later pages cost what they return.
        let dir = tmp.path().join("d");
        fs::create_dir(&dir).unwrap();
        for i in 0..MIN_ENTRIES {
            fs::write(dir.join(format!("{i:05}")), b"").unwrap();
        }
        std::thread::sleep(window);
        let cache = DirCache::new(window);
        let first = cache.entries(&dir).unwrap().unwrap();
        assert!(Arc::ptr_eq(&first, &cache.entries(&dir).unwrap().unwrap()), "kept");
    }
}
