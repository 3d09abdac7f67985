//! The public access block: PutPublicAccessBlock, GetPublicAccessBlock and
//! DeletePublicAccessBlock. It is kept and read back for the tools that set it and changes no
//! access decision: nothing here is ever public (see [`crate::store::PublicAccessBlock`]).
//! Who may set it is decided before (a bucket-wide setting, see `auth`).

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

use super::HostPathS3;
use crate::s3::convert::s3_err;
use crate::store::PublicAccessBlock;

impl HostPathS3 {
    pub(super) async fn put_public_access_block(
        &self,
        req: S3Request<PutPublicAccessBlockInput>,
    ) -> S3Result<S3Response<PutPublicAccessBlockOutput>> {
        let input = req.input;
        let wire = input.public_access_block_configuration;
        // A setting left out is off, as S3 reads it.
        let block = PublicAccessBlock {
            block_public_acls: wire.block_public_acls.unwrap_or(false),
            ignore_public_acls: wire.ignore_public_acls.unwrap_or(false),
            block_public_policy: wire.block_public_policy.unwrap_or(false),
            restrict_public_buckets: wire.restrict_public_buckets.unwrap_or(false),
        };
        self.store.set_public_access_block(&input.bucket, Some(block)).await.map_err(s3_err)?;
        Ok(S3Response::new(PutPublicAccessBlockOutput::default()))
    }

    pub(super) async fn get_public_access_block(
        &self,
        req: S3Request<GetPublicAccessBlockInput>,
    ) -> S3Result<S3Response<GetPublicAccessBlockOutput>> {
        let Some(block) =
            self.store.public_access_block(&req.input.bucket).await.map_err(s3_err)?
        else {
            let mut error = S3Error::with_message(
                S3ErrorCode::Custom(NO_SUCH_CONFIGURATION.into()),
                "The public access block configuration was not found",
            );
            error.set_status_code(http::StatusCode::NOT_FOUND);
            return Err(error);
        };
        let wire = PublicAccessBlockConfiguration {
            block_public_acls: Some(block.block_public_acls),
            ignore_public_acls: Some(block.ignore_public_acls),
            block_public_policy: Some(block.block_public_policy),
            restrict_public_buckets: Some(block.restrict_public_buckets),
        };
        Ok(S3Response::new(GetPublicAccessBlockOutput {
            public_access_block_configuration: Some(wire),
        }))
    }

    pub(super) async fn delete_public_access_block(
        &self,
        req: S3Request<DeletePublicAccessBlockInput>,
    ) -> S3Result<S3Response<DeletePublicAccessBlockOutput>> {
        self.store.set_public_access_block(&req.input.bucket, None).await.map_err(s3_err)?;
        let mut response = S3Response::new(DeletePublicAccessBlockOutput::default());
        // S3 answers 204 No Content.
        response.status = Some(http::StatusCode::NO_CONTENT);
        Ok(response)
    }
}

/// S3's error for a bucket without a public access block (`s3s` has no code of its own for it).
const NO_SUCH_CONFIGURATION: &str = "NoSuchPublicAccessBlockConfiguration";
