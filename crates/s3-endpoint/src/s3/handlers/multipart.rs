//! Multipart uploads: starting, uploading parts, completing, aborting and listing them.

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use super::HostPathS3;
use crate::s3::convert::*;
use crate::s3::rules;
use crate::store::{ChecksumAlgorithm, CompleteRequest, CompletedPartSpec, UploadInfo};

impl HostPathS3 {
    pub(super) async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
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
        let checksum = rules::upload_checksum(
            input.checksum_algorithm.as_ref().map(s3s::dto::ChecksumAlgorithm::as_str),
            input.checksum_type.as_ref().map(s3s::dto::ChecksumType::as_str),
        )?;
        let (bucket, key) = (input.bucket.clone(), input.key.clone());
        let tags = super::tagging::tags_of_header(input.tagging.as_deref())?;
        let lock = crate::s3::object_lock_rules::lock_of_headers(
            input.object_lock_mode.as_ref(),
            input.object_lock_retain_until_date.as_ref(),
            input.object_lock_legal_hold_status.as_ref(),
        )?;
        self.check_lock_allowed(&bucket, &lock, &writer).await?;
        let attrs = crate::store::ObjectAttrs { tags, lock, ..attrs_input!(input).into_attrs() };
        let id = self
            .store
            .create_upload(&bucket, &key, attrs, checksum, &writer)
            .await
            .map_err(s3_err)?;
        Ok(S3Response::new(CreateMultipartUploadOutput {
            bucket: Some(bucket),
            key: Some(key),
            upload_id: Some(id),
            checksum_algorithm: checksum
                .map(|(a, _)| s3s::dto::ChecksumAlgorithm::from(a.name().to_owned())),
            checksum_type: checksum.map(|(_, t)| s3s::dto::ChecksumType::from(t.name().to_owned())),
            ..Default::default()
        }))
    }

    pub(super) async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        let writer = self.writer_of(&req)?;
        let input = req.input;
        let mut check = check_of(&req.headers, input.content_length, input.content_md5.as_deref())?;
        check.checksum = rules::checksum_check(
            &req.headers,
            checksum_fields!(input),
            input.checksum_algorithm.as_ref().map(s3s::dto::ChecksumAlgorithm::as_str),
            req.trailing_headers.as_ref(),
        )?;
        let part = self
            .store
            .upload_part(
                &input.bucket,
                &input.key,
                &input.upload_id,
                input.part_number,
                body_of(input.body),
                check,
                &writer,
            )
            .await
            .map_err(s3_err)?;
        let mut output = UploadPartOutput { e_tag: Some(etag(&part.etag)), ..Default::default() };
        set_checksum!(output, part.checksum.as_ref());
        Ok(S3Response::new(output))
    }

    pub(super) async fn upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        let writer = self.writer_of(&req)?;
        let input = req.input;
        let CopySource::Bucket { bucket: src_bucket, key: src_key, version_id } =
            &input.copy_source
        else {
            return Err(s3_error!(NotImplemented, "only bucket copy sources are supported"));
        };
        let range = input.copy_source_range.as_deref().map(copy_range).transpose()?;
        let mut source_check = copy_source_check(
            input.copy_source_if_match.clone(),
            input.copy_source_if_none_match.clone(),
            input.copy_source_if_modified_since.clone(),
            input.copy_source_if_unmodified_since.clone(),
        );
        source_check.version_id = version_id.as_deref().map(str::to_owned);
        let source_version = source_check.version_id.clone();
        let part = self
            .store
            .upload_part_copy(
                &input.bucket,
                &input.key,
                &input.upload_id,
                input.part_number,
                (src_bucket, src_key),
                range,
                source_check,
                &writer,
            )
            .await
            .map_err(copy_source_err)?;
        let mut result = CopyPartResult {
            e_tag: Some(etag(&part.etag)),
            last_modified: Some(timestamp(part.last_modified)),
            ..Default::default()
        };
        set_checksum!(result, part.checksum.as_ref());
        Ok(S3Response::new(UploadPartCopyOutput {
            copy_part_result: Some(result),
            copy_source_version_id: source_version,
            ..Default::default()
        }))
    }

    pub(super) async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let writer = self.writer_of(&req)?;
        let input = req.input;
        let mut parts = Vec::new();
        for part in
            input.multipart_upload.as_ref().and_then(|m| m.parts.clone()).unwrap_or_default()
        {
            let (Some(number), Some(tag)) = (part.part_number, part.e_tag.as_ref()) else {
                return Err(s3_error!(InvalidPart, "every part needs a PartNumber and an ETag"));
            };
            let number = u32::try_from(number).map_err(|_| s3_error!(InvalidPart))?;
            let checksum = ChecksumAlgorithm::ALL
                .into_iter()
                .zip(checksum_fields!(part))
                .find_map(|(a, v)| Some((a, v?.clone())));
            parts.push(CompletedPartSpec { number, etag: tag.value().to_owned(), checksum });
        }
        let checksum = ChecksumAlgorithm::ALL
            .into_iter()
            .zip(checksum_fields!(input))
            .find_map(|(a, v)| Some((a, v?.clone())));
        let condition =
            rules::write_condition(input.if_match.as_ref(), input.if_none_match.as_ref())?;
        let request = CompleteRequest { parts, checksum, condition };
        let info = self
            .store
            .complete_upload(&input.bucket, &input.key, &input.upload_id, request, &writer)
            .await
            .map_err(s3_err)?;
        let mut output = CompleteMultipartUploadOutput {
            location: Some(format!("/{}/{}", input.bucket, input.key)),
            bucket: Some(input.bucket),
            key: Some(input.key),
            e_tag: Some(etag(&info.etag)),
            checksum_type: checksum_type_of(info.checksum.as_ref()),
            version_id: written_version_id(&info),
            ..Default::default()
        };
        set_checksum!(output, info.checksum.as_ref());
        Ok(S3Response::new(output))
    }

    pub(super) async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        let input = req.input;
        self.store
            .abort_upload(&input.bucket, &input.key, &input.upload_id)
            .await
            .map_err(s3_err)?;
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
    }

    pub(super) async fn list_parts(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        let owner = owner_of_req(&req);
        let input = req.input;
        let (upload, all) = self
            .store
            .list_parts(&input.bucket, &input.key, &input.upload_id)
            .await
            .map_err(s3_err)?;
        let marker = input.part_number_marker.unwrap_or(0).max(0);
        let rest = all.into_iter().filter(|p| i64::from(p.part_number) > i64::from(marker));
        let (page, is_truncated) = page_of(rest, input.max_parts);
        let next_marker = page.last().and_then(|p| i32::try_from(p.part_number).ok());
        let parts = page
            .into_iter()
            .map(|p| {
                let mut part = Part {
                    e_tag: Some(etag(&p.etag)),
                    last_modified: Some(timestamp(p.last_modified)),
                    part_number: i32::try_from(p.part_number).ok(),
                    size: i64::try_from(p.size).ok(),
                    ..Part::default()
                };
                set_checksum!(part, p.checksum.as_ref());
                part
            })
            .collect();
        Ok(S3Response::new(ListPartsOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(input.upload_id),
            part_number_marker: input.part_number_marker,
            max_parts: Some(input.max_parts.unwrap_or(MAX_KEYS).clamp(0, MAX_KEYS)),
            is_truncated: Some(is_truncated),
            next_part_number_marker: if is_truncated { next_marker } else { None },
            parts: Some(parts),
            checksum_algorithm: upload
                .checksum_algorithm
                .map(|a| s3s::dto::ChecksumAlgorithm::from(a.name().to_owned())),
            checksum_type: upload
                .checksum_type
                .map(|t| s3s::dto::ChecksumType::from(t.name().to_owned())),
            initiator: Some(Initiator {
                id: owner.id.clone(),
                display_name: owner.display_name.clone(),
            }),
            owner: Some(owner),
            storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
            ..Default::default()
        }))
    }

    pub(super) async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        let owner = owner_of_req(&req);
        let input = req.input;
        let url = wants_url(input.encoding_type.as_ref())?;
        let prefix = input.prefix.clone().unwrap_or_default();
        let delimiter = input.delimiter.clone().filter(|d| !d.is_empty());
        let key_marker = input.key_marker.clone().unwrap_or_default();
        let id_marker = input.upload_id_marker.clone().filter(|_| !key_marker.is_empty());
        let all = self.store.list_uploads(&input.bucket).await.map_err(s3_err)?;
        let max =
            usize::try_from(input.max_uploads.unwrap_or(MAX_KEYS).clamp(0, MAX_KEYS)).unwrap_or(0);
        let (mut uploads, mut prefixes): (Vec<UploadInfo>, Vec<String>) = (Vec::new(), Vec::new());
        let mut truncated = false;
        // Uploads of one key are listed by start time, not by id: the marker key's later uploads
        // are those after the marker upload in that order (by id only should it be gone).
        let marker_listed =
            id_marker.as_ref().is_some_and(|id| all.iter().any(|u| u.upload_id == *id));
        let mut past_marker = false;
        // The last entry returned, upload or common prefix: where the next page starts.
        let mut last: Option<(String, Option<String>)> = None;
        for upload in all.into_iter().filter(|u| u.key.starts_with(&prefix)) {
            let rolled = delimiter.as_deref().and_then(|d| {
                upload.key[prefix.len()..]
                    .find(d)
                    .map(|at| upload.key[..prefix.len() + at + d.len()].to_owned())
            });
            let after = match (&rolled, &id_marker) {
                // A common prefix up to the marker was returned before (or lies before it).
                (Some(common), _) => *common > key_marker,
                (None, Some(id)) if upload.key == key_marker && marker_listed => {
                    let after = past_marker;
                    past_marker |= upload.upload_id == *id;
                    after
                }
                (None, Some(id)) => {
                    upload.key > key_marker || (upload.key == key_marker && upload.upload_id > *id)
                }
                (None, None) => upload.key > key_marker,
            };
            if !after {
                continue;
            }
            if let Some(common) = &rolled
                && prefixes.last() == Some(common)
            {
                continue;
            }
            if uploads.len() + prefixes.len() == max {
                truncated = true;
                break;
            }
            match rolled {
                Some(common) => {
                    last = Some((common.clone(), None));
                    prefixes.push(common);
                }
                None => {
                    last = Some((upload.key.clone(), Some(upload.upload_id.clone())));
                    uploads.push(upload);
                }
            }
        }
        let (next_key, next_id) = last.filter(|_| truncated).unzip();
        let list = uploads
            .into_iter()
            .map(|u| MultipartUpload {
                key: Some(encode_if(url, &u.key)),
                upload_id: Some(u.upload_id),
                initiated: Some(timestamp(u.initiated)),
                initiator: Some(Initiator {
                    id: owner.id.clone(),
                    display_name: owner.display_name.clone(),
                }),
                owner: Some(owner.clone()),
                storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
                checksum_algorithm: u
                    .checksum_algorithm
                    .map(|a| s3s::dto::ChecksumAlgorithm::from(a.name().to_owned())),
                checksum_type: u
                    .checksum_type
                    .map(|t| s3s::dto::ChecksumType::from(t.name().to_owned())),
            })
            .collect();
        let common_prefixes: CommonPrefixList =
            prefixes.iter().map(|p| CommonPrefix { prefix: Some(encode_if(url, p)) }).collect();
        Ok(S3Response::new(ListMultipartUploadsOutput {
            bucket: Some(input.bucket),
            prefix: Some(encode_if(url, &prefix)),
            delimiter: input.delimiter.filter(|d| !d.is_empty()).map(|d| encode_if(url, &d)),
            key_marker: Some(encode_if(url, &key_marker)),
            upload_id_marker: Some(input.upload_id_marker.unwrap_or_default()),
            max_uploads: Some(input.max_uploads.unwrap_or(MAX_KEYS)),
            is_truncated: Some(truncated),
            next_key_marker: next_key.map(|k| encode_if(url, &k)),
            next_upload_id_marker: next_id.flatten(),
            uploads: Some(list),
            common_prefixes: (!common_prefixes.is_empty()).then_some(common_prefixes),
            encoding_type: input.encoding_type,
            ..Default::default()
        }))
    }
}
