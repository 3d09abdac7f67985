//! Versioning and object lock of a claim's bucket through the S3 API: `PutBucketVersioning`,
//! and `GetObjectLockConfiguration` / `PutObjectLockConfiguration` for a bucket created with
//! object lock (see [`crate::bucket`]'s `create`).

use aws_sdk_s3::types::{
    BucketVersioningStatus, DefaultRetention, ObjectLockConfiguration, ObjectLockEnabled,
    ObjectLockRetentionMode, ObjectLockRule, VersioningConfiguration,
};
use bucket_provisioner::BackendError;
use bucket_provisioner::bucket::features::object_lock::{Mode, ObjectLock, Period, Retention};
use bucket_provisioner::bucket::features::versioning::Versioning;

use crate::aws::{classify, code};
use crate::bucket::Buckets;

impl Buckets<'_> {
    /// Sets the versioning state of `bucket`.
    pub(crate) async fn set_versioning(
        &self,
        bucket: &str,
        state: Versioning,
    ) -> Result<(), BackendError> {
        let status = BucketVersioningStatus::from(state.as_str());
        let configuration = VersioningConfiguration::builder().status(status).build();
        let request = self.s3.put_bucket_versioning().bucket(bucket);
        request
            .versioning_configuration(configuration)
            .send()
            .await
            .map_err(|e| classify(e, &format!("s3:PutBucketVersioning {bucket}"), self.owner))?;
        Ok(())
    }

    /// The object lock of `bucket`: `None` when it has none, else its default retention.
    pub(crate) async fn object_lock(
        &self,
        bucket: &str,
    ) -> Result<Option<Option<Retention>>, BackendError> {
        let action = format!("s3:GetBucketObjectLockConfiguration {bucket}");
        let found = match self.s3.get_object_lock_configuration().bucket(bucket).send().await {
            Ok(found) => found,
            Err(e) if code(&e) == Some("ObjectLockConfigurationNotFoundError") => return Ok(None),
            Err(e) => return Err(classify(e, &action, self.owner)),
        };
        let Some(configuration) = found.object_lock_configuration() else { return Ok(None) };
        if configuration.object_lock_enabled() != Some(&ObjectLockEnabled::Enabled) {
            return Ok(None);
        }
        let retention = configuration.rule().and_then(|r| r.default_retention());
        let Some(retention) = retention else { return Ok(Some(None)) };
        let mode = retention.mode().and_then(|m| Mode::parse(m.as_str()));
        let period = match (retention.days(), retention.years()) {
            (Some(days), _) if days > 0 => u32::try_from(days).ok().map(Period::Days),
            (_, Some(years)) if years > 0 => u32::try_from(years).ok().map(Period::Years),
            _ => None,
        };
        match (mode, period) {
            (Some(mode), Some(period)) => Ok(Some(Some(Retention { mode, period }))),
            // A retention this provisioner cannot read: treated as the firmest, so no claim
            // change can weaken what it does not understand.
            _ => Err(BackendError::permanent(
                "UnreadableObjectLock",
                format!("{action}: the default retention {retention:?} is not one S3 documents"),
            )),
        }
    }

    /// Sets the default retention of `bucket`, whose object lock is on, to what `lock` asks
    /// (none: objects are held only when their writer says so).
    pub(crate) async fn set_object_lock(
        &self,
        bucket: &str,
        lock: &ObjectLock,
    ) -> Result<(), BackendError> {
        let rule = lock.retention.map(|retention| {
            let (days, years) = match retention.period {
                Period::Days(days) => (Some(days), None),
                Period::Years(years) => (None, Some(years)),
            };
            let as_i32 = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
            ObjectLockRule::builder()
                .default_retention(
                    DefaultRetention::builder()
                        .mode(ObjectLockRetentionMode::from(retention.mode.as_str()))
                        .set_days(days.map(as_i32))
                        .set_years(years.map(as_i32))
                        .build(),
                )
                .build()
        });
        let configuration = ObjectLockConfiguration::builder()
            .object_lock_enabled(ObjectLockEnabled::Enabled)
            .set_rule(rule)
            .build();
        let request = self.s3.put_object_lock_configuration().bucket(bucket);
        request.object_lock_configuration(configuration).send().await.map_err(|e| {
            classify(e, &format!("s3:PutBucketObjectLockConfiguration {bucket}"), self.owner)
        })?;
        Ok(())
    }
}
