//! Bucket lifecycle: PutBucketLifecycleConfiguration, GetBucketLifecycleConfiguration and
//! DeleteBucketLifecycle. What the rules may say is checked in the store
//! ([`crate::store::LifecycleConfig::check`]), the wire form is `lifecycle_rules`'s, and the
//! store's lifecycle pass acts on them.

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use super::HostPathS3;
use crate::s3::convert::s3_err;
use crate::s3::lifecycle_rules;

impl HostPathS3 {
    pub(super) async fn put_bucket_lifecycle_configuration(
        &self,
        req: S3Request<PutBucketLifecycleConfigurationInput>,
    ) -> S3Result<S3Response<PutBucketLifecycleConfigurationOutput>> {
        let input = req.input;
        self.require_bucket(&input.bucket)?;
        let config = lifecycle_rules::config_of(input.lifecycle_configuration).inspect_err(|e| {
            tracing::info!(bucket = input.bucket, error = %e, "lifecycle configuration refused");
        })?;
        self.store.set_bucket_lifecycle(&input.bucket, Some(config)).await.map_err(s3_err)?;
        Ok(S3Response::new(PutBucketLifecycleConfigurationOutput::default()))
    }

    pub(super) async fn get_bucket_lifecycle_configuration(
        &self,
        req: S3Request<GetBucketLifecycleConfigurationInput>,
    ) -> S3Result<S3Response<GetBucketLifecycleConfigurationOutput>> {
        match self.store.bucket_lifecycle(&req.input.bucket).await.map_err(s3_err)? {
            Some(config) => Ok(S3Response::new(GetBucketLifecycleConfigurationOutput {
                rules: Some(lifecycle_rules::rules_of(&config)),
                ..GetBucketLifecycleConfigurationOutput::default()
            })),
            None => Err(s3_error!(
                NoSuchLifecycleConfiguration,
                "The lifecycle configuration does not exist"
            )),
        }
    }

    pub(super) async fn delete_bucket_lifecycle(
        &self,
        req: S3Request<DeleteBucketLifecycleInput>,
    ) -> S3Result<S3Response<DeleteBucketLifecycleOutput>> {
        self.store.set_bucket_lifecycle(&req.input.bucket, None).await.map_err(s3_err)?;
        let mut response = S3Response::new(DeleteBucketLifecycleOutput::default());
        response.status = Some(http::StatusCode::NO_CONTENT);
        Ok(response)
    }
}
