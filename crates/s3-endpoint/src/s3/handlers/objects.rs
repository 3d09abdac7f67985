//! Object operations: writing, reading, describing, deleting and copying one object.

use std::sync::Arc;

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result, s3_error};

use super::HostPathS3;
use super::tagging::{TAGGING_COUNT, copy_tags, tags_of_header};
use crate::s3::body::ObjectBody;
use crate::s3::convert::*;
use crate::s3::object_lock_rules::{lock_fields, lock_of_headers};
use crate::s3::rules;
use crate::s3::zero_copy::{FileSends, MIN_ZERO_COPY, ZeroCopyBody};
use crate::store::{Checksum, ChecksumType, CopyReplace, ObjectAttrs, ObjectInfo};

impl HostPathS3 {
    pub(super) async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let writer = self.writer_of(&req)?;
        let input = req.input;
        rules::require_private_acl(
            input.acl.as_ref().map(ObjectCannedACL::as_str),
            &[
                input.grant_full_control.as_ref(),
                input.grant_read.as_ref(),
                input.grant_read_acp.as_ref(),
                input.grant_write_acp.as_ref(),
            ],
        )?;
        let mut check = check_of(&req.headers, input.content_length, input.content_md5.as_deref())?;
        check.checksum = rules::checksum_check(
            &req.headers,
            checksum_fields!(input),
            input.checksum_algorithm.as_ref().map(s3s::dto::ChecksumAlgorithm::as_str),
            req.trailing_headers.as_ref(),
        )?;
        check.condition =
            rules::write_condition(input.if_match.as_ref(), input.if_none_match.as_ref())?;
        let lock = lock_of_headers(
            input.object_lock_mode.as_ref(),
            input.object_lock_retain_until_date.as_ref(),
            input.object_lock_legal_hold_status.as_ref(),
        )?;
        self.check_lock_allowed(&input.bucket, &lock, &writer).await?;
        // As S3: bytes to keep for years are checked on the way in.
        if !lock.is_none() && check.md5.is_none() && check.checksum.is_none() {
            return Err(s3_error!(
                InvalidRequest,
                "Content-MD5 OR x-amz-checksum- HTTP header is required for Put Object requests \
                 with Object Lock parameters"
            ));
        }
        let body = body_of(input.body);
        let tags = tags_of_header(input.tagging.as_deref())?;
        let attrs = ObjectAttrs { tags, lock, ..attrs_input!(input).into_attrs() };
        let info = self
            .store
            .put_object(&input.bucket, &input.key, attrs, body, check, &writer)
            .await
            .map_err(s3_err)?;
        let mut output = PutObjectOutput {
            e_tag: Some(etag(&info.etag)),
            size: i64::try_from(info.size).ok(),
            checksum_type: checksum_type_of(info.checksum.as_ref()),
            version_id: written_version_id(&info),
            ..Default::default()
        };
        set_checksum!(output, info.checksum.as_ref());
        output.expiration = self.expiration_of(&input.bucket, &info).await;
        Ok(S3Response::new(output))
    }

    pub(super) async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        let input = req.input;
        let connection = req.extensions.get::<Arc<FileSends>>().cloned();
        let version = input.version_id.as_deref();
        let (info, file) =
            self.store.open_version(&input.bucket, &input.key, version).await.map_err(s3_err)?;
        rules::ReadConditions {
            if_match: input.if_match.as_ref(),
            if_none_match: input.if_none_match.as_ref(),
            if_modified_since: input.if_modified_since.as_ref(),
            if_unmodified_since: input.if_unmodified_since.as_ref(),
        }
        .check_read(&info)?;
        let served = served_part(&info, input.range.as_ref(), input.part_number)?;
        let (start, end) = (served.start, served.end);
        let body = file.map(|file| match connection {
            Some(sends) if end - start >= MIN_ZERO_COPY => {
                StreamingBlob::new(ZeroCopyBody::new(file, start, end, sends))
            }
            _ => StreamingBlob::new(ObjectBody::new(file, start..end)),
        });
        let content_range = served
            .partial
            .then(|| format!("bytes {start}-{}/{}", end.saturating_sub(1), info.size));
        // A checksum describes the whole object (or, with partNumber, a part): never a range.
        let whole = !served.partial || (input.part_number.is_some() && info.part_sizes.len() <= 1);
        let checksum_enabled =
            input.checksum_mode.as_ref().is_some_and(|m| m.as_str() == ChecksumMode::ENABLED);
        let mut output = GetObjectOutput {
            body,
            content_length: i64::try_from(end - start).ok(),
            content_range,
            accept_ranges: Some("bytes".to_owned()),
            e_tag: Some(etag(&info.etag)),
            last_modified: Some(timestamp(info.last_modified)),
            metadata: metadata_of(&info.attrs),
            parts_count: info.parts.and_then(|p| i32::try_from(p).ok()),
            storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
            tag_count: tag_count(&info),
            version_id: info.version_id.clone(),
            ..Default::default()
        };
        (
            output.object_lock_mode,
            output.object_lock_retain_until_date,
            output.object_lock_legal_hold_status,
        ) = lock_fields(&info.attrs.lock);
        set_standard_headers!(output, info.attrs);
        if checksum_enabled && whole {
            output.checksum_type = checksum_type_of(info.checksum.as_ref());
            set_checksum!(output, info.checksum.as_ref());
        } else if checksum_enabled && let Some(part) = part_checksum(&info, input.part_number) {
            // One part of a multipart object: that part's own checksum.
            output.checksum_type = checksum_type_of(Some(&part));
            set_checksum!(output, Some(&part));
        }
        // The response-* query parameters override what the object was stored with.
        if let Some(v) = input.response_content_type {
            output.content_type = Some(v);
        }
        if let Some(v) = input.response_cache_control {
            output.cache_control = Some(v);
        }
        if let Some(v) = input.response_content_disposition {
            output.content_disposition = Some(v);
        }
        if let Some(v) = input.response_content_encoding {
            output.content_encoding = Some(v);
        }
        if let Some(v) = input.response_content_language {
            output.content_language = Some(v);
        }
        if let Some(v) = input.response_expires {
            output.expires = Some(v);
        }
        if version.is_none() {
            output.expiration = self.expiration_of(&input.bucket, &info).await;
        }
        Ok(S3Response::new(output))
    }

    pub(super) async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        let input = req.input;
        let version = input.version_id.as_deref();
        let (info, _) =
            self.store.open_version(&input.bucket, &input.key, version).await.map_err(s3_err)?;
        rules::ReadConditions {
            if_match: input.if_match.as_ref(),
            if_none_match: input.if_none_match.as_ref(),
            if_modified_since: input.if_modified_since.as_ref(),
            if_unmodified_since: input.if_unmodified_since.as_ref(),
        }
        .check_read(&info)?;
        let served = served_part(&info, input.range.as_ref(), input.part_number)?;
        let checksum_enabled =
            input.checksum_mode.as_ref().is_some_and(|m| m.as_str() == ChecksumMode::ENABLED);
        let mut output = HeadObjectOutput {
            content_length: i64::try_from(served.end - served.start).ok(),
            content_range: served.partial.then(|| {
                format!("bytes {}-{}/{}", served.start, served.end.saturating_sub(1), info.size)
            }),
            accept_ranges: Some("bytes".to_owned()),
            e_tag: Some(etag(&info.etag)),
            last_modified: Some(timestamp(info.last_modified)),
            metadata: metadata_of(&info.attrs),
            parts_count: info.parts.and_then(|p| i32::try_from(p).ok()),
            storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
            version_id: info.version_id.clone(),
            ..Default::default()
        };
        (
            output.object_lock_mode,
            output.object_lock_retain_until_date,
            output.object_lock_legal_hold_status,
        ) = lock_fields(&info.attrs.lock);
        set_standard_headers!(output, info.attrs);
        if checksum_enabled && !served.partial {
            output.checksum_type = checksum_type_of(info.checksum.as_ref());
            set_checksum!(output, info.checksum.as_ref());
        } else if checksum_enabled && let Some(part) = part_checksum(&info, input.part_number) {
            output.checksum_type = checksum_type_of(Some(&part));
            set_checksum!(output, Some(&part));
        }
        if version.is_none() {
            output.expiration = self.expiration_of(&input.bucket, &info).await;
        }
        let mut response = S3Response::new(output);
        // HeadObject's output has no field for it; S3 sends it on HEAD as on GET.
        if let Some(count) = tag_count(&info) {
            response.headers.insert(TAGGING_COUNT, http::HeaderValue::from(count));
        }
        Ok(response)
    }

    pub(super) async fn get_object_attributes(
        &self,
        req: S3Request<GetObjectAttributesInput>,
    ) -> S3Result<S3Response<GetObjectAttributesOutput>> {
        let input = req.input;
        let version = input.version_id.as_deref();
        let (info, _) =
            self.store.open_version(&input.bucket, &input.key, version).await.map_err(s3_err)?;
        // One header per attribute, or one comma-separated header as most clients send.
        let wants = |name: &str| {
            input
                .object_attributes
                .iter()
                .flat_map(|a| a.as_str().split(','))
                .any(|a| a.trim() == name)
        };
        let mut output = GetObjectAttributesOutput {
            last_modified: Some(timestamp(info.last_modified)),
            version_id: info.version_id.clone(),
            ..Default::default()
        };
        if wants(ObjectAttributes::ETAG) {
            output.e_tag = Some(etag(&info.etag));
        }
        if wants(ObjectAttributes::OBJECT_SIZE) {
            output.object_size = i64::try_from(info.size).ok();
        }
        if wants(ObjectAttributes::STORAGE_CLASS) {
            output.storage_class = Some(StorageClass::from_static(StorageClass::STANDARD));
        }
        if wants(ObjectAttributes::CHECKSUM)
            && let Some(checksum) = &info.checksum
        {
            let mut out = s3s::dto::Checksum {
                checksum_type: checksum_type_of(Some(checksum)),
                ..Default::default()
            };
            set_checksum!(out, Some(checksum));
            output.checksum = Some(out);
        }
        if wants(ObjectAttributes::OBJECT_PARTS) && !info.part_sizes.is_empty() {
            let marker = input.part_number_marker.unwrap_or(0).max(0);
            let algorithm = info.checksum.as_ref().map(|c| c.algorithm);
            let parts = info.part_sizes.iter().enumerate().filter_map(|(i, size)| {
                let number = i32::try_from(i + 1).ok()?;
                (number > marker).then(|| {
                    let mut part = ObjectPart {
                        part_number: Some(number),
                        size: i64::try_from(*size).ok(),
                        ..Default::default()
                    };
                    if let (Some(algorithm), Some(value)) = (algorithm, info.part_checksums.get(i))
                    {
                        let checksum = Checksum {
                            algorithm,
                            value: value.clone(),
                            kind: ChecksumType::FullObject,
                        };
                        set_checksum!(part, Some(&checksum));
                    }
                    part
                })
            });
            let (page, truncated) = page_of(parts, input.max_parts);
            output.object_parts = Some(GetObjectAttributesParts {
                total_parts_count: i32::try_from(info.part_sizes.len()).ok(),
                part_number_marker: Some(marker),
                next_part_number_marker: page.last().and_then(|p| p.part_number),
                max_parts: Some(input.max_parts.unwrap_or(MAX_KEYS)),
                is_truncated: Some(truncated),
                parts: Some(page),
            });
        }
        Ok(S3Response::new(output))
    }

    pub(super) async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        let bypass = self.bypass_of(&req, &req.input.bucket, req.input.bypass_governance_retention);
        let input = req.input;
        let version = input.version_id.as_deref();
        let deleted = self
            .store
            .delete_object_version_with(&input.bucket, &input.key, version, bypass)
            .await
            .map_err(|e| {
                tracing::info!(bucket = input.bucket, key = input.key, error = %e, "delete refused");
                s3_err(e)
            })?;
        let mut response = S3Response::new(DeleteObjectOutput {
            delete_marker: deleted.delete_marker.then_some(true),
            version_id: deleted.version_id,
            ..DeleteObjectOutput::default()
        });
        response.status = Some(http::StatusCode::NO_CONTENT);
        Ok(response)
    }

    pub(super) async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let bypass = self.bypass_of(&req, &req.input.bucket, req.input.bypass_governance_retention);
        let input = req.input;
        if input.delete.objects.len() > MAX_KEYS as usize {
            return Err(s3_error!(
                MalformedXML,
                "The XML you provided was not well-formed or did not validate against our \
                 published schema: at most 1000 keys can be deleted at once"
            ));
        }
        self.require_bucket(&input.bucket)?;
        let quiet = input.delete.quiet.unwrap_or(false);
        let (mut deleted, mut errors) = (Vec::new(), Vec::new());
        for object in input.delete.objects {
            let version = object.version_id.as_deref();
            let store = &self.store;
            match store
                .delete_object_version_with(&input.bucket, &object.key, version, bypass)
                .await
            {
                Ok(done) => {
                    if !quiet {
                        // A marker made answers with its id; a version removed with its own.
                        let made = done.delete_marker && object.version_id.is_none();
                        deleted.push(DeletedObject {
                            key: Some(object.key),
                            delete_marker: done.delete_marker.then_some(true),
                            delete_marker_version_id: done
                                .delete_marker
                                .then(|| done.version_id.clone())
                                .flatten(),
                            version_id: if made { None } else { object.version_id },
                        });
                    }
                }
                Err(e) => {
                    let e = s3_err(e);
                    // The version asked for is named back, so a client can tell which of a
                    // key's versions was refused.
                    errors.push(Error {
                        code: Some(e.code().as_str().to_owned()),
                        key: Some(object.key),
                        message: e.message().map(str::to_owned),
                        version_id: object.version_id,
                    });
                }
            }
        }
        Ok(S3Response::new(DeleteObjectsOutput {
            deleted: Some(deleted),
            errors: (!errors.is_empty()).then_some(errors),
            ..Default::default()
        }))
    }

    pub(super) async fn copy_object(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        let writer = self.writer_of(&req)?;
        let input = req.input;
        let CopySource::Bucket { bucket: src_bucket, key: src_key, version_id } =
            &input.copy_source
        else {
            return Err(s3_error!(NotImplemented, "only bucket copy sources are supported"));
        };
        rules::require_private_acl(
            input.acl.as_ref().map(ObjectCannedACL::as_str),
            &[
                input.grant_full_control.as_ref(),
                input.grant_read.as_ref(),
                input.grant_read_acp.as_ref(),
                input.grant_write_acp.as_ref(),
            ],
        )?;
        let replace = input
            .metadata_directive
            .as_ref()
            .is_some_and(|d| d.as_str() == MetadataDirective::REPLACE);
        let mut source_check = copy_source_check(
            input.copy_source_if_match.clone(),
            input.copy_source_if_none_match.clone(),
            input.copy_source_if_modified_since.clone(),
            input.copy_source_if_unmodified_since.clone(),
        );
        source_check.version_id = version_id.as_deref().map(str::to_owned);
        let source_version = source_check.version_id.clone();
        let (src_bucket, src_key) = (src_bucket.to_string(), src_key.to_string());
        let tags = copy_tags(input.tagging_directive.as_ref(), input.tagging.as_deref())?;
        let lock = lock_of_headers(
            input.object_lock_mode.as_ref(),
            input.object_lock_retain_until_date.as_ref(),
            input.object_lock_legal_hold_status.as_ref(),
        )?;
        self.check_lock_allowed(&input.bucket, &lock, &writer).await?;
        let replace =
            CopyReplace { attrs: replace.then(|| attrs_input!(input).into_attrs()), tags, lock };
        let (dst_bucket, dst_key) = (&input.bucket, &input.key);
        let info = self
            .store
            .copy_object(&src_bucket, &src_key, dst_bucket, dst_key, replace, source_check, &writer)
            .await
            .map_err(copy_source_err)?;
        let mut result = CopyObjectResult {
            e_tag: Some(etag(&info.etag)),
            last_modified: Some(timestamp(info.last_modified)),
            checksum_type: checksum_type_of(info.checksum.as_ref()),
            ..Default::default()
        };
        set_checksum!(result, info.checksum.as_ref());
        Ok(S3Response::new(CopyObjectOutput {
            copy_object_result: Some(result),
            copy_source_version_id: source_version,
            version_id: written_version_id(&info),
            ..Default::default()
        }))
    }
}

