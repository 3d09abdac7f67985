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
        unversioned(input.version_id.as_deref())?;
        let tags = tags::from_tagging(input.tagging)?;
        self.store.set_object_tags(&input.bucket, &input.key, tags).await.map_err(s3_err)?;
        Ok(S3Response::new(PutObjectTaggingOutput::default()))
    }

    pub(super) async fn get_object_tagging(
        &self,
        req: S3Request<GetObjectTaggingInput>,
    ) -> S3Result<S3Response<GetObjectTaggingOutput>> {
        let input = req.input;
        unversioned(input.version_id.as_deref())?;
        let info = self.store.head_object(&input.bucket, &input.key).await.map_err(s3_err)?;
        Ok(S3Response::new(GetObjectTaggingOutput {
            tag_set: tags::to_tag_set(&info.attrs.tags),
            version_id: None,
        }))
    }

    pub(super) async fn delete_object_tagging(
        &self,
        req: S3Request<DeleteObjectTaggingInput>,
    ) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
        let input = req.input;
        unversioned(input.version_id.as_deref())?;
        self.store.set_object_tags(&input.bucket, &input.key, Vec::new()).await.map_err(s3_err)?;
        let mut response = S3Response::new(DeleteObjectTaggingOutput::default());
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

/// Buckets here keep one version of each object, whose id is `null`.
fn unversioned(version_id: Option<&str>) -> S3Result<()> {
    match version_id {
        Some(v) if v != "null" => Err(s3_error!(NoSuchVersion, "buckets here are not versioned")),
        _ => Ok(()),
    }
}

/// The `x-amz-tagging-count` header HeadObject answers with (GetObject has a field for it).
pub(super) const TAGGING_COUNT: &str = "x-amz-tagging-count";
