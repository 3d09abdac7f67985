//! The parts of a multipart upload on disk. A part is stored as `<number:05>.<etag>` or, with a
//! checksum, `<number:05>.<etag>.<ALG>-<hex>`, so a single rename publishes its data, ETag and
//! checksum together; uploading the same part number again replaces it.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::checksum::{self, Checksum, ChecksumAlgorithm, ChecksumType};
use super::durable::{entries_of, fsync_dir};
use super::object_meta::Received;
use super::upload_file::{UPLOAD_FILE, UploadFile};
use super::usage_change::{Change, Writer};
use super::{BucketStore, StoreError};

/// S3's highest part number.
pub const MAX_PART_NUMBER: i32 = 10_000;

/// A part received for a multipart upload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartInfo {
    /// 1 to 10000.
    pub part_number: u32,
    /// Hex MD5 of the part, without quotes.
    pub etag: String,
    /// Size in bytes.
    pub size: u64,
    /// When it was received.
    pub last_modified: SystemTime,
    /// Its additional checksum, when one was sent or the upload has an algorithm.
    pub checksum: Option<Checksum>,
}

impl BucketStore {
    /// Refuses ahead of its body a part of `size` that could not fit the quotas as they stand;
    /// publishing it checks again, exactly.
    pub(super) fn precheck_part(
        &self,
        bucket: &str,
        dir: &Path,
        number: u32,
        upload: &UploadFile,
        actor: &Writer,
        size: u64,
    ) -> Result<(), StoreError> {
        let meter = self.meter(bucket)?;
        if !meter.limits(actor) {
            return Ok(());
        }
        let replaced = part_files(dir, number)?;
        let old = replaced.iter().map(|(_, size)| size).sum();
        meter.check(&Change::resize(upload.writer.as_deref(), size, old), actor)
    }

    /// Renames a received part into the upload directory, replacing any earlier part of the
    /// same number, and returns its info. What it adds counts for whoever started the upload,
    /// checked against the quotas for `actor`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn publish_part(
        &self,
        bucket: &str,
        dir: &Path,
        upload_id: &str,
        number: u32,
        received: Received,
        upload: &UploadFile,
        actor: &Writer,
    ) -> Result<PartInfo, StoreError> {
        let Received { body, md5, size, checksum } = received;
        let (temp, file) = self.spooled_file(body)?;
        file.sync_all()?;
        drop(file);
        let _upload = self.upload_lock(bucket, upload_id);
        let replaced = part_files(dir, number)?;
        let old = replaced.iter().map(|(_, size)| size).sum();
        let change = Change::resize(upload.writer.as_deref(), size, old);
        let ticket = self.meter(bucket)?.begin(change, actor)?;
        let mut part = PartInfo {
            part_number: number,
            etag: hex::encode(md5),
            size,
            last_modified: SystemTime::now(),
            checksum,
        };
        let target = dir.join(part_file_name(&part));
        // The directory must still be there: a part of an aborted upload is refused rather
        // than recreating the upload.
        match temp.rename_to(&target) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(StoreError::NoSuchUpload(upload_id.to_owned()));
            }
            Err(e) => return Err(e.into()),
        }
        let cleaned = (|| {
            for (path, _) in replaced.iter().filter(|(path, _)| *path != target) {
                match fs::remove_file(path) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
            fsync_dir(dir)
        })();
        match cleaned {
            Ok(()) => ticket.applied(),
            Err(e) => {
                ticket.uncertain();
                return Err(e.into());
            }
        }
        if let Ok(meta) = fs::metadata(&target)
            && let Ok(modified) = meta.modified()
        {
            part.last_modified = modified;
        }
        Ok(part)
    }
}

/// The files of part `number` in an upload directory (named by the upload id), with their
/// sizes.
pub(super) fn part_files(dir: &Path, number: u32) -> Result<Vec<(PathBuf, u64)>, StoreError> {
    let prefix = format!("{number:05}.");
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let id = dir.file_name().unwrap_or_default().to_string_lossy();
            return Err(StoreError::NoSuchUpload(id.into_owned()));
        }
        Err(e) => return Err(e.into()),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            files.push((entry.path(), entry.metadata()?.len()));
        }
    }
    Ok(files)
}

