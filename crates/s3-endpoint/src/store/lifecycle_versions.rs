//! The lifecycle pass over a versioned bucket's history: `NoncurrentVersionExpiration`
//! (`NoncurrentDays`, `NewerNoncurrentVersions`) removes noncurrent versions for good, and
//! `ExpiredObjectDeleteMarker` removes a delete marker with no version left behind it, both
//! through [`BucketStore::remove_version_permanently`], under the key's lock, decided again on
//! the history as it stands then.

use std::time::SystemTime;

use super::lifecycle::{LifecycleRule, days_after};
use super::lifecycle_pass::LifecyclePassReport;
use super::object_lock::Bypass;
use super::versions::Version;
use super::{BucketStore, StoreError};

impl BucketStore {
    /// Applies `rule`'s version actions to every key of `bucket` with noncurrent versions.
    pub(super) fn expire_versions(
        &self,
        bucket: &str,
        rule: &LifecycleRule,
        now: SystemTime,
        stop: &dyn Fn() -> bool,
        report: &mut LifecyclePassReport,
    ) {
        let prefix = rule.filter.prefix.clone().unwrap_or_default();
        let keys = match self.archived_keys(bucket, &prefix) {
            Ok(keys) => keys,
            Err(e) => {
                tracing::warn!(bucket, error = %e, "listing a bucket's versions failed");
                report.failed += 1;
                return;
            }
        };
        for key in keys {
            if stop() {
                report.stopped = true;
                return;
            }
            match self.expire_versions_of(bucket, &key, rule, now) {
                Ok((removed, locked)) => {
                    if removed > 0 {
                        tracing::debug!(bucket, key, removed, "versions expired");
                    }
                    report.expired += removed;
                    report.locked += locked;
                }
                Err(e) => {
                    tracing::warn!(bucket, key, error = %e, "expiring versions failed");
                    report.failed += 1;
                }
            }
        }
    }

    /// The version actions of `rule` on `key`; answers how many versions and markers went, and
    /// how many due versions object lock kept.
    fn expire_versions_of(
        &self,
        bucket: &str,
        key: &str,
        rule: &LifecycleRule,
        now: SystemTime,
    ) -> Result<(u64, u64), StoreError> {
        let dir = self.bucket_dir(bucket)?;
        let _guard = self.key_lock(bucket, key);
        let (mut removed, mut locked) = (0, 0);
        let history = self.versions_of(bucket, &dir, key)?;
        if let Some(noncurrent) = &rule.noncurrent_expiration {
            let keep = noncurrent.newer_versions.map_or(0, |n| usize::try_from(n).unwrap_or(0));
            // Oldest first, so that each removal leaves the indices of the others valid.
            for index in (1..history.len()).rev() {
                let version = &history[index];
                // Noncurrent since its successor was made; the `keep` newest noncurrent stay.
                let since = history[index - 1].stamp().made();
                let due = noncurrent.days.is_none_or(|days| days_after(since, days) <= now);
                if index > keep && due && matches(rule, version) {
                    match self.remove_version_permanently(bucket, &dir, &history, index, Bypass::No)
                    {
                        Ok(()) => removed += 1,
                        // Object lock outranks lifecycle: the version stays, the pass goes on.
                        Err(StoreError::ObjectLocked(refusal)) => {
                            tracing::debug!(bucket, key, %refusal, "expiry waits for object lock");
                            locked += 1;
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        let expire_markers =
            rule.expiration.as_ref().is_some_and(|e| e.expired_object_delete_marker == Some(true));
        if expire_markers && rule.filter.prefix.as_deref().is_none_or(|p| key.starts_with(p)) {
            let history = self.versions_of(bucket, &dir, key)?;
            if let [only] = history.as_slice()
                && only.is_marker()
            {
                self.remove_version_permanently(bucket, &dir, &history, 0, Bypass::No)?;
                removed += 1;
            }
        }
        Ok((removed, locked))
    }
}

/// Whether `rule`'s filter takes `version`: a marker by its key alone (it has no size or tags).
fn matches(rule: &LifecycleRule, version: &Version) -> bool {
    let meta = &version.meta;
    if version.is_marker() {
        rule.filter.prefix.as_deref().is_none_or(|p| meta.key.starts_with(p))
    } else {
        rule.filter.matches(&meta.key, meta.size, &meta.attrs.tags)
    }
}
