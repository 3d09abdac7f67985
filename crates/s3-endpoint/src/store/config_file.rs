//! A bucket configuration kept as one JSON file in the bucket's metadata directory (its CORS
//! rules, its lifecycle rules): read back, replaced atomically and synced, or removed with its
//! directory synced, so that what an answer acknowledged survives a crash.

use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::StoreError;
use super::durable::{create_dir_all_durably, fsync_dir, write_atomic};

/// The configuration at `path`; `None` when the bucket has none.
pub(super) fn read_config<T: DeserializeOwned>(path: PathBuf) -> Result<Option<T>, StoreError> {
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StoreError::Corrupt { path, message: e.to_string() }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Writes `config` to `path` (`Some`) or removes the file (`None`); durable once it returns.
pub(super) fn replace_config<T: Serialize>(
    path: &Path,
    config: Option<&T>,
) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(path);
    match config {
        Some(config) => {
            create_dir_all_durably(dir)?;
            let bytes = serde_json::to_vec(config).map_err(io::Error::other)?;
            write_atomic(path, &bytes, 0o600)?;
        }
        None => match std::fs::remove_file(path) {
            Ok(()) => fsync_dir(dir)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        },
    }
    Ok(())
}
