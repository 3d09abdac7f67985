//! Object lock: PutObjectLockConfiguration, GetObjectLockConfiguration, Put/GetObjectRetention,
//! Put/GetObjectLegalHold, and the governance bypass deletions and retention changes carry.
//! Documents and headers are read by `object_lock_rules`; what a change may do is decided in
//! the store, which refuses with S3's codes (`InvalidBucketState` on a bucket created without
//! object lock, `AccessDenied` on a protected object).

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use super::HostPathS3;
use crate::s3::convert::s3_err;
use crate::s3::object_lock_rules::{
    config_doc, default_of, legal_hold_of, legal_hold_status, retention_doc, retention_of,
};
use crate::store::{Bypass, ObjectLock, Writer};

impl HostPathS3 {
    /// The governance bypass of a request on `bucket`: asked for with
    /// `x-amz-bypass-governance-retention: true`, permitted to the creating claim's key and the operator
    /// credential only.
    pub(super) fn bypass_of<T>(
        &self,
        req: &S3Request<T>,
        bucket: &str,
        requested: Option<bool>,
    ) -> Bypass {
        let key = req.credentials.as_ref().map(|c| c.access_key.as_str()).unwrap_or_default();
        let requested = requested.unwrap_or(false);
        Bypass::of(requested, requested && self.store.may_bypass_governance(bucket, key))
    }

    /// `InvalidRequest` when a write asks for a lock in a bucket without object lock, before
    /// its body is received (the store checks again when it commits); `AccessDenied` when a
    /// claim's key asks a retention past its bucket's ceiling.
    pub(super) async fn check_lock_allowed(
        &self,
        bucket: &str,
        lock: &ObjectLock,
        writer: &Writer,
    ) -> S3Result<()> {
        if lock.is_none() {
            return Ok(());
        }
        if self.store.bucket_object_lock(bucket).await.map_err(s3_err)?.is_none() {
            return Err(s3_error!(InvalidRequest, "Bucket is missing Object Lock Configuration"));
        }
        self.store.check_retention_ceiling(bucket, writer, lock).await.map_err(|e| {
            tracing::info!(bucket, error = %e, "object lock of a write refused");
            s3_err(e)
        })
    }

    pub(super) async fn put_object_lock_configuration(
        &self,
        req: S3Request<PutObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<PutObjectLockConfigurationOutput>> {
        let writer = self.writer_of(&req)?;
        let input = req.input;
        self.require_bucket(&input.bucket)?;
        let default = default_of(input.object_lock_configuration).inspect_err(|e| {
            tracing::info!(bucket = input.bucket, error = %e, "object lock configuration refused");
        })?;
        let refused = |e| {
            tracing::info!(bucket = input.bucket, error = %e, "object lock configuration refused");
            s3_err(e)
        };
        let store = &self.store;
        store
            .check_default_ceiling(&input.bucket, &writer, default.as_ref())
            .await
            .map_err(refused)?;
        store.set_object_lock_default(&input.bucket, default).await.map_err(refused)?;
        Ok(S3Response::new(PutObjectLockConfigurationOutput::default()))
    }

    pub(super) async fn get_object_lock_configuration(
        &self,
        req: S3Request<GetObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<GetObjectLockConfigurationOutput>> {
        match self.store.bucket_object_lock(&req.input.bucket).await.map_err(s3_err)? {
            Some(config) => Ok(S3Response::new(GetObjectLockConfigurationOutput {
                object_lock_configuration: Some(config_doc(&config)),
            })),
            None => Err(s3_error!(
                ObjectLockConfigurationNotFoundError,
                "Object Lock configuration does not exist for this bucket"
            )),
        }
    }

    pub(super) async fn put_object_retention(
        &self,
        req: S3Request<PutObjectRetentionInput>,
    ) -> S3Result<S3Response<PutObjectRetentionOutput>> {
        let bypass = self.bypass_of(&req, &req.input.bucket, req.input.bypass_governance_retention);
        let writer = self.writer_of(&req)?;
        let input = req.input;
        let retention = retention_of(input.retention)?;
        let version = input.version_id.as_deref();
        let refused = |e| {
            tracing::info!(bucket = input.bucket, key = input.key, error = %e, "retention refused");
            s3_err(e)
        };
        let asked = ObjectLock { retention, ..ObjectLock::default() };
        let store = &self.store;
        store.check_retention_ceiling(&input.bucket, &writer, &asked).await.map_err(refused)?;
        store
            .set_object_retention(&input.bucket, &input.key, version, retention, bypass)
            .await
            .map_err(refused)?;
        Ok(S3Response::new(PutObjectRetentionOutput::default()))
    }

    pub(super) async fn get_object_retention(
        &self,
        req: S3Request<GetObjectRetentionInput>,
    ) -> S3Result<S3Response<GetObjectRetentionOutput>> {
        let input = req.input;
        let lock = self
            .store
            .object_lock(&input.bucket, &input.key, input.version_id.as_deref())
            .await
            .map_err(s3_err)?;
        match lock.retention {
            Some(retention) => Ok(S3Response::new(GetObjectRetentionOutput {
                retention: Some(retention_doc(&retention)),
            })),
            None => Err(s3_error!(
                NoSuchObjectLockConfiguration,
                "The specified object does not have a ObjectLock configuration"
            )),
        }
    }

    pub(super) async fn put_object_legal_hold(
        &self,
        req: S3Request<PutObjectLegalHoldInput>,
    ) -> S3Result<S3Response<PutObjectLegalHoldOutput>> {
        let input = req.input;
        let on = legal_hold_of(input.legal_hold)?;
        let version = input.version_id.as_deref();
        self.store
            .set_object_legal_hold(&input.bucket, &input.key, version, on)
            .await
            .map_err(s3_err)?;
        Ok(S3Response::new(PutObjectLegalHoldOutput::default()))
    }

    pub(super) async fn get_object_legal_hold(
        &self,
        req: S3Request<GetObjectLegalHoldInput>,
    ) -> S3Result<S3Response<GetObjectLegalHoldOutput>> {
        let input = req.input;
        let lock = self
            .store
            .object_lock(&input.bucket, &input.key, input.version_id.as_deref())
            .await
            .map_err(s3_err)?;
        if !lock.legal_hold && !lock.legal_hold_set {
            return Err(s3_error!(
                NoSuchObjectLockConfiguration,
                "The specified object does not have a ObjectLock configuration"
            ));
        }
        Ok(S3Response::new(GetObjectLegalHoldOutput {
            legal_hold: Some(ObjectLockLegalHold {
                status: Some(legal_hold_status(lock.legal_hold)),
            }),
        }))
    }
}
