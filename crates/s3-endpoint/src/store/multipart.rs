//! Multipart uploads: parts are files in the upload's directory (see [`super::parts`]),
//! concatenated on completion.

use std::fmt::Display;
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::Stream;
use md5::{Digest, Md5};

use super::attached::DataFile;
use super::checksum::{self, Checksum, ChecksumAlgorithm, ChecksumType, Hasher};
use super::durable::{
    create_dir_all_durably, entries_of, random_hex, remove_tree, unix_now, write_atomic,
};
use super::object_meta::{CopySourceCheck, NewObject, Received};
use super::objects::COPY_BUF;
use super::parts::{PartInfo, checked_part_number, part_bytes, part_file_name, read_parts};
use super::temp::Spooled;
use super::upload_file::{UPLOAD_FILE, UploadFile, read_upload_file};
use super::usage_change::{Change, Writer};
use super::{
    BucketStore, ChecksumCheck, ExpectedChecksum, ObjectAttrs, ObjectInfo, PutCheck, StoreError,
    WriteCondition, validate_key,
};

/// S3's smallest part size, for every part but the last.
pub const MIN_PART_SIZE: u64 = 5 * 1024 * 1024;
/// A multipart upload in progress, as ListMultipartUploads shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadInfo {
    /// The key it will create.
    pub key: String,
    /// Its id.
    pub upload_id: String,
    /// When it was started.
    pub initiated: SystemTime,
    /// The checksum algorithm its parts carry, if any.
    pub checksum_algorithm: Option<ChecksumAlgorithm>,
    /// The kind of checksum the completed object gets.
    pub checksum_type: Option<ChecksumType>,
}

/// A part named in CompleteMultipartUpload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompletedPartSpec {
    /// Its number.
    pub number: u32,
    /// The ETag the client got for it (quotes allowed).
    pub etag: String,
    /// The checksum the client got for it, if it names one.
    pub checksum: Option<(ChecksumAlgorithm, String)>,
}

/// How a multipart upload is completed.
#[derive(Debug, Default)]
pub struct CompleteRequest {
    /// The parts, in ascending order.
    pub parts: Vec<CompletedPartSpec>,
    /// The whole object's checksum the client expects, if it sent one.
    pub checksum: Option<(ChecksumAlgorithm, String)>,
    /// Only complete if this holds for the object currently at the key.
    pub condition: Option<WriteCondition>,
}

