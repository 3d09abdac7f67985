//! Bucket tagging: PutBucketTagging, GetBucketTagging and DeleteBucketTagging. Tags follow the
//! rules of object tags, up to 50 of them (`tags`); who may set them is decided before (a
//! bucket-wide setting, see `auth`).

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use super::HostPathS3;
use crate::s3::convert::s3_err;
use crate::s3::tags;

impl HostPathS3 {
    pub(super) async fn put_bucket_tagging(
        &self,
        req: S3Request<PutBucketTaggingInput>,
    ) -> S3Result<S3Response<PutBucketTaggingOutput>> {
        let input = req.input;
        let tags = tags::bucket_tags_from(input.tagging)?;
        // An empty set leaves the bucket without one, as deleting it does.
        let tags = Some(tags).filter(|t| !t.is_empty());
        self.store.set_bucket_tags(&input.bucket, tags).await.map_err(s3_err)?;
        let mut response = S3Response::new(PutBucketTaggingOutput::default());
        // S3 answers 204 No Content.
        response.status = Some(http::StatusCode::NO_CONTENT);
        Ok(response)
    }

    pub(super) async fn get_bucket_tagging(
        &self,
        req: S3Request<GetBucketTaggingInput>,
    ) -> S3Result<S3Response<GetBucketTaggingOutput>> {
        match self.store.bucket_tags(&req.input.bucket).await.map_err(s3_err)? {
            Some(tags) => {
                Ok(S3Response::new(GetBucketTaggingOutput { tag_set: tags::to_tag_set(&tags) }))
            }
            None => Err(s3_error!(NoSuchTagSet, "The TagSet does not exist")),
        }
    }

    pub(super) async fn delete_bucket_tagging(
        &self,
        req: S3Request<DeleteBucketTaggingInput>,
    ) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
        self.store.set_bucket_tags(&req.input.bucket, None).await.map_err(s3_err)?;
        let mut response = S3Response::new(DeleteBucketTaggingOutput::default());
        response.status = Some(http::StatusCode::NO_CONTENT);
        Ok(response)
    }
}
