//! Object listings: ListObjects, ListObjectsV2 and ListObjectVersions (buckets are never
//! versioned: each object is its own only version).

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result};

use super::HostPathS3;
use crate::s3::convert::{
    MAX_KEYS, checksum_type_of, decode_token, encode_if, etag, object_of, owner_of_req,
    prefixes_of, timestamp, wants_url,
};

impl HostPathS3 {
    pub(super) async fn list_objects(
        &self,
        req: S3Request<ListObjectsInput>,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        let owner = owner_of_req(&req);
        let input = req.input;
        let url = wants_url(input.encoding_type.as_ref())?;
        let page = self
            .list(
                &input.bucket,
                input.prefix.clone(),
                input.delimiter.clone(),
                input.marker.clone(),
                input.max_keys,
            )
            .await?;
        let common_prefixes = prefixes_of(&page, url);
        // S3 documents NextMarker for delimited listings only; it is sent whenever the page is
        // truncated, which clients paging by it rely on.
        let next_marker = page.next_after.as_deref().map(|m| encode_if(url, m));
        Ok(S3Response::new(ListObjectsOutput {
            name: Some(input.bucket),
            // V1 clients (botocore among them) decode Delimiter and markers, never Prefix.
            prefix: Some(input.prefix.clone().unwrap_or_default()),
            delimiter: input.delimiter.filter(|d| !d.is_empty()).map(|d| encode_if(url, &d)),
            marker: Some(encode_if(url, input.marker.as_deref().unwrap_or_default())),
            max_keys: Some(input.max_keys.unwrap_or(MAX_KEYS)),
            is_truncated: Some(page.is_truncated),
            next_marker,
            common_prefixes,
            contents: Some(
                page.objects.into_iter().map(|o| object_of(o, url, Some(&owner))).collect(),
            ),
            encoding_type: input.encoding_type,
            ..Default::default()
        }))
    }

    pub(super) async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        let owner = owner_of_req(&req);
        let input = req.input;
        let url = wants_url(input.encoding_type.as_ref())?;
        let after = match input.continuation_token.as_deref() {
            Some(token) => Some(decode_token(token)?),
            None => input.start_after.clone(),
        };
        let page = self
            .list(
                &input.bucket,
                input.prefix.clone(),
                input.delimiter.clone(),
                after,
                input.max_keys,
            )
            .await?;
        let common_prefixes = prefixes_of(&page, url);
        let key_count = page.objects.len() + page.common_prefixes.len();
        let owner = (input.fetch_owner == Some(true)).then_some(owner);
        Ok(S3Response::new(ListObjectsV2Output {
            name: Some(input.bucket),
            prefix: Some(encode_if(url, input.prefix.as_deref().unwrap_or_default())),
            delimiter: input.delimiter.filter(|d| !d.is_empty()).map(|d| encode_if(url, &d)),
            max_keys: Some(input.max_keys.unwrap_or(MAX_KEYS)),
            key_count: i32::try_from(key_count).ok(),
            continuation_token: input.continuation_token,
            start_after: input.start_after.map(|s| encode_if(url, &s)),
            is_truncated: Some(page.is_truncated),
            next_continuation_token: page.next_after.as_deref().map(|k| hex::encode(k.as_bytes())),
            common_prefixes,
            contents: Some(
                page.objects.into_iter().map(|o| object_of(o, url, owner.as_ref())).collect(),
            ),
            encoding_type: input.encoding_type,
            ..Default::default()
        }))
    }

    pub(super) async fn list_object_versions(
        &self,
        req: S3Request<ListObjectVersionsInput>,
    ) -> S3Result<S3Response<ListObjectVersionsOutput>> {
        // Buckets here are never versioned: every object is its own only version, "null".
        let owner = owner_of_req(&req);
        let input = req.input;
        let url = wants_url(input.encoding_type.as_ref())?;
        let page = self
            .list(
                &input.bucket,
                input.prefix.clone(),
                input.delimiter.clone(),
                input.key_marker.clone(),
                input.max_keys,
            )
            .await?;
        let common_prefixes = prefixes_of(&page, url);
        let versions = page
            .objects
            .into_iter()
            .map(|info| ObjectVersion {
                key: Some(encode_if(url, &info.key)),
                version_id: Some("null".to_owned()),
                is_latest: Some(true),
                e_tag: Some(etag(&info.etag)),
                size: i64::try_from(info.size).ok(),
                last_modified: Some(timestamp(info.last_modified)),
                storage_class: Some(ObjectVersionStorageClass::from_static(
                    ObjectVersionStorageClass::STANDARD,
                )),
                checksum_type: checksum_type_of(info.checksum.as_ref()),
                owner: Some(owner.clone()),
                ..ObjectVersion::default()
            })
            .collect();
        let truncated = page.is_truncated;
        Ok(S3Response::new(ListObjectVersionsOutput {
            name: Some(input.bucket),
            prefix: Some(encode_if(url, input.prefix.as_deref().unwrap_or_default())),
            delimiter: input.delimiter.filter(|d| !d.is_empty()).map(|d| encode_if(url, &d)),
            key_marker: Some(encode_if(url, input.key_marker.as_deref().unwrap_or_default())),
            version_id_marker: Some(input.version_id_marker.unwrap_or_default()),
            max_keys: Some(input.max_keys.unwrap_or(MAX_KEYS)),
            is_truncated: Some(truncated),
            next_key_marker: page.next_after.as_deref().map(|k| encode_if(url, k)),
            next_version_id_marker: truncated.then(|| "null".to_owned()),
            versions: Some(versions),
            common_prefixes,
            encoding_type: input.encoding_type,
            ..Default::default()
        }))
    }
}
