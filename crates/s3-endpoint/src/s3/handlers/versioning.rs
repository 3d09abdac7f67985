//! Bucket versioning: PutBucketVersioning and GetBucketVersioning. The store keeps the state
//! ([`crate::store::Versioning`]) and acts on it in every write, read and delete.

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result, s3_error};

use super::HostPathS3;
use crate::s3::convert::s3_err;
use crate::store::Versioning;

impl HostPathS3 {
    pub(super) async fn put_bucket_versioning(
        &self,
        req: S3Request<PutBucketVersioningInput>,
    ) -> S3Result<S3Response<PutBucketVersioningOutput>> {
        let input = req.input;
        self.require_bucket(&input.bucket)?;
        let config = input.versioning_configuration;
        let status = status_of(input.mfa.as_deref(), &config).inspect_err(|e| {
            tracing::info!(bucket = input.bucket, error = %e, "versioning configuration refused");
        })?;
        self.store.set_bucket_versioning(&input.bucket, status).await.map_err(s3_err)?;
        Ok(S3Response::new(PutBucketVersioningOutput::default()))
    }

    pub(super) async fn get_bucket_versioning(
        &self,
        req: S3Request<GetBucketVersioningInput>,
    ) -> S3Result<S3Response<GetBucketVersioningOutput>> {
        let status = self.store.bucket_versioning(&req.input.bucket).await.map_err(s3_err)?;
        // Never set: an empty configuration, as S3 answers.
        Ok(S3Response::new(GetBucketVersioningOutput {
            status: status.map(|s| BucketVersioningStatus::from(s.as_str().to_owned())),
            mfa_delete: None,
        }))
    }
}

/// The state a PutBucketVersioning asks for; MFA delete is refused, since no MFA device can
/// be checked here.
fn status_of(mfa: Option<&str>, config: &VersioningConfiguration) -> S3Result<Versioning> {
    let mfa_delete = config.mfa_delete.as_ref().map(MFADelete::as_str);
    if mfa.is_some() || mfa_delete == Some(MFADelete::ENABLED) {
        return Err(s3_error!(
            NotImplemented,
            "MFA delete is not supported by this endpoint: send the configuration without \
             MfaDelete (or with MfaDelete Disabled) and without the x-amz-mfa header"
        ));
    }
    if mfa_delete.is_some_and(|m| m != MFADelete::DISABLED) {
        return Err(illegal(&format!("MfaDelete must be Enabled or Disabled, not {mfa_delete:?}")));
    }
    match config.status.as_ref().map(BucketVersioningStatus::as_str) {
        Some(BucketVersioningStatus::ENABLED) => Ok(Versioning::Enabled),
        Some(BucketVersioningStatus::SUSPENDED) => Ok(Versioning::Suspended),
        Some(other) => Err(illegal(&format!("Status must be Enabled or Suspended, not {other:?}"))),
        None => Err(illegal("the versioning configuration has no Status")),
    }
}

/// S3's answer to a versioning configuration it cannot take.
fn illegal(detail: &str) -> S3Error {
    S3Error::with_message(
        S3ErrorCode::IllegalVersioningConfigurationException,
        format!("The Versioning element must be specified correctly: {detail}"),
    )
}
