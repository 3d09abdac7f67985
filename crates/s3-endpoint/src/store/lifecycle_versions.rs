//! The lifecycle pass over one key's history in a versioned bucket: `NoncurrentVersionExpiration`
//! (`NoncurrentDays`, `NewerNoncurrentVersions`) removes noncurrent versions for good, and a
//! delete marker with no version left behind it goes by `ExpiredObjectDeleteMarker` or by an
//! expiration by age (as S3 cleans them up), both through
//! [`BucketStore::remove_version_permanently`], under the key's lock, decided again on the
//! history as it stands then. Every rule of the bucket is applied in one reading of the history.

use std::time::SystemTime;

use super::lifecycle_match::BucketRules;
use super::lifecycle_pass::LifecyclePassReport;
use super::object_lock::Bypass;
use super::{BucketStore, StoreError};

impl BucketStore {
    /// Applies `rules`' version actions to `key` of `bucket`; answers how many versions were
    /// examined.
    pub(super) fn expire_versions(
        &self,
        bucket: &str,
        rules: &BucketRules,
        key: &str,
        now: SystemTime,
        report: &mut LifecyclePassReport,
    ) -> u64 {
        match self.expire_versions_of(bucket, key, rules, now) {
            Ok(outcome) => {
                if outcome.removed > 0 {
                    tracing::debug!(bucket, key, outcome.removed, "versions expired");
                }
                report.examined += outcome.examined;
                report.expired += outcome.removed;
                report.locked += outcome.locked;
                outcome.examined
            }
            Err(e) => {
                tracing::warn!(bucket, key, error = %e, "expiring versions failed");
                report.failed += 1;
                1
            }
        }
    }

    fn expire_versions_of(
        &self,
        bucket: &str,
        key: &str,
        rules: &BucketRules,
        now: SystemTime,
    ) -> Result<Outcome, StoreError> {
        let dir = self.bucket_dir(bucket)?;
        let _guard = self.key_lock(bucket, key);
        let mut outcome = Outcome::default();
        let mut history = self.versions_of(bucket, &dir, key)?;
        outcome.examined = history.len() as u64;
        // Oldest first, so that each removal leaves the indices of the others valid.
        for index in (1..history.len()).rev() {
            // Noncurrent since its successor was made.
            let since = history[index - 1].stamp().made();
            if rules.noncurrent_due(&history[index], index, since, now) {
                match self.remove_version_permanently(bucket, &dir, &history, index, Bypass::No) {
                    Ok(()) => outcome.removed += 1,
                    // Object lock outranks lifecycle: the version stays, the pass goes on.
                    Err(StoreError::ObjectLocked(refusal)) => {
                        tracing::debug!(bucket, key, %refusal, "expiry waits for object lock");
                        outcome.locked += 1;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        if outcome.removed > 0 {
            history = self.versions_of(bucket, &dir, key)?;
        }
        // A marker left alone by the removals above goes in the same look.
        if let [only] = history.as_slice()
            && only.is_marker()
            && rules.lone_marker_due(key, only.stamp().made(), now)
        {
            self.remove_version_permanently(bucket, &dir, &history, 0, Bypass::No)?;
            outcome.removed += 1;
        }
        Ok(outcome)
    }
}

/// What the rules did to one key's history.
#[derive(Debug, Default)]
struct Outcome {
    examined: u64,
    removed: u64,
    locked: u64,
}
