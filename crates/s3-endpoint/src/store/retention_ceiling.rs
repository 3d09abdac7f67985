//! The operator's limits on the retentions a claim's keys set in a bucket: the longest
//! retention, and whether COMPLIANCE is allowed at all. The provisioner records them from the
//! bucket's StorageClass (`maxObjectLockRetentionDays`, `allowComplianceRetention`) in the
//! bucket's object lock file, which no S3 request writes; every retention a claim key sets
//! (PutObject, CopyObject and CreateMultipartUpload lock headers, PutObjectRetention, and the
//! default of PutObjectLockConfiguration) is checked against them. Without such limits a key
//! could lock data for a century, past anything its class lets the claim itself ask. The
//! operator credential is not bound: it sets what the operator decides.

use std::time::SystemTime;

use super::object_lock::{DefaultRetention, ObjectLock, RetentionCeiling, unix_ms};
use super::{BucketStore, StoreError, Writer};

impl BucketStore {
    /// The ceiling recorded for `bucket`, if any (none for a bucket without object lock).
    fn ceiling_of(&self, bucket: &str) -> Result<Option<RetentionCeiling>, StoreError> {
        Ok(self.bucket_object_lock_blocking(bucket)?.and_then(|lock| lock.ceiling))
    }

    /// Refuses, with [`StoreError::OverCeiling`], a retention in `lock` that `writer` may not
    /// set in `bucket`; the operator is never refused.
    pub async fn check_retention_ceiling(
        &self,
        bucket: &str,
        writer: &Writer,
        lock: &ObjectLock,
    ) -> Result<(), StoreError> {
        let Some(retention) = lock.retention.filter(|_| *writer != Writer::Operator) else {
            return Ok(());
        };
        let bucket = bucket.to_owned();
        self.blocking(move |store| {
            let Some(ceiling) = store.ceiling_of(&bucket)? else { return Ok(()) };
            match ceiling.refusal(&retention, unix_ms(SystemTime::now())) {
                Some(why) => Err(StoreError::OverCeiling(why)),
                None => Ok(()),
            }
        })
        .await
    }

    /// Refuses, with [`StoreError::OverCeiling`], a default retention `writer` may not set on
    /// `bucket`; the operator is never refused.
    pub async fn check_default_ceiling(
        &self,
        bucket: &str,
        writer: &Writer,
        default: Option<&DefaultRetention>,
    ) -> Result<(), StoreError> {
        let Some(default) = default.copied().filter(|_| *writer != Writer::Operator) else {
            return Ok(());
        };
        let bucket = bucket.to_owned();
        self.blocking(move |store| {
            let Some(ceiling) = store.ceiling_of(&bucket)? else { return Ok(()) };
            match ceiling.default_refusal(&default) {
                Some(why) => Err(StoreError::OverCeiling(why)),
                None => Ok(()),
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::store::{LockMode, Retention, RetentionPeriod};

    const DAY_MS: u64 = 24 * 60 * 60 * 1000;

    const NOW: u64 = 1_800_000_000_000;

    #[test]
    fn compliance_and_length_are_limited_as_recorded() {
        let ceiling = RetentionCeiling { compliance: false, max_days: Some(30) };
        let at = |mode, days: u64| Retention { mode, until_ms: NOW + days * DAY_MS };
        assert!(ceiling.refusal(&at(LockMode::Governance, 30), NOW).is_none());
        let long = ceiling.refusal(&at(LockMode::Governance, 31), NOW).unwrap();
        assert!(long.contains("30 days"), "{long}");
        let mode = ceiling.refusal(&at(LockMode::Compliance, 1), NOW).unwrap();
        assert!(mode.contains("allowComplianceRetention"), "{mode}");
        let open = RetentionCeiling { compliance: true, max_days: None };
        assert!(open.refusal(&at(LockMode::Compliance, 36_500), NOW).is_none());
        let default = |mode, period| DefaultRetention { mode, period };
        let years = default(LockMode::Governance, RetentionPeriod::Years(1));
        assert!(ceiling.default_refusal(&years).unwrap().contains("30 days"));
        assert!(
            ceiling
                .default_refusal(&default(LockMode::Governance, RetentionPeriod::Days(30)))
                .is_none()
        );
        let compliant = default(LockMode::Compliance, RetentionPeriod::Days(1));
        assert!(ceiling.default_refusal(&compliant).is_some());
    }

    proptest! {
        /// Whatever is accepted ends within the cap and is of an allowed mode.
        #[test]
        fn nothing_accepted_passes_the_ceiling(
            compliance in any::<bool>(), most in 1u32..1000, days in 0u64..2000,
            extra in 0u64..DAY_MS, governance in any::<bool>(),
        ) {
            let ceiling = RetentionCeiling { compliance, max_days: Some(most) };
            let mode = if governance { LockMode::Governance } else { LockMode::Compliance };
            let retention = Retention { mode, until_ms: NOW + days * DAY_MS + extra };
            if ceiling.refusal(&retention, NOW).is_none() {
                prop_assert!(retention.until_ms <= NOW + u64::from(most) * DAY_MS);
                prop_assert!(compliance || governance);
            }
        }
    }
}
