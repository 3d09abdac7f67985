//! Bucket CORS: PutBucketCors, GetBucketCors and DeleteBucketCors. What the rules may say and
//! how requests are matched against them is in `cors_rules`; the preflight is answered at the
//! front (`cors`).

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use super::HostPathS3;
use crate::s3::convert::s3_err;
use crate::s3::cors_rules;

impl HostPathS3 {
    pub(super) async fn put_bucket_cors(
        &self,
        req: S3Request<PutBucketCorsInput>,
    ) -> S3Result<S3Response<PutBucketCorsOutput>> {
        let input = req.input;
        let config = cors_rules::config_of(input.cors_configuration)?;
        self.store.set_bucket_cors(&input.bucket, Some(config)).await.map_err(s3_err)?;
        Ok(S3Response::new(PutBucketCorsOutput::default()))
    }

    pub(super) async fn get_bucket_cors(
        &self,
        req: S3Request<GetBucketCorsInput>,
    ) -> S3Result<S3Response<GetBucketCorsOutput>> {
        match self.store.bucket_cors(&req.input.bucket).await.map_err(s3_err)? {
            Some(config) => Ok(S3Response::new(GetBucketCorsOutput {
                cors_rules: Some(cors_rules::rules_of(&config)),
            })),
            None => {
                Err(s3_error!(NoSuchCORSConfiguration, "The CORS configuration does not exist"))
            }
        }
    }

    pub(super) async fn delete_bucket_cors(
        &self,
        req: S3Request<DeleteBucketCorsInput>,
    ) -> S3Result<S3Response<DeleteBucketCorsOutput>> {
        self.store.set_bucket_cors(&req.input.bucket, None).await.map_err(s3_err)?;
        let mut response = S3Response::new(DeleteBucketCorsOutput::default());
        response.status = Some(http::StatusCode::NO_CONTENT);
        Ok(response)
    }
}