/// The part of an object GetObject serves: a range, a part, or all of it, and whether the
/// answer is partial.
struct Served {
    start: u64,
    end: u64,
    partial: bool,
}

fn served_part(info: &ObjectInfo, range: Option<&Range>, part: Option<i32>) -> S3Result<Served> {
    match (range, part) {
        (Some(_), Some(_)) => Err(s3_error!(
            InvalidRequest,
            "Cannot specify both Range header and partNumber query parameter"
        )),
        (Some(range), None) => {
            let r = range.check(info.size)?;
            Ok(Served { start: r.start, end: r.end, partial: true })
        }
        (None, Some(number)) => {
            // S3's answer to a part past the last (ceph/s3-tests expect RGW's 400 InvalidPart).
            let not_satisfiable = || {
                let mut e = S3Error::with_message(
                    S3ErrorCode::Custom("InvalidPartNumber".into()),
                    "The requested partnumber is not satisfiable",
                );
                e.set_status_code(http::StatusCode::RANGE_NOT_SATISFIABLE);
                e
            };
            let index = usize::try_from(number).ok().and_then(|n| n.checked_sub(1));
            let Some(index) = index else {
                return Err(s3_error!(
                    InvalidArgument,
                    "Part number must be an integer between 1 and 10000, inclusive"
                ));
            };
            if info.part_sizes.is_empty() {
                // A simple upload is its own single part.
                return if index == 0 {
                    Ok(Served { start: 0, end: info.size, partial: true })
                } else {
                    Err(not_satisfiable())
                };
            }
            let size = *info.part_sizes.get(index).ok_or_else(not_satisfiable)?;
            let start: u64 = info.part_sizes[..index].iter().sum();
            Ok(Served { start, end: start + size, partial: true })
        }
        (None, None) => Ok(Served { start: 0, end: info.size, partial: false }),
    }
}

/// How many tags an object has, sent only when it has some, as S3 does.
fn tag_count(info: &ObjectInfo) -> Option<i32> {
    (!info.attrs.tags.is_empty()).then(|| i32::try_from(info.attrs.tags.len()).unwrap_or(i32::MAX))
}

/// The checksum of part `number` of a multipart object, when its upload kept them.
fn part_checksum(info: &ObjectInfo, number: Option<i32>) -> Option<Checksum> {
    let index = usize::try_from(number?).ok()?.checked_sub(1)?;
    let algorithm = info.checksum.as_ref()?.algorithm;
    let value = info.part_checksums.get(index)?.clone();
    Some(Checksum { algorithm, value, kind: ChecksumType::FullObject })
}
