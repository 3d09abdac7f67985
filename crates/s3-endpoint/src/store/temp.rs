//! Temporary files under `.provisioner/tmp`, where a body waits until it is put in place, and
//! the body of a write as received: in memory when small, else in such a file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::durable::random_hex;
use super::{BucketStore, StoreError};

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

/// Directory of the temporary files under the state directory.
pub(super) const TEMP_DIR: &str = "tmp";

/// Temporary files are spread over this many directories of `.provisioner/tmp`, named `00` to
/// `3f`. Creating a file holds its directory's lock while the file system finds an inode; with
/// one directory, concurrent PUTs queued there (measured: 16 writers made 3.5 times the system
/// CPU per PUT with one directory than with 64).
pub(super) const TEMP_SHARDS: u8 = 64;

/// Temporary directory number `shard`.
fn temp_shard(state_dir: &Path, shard: u8) -> PathBuf {
    state_dir.join(TEMP_DIR).join(format!("{shard:02x}"))
}

/// The temporary directories, for the store to make when it opens.
pub(super) fn temp_shards(state_dir: &Path) -> impl Iterator<Item = PathBuf> + '_ {
    (0..TEMP_SHARDS).map(|shard| temp_shard(state_dir, shard))
}

/// Where a received body waits until it is put in place.
pub(super) enum Spooled {
    /// A body no larger than [`IN_MEMORY`]: written to its file by the same blocking call that
    /// puts it in place, which saves a small PUT two trips to the blocking pool.
    Memory(Vec<u8>),
    /// A larger body, in a temporary file (written, not yet synced).
    File(TempFile, File),
}

/// The largest body kept in memory until it is put in place; a larger one is written to a
/// temporary file as it arrives, by a thread of its own (see `body_writer`), so that memory per
/// upload stays bounded whatever the object's size.
pub(super) const IN_MEMORY: usize = 256 * 1024;

impl BucketStore {
    /// The temporary file holding `body`, written out first if it was kept in memory.
    pub(super) fn spooled_file(&self, body: Spooled) -> Result<(TempFile, File), StoreError> {
        match body {
            Spooled::File(temp, file) => Ok((temp, file)),
            Spooled::Memory(bytes) => {
                let (temp, mut file) = self.temp_file()?;
                file.write_all(&bytes)?;
                Ok((temp, file))
            }
        }
    }

    /// A fresh path for a temporary file, in a directory picked at random.
    pub(super) fn temp_path(&self) -> PathBuf {
        let shard = rand::random::<u8>() % TEMP_SHARDS;
        temp_shard(&self.inner.state_dir(), shard).join(random_hex(16))
    }

    /// A new empty file in `.provisioner/tmp`, on the same file system as the buckets so that
    /// a rename moves it into place atomically.
    pub(super) fn temp_file(&self) -> Result<(TempFile, File), StoreError> {
        let path = self.temp_path();
        let file = OpenOptions::new().write(true).create_new(true).mode(0o644).open(&path)?;
        Ok((TempFile { path, keep: false }, file))
    }

    /// A new file in `.provisioner/tmp` with no name: removed as soon as it is opened, so that
    /// its space comes back when it is closed, even after a crash.
    pub async fn scratch_file(&self) -> Result<File, StoreError> {
        self.blocking(|store| {
            let path = store.temp_path();
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
}
