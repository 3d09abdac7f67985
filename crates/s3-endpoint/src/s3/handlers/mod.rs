//! The S3 operations over a [`BucketStore`], one file per family of operations.

mod acl;
mod bucket_tagging;
mod buckets;
mod cors;
mod expiration;
mod lifecycle;
mod listing;
mod multipart;
mod object_lock;
mod objects;
mod public_access_block;
mod tagging;
mod versioning;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use s3s::dto::*;
use s3s::{S3, S3Request, S3Response, S3Result, s3_error};

use super::convert::{max_keys, s3_err};
use crate::store::{BucketStore, ListPage, ListQuery, Writer};

/// The S3 operations, over a [`BucketStore`].
#[derive(Debug, Clone)]
pub struct HostPathS3 {
    store: Arc<BucketStore>,
}

impl HostPathS3 {
    /// The operations over `store`.
    pub fn new(store: Arc<BucketStore>) -> Self {
        Self { store }
    }

    /// Repeats the access check's verdict for operator-only handlers, so that they stay safe
    /// even if the service were built without [`BucketAccess`].
    fn require_admin<T>(&self, req: &S3Request<T>) -> S3Result<()> {
        match &req.credentials {
            Some(c) if self.store.is_admin(&c.access_key) => Ok(()),
            _ => Err(s3_error!(AccessDenied, "only the operator credential may do this")),
        }
    }

    /// Who writes with this request's key, for usage and quotas: the operator, or a claim's
    /// user (a key revoked since the access check is denied).
    fn writer_of<T>(&self, req: &S3Request<T>) -> S3Result<Writer> {
        let key = req.credentials.as_ref().map(|c| c.access_key.as_str()).unwrap_or_default();
        if self.store.is_admin(key) {
            return Ok(Writer::Operator);
        }
        match self.store.user_of_key(key) {
            Some(user) => Ok(Writer::Claim(user)),
            None => Err(s3_error!(AccessDenied, "the access key id does not exist any more")),
        }
    }

    /// Lets a claim key through only for `bucket` when it exists and the key reaches it: the
    /// one CreateBucket a claim key may send, answered as to an owner creating it again.
    fn require_own_existing_bucket<T>(&self, req: &S3Request<T>, bucket: &str) -> S3Result<()> {
        let key = req.credentials.as_ref().and_then(|c| self.store.lookup_key(&c.access_key));
        let exists = self.store.bucket_exists(bucket).map_err(s3_err)?;
        match key {
            Some(key) if exists && key.allows(bucket) => Ok(()),
            _ => Err(s3_error!(AccessDenied, "only the operator credential may create buckets")),
        }
    }

    /// `NoSuchBucket` unless `bucket` exists.
    fn require_bucket(&self, bucket: &str) -> S3Result<()> {
        if self.store.bucket_exists(bucket).map_err(s3_err)? {
            Ok(())
        } else {
            Err(s3_error!(NoSuchBucket))
        }
    }

    /// When `bucket` was created: from its record, else its directory's modification time.
    fn created(&self, bucket: &str) -> SystemTime {
        match self.store.bucket_record(bucket) {
            Some(record) => UNIX_EPOCH + Duration::from_secs(record.created_unix),
            None => self
                .store
                .bucket_path(bucket)
                .ok()
                .and_then(|p| std::fs::metadata(p).ok())
                .and_then(|m| m.modified().ok())
                .unwrap_or(UNIX_EPOCH),
        }
    }

    async fn list(
        &self,
        bucket: &str,
        prefix: Option<String>,
        delimiter: Option<String>,
        after: Option<String>,
        max: Option<i32>,
    ) -> S3Result<ListPage> {
        let query = ListQuery {
            prefix: prefix.unwrap_or_default(),
            delimiter,
            after: after.filter(|a| !a.is_empty()),
            max_keys: max_keys(max)?,
        };
        self.store.list_objects(bucket, query).await.map_err(s3_err)
    }
}

/// `s3s` takes every operation in one `impl S3`: each one here calls the handler of the same
/// name in its family's file (an inherent method, which a path finds before the trait's).
macro_rules! operations {
    ($($name:ident($input:ident) -> $output:ident;)*) => {
        #[async_trait::async_trait]
        impl S3 for HostPathS3 {
            $(
                async fn $name(&self, req: S3Request<$input>) -> S3Result<S3Response<$output>> {
                    HostPathS3::$name(self, req).await
                }
            )*
        }
    };
}