impl BucketStore {
    fn upload_dir(&self, bucket: &str, upload_id: &str) -> Result<PathBuf, StoreError> {
        // The id becomes a directory name: only ids this store could have made are accepted.
        if !is_upload_id(upload_id) {
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
        let upload = read_upload_file(&dir)?.ok_or_else(no_such)?;
        if upload.key != key {
            return Err(no_such());
        }
        Ok((dir, upload))
    }

    /// Starts a multipart upload of `key` for `writer`; returns its upload id. With a checksum
    /// algorithm, every part gets that checksum and the object a composite or whole-object one.
    pub async fn create_upload(
        &self,
        bucket: &str,
        key: &str,
        attrs: ObjectAttrs,
        checksum: Option<(ChecksumAlgorithm, ChecksumType)>,
        writer: &Writer,
    ) -> Result<String, StoreError> {
        validate_key(key)?;
        if let Some((algorithm, ChecksumType::FullObject)) = checksum
            && !algorithm.is_crc()
        {
            return Err(StoreError::InvalidRequest(format!(
                "The FULL_OBJECT checksum type cannot be used with the {algorithm} algorithm."
            )));
        }
        let (bucket, key) = (bucket.to_owned(), key.to_owned());
        let writer = writer.user().map(str::to_owned);
        self.blocking(move |store| {
            store.bucket_dir(&bucket)?;
            let id = random_hex(16);
            let dir = store.upload_dir(&bucket, &id)?;
            create_dir_all_durably(&dir)?;
            let upload = UploadFile {
                key,
                attrs,
                initiated_unix: unix_now(),
                checksum_algorithm: checksum.map(|(a, _)| a),
                checksum_type: checksum.map(|(_, t)| t),
                writer,
            };
            let bytes = serde_json::to_vec(&upload).map_err(io::Error::other)?;
            write_atomic(&dir.join(UPLOAD_FILE), &bytes, 0o600)?;
            Ok(id)
        })
        .await
    }

    /// Receives part `part_number` for `writer`, streamed to disk and verified; returns its
    /// info. A declared length the quotas cannot take is refused before the body is read.
    #[allow(clippy::too_many_arguments)]
    pub async fn upload_part<S, E>(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        part_number: i32,
        body: S,
        mut check: PutCheck,
        writer: &Writer,
    ) -> Result<PartInfo, StoreError>
    where
        S: Stream<Item = Result<Bytes, E>> + Send + Unpin,
        E: Display,
    {
        let number = checked_part_number(part_number)?;
        let (dir, upload) = {
            let args = (bucket.to_owned(), key.to_owned(), upload_id.to_owned(), writer.clone());
            let length = check.length;
            self.blocking(move |store| {
                let (dir, upload) = store.load_upload(&args.0, &args.1, &args.2)?;
                if let Some(length) = length {
                    store.precheck_part(&args.0, &dir, number, &upload, &args.3, length)?;
                }
                Ok((dir, upload))
            })
            .await?
        };
        match (&check.checksum, upload.checksum_algorithm) {
            (Some(sent), Some(wanted)) if sent.algorithm != wanted => {
                return Err(StoreError::InvalidRequest(format!(
                    "Checksum Type mismatch occurred, expected checksum Type: {}, actual \
                     checksum Type: {}",
                    wanted.name().to_ascii_lowercase(),
                    sent.algorithm.name().to_ascii_lowercase()
                )));
            }
            // The upload's algorithm is kept for every part, sent or not.
            (None, Some(wanted)) => {
                check.checksum =
                    Some(ChecksumCheck { algorithm: wanted, expected: ExpectedChecksum::Compute });
            }
            _ => {}
        }
        let received = self.receive(body, check).await?;
        let (bucket, upload_id, writer) = (bucket.to_owned(), upload_id.to_owned(), writer.clone());
        self.blocking(move |store| {
            store.publish_part(&bucket, &dir, &upload_id, number, received, &upload, &writer)
        })
        .await
    }

    /// Copies `range` (start, end exclusive) of an existing object, or all of it, into part
    /// `part_number` (UploadPartCopy) for `writer`: the version `source_check` names, or the
    /// newest.
    #[allow(clippy::too_many_arguments)]
    pub async fn upload_part_copy(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        part_number: i32,
        source: (&str, &str),
        range: Option<(u64, u64)>,
        source_check: CopySourceCheck,
        writer: &Writer,
    ) -> Result<PartInfo, StoreError> {
        let number = checked_part_number(part_number)?;
        let args = (
            bucket.to_owned(),
            key.to_owned(),
            upload_id.to_owned(),
            source.0.to_owned(),
            source.1.to_owned(),
        );
        let writer = writer.clone();
        self.blocking(move |store| {
            let (bucket, key, upload_id, src_bucket, src_key) = args;
            let (dir, upload) = store.load_upload(&bucket, &key, &upload_id)?;
            let source_version = source_check.version_id.as_deref();
            let (info, file) = store.open_current(&src_bucket, &src_key, source_version)?;
            (source_check.check)(&info)?;
            let (start, end) = match range {
                Some((start, end)) if start < end && end <= info.size => (start, end),
                Some(_) => {
                    return Err(StoreError::InvalidRange(format!(
                        "the range is not satisfiable for a source of {} bytes",
                        info.size
                    )));
                }
                None => (0, info.size),
            };
            store.precheck_part(&bucket, &dir, number, &upload, &writer, end - start)?;
            let (temp, mut out) = store.temp_file()?;
            let mut md5 = Md5::new();
            let mut extra = upload.checksum_algorithm.map(Hasher::new);
            if let Some(mut src) = file {
                src.seek(io::SeekFrom::Start(start))?;
                let mut src = src.take(end - start);
                let mut buf = vec![0u8; COPY_BUF];
                loop {
                    let n = src.read(&mut buf)?;
                    if n == 0 {
                        break;
                    }
                    md5.update(&buf[..n]);
                    if let Some(extra) = &mut extra {
                        extra.update(&buf[..n]);
                    }
                    out.write_all(&buf[..n])?;
                }
            }
            let checksum =
                upload.checksum_algorithm.zip(extra).map(|(algorithm, extra)| Checksum {
                    algorithm,
                    value: checksum::encode(&extra.finalize()),
                    kind: ChecksumType::FullObject,
                });
            let received = Received {
                body: Spooled::File(temp, out),
                md5: md5.finalize().into(),
                size: end - start,
                checksum,
            };
            store.publish_part(&bucket, &dir, &upload_id, number, received, &upload, &writer)
        })
        .await
    }

    /// The parts received so far, by part number.
    pub async fn list_parts(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> Result<(UploadInfo, Vec<PartInfo>), StoreError> {
        let args = (bucket.to_owned(), key.to_owned(), upload_id.to_owned());
        self.blocking(move |store| {
            let (dir, upload) = store.load_upload(&args.0, &args.1, &args.2)?;
            let parts = read_parts(&dir)?.into_values().collect();
            Ok((upload_info(args.2, upload), parts))
        })
        .await
    }

    /// The uploads in progress in `bucket`, ordered by key, then by start time.
    pub async fn list_uploads(&self, bucket: &str) -> Result<Vec<UploadInfo>, StoreError> {
        let bucket = bucket.to_owned();
        self.blocking(move |store| store.list_uploads_blocking(&bucket)).await
    }

    pub(super) fn list_uploads_blocking(
        &self,
        bucket: &str,
    ) -> Result<Vec<UploadInfo>, StoreError> {
        self.bucket_dir(bucket)?;
        let dir = self.inner.state_dir().join("uploads").join(bucket);
        let mut uploads = Vec::new();
        for entry in entries_of(&dir)? {
            let entry = entry?;
            let Ok(id) = entry.file_name().into_string() else { continue };
            if !is_upload_id(&id) {
                continue;
            }
            // Completed or aborted meanwhile: simply not listed.
            if let Some(upload) = read_upload_file(&entry.path())? {
                uploads.push(upload_info(id, upload));
            }
        }
        uploads.sort_by(|a, b| {
            (&a.key, a.initiated, &a.upload_id).cmp(&(&b.key, b.initiated, &b.upload_id))
        });
        Ok(uploads)
    }

    /// Assembles the listed parts into `key` (streamed file to file) and ends the upload. The
    /// ETag is the MD5 of the parts' binary MD5s, a dash and the number of parts.
    ///
    /// Completing an upload again after it succeeded answers with the object it made, as long
    /// as that object is still in place. The object counts for whoever started the upload, in
    /// place of its parts; `writer` is who asks.
    pub async fn complete_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: CompleteRequest,
        writer: &Writer,
    ) -> Result<ObjectInfo, StoreError> {
        let args = (bucket.to_owned(), key.to_owned(), upload_id.to_owned());
        let writer = writer.clone();
        self.blocking(move |store| {
            let (bucket, key, upload_id) = args;
            // No part may come or go while what the parts take is handed to the object.
            let _upload = store.upload_lock(&bucket, &upload_id);
            let (dir, upload) = match store.load_upload(&bucket, &key, &upload_id) {
                Ok(found) => found,
                Err(StoreError::NoSuchUpload(id)) => {
                    return match store.completed_by(&bucket, &key, &upload_id) {
                        Some(info) => Ok(info),
                        None => Err(StoreError::NoSuchUpload(id)),
                    };
                }
                Err(e) => return Err(e),
            };
            // A part number listed twice (a part re-sent while the first send was still on
            // its way) means its last upload, which is the one stored.
            let mut parts: Vec<CompletedPartSpec> = Vec::with_capacity(request.parts.len());
            for spec in request.parts {
                match parts.last_mut() {
                    Some(last) if last.number == spec.number => *last = spec,
                    _ => parts.push(spec),
                }
            }
            if parts.is_empty() {
                return Err(StoreError::MalformedXml(
                    "The XML you provided was not well-formed or did not validate against our \
                     published schema"
                        .into(),
                ));
            }
            if parts.windows(2).any(|w| w[0].number >= w[1].number) {
                return Err(StoreError::InvalidPartOrder);
            }
            let stored = read_parts(&dir)?;
            let mut chosen = Vec::with_capacity(parts.len());
            for (i, spec) in parts.iter().enumerate() {
                let not_found = || {
                    StoreError::InvalidPart(format!(
                        "part {} with ETag {} not found",
                        spec.number, spec.etag
                    ))
                };
                let part = stored
                    .get(&spec.number)
                    .filter(|p| p.etag == spec.etag.trim().trim_matches('"'))
                    .ok_or_else(not_found)?;
                if let Some((algorithm, value)) = &spec.checksum {
                    let same = part.checksum.as_ref().is_some_and(|c| {
                        c.algorithm == *algorithm
                            && algorithm.decode(&c.value) == algorithm.decode(value)
                    });
                    if !same {
                        return Err(StoreError::InvalidPart(format!(
                            "part {} does not have the {algorithm} checksum {value}",
                            spec.number
                        )));
                    }
                }
                if i + 1 < parts.len() && part.size < MIN_PART_SIZE {
                    return Err(StoreError::EntityTooSmall(spec.number));
                }
                chosen.push(part);
            }
            let checksum = object_checksum(&upload, &chosen, request.checksum.as_ref())?;
            // The object counts in place of every part of the upload, chosen or not.
            let parts = Change::resize(upload.writer.as_deref(), 0, part_bytes(&dir)?);
            let size = chosen.iter().map(|p| p.size).sum();
            let bucket_dir = store.bucket_dir(&bucket)?;
            let counts_for = upload.writer.as_deref();
            store.precheck(&bucket, &bucket_dir, &key, size, counts_for, parts.clone(), &writer)?;
            let (temp, mut out) = store.temp_file()?;
            let mut digests = Md5::new();
            for part in &chosen {
                let mut src = File::open(dir.join(part_file_name(part)))?;
                // Kernel-side copy where the platform allows it; never the whole part in memory.
                io::copy(&mut src, &mut out)?;
                digests.update(hex::decode(&part.etag).map_err(io::Error::other)?);
            }
            let object = NewObject {
                etag: format!("{}-{}", hex::encode(digests.finalize()), chosen.len()),
                attrs: upload.attrs,
                checksum,
                part_sizes: chosen.iter().map(|p| p.size).collect(),
                part_checksums: chosen
                    .iter()
                    .filter_map(|p| p.checksum.as_ref().map(|c| c.value.clone()))
                    .collect(),
                upload_id: Some(upload_id),
                also: parts,
                writer: upload.writer,
            };
            let condition = request.condition.as_ref();
            let info = store.commit(&bucket, &key, (temp, out), object, condition, &writer)?;
            // Counted as gone with the commit: if they stay, the next start counts again.
            if let Err(e) = remove_tree(&dir) {
                store.meter(&bucket)?.taint();
                return Err(e.into());
            }
            Ok(info)
        })
        .await
    }

    /// The object at `key` if the upload `upload_id` made it and it was not replaced since.
    fn completed_by(&self, bucket: &str, key: &str, upload_id: &str) -> Option<ObjectInfo> {
        let (info, file) = self.open_blocking(bucket, key).ok()?;
        let file = file?;
        let data = file.metadata().ok()?;
        let meta = self.object_meta(bucket, key, DataFile::Open(&file), &data)?;
        (meta.upload_id.as_deref() == Some(upload_id)).then_some(info)
    }

    /// Abandons an upload and its parts.
    pub async fn abort_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> Result<(), StoreError> {
        let args = (bucket.to_owned(), key.to_owned(), upload_id.to_owned());
        self.blocking(move |store| store.abort_blocking(&args.0, &args.1, &args.2)).await
    }

    /// [`BucketStore::abort_upload`], off the async threads: what its parts take is freed in
    /// the bucket's usage once they are gone.
    pub(super) fn abort_blocking(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> Result<(), StoreError> {
        let _upload = self.upload_lock(bucket, upload_id);
        let (dir, upload) = self.load_upload(bucket, key, upload_id)?;
        let freed = Change::resize(upload.writer.as_deref(), 0, part_bytes(&dir)?);
        let ticket = self.meter(bucket)?.begin(freed, &Writer::Operator)?;
        match remove_tree(&dir) {
            Ok(()) => ticket.applied(),
            Err(e) => {
                ticket.uncertain();
                return Err(e.into());
            }
        }
        Ok(())
    }

    /// Who started each multipart upload of `bucket`, and what its parts take, for counting the
    /// bucket's usage.
    pub(super) fn upload_parts(
        &self,
        bucket: &str,
    ) -> Result<Vec<(Option<String>, u64)>, StoreError> {
        let dir = self.inner.state_dir().join("uploads").join(bucket);
        let mut uploads = Vec::new();
        for entry in entries_of(&dir)? {
            let path = entry?.path();
            // An upload whose file is gone is not one (a crash while it was removed), but its
            // parts still take their bytes.
            let writer = read_upload_file(&path)?.and_then(|u| u.writer);
            uploads.push((writer, part_bytes(&path)?));
        }
        Ok(uploads)
    }
}

fn is_upload_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

fn upload_info(upload_id: String, upload: UploadFile) -> UploadInfo {
    UploadInfo {
        key: upload.key,
        upload_id,
        initiated: UNIX_EPOCH + Duration::from_secs(upload.initiated_unix),
        checksum_algorithm: upload.checksum_algorithm,
        checksum_type: upload.checksum_type,
    }
}

/// The whole object's checksum from its parts', checked against the client's if it sent one.
fn object_checksum(
    upload: &UploadFile,
    parts: &[&PartInfo],
    sent: Option<&(ChecksumAlgorithm, String)>,
) -> Result<Option<Checksum>, StoreError> {
    let Some(algorithm) = upload.checksum_algorithm else {
        return Ok(None);
    };
    let mut raws = Vec::with_capacity(parts.len());
    for part in parts {
        let raw = part
            .checksum
            .as_ref()
            .filter(|c| c.algorithm == algorithm)
            .and_then(|c| algorithm.decode(&c.value))
            .ok_or_else(|| {
                StoreError::InvalidPart(format!(
                    "part {} has no {algorithm} checksum",
                    part.part_number
                ))
            })?;
        raws.push((raw, part.size));
    }
    let kind = upload.checksum_type.unwrap_or(if algorithm == ChecksumAlgorithm::Crc64Nvme {
        ChecksumType::FullObject
    } else {
        ChecksumType::Composite
    });
    let value = match kind {
        ChecksumType::FullObject => {
            let whole = checksum::combine_crcs(algorithm, &raws).ok_or_else(|| {
                StoreError::InvalidRequest(format!(
                    "{algorithm} cannot make a FULL_OBJECT checksum"
                ))
            })?;
            checksum::encode(&whole)
        }
        ChecksumType::Composite => {
            let raws: Vec<Vec<u8>> = raws.into_iter().map(|(raw, _)| raw).collect();
            checksum::composite(algorithm, &raws)
        }
    };
    if let Some((sent_algorithm, sent_value)) = sent {
        let ours = value.split('-').next().unwrap_or_default();
        let theirs = sent_value.split('-').next().unwrap_or_default();
        if *sent_algorithm != algorithm || algorithm.decode(ours) != algorithm.decode(theirs) {
            return Err(StoreError::BadChecksum(*sent_algorithm));
        }
    }
    Ok(Some(Checksum { algorithm, value, kind }))
}
