//! Bucket operations: listing, creating, deleting and locating buckets.

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use super::HostPathS3;
use crate::s3::convert::{owner_of_req, s3_err, timestamp};
use crate::store::StoreError;

impl HostPathS3 {
    pub(super) async fn list_buckets(
        &self,
        req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
        let owner = owner_of_req(&req);
        let access_key = req.credentials.as_ref().map(|c| c.access_key.as_str());
        let names = match access_key {
            Some(id) if self.store.is_admin(id) => {
                self.store.bucket_names().await.map_err(s3_err)?
            }
            Some(id) => {
                let key = self.store.lookup_key(id).ok_or_else(|| s3_error!(AccessDenied))?;
                let mut names = Vec::new();
                for name in key.buckets {
                    if self.store.bucket_exists(&name).map_err(s3_err)? {
                        names.push(name);
                    }
                }
                names
            }
            None => return Err(s3_error!(AccessDenied)),
        };
        let buckets = names
            .into_iter()
            .map(|name| Bucket {
                creation_date: Some(timestamp(self.created(&name))),
                name: Some(name),
                ..Bucket::default()
            })
            .collect();
        Ok(S3Response::new(ListBucketsOutput {
            buckets: Some(buckets),
            owner: Some(owner),
            ..Default::default()
        }))
    }

    pub(super) async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        self.require_admin(&req)?;
        let region = req.region.as_ref().map(|r| r.as_str().to_owned());
        let input = req.input;
        if input.object_lock_enabled_for_bucket == Some(true) {
            return Err(s3_error!(NotImplemented, "object lock is not supported"));
        }
        // ACLs and ownership controls are accepted and ignored: buckets here are never public,
        // whatever the operator asks for at creation (GetBucketAcl shows them private).
        let constraint = input
            .create_bucket_configuration
            .as_ref()
            .and_then(|c| c.location_constraint.as_ref())
            .map(|c| c.as_str().to_owned());
        let here = region.unwrap_or_else(|| "us-east-1".to_owned());
        if let Some(constraint) = constraint.filter(|c| !c.is_empty())
            && constraint != here
        {
            return Err(s3_error!(
                IllegalLocationConstraintException,
                "The {constraint} location constraint is incompatible for the region \
                 specific endpoint this request was sent to."
            ));
        }
        match self.store.create_operator_bucket(&input.bucket).await {
            Ok(_) => {}
            // S3's legacy rule in us-east-1: creating again a bucket one owns answers 200 (and
            // changes nothing here); every other region answers BucketAlreadyOwnedByYou.
            Err(StoreError::BucketAlreadyOwnedByYou(_)) if here == "us-east-1" => {}
            Err(e) => return Err(s3_err(e)),
        }
        Ok(S3Response::new(CreateBucketOutput { location: Some(format!("/{}", input.bucket)) }))
    }

    pub(super) async fn delete_bucket(
        &self,
        req: S3Request<DeleteBucketInput>,
    ) -> S3Result<S3Response<DeleteBucketOutput>> {
        self.require_admin(&req)?;
        self.store.delete_empty_bucket(&req.input.bucket).await.map_err(s3_err)?;
        Ok(S3Response::new(DeleteBucketOutput::default()))
    }

    pub(super) async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        self.require_bucket(&req.input.bucket)?;
        Ok(S3Response::new(HeadBucketOutput::default()))
    }

    pub(super) async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        self.require_bucket(&req.input.bucket)?;
        // us-east-1 is shown as an empty constraint, as S3 does.
        let constraint = req
            .region
            .as_ref()
            .map(|r| r.as_str().to_owned())
            .filter(|r| r != "us-east-1" && !r.is_empty())
            .map(BucketLocationConstraint::from);
        Ok(S3Response::new(GetBucketLocationOutput { location_constraint: constraint }))
    }
}