/// What every part file of an upload directory takes (a missing directory takes nothing).
pub(super) fn part_bytes(dir: &Path) -> Result<u64, StoreError> {
    let mut bytes = 0;
    for entry in entries_of(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        if meta.is_file() && entry.file_name() != UPLOAD_FILE {
            bytes += meta.len();
        }
    }
    Ok(bytes)
}

pub(super) fn checked_part_number(part_number: i32) -> Result<u32, StoreError> {
    u32::try_from(part_number)
        .ok()
        .filter(|n| (1..=MAX_PART_NUMBER.unsigned_abs()).contains(n))
        .ok_or_else(|| {
            StoreError::InvalidArgument(format!(
                "Part number must be an integer between 1 and {MAX_PART_NUMBER}, inclusive"
            ))
        })
}

pub(super) fn part_file_name(part: &PartInfo) -> String {
    let number = part.part_number;
    match &part.checksum {
        Some(c) => match c.algorithm.decode(&c.value) {
            Some(raw) => format!("{number:05}.{}.{}-{}", part.etag, c.algorithm, hex::encode(raw)),
            None => format!("{number:05}.{}", part.etag),
        },
        None => format!("{number:05}.{}", part.etag),
    }
}

/// Parts in an upload directory by number; of two files for one number (a crash while
/// replacing it), the newer wins.
pub(super) fn read_parts(dir: &Path) -> io::Result<BTreeMap<u32, PartInfo>> {
    let mut parts: BTreeMap<u32, PartInfo> = BTreeMap::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else { continue };
        let mut fields = name.split('.');
        let (Some(number), Some(etag)) = (fields.next(), fields.next()) else { continue };
        let Ok(part_number) = number.parse::<u32>() else { continue };
        let checksum = fields.next().and_then(parse_part_checksum);
        let meta = entry.metadata()?;
        if !meta.is_file() {
            continue;
        }
        let part = PartInfo {
            part_number,
            etag: etag.to_owned(),
            size: meta.len(),
            last_modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            checksum,
        };
        match parts.get(&part_number) {
            Some(existing) if existing.last_modified >= part.last_modified => {}
            _ => {
                parts.insert(part_number, part);
            }
        }
    }
    Ok(parts)
}

/// `<ALG>-<hex>` from a part file name.
pub(super) fn parse_part_checksum(field: &str) -> Option<Checksum> {
    let (name, hex_value) = field.split_once('-')?;
    let algorithm = ChecksumAlgorithm::from_name(name)?;
    let raw = hex::decode(hex_value).ok().filter(|r| r.len() == algorithm.raw_len())?;
    Some(Checksum { algorithm, value: checksum::encode(&raw), kind: ChecksumType::FullObject })
}

#[cfg(test)]
mod tests {
    use md5::{Digest, Md5};

    use super::*;

    #[test]
    fn part_names_carry_their_checksum() {
        let tmp = tempfile::tempdir().unwrap();
        let raw = checksum::checksum_of(ChecksumAlgorithm::Crc32c, b"part");
        let part = PartInfo {
            part_number: 7,
            etag: hex::encode(Md5::digest(b"part")),
            size: 4,
            last_modified: SystemTime::now(),
            checksum: Some(Checksum {
                algorithm: ChecksumAlgorithm::Crc32c,
                value: checksum::encode(&raw),
                kind: ChecksumType::FullObject,
            }),
        };
        fs::write(tmp.path().join(part_file_name(&part)), b"part").unwrap();
        fs::write(tmp.path().join("00008.00000000000000000000000000000000"), b"").unwrap();
        let parts = read_parts(tmp.path()).unwrap();
        assert_eq!(parts[&7].checksum, part.checksum);
        assert_eq!(parts[&7].etag, part.etag);
        assert!(parts[&8].checksum.is_none());
    }
}
