//! ACL operations. Buckets and objects here are only ever private (S3's own default,
//! BucketOwnerEnforced): the private ACL is shown, and only it may be set.

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result};

use super::HostPathS3;
use crate::s3::convert::{owner_of_req, s3_err};
use crate::s3::rules;

impl HostPathS3 {
    pub(super) async fn get_bucket_acl(
        &self,
        req: S3Request<GetBucketAclInput>,
    ) -> S3Result<S3Response<GetBucketAclOutput>> {
        self.require_bucket(&req.input.bucket)?;
        let (owner, grants) = rules::private_acl(owner_of_req(&req));
        Ok(S3Response::new(GetBucketAclOutput { owner: Some(owner), grants: Some(grants) }))
    }

    pub(super) async fn put_bucket_acl(
        &self,
        req: S3Request<PutBucketAclInput>,
    ) -> S3Result<S3Response<PutBucketAclOutput>> {
        self.require_bucket(&req.input.bucket)?;
        let owner = owner_of_req(&req);
        let input = &req.input;
        rules::require_private_acl(
            input.acl.as_ref().map(BucketCannedACL::as_str),
            &[
                input.grant_full_control.as_ref(),
                input.grant_read.as_ref(),
                input.grant_read_acp.as_ref(),
                input.grant_write.as_ref(),
                input.grant_write_acp.as_ref(),
            ],
        )?;
        require_owner_only_policy(input.access_control_policy.as_ref(), &owner)?;
        Ok(S3Response::new(PutBucketAclOutput::default()))
    }

    pub(super) async fn get_object_acl(
        &self,
        req: S3Request<GetObjectAclInput>,
    ) -> S3Result<S3Response<GetObjectAclOutput>> {
        self.store.head_object(&req.input.bucket, &req.input.key).await.map_err(s3_err)?;
        let (owner, grants) = rules::private_acl(owner_of_req(&req));
        Ok(S3Response::new(GetObjectAclOutput {
            owner: Some(owner),
            grants: Some(grants),
            ..Default::default()
        }))
    }

    pub(super) async fn put_object_acl(
        &self,
        req: S3Request<PutObjectAclInput>,
    ) -> S3Result<S3Response<PutObjectAclOutput>> {
        self.store.head_object(&req.input.bucket, &req.input.key).await.map_err(s3_err)?;
        let owner = owner_of_req(&req);
        let input = &req.input;
        rules::require_private_acl(
            input.acl.as_ref().map(ObjectCannedACL::as_str),
            &[
                input.grant_full_control.as_ref(),
                input.grant_read.as_ref(),
                input.grant_read_acp.as_ref(),
                input.grant_write.as_ref(),
                input.grant_write_acp.as_ref(),
            ],
        )?;
        require_owner_only_policy(input.access_control_policy.as_ref(), &owner)?;
        Ok(S3Response::new(PutObjectAclOutput::default()))
    }
}

/// An AccessControlPolicy body may only restate the private ACL: the owner with full control.
fn require_owner_only_policy(policy: Option<&AccessControlPolicy>, owner: &Owner) -> S3Result<()> {
    let Some(policy) = policy else { return Ok(()) };
    let grants = policy.grants.as_deref().unwrap_or_default();
    let owner_only = grants.iter().all(|grant| {
        let full =
            grant.permission.as_ref().is_some_and(|p| p.as_str() == Permission::FULL_CONTROL);
        let to_owner = grant.grantee.as_ref().is_some_and(|g| g.id.is_some() && g.id == owner.id);
        full && to_owner
    });
    if owner_only { Ok(()) } else { Err(rules::acl_not_supported()) }
}
