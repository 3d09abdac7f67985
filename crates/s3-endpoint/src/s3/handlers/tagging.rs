//! Object tagging: PutObjectTagging, GetObjectTagging and DeleteObjectTagging, and the tags a
//! write sets (`x-amz-tagging`) or a copy takes (`x-amz-tagging-directive`).

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use super::HostPathS3;
use crate::s3::convert::s3_err;
use crate::s3::tags;
use crate::store::Tags;

impl HostPathS3 {
    pub(super) async fn put_object_tagging(
        &self,
        req: S3Request<PutObjectTaggingInput>,
    ) -> S3Result<S3Response<PutObjectTaggingOutput>> {
        let input = req.input;
        let tags = tags::from_tagging(input.tagging)?;
        let version = input.version_id.as_deref();
        let info = self
            .store
            .set_version_tags(&input.bucket, &input.key, version, tags)
            .await
            .map_err(s3_err)?;
        Ok(S3Response::new(PutObjectTaggingOutput { version_id: info.version_id }))
    }

    pub(super) async fn get_object_tagging(
        &self,
        req: S3Request<GetObjectTaggingInput>,
    ) -> S3Result<S3Response<GetObjectTaggingOutput>> {
        let input = req.input;
        let version = input.version_id.as_deref();
        let (info, _) =
            self.store.open_version(&input.bucket, &input.key, version).await.map_err(s3_err)?;
        Ok(S3Response::new(GetObjectTaggingOutput {
            tag_set: tags::to_tag_set(&info.attrs.tags),
            version_id: info.version_id,
        }))
    }

    pub(super) async fn delete_object_tagging(
        &self,
        req: S3Request<DeleteObjectTaggingInput>,
    ) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
        let input = req.input;
        let version = input.version_id.as_deref();
        let info = self
            .store
            .set_version_tags(&input.bucket, &input.key, version, Vec::new())
            .await
            .map_err(s3_err)?;
        let mut response =
            S3Response::new(DeleteObjectTaggingOutput { version_id: info.version_id });
        // S3 answers 204 No Content.
        response.status = Some(http::StatusCode::NO_CONTENT);
        Ok(response)
    }
}

/// The tags of a write's `x-amz-tagging` header (none without it).
pub(super) fn tags_of_header(header: Option<&str>) -> S3Result<Tags> {
    header.map_or(Ok(Vec::new()), tags::from_header)
}

/// What a copy does with tags: `None` keeps the source's (`COPY`, the default), `Some` gives the
/// destination the request's `x-amz-tagging` (`REPLACE`).
pub(super) fn copy_tags(
    directive: Option<&TaggingDirective>,
    header: Option<&str>,
) -> S3Result<Option<Tags>> {
    match directive.map(TaggingDirective::as_str) {
        None | Some(TaggingDirective::COPY) => Ok(None),
        Some(TaggingDirective::REPLACE) => tags_of_header(header).map(Some),
        Some(_) => Err(s3_error!(InvalidArgument, "Unknown tagging directive.")),
    }
}

/// The `x-amz-tagging-count` header HeadObject answers with (GetObject has a field for it).
pub(super) const TAGGING_COUNT: &str = "x-amz-tagging-count";
