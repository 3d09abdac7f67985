//! The lifecycle pass: every bucket's rules applied once, at a given time. Objects a rule makes
//! due are removed by the same path as DeleteObject (so usage and quotas drop with them), each
//! checked again under its commit lock (one written since it was listed is a new object, and
//! stays); uploads a rule makes due are aborted as AbortMultipartUpload does.
//!
//! Nothing of a pass is kept in memory between passes: what is due follows from the stored
//! rules and the objects' and uploads' own times, so a pass interrupted by a crash or a restart
//! is simply done again, and whatever expired while the endpoint was down goes at its first
//! pass. In a versioned bucket, expiring an object makes a delete marker (as DeleteObject does
//! there), and `lifecycle_versions` acts on noncurrent versions and lone delete markers.

use std::fs;
use std::io;
use std::time::SystemTime;

use super::lifecycle::{LifecycleConfig, LifecycleRule};
use super::lifecycle_file::LIFECYCLE_FILE;
use super::object_lock::Bypass;
use super::{BucketStore, ListQuery, ObjectInfo, StoreError};

/// Objects listed at a time while a pass walks a bucket.
const PAGE: usize = 1000;

/// What one lifecycle pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LifecyclePassReport {
    /// Buckets whose rules were applied.
    pub buckets: u64,
    /// Objects removed (or, in a versioned bucket, given a delete marker), noncurrent versions
    /// and delete markers removed.
    pub expired: u64,
    /// Multipart uploads aborted.
    pub aborted: u64,
    /// Objects due to expire that object lock keeps (a retention or a legal hold); a later
    /// pass removes them once nothing protects them.
    pub locked: u64,
    /// Buckets, objects or uploads that could not be handled (each logged); the next pass
    /// tries them again.
    pub failed: u64,
    /// Whether the pass was stopped before it was done.
    pub stopped: bool,
}

impl BucketStore {
    /// Applies every bucket's lifecycle rules once, taking `now` as the time (for tests, any
    /// time; the endpoint's worker passes the clock's).
    pub async fn run_lifecycle_pass(
        &self,
        now: SystemTime,
    ) -> Result<LifecyclePassReport, StoreError> {
        self.blocking(move |store| Ok(store.lifecycle_pass_blocking(now, &|| false))).await
    }

    /// [`BucketStore::run_lifecycle_pass`] off the async threads, stopping early (between two
    /// objects) once `stop` answers `true`.
    pub fn lifecycle_pass_blocking(
        &self,
        now: SystemTime,
        stop: &dyn Fn() -> bool,
    ) -> LifecyclePassReport {
        let mut report = LifecyclePassReport::default();
        let buckets = match self.buckets_with_lifecycle() {
            Ok(buckets) => buckets,
            Err(e) => {
                tracing::error!(error = %e, "listing the buckets with lifecycle rules failed");
                report.failed += 1;
                return report;
            }
        };
        for bucket in buckets {
            if stop() {
                report.stopped = true;
                break;
            }
            match self.bucket_lifecycle_blocking(&bucket) {
                Ok(Some(config)) => {
                    report.buckets += 1;
                    let before = report.clone();
                    self.apply_lifecycle(&bucket, &config, now, stop, &mut report);
                    let (expired, aborted) =
                        (report.expired - before.expired, report.aborted - before.aborted);
                    if expired + aborted > 0 {
                        tracing::info!(bucket, expired, aborted, "lifecycle rules applied");
                    }
                }
                // Gone, or its rules removed, since the listing.
                Ok(None) | Err(StoreError::NoSuchBucket(_)) => {}
                Err(e) => {
                    tracing::error!(bucket, error = %e, "reading a bucket's lifecycle rules failed");
                    report.failed += 1;
                }
            }
        }
        report
    }

    /// The buckets that have a lifecycle file, in name order.
    fn buckets_with_lifecycle(&self) -> io::Result<Vec<String>> {
        let mut buckets = Vec::new();
        for entry in fs::read_dir(self.inner.state_dir().join("meta"))? {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else { continue };
            if entry.path().join(LIFECYCLE_FILE).exists() {
                buckets.push(name);
            }
        }
        buckets.sort();
        Ok(buckets)
    }

    fn apply_lifecycle(
        &self,
        bucket: &str,
        config: &LifecycleConfig,
        now: SystemTime,
        stop: &dyn Fn() -> bool,
        report: &mut LifecyclePassReport,
    ) {
        for rule in config.rules.iter().filter(|r| r.enabled()) {
            if rule.expiration.as_ref().is_some_and(|e| e.days.is_some() || e.date_unix.is_some()) {
                self.expire_objects(bucket, rule, now, stop, report);
            }
            let markers = rule
                .expiration
                .as_ref()
                .is_some_and(|e| e.expired_object_delete_marker == Some(true));
            if rule.noncurrent_expiration.is_some() || markers {
                self.expire_versions(bucket, rule, now, stop, report);
            }
            if rule.abort_incomplete_upload_days.flatten().is_some() {
                self.abort_uploads(bucket, rule, now, stop, report);
            }
            if report.stopped {
                return;
            }
        }
    }

