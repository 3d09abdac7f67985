//! Multipart uploads: parts are files in the upload's directory, concatenated on completion.
//!
//! A part is stored as `<number:05>.<etag>`, so a single rename publishes its data and ETag
//! together; uploading the same part number again replaces it.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::fs::{self, File};
use std::io;
use std::path::PathBuf;
use std::time::SystemTime;

use bytes::Bytes;
use futures::Stream;
use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};

use super::{
    BucketStore, ObjectAttrs, ObjectInfo, PutCheck, StoreError, fsync_dir, parse_key, random_hex,
    remove_tree, unix_now, write_atomic,
};

/// S3's smallest part size, for every part but the last.
pub const MIN_PART_SIZE: u64 = 5 * 1024 * 1024;
/// S3's highest part number.
pub const MAX_PART_NUMBER: i32 = 10_000;

const UPLOAD_FILE: &str = "upload.json";

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
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct UploadFile {
    key: String,
    attrs: ObjectAttrs,
    initiated_unix: u64,
}

impl BucketStore {
    fn upload_dir(&self, bucket: &str, upload_id: &str) -> Result<PathBuf, StoreError> {
        // The id becomes a directory name: only ids this store could have made are accepted.
        if upload_id.len() != 32 || !upload_id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(StoreError::NoSuchUpload(upload_id.to_owned()));
        }
        Ok(self.inner.state_dir().join("uploads").join(bucket).join(upload_id))
    }

    fn load_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> Result<(PathBuf, UploadFile), StoreError> {
        self.bucket_dir(bucket)?;
        let dir = self.upload_dir(bucket, upload_id)?;
        let no_such = || StoreError::NoSuchUpload(upload_id.to_owned());
        let bytes = match fs::read(dir.join(UPLOAD_FILE)) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(no_such()),
            Err(e) => return Err(e.into()),
        };
        let upload: UploadFile = serde_json::from_slice(&bytes).map_err(|_| no_such())?;
        if upload.key != key {
            return Err(no_such());
        }
        Ok((dir, upload))
    }

    /// Starts a multipart upload of `key`; returns its upload id.
    pub async fn create_upload(
        &self,
        bucket: &str,
        key: &str,
        attrs: ObjectAttrs,
    ) -> Result<String, StoreError> {
        if parse_key(key)?.dir_marker {
            return Err(StoreError::InvalidArgument(
                "an object whose key ends with '/' must be empty".into(),
            ));
        }
        let (bucket, key) = (bucket.to_owned(), key.to_owned());
        self.blocking(move |store| {
            store.bucket_dir(&bucket)?;
            let id = random_hex(16);
            let dir = store.upload_dir(&bucket, &id)?;
            fs::create_dir_all(&dir)?;
            let upload = UploadFile { key, attrs, initiated_unix: unix_now() };
            let bytes = serde_json::to_vec(&upload).map_err(io::Error::other)?;
            write_atomic(&dir.join(UPLOAD_FILE), &bytes, 0o600)?;
            Ok(id)
        })
        .await
    }

    /// Receives part `part_number`, streamed to disk; returns its ETag (hex MD5).
    pub async fn upload_part<S, E>(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        part_number: i32,
        body: S,
        check: PutCheck,
    ) -> Result<String, StoreError>
    where
        S: Stream<Item = Result<Bytes, E>> + Send + Unpin,
        E: Display,
    {
        if !(1..=MAX_PART_NUMBER).contains(&part_number) {
            return Err(StoreError::InvalidArgument(format!(
                "part number must be between 1 and {MAX_PART_NUMBER}"
            )));
        }
        let args = (bucket.to_owned(), key.to_owned(), upload_id.to_owned());
        let (dir, _) = {
            let (bucket, key, upload_id) = args.clone();
            self.blocking(move |store| store.load_upload(&bucket, &key, &upload_id)).await?
        };
        let (temp, md5) = self.receive(body, check).await?;
        let etag = hex::encode(md5);
        let upload_id = args.2;
        self.blocking(move |_| {
            let number = format!("{part_number:05}.");
            let target = dir.join(format!("{number}{etag}"));
            match temp.rename_to(&target) {
                Ok(()) => {}
                // Aborted while the part was on its way.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(StoreError::NoSuchUpload(upload_id));
                }
                Err(e) => return Err(e.into()),
            }
            for entry in fs::read_dir(&dir)? {
                let entry = entry?;
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if name.starts_with(&number) && entry.path() != target {
                    let _ = fs::remove_file(entry.path());
                }
            }
            fsync_dir(&dir)?;
            Ok(etag)
        })
        .await
    }

    /// The parts received so far, by part number.
    pub async fn list_parts(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> Result<Vec<PartInfo>, StoreError> {
        let args = (bucket.to_owned(), key.to_owned(), upload_id.to_owned());
        self.blocking(move |store| {
            let (dir, _) = store.load_upload(&args.0, &args.1, &args.2)?;
            Ok(read_parts(&dir)?.into_values().collect())
        })
        .await
    }

    /// Assembles the listed parts into `key` (streamed file to file) and ends the upload. The
    /// ETag is the MD5 of the parts' binary MD5s, a dash and the number of parts.
    pub async fn complete_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: Vec<(u32, String)>,
    ) -> Result<ObjectInfo, StoreError> {
        let args = (bucket.to_owned(), key.to_owned(), upload_id.to_owned());
        self.blocking(move |store| {
            let (bucket, key, upload_id) = args;
            let (dir, upload) = store.load_upload(&bucket, &key, &upload_id)?;
            if parts.is_empty() {
                return Err(StoreError::InvalidArgument("at least one part is required".into()));
            }
            if parts.windows(2).any(|w| w[0].0 >= w[1].0) {
                return Err(StoreError::InvalidPartOrder);
            }
            let stored = read_parts(&dir)?;
            let mut chosen = Vec::with_capacity(parts.len());
            for (i, (number, etag)) in parts.iter().enumerate() {
                let part = stored
                    .get(number)
                    .filter(|p| p.etag == etag.trim_matches('"'))
                    .ok_or_else(|| {
                        StoreError::InvalidPart(format!("part {number} with ETag {etag} not found"))
                    })?;
                if i + 1 < parts.len() && part.size < MIN_PART_SIZE {
                    return Err(StoreError::EntityTooSmall(*number));
                }
                chosen.push(part);
            }
            let (temp, mut out) = store.temp_file()?;
            let mut digests = Md5::new();
            for part in &chosen {
                let mut src =
                    File::open(dir.join(format!("{:05}.{}", part.part_number, part.etag)))?;
                // Kernel-side copy where the platform allows it; never the whole part in memory.
                io::copy(&mut src, &mut out)?;
                digests.update(hex::decode(&part.etag).map_err(io::Error::other)?);
            }
            out.sync_all()?;
            drop(out);
            let etag = format!("{}-{}", hex::encode(digests.finalize()), chosen.len());
            let count = u32::try_from(chosen.len()).unwrap_or(u32::MAX);
            let info = store.commit(&bucket, &key, temp, etag, upload.attrs, Some(count))?;
            remove_tree(&dir)?;
            Ok(info)
        })
        .await
    }

    /// Abandons an upload and its parts.
    pub async fn abort_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> Result<(), StoreError> {
        let args = (bucket.to_owned(), key.to_owned(), upload_id.to_owned());
        self.blocking(move |store| {
            let (dir, _) = store.load_upload(&args.0, &args.1, &args.2)?;
            remove_tree(&dir)?;
            Ok(())
        })
        .await
    }
}

/// Parts in an upload directory by number; of two files for one number (a crash while
/// replacing it), the newer wins.
fn read_parts(dir: &std::path::Path) -> io::Result<BTreeMap<u32, PartInfo>> {
    let mut parts: BTreeMap<u32, PartInfo> = BTreeMap::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else { continue };
        let Some((number, etag)) = name.split_once('.') else { continue };
        let Ok(part_number) = number.parse::<u32>() else { continue };
        let meta = entry.metadata()?;
        if !meta.is_file() {
            continue;
        }
        let part = PartInfo {
            part_number,
            etag: etag.to_owned(),
            size: meta.len(),
            last_modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
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