operations! {
    list_buckets(ListBucketsInput) -> ListBucketsOutput;
    create_bucket(CreateBucketInput) -> CreateBucketOutput;
    delete_bucket(DeleteBucketInput) -> DeleteBucketOutput;
    head_bucket(HeadBucketInput) -> HeadBucketOutput;
    get_bucket_location(GetBucketLocationInput) -> GetBucketLocationOutput;
    get_bucket_acl(GetBucketAclInput) -> GetBucketAclOutput;
    put_bucket_acl(PutBucketAclInput) -> PutBucketAclOutput;
    get_object_acl(GetObjectAclInput) -> GetObjectAclOutput;
    put_object_acl(PutObjectAclInput) -> PutObjectAclOutput;
    list_objects(ListObjectsInput) -> ListObjectsOutput;
    list_objects_v2(ListObjectsV2Input) -> ListObjectsV2Output;
    list_object_versions(ListObjectVersionsInput) -> ListObjectVersionsOutput;
    put_object(PutObjectInput) -> PutObjectOutput;
    get_object(GetObjectInput) -> GetObjectOutput;
    head_object(HeadObjectInput) -> HeadObjectOutput;
    get_object_attributes(GetObjectAttributesInput) -> GetObjectAttributesOutput;
    delete_object(DeleteObjectInput) -> DeleteObjectOutput;
    delete_objects(DeleteObjectsInput) -> DeleteObjectsOutput;
    copy_object(CopyObjectInput) -> CopyObjectOutput;
    create_multipart_upload(CreateMultipartUploadInput) -> CreateMultipartUploadOutput;
    upload_part(UploadPartInput) -> UploadPartOutput;
    upload_part_copy(UploadPartCopyInput) -> UploadPartCopyOutput;
    complete_multipart_upload(CompleteMultipartUploadInput) -> CompleteMultipartUploadOutput;
    abort_multipart_upload(AbortMultipartUploadInput) -> AbortMultipartUploadOutput;
    list_parts(ListPartsInput) -> ListPartsOutput;
    list_multipart_uploads(ListMultipartUploadsInput) -> ListMultipartUploadsOutput;
    put_object_tagging(PutObjectTaggingInput) -> PutObjectTaggingOutput;
    put_bucket_cors(PutBucketCorsInput) -> PutBucketCorsOutput;
    get_bucket_cors(GetBucketCorsInput) -> GetBucketCorsOutput;
    delete_bucket_cors(DeleteBucketCorsInput) -> DeleteBucketCorsOutput;
    put_bucket_lifecycle_configuration(PutBucketLifecycleConfigurationInput)
        -> PutBucketLifecycleConfigurationOutput;
    get_bucket_lifecycle_configuration(GetBucketLifecycleConfigurationInput)
        -> GetBucketLifecycleConfigurationOutput;
    delete_bucket_lifecycle(DeleteBucketLifecycleInput) -> DeleteBucketLifecycleOutput;
    get_object_tagging(GetObjectTaggingInput) -> GetObjectTaggingOutput;
    delete_object_tagging(DeleteObjectTaggingInput) -> DeleteObjectTaggingOutput;
    put_object_lock_configuration(PutObjectLockConfigurationInput)
        -> PutObjectLockConfigurationOutput;
    get_object_lock_configuration(GetObjectLockConfigurationInput)
        -> GetObjectLockConfigurationOutput;
    put_object_retention(PutObjectRetentionInput) -> PutObjectRetentionOutput;
    get_object_retention(GetObjectRetentionInput) -> GetObjectRetentionOutput;
    put_object_legal_hold(PutObjectLegalHoldInput) -> PutObjectLegalHoldOutput;
    get_object_legal_hold(GetObjectLegalHoldInput) -> GetObjectLegalHoldOutput;
    put_bucket_versioning(PutBucketVersioningInput) -> PutBucketVersioningOutput;
    get_bucket_versioning(GetBucketVersioningInput) -> GetBucketVersioningOutput;
    put_bucket_tagging(PutBucketTaggingInput) -> PutBucketTaggingOutput;
    get_bucket_tagging(GetBucketTaggingInput) -> GetBucketTaggingOutput;
    delete_bucket_tagging(DeleteBucketTaggingInput) -> DeleteBucketTaggingOutput;
    put_public_access_block(PutPublicAccessBlockInput) -> PutPublicAccessBlockOutput;
    get_public_access_block(GetPublicAccessBlockInput) -> GetPublicAccessBlockOutput;
    delete_public_access_block(DeletePublicAccessBlockInput) -> DeletePublicAccessBlockOutput;
}
