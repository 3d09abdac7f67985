//! Files that survive a crash: written beside their place, synced, renamed into it, their
//! directory synced; and the names and times written into them.

use std::collections::{BTreeSet, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use rand::Rng;
use serde::Serialize;

use super::StoreError;

/// One record or key file to write (`Some` bytes) or remove (`None`).
pub(super) struct FileChange {
    path: PathBuf,
    bytes: Option<Vec<u8>>,
}

pub(super) fn file_change<T: Serialize>(
    dir: &Path,
    name: &str,
    value: Option<&T>,
) -> Result<FileChange, StoreError> {
    let bytes = value.map(serde_json::to_vec).transpose().map_err(io::Error::other)?;
    Ok(FileChange { path: dir.join(format!("{name}.json")), bytes })
}

/// Makes every change durable with as few syncs as crash safety allows: each new file is written
/// and synced beside its place, then all are renamed (and removals done), then each directory
/// involved is synced once.
pub(super) fn persist_all(files: &[FileChange]) -> Result<(), StoreError> {
    let mut staged = Vec::new();
    let result = (|| {
        for change in files {
            if let Some(bytes) = &change.bytes {
                let tmp = change.path.with_extension(format!("tmp-{}", random_hex(8)));
                staged.push(tmp.clone());
                let mut file =
                    OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
                file.write_all(bytes)?;
                file.sync_all()?;
            }
        }
        let mut tmps = staged.iter();
        let mut dirs = BTreeSet::new();
        for change in files {
            match &change.bytes {
                Some(_) => fs::rename(tmps.next().expect("one per written file"), &change.path)?,
                None => match fs::remove_file(&change.path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                },
            }
            dirs.insert(change.path.parent().unwrap_or(&change.path).to_owned());
        }
        dirs.iter().try_for_each(|dir| fsync_dir(dir))
    })();
    if result.is_err() {
        for tmp in &staged {
            let _ = fs::remove_file(tmp);
        }
    }
    Ok(result?)
}

/// Reads every `*.json` file of `dir`, when the store opens. A `*.tmp-*` file is a write a crash
/// interrupted before its rename: nothing refers to it, but it may hold a key's secret, so it is
/// removed.
pub(super) fn read_all<T: serde::de::DeserializeOwned>(dir: &Path) -> Result<Vec<T>, StoreError> {
    let mut values = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let extension = path.extension().and_then(|e| e.to_str()).unwrap_or_default();
        if extension.starts_with("tmp-") {
            if let Err(e) = fs::remove_file(&path) {
                tracing::warn!(path = %path.display(), error = %e,
                    "could not remove the file of an interrupted write");
            }
            continue;
        }
        if extension != "json" {
            continue;
        }
        let bytes = fs::read(&path)?;
        let value = serde_json::from_slice(&bytes)
            .map_err(|e| StoreError::Corrupt { path: path.clone(), message: e.to_string() })?;
        values.push(value);
    }
    Ok(values)
}

/// Replaces `path` with `bytes` atomically: a temporary file beside it is written, fsynced and
/// renamed over it, then the directory is fsynced so the rename survives a crash.
pub(super) fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let dir = path.parent().ok_or_else(|| io::Error::other("path has no parent"))?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp-{}", random_hex(8)));
    let result = (|| {
        let mut file = OpenOptions::new().write(true).create_new(true).mode(mode).open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        fsync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

pub(super) fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Fails unless `path` is a directory reached without a final symlink.
pub(super) fn ensure_real_dir(path: &Path) -> Result<(), StoreError> {
    let meta = fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Err(StoreError::Symlink(path.display().to_string()));
    }
    if !meta.is_dir() {
        return Err(StoreError::Io(io::Error::other(format!(
            "{} is not a directory",
            path.display()
        ))));
    }
    Ok(())
}

/// Removes a directory tree if present. `remove_dir_all` does not follow symlinks inside it.
pub(super) fn remove_tree(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        // A symlink or file in place of the directory: remove the entry, never its target.
        Ok(_) => fs::remove_file(path),
    }
}

/// The entries of `dir`; a directory that does not exist has none.
pub(super) fn entries_of(dir: &Path) -> io::Result<impl Iterator<Item = io::Result<fs::DirEntry>>> {
    let read = match fs::read_dir(dir) {
        Ok(read) => Some(read),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    Ok(read.into_iter().flatten())
}

/// Makes a bucket's directory (durably) unless it is there.
pub(super) fn make_bucket_dir(path: &Path) -> Result<(), StoreError> {
    match fs::create_dir(path) {
        Ok(()) => fsync_dir(path.parent().unwrap_or(path))?,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e.into()),
    }
    ensure_real_dir(path)
}

/// A random name for temporary files and upload ids.
pub(super) fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::rng().fill(&mut buf[..]);
    hex::encode(buf)
}

pub(super) fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Directories made whose names are not yet synced in their parents.
static UNSYNCED_DIRS: LazyLock<Mutex<HashSet<PathBuf>>> = LazyLock::new(Mutex::default);

fn unsynced() -> std::sync::MutexGuard<'static, HashSet<PathBuf>> {
    UNSYNCED_DIRS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Makes the directory `path` (its parent exists) and syncs its name in its parent, so that
/// whatever is later synced inside it is still reachable after a crash. Fails with
/// `AlreadyExists` when something is there already.
pub(super) fn create_dir_durably(path: &Path) -> io::Result<()> {
    unsynced().insert(path.to_owned());
    let made = fs::create_dir(path).and_then(|()| fsync_dir(path.parent().unwrap_or(path)));
    unsynced().remove(path);
    made
}

/// For a directory found in place: when another writer made it a moment ago and has not synced
/// its name yet, syncs it now rather than rely on a name that a crash could still take away.
pub(super) fn settle_dir(path: &Path) -> io::Result<()> {
    let pending = unsynced().contains(path);
    if pending { fsync_dir(path.parent().unwrap_or(path)) } else { Ok(()) }
}

/// [`create_dir_durably`] for `path` and each missing directory above it, top down.
pub(super) fn create_dir_all_durably(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => return settle_dir(path),
        Ok(_) => return Err(io::Error::other(format!("{} is not a directory", path.display()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    if let Some(parent) = path.parent() {
        create_dir_all_durably(parent)?;
    }
    match create_dir_durably(path) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => settle_dir(path),
        made => made,
    }
}
