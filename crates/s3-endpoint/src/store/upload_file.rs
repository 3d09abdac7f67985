//! The record of a multipart upload in progress, `upload.json` in the upload's directory: the
//! key it will create, its attributes, checksum kind and whose it is.

use std::fs;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::checksum::{ChecksumAlgorithm, ChecksumType};
use super::{ObjectAttrs, StoreError};

/// The record's file name in the upload's directory.
pub(super) const UPLOAD_FILE: &str = "upload.json";

/// What `upload.json` in an upload's directory records of the upload.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct UploadFile {
    pub(super) key: String,
    pub(super) attrs: ObjectAttrs,
    pub(super) initiated_unix: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) checksum_algorithm: Option<ChecksumAlgorithm>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) checksum_type: Option<ChecksumType>,
    /// The claim user that started it: its parts, and the object they make, count for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) writer: Option<String>,
}

/// The record of the upload whose directory is `dir`; `None` when it is gone or unreadable.
pub(super) fn read_upload_file(dir: &Path) -> Result<Option<UploadFile>, StoreError> {
    let bytes = match fs::read(dir.join(UPLOAD_FILE)) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    Ok(serde_json::from_slice(&bytes).ok())
}
