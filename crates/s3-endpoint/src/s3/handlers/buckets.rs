//! Bucket operations: listing, creating, deleting and locating buckets.

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use super::HostPathS3;
use crate::s3::convert::{decode_token, owner_of_req, s3_err, timestamp};
use crate::s3::rules::{self, DEFAULT_REGION};
use crate::store::StoreError;

/// Most buckets one ListBuckets page returns, as in S3.
const MAX_BUCKETS: i32 = 10_000;

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
                // Pages resume by name.
                names.sort_unstable();
                names
            }
            None => return Err(s3_error!(AccessDenied)),
        };
        let input = req.input;
        let prefix = input.prefix.unwrap_or_default();
        let after = input.continuation_token.as_deref().map(decode_token).transpose()?;
        let max = match input.max_buckets {
            None => MAX_BUCKETS,
            Some(n) if (1..=MAX_BUCKETS).contains(&n) => n,
            Some(_) => {
                return Err(s3_error!(InvalidArgument, "max-buckets must be between 1 and 10000"));
            }
        };
        let mut rest = names
            .into_iter()
            .filter(|name| {
                name.starts_with(&prefix) && after.as_ref().is_none_or(|after| name > after)
            })
            .peekable();
        let page: Vec<String> = rest.by_ref().take(usize::try_from(max).unwrap_or(0)).collect();
        let more = rest.peek().is_some();
        let continuation_token =
            more.then(|| page.last().map(|name| hex::encode(name.as_bytes()))).flatten();
        let buckets = page
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
            continuation_token,
            prefix: Some(prefix).filter(|p| !p.is_empty()),
        }))
    }

    pub(super) async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        // Past the access check, a claim key only gets here for a bucket it already has.
        let operator = self.require_admin(&req).is_ok();
        if !operator {
            self.require_own_existing_bucket(&req, &req.input.bucket)?;
        }
        let here = req.region.as_ref().map_or(DEFAULT_REGION, |r| r.as_str()).to_owned();
        let input = req.input;
        let with_lock = input.object_lock_enabled_for_bucket == Some(true);
        // ACLs and ownership controls are accepted and ignored: buckets here are never public,
        // whatever the operator asks for at creation (GetBucketAcl shows them private).
        let constraint = input
            .create_bucket_configuration
            .as_ref()
            .and_then(|c| c.location_constraint.as_ref())
            .map(|c| c.as_str().to_owned())
            .filter(|c| !c.is_empty());
        let location = rules::bucket_location(&here, constraint)?;
        let created = if operator {
            self.store.create_operator_bucket(&input.bucket, location.as_deref()).await
        } else {
            Err(StoreError::BucketAlreadyOwnedByYou(input.bucket.clone()))
        };
        let is_new = match created {
            Ok(_) => true,
            // S3's legacy rule in us-east-1: creating again a bucket one owns answers 200 (and
            // changes nothing here); every other region answers BucketAlreadyOwnedByYou.
            Err(StoreError::BucketAlreadyOwnedByYou(_)) if here == DEFAULT_REGION => false,
            Err(e) => return Err(s3_err(e)),
        };
        if with_lock && is_new {
            self.store.enable_object_lock(&input.bucket).await.map_err(s3_err)?;
        } else if with_lock
            && self.store.bucket_object_lock(&input.bucket).await.map_err(s3_err)?.is_none()
        {
            // Changing nothing would answer as if it had: object lock comes only with a new
            // bucket.
            return Err(s3_error!(
                InvalidBucketState,
                "Object lock can only be enabled when a bucket is created; this bucket exists \
                 without it"
            ));
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
        let bucket = &req.input.bucket;
        self.require_bucket(bucket)?;
        let location = match self.store.bucket_record(bucket) {
            // The operator's buckets are where they were created for.
            Some(record) if !record.created_by_provisioner => record.location,
            // Claims' buckets (and buckets made by hand) are in the region clients are given,
            // which is the one they sign for.
            _ => req.region.as_ref().map(|r| r.as_str().to_owned()),
        };
        // The default region is shown as an empty constraint, as S3 does.
        let constraint = location
            .filter(|r| r != DEFAULT_REGION && !r.is_empty())
            .map(BucketLocationConstraint::from);
        Ok(S3Response::new(GetBucketLocationOutput { location_constraint: constraint }))
    }
}
