//! Object listings: ListObjects, ListObjectsV2 (current objects only) and ListObjectVersions
//! (every version and delete marker, see `store::version_list`).

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use super::HostPathS3;
use crate::s3::convert::{
    MAX_KEYS, checksum_type_of, decode_token, encode_if, etag, max_keys, object_of, owner_of_req,
    prefixes_of, s3_err, timestamp, wants_url,
};
use crate::store::{NULL_VERSION, VersionQuery, valid_version_id};

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
        let owner = owner_of_req(&req);
        let input = req.input;
        let url = wants_url(input.encoding_type.as_ref())?;
        if let Some(id) = input.version_id_marker.as_deref().filter(|id| !id.is_empty()) {
            if input.key_marker.as_deref().unwrap_or_default().is_empty() {
                return Err(s3_error!(
                    InvalidArgument,
                    "A version-id marker cannot be specified without a key marker."
                ));
            }
            if !valid_version_id(id) {
                return Err(s3_error!(InvalidArgument, "Invalid version id specified"));
            }
        }
        let query = VersionQuery {
            prefix: input.prefix.clone().unwrap_or_default(),
            delimiter: input.delimiter.clone(),
            key_marker: input.key_marker.clone().filter(|m| !m.is_empty()),
            version_id_marker: input.version_id_marker.clone().filter(|m| !m.is_empty()),
            max_keys: max_keys(input.max_keys)?,
        };
        let page = self.store.list_versions(&input.bucket, query).await.map_err(s3_err)?;
        let (mut versions, mut delete_markers) = (Vec::new(), Vec::new());
        for entry in page.versions {
            let info = entry.info;
            if entry.delete_marker {
                delete_markers.push(DeleteMarkerEntry {
                    key: Some(encode_if(url, &info.key)),
                    version_id: info.version_id,
                    is_latest: Some(entry.is_latest),
                    last_modified: Some(timestamp(info.last_modified)),
                    owner: Some(owner.clone()),
                });
                continue;
            }
            versions.push(ObjectVersion {
                key: Some(encode_if(url, &info.key)),
                version_id: Some(info.version_id.unwrap_or_else(|| NULL_VERSION.to_owned())),
                is_latest: Some(entry.is_latest),
                e_tag: Some(etag(&info.etag)),
                size: i64::try_from(info.size).ok(),
                last_modified: Some(timestamp(info.last_modified)),
                storage_class: Some(ObjectVersionStorageClass::from_static(
                    ObjectVersionStorageClass::STANDARD,
                )),
                checksum_type: checksum_type_of(info.checksum.as_ref()),
                owner: Some(owner.clone()),
                ..ObjectVersion::default()
            });
        }
        let common_prefixes: Vec<_> = page
            .common_prefixes
            .iter()
            .map(|p| CommonPrefix { prefix: Some(encode_if(url, p)) })
            .collect();
        let common_prefixes = (!common_prefixes.is_empty()).then_some(common_prefixes);
        let truncated = page.is_truncated;
        Ok(S3Response::new(ListObjectVersionsOutput {
            name: Some(input.bucket),
            prefix: Some(encode_if(url, input.prefix.as_deref().unwrap_or_default())),
            delimiter: input.delimiter.filter(|d| !d.is_empty()).map(|d| encode_if(url, &d)),
            key_marker: Some(encode_if(url, input.key_marker.as_deref().unwrap_or_default())),
            version_id_marker: Some(input.version_id_marker.unwrap_or_default()),
            max_keys: Some(input.max_keys.unwrap_or(MAX_KEYS)),
            is_truncated: Some(truncated),
            next_key_marker: page.next_key_marker.filter(|_| truncated).map(|k| encode_if(url, &k)),
            next_version_id_marker: page.next_version_id_marker.filter(|_| truncated),
            versions: Some(versions),
            delete_markers: Some(delete_markers),
            common_prefixes,
            encoding_type: input.encoding_type,
            ..Default::default()
        }))
    }
}