    fn expire_objects(
        &self,
        bucket: &str,
        rule: &LifecycleRule,
        now: SystemTime,
        stop: &dyn Fn() -> bool,
        report: &mut LifecyclePassReport,
    ) {
        let due = |info: &ObjectInfo| {
            rule.expires(&info.key, info.size, &info.attrs.tags, info.last_modified)
                .is_some_and(|at| at <= now)
        };
        let prefix = rule.filter.prefix.clone().unwrap_or_default();
        let mut after = None;
        loop {
            let query =
                ListQuery { prefix: prefix.clone(), delimiter: None, after, max_keys: PAGE };
            let page = match self.list_blocking(bucket, &query) {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!(bucket, error = %e, "listing a bucket for its lifecycle failed");
                    report.failed += 1;
                    return;
                }
            };
            for info in page.objects.iter().filter(|info| due(info)) {
                if stop() {
                    report.stopped = true;
                    return;
                }
                match self.delete_if(bucket, &info.key, Some(&due), Bypass::No) {
                    Ok(true) => {
                        tracing::debug!(bucket, key = info.key, "object expired");
                        report.expired += 1;
                    }
                    Ok(false) => {}
                    // Object lock outranks lifecycle: the object stays, the pass goes on.
                    Err(StoreError::ObjectLocked(refusal)) => {
                        tracing::debug!(bucket, key = info.key, %refusal, "expiry waits for object lock");
                        report.locked += 1;
                    }
                    Err(e) => {
                        tracing::warn!(bucket, key = info.key, error = %e, "expiring an object failed");
                        report.failed += 1;
                    }
                }
            }
            if !page.is_truncated {
                return;
            }
            after = page.next_after;
        }
    }

    fn abort_uploads(
        &self,
        bucket: &str,
        rule: &LifecycleRule,
        now: SystemTime,
        stop: &dyn Fn() -> bool,
        report: &mut LifecyclePassReport,
    ) {
        let uploads = match self.list_uploads_blocking(bucket) {
            Ok(uploads) => uploads,
            Err(e) => {
                tracing::warn!(bucket, error = %e, "listing a bucket's uploads failed");
                report.failed += 1;
                return;
            }
        };
        for upload in uploads {
            if rule.aborts(&upload.key, upload.initiated).is_none_or(|at| at > now) {
                continue;
            }
            if stop() {
                report.stopped = true;
                return;
            }
            match self.abort_blocking(bucket, &upload.key, &upload.upload_id) {
                Ok(()) => {
                    tracing::debug!(bucket, upload.key, upload.upload_id, "upload aborted");
                    report.aborted += 1;
                }
                // Completed or aborted since it was listed.
                Err(StoreError::NoSuchUpload(_)) => {}
                Err(e) => {
                    tracing::warn!(
                        bucket, upload.key, upload.upload_id, error = %e,
                        "aborting an upload failed"
                    );
                    report.failed += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::store::{Creator, ObjectAttrs, PutCheck, Writer};

    async fn put(store: &BucketStore, key: &str, body: &'static [u8]) {
        let body = futures::stream::iter([Ok::<_, io::Error>(Bytes::from_static(body))]);
        let (attrs, check) = (ObjectAttrs::default(), PutCheck::default());
        store.put_object("b-1", key, attrs, body, check, &Writer::Operator).await.unwrap();
    }

    /// An object written again after a pass decided the old one was due is a new object: the
    /// decision is taken again under the key's commit lock, and it stays.
    #[tokio::test]
    async fn an_object_replaced_since_it_was_found_due_stays() {
        let tmp = tempfile::tempdir().unwrap();
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        let creator = Creator { user_id: "obc-1", delete_with_claim: true };
        store.create_bucket("b-1", creator).await.unwrap();
        put(&store, "k", b"old").await;
        let old = store.head_object("b-1", "k").await.unwrap();
        put(&store, "k", b"new").await;
        let due = |info: &ObjectInfo| info.etag == old.etag;
        assert!(!store.delete_if("b-1", "k", Some(&due), Bypass::No).unwrap());
        assert_eq!(store.head_object("b-1", "k").await.unwrap().size, 3);
        let due = |info: &ObjectInfo| info.etag != old.etag;
        assert!(store.delete_if("b-1", "k", Some(&due), Bypass::No).unwrap());
        assert!(matches!(store.head_object("b-1", "k").await, Err(StoreError::NoSuchKey(_))));
        assert!(!store.delete_if("b-1", "k", Some(&due), Bypass::No).unwrap(), "gone already");
    }
}
