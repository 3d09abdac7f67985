//! One turn of a bucket's lifecycle walk: from where its walk stands, the next keys in order,
//! each looked at once for all the bucket's rules (its current object, then its versions), until
//! the turn's share of the budget is spent or the bucket is done. The walk starts with the
//! bucket's uploads, listed once for all rules.

use std::time::SystemTime;

use super::lifecycle_pass::{BucketTurn, LifecyclePassReport, TurnEnd};
use super::object_lock::Bypass;
use super::{BucketStore, ListQuery, ObjectInfo, StoreError};

impl BucketStore {
    /// Walks `turn` on by about `share` objects.
    pub(super) fn walk_turn(
        &self,
        turn: &mut BucketTurn,
        share: u64,
        now: SystemTime,
        stop: &dyn Fn() -> bool,
        report: &mut LifecyclePassReport,
    ) -> TurnEnd {
        let bucket = turn.bucket.as_str();
        if !turn.walk.uploads_done && turn.rules.acts_on_uploads() {
            self.abort_uploads(turn, now, report);
        }
        turn.walk.uploads_done = true;
        let rules = &turn.rules;
        let prefix = rules.walk_prefix().to_owned();
        let after = turn.walk.after.clone();
        let page = if rules.acts_on_objects() {
            let max_keys = usize::try_from(share).unwrap_or(usize::MAX);
            let query = ListQuery { prefix: prefix.clone(), delimiter: None, after, max_keys };
            report.listings += 1;
            match self.list_blocking(bucket, &query) {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!(bucket, error = %e, "listing a bucket for its lifecycle failed");
                    report.failed += 1;
                    return TurnEnd::Failed;
                }
            }
        } else {
            Default::default()
        };
        // Versions are looked at for the keys this page covers; all the rest when it is the last.
        let upper = page.is_truncated.then(|| page.next_after.clone()).flatten();
        let versions = rules.acts_on_versions() && self.versions_to_walk(bucket, report);
        let mut objects = page.objects.into_iter().peekable();
        let mut spent = 0;
        loop {
            let cursor = turn.walk.after.as_deref().unwrap_or("");
            let archived = versions
                .then(|| self.next_archived_key(bucket, &prefix, cursor))
                .flatten()
                .filter(|k| upper.as_ref().is_none_or(|u| k <= u));
            let object_key = objects.peek().map(|o| o.key.clone());
            let key = match (&object_key, &archived) {
                (Some(o), Some(a)) => o.min(a).clone(),
                (Some(k), None) | (None, Some(k)) => k.clone(),
                (None, None) => break,
            };
            if object_key.as_ref() == Some(&key) {
                let info = objects.next().expect("peeked");
                report.examined += 1;
                spent += 1;
                if rules.object_due(&info, now) {
                    self.expire_object(bucket, turn, &info, now, report);
                }
            }
            if archived.as_ref() == Some(&key) {
                spent += self.expire_versions(bucket, &turn.rules, &key, now, report);
            }
            turn.walk.after = Some(key);
            if stop() {
                report.stopped = true;
                return TurnEnd::More;
            }
            // The next turn lists again from here, unless nothing is left to list.
            let more = objects.peek().is_some() || page.is_truncated || versions;
            if spent >= share && more {
                return TurnEnd::More;
            }
        }
        if page.is_truncated { TurnEnd::More } else { TurnEnd::Done }
    }

    /// Whether `bucket` can have versions (its versioning was ever set), with its index of
    /// keys with versions loaded.
    fn versions_to_walk(&self, bucket: &str, report: &mut LifecyclePassReport) -> bool {
        let loaded = match self.versioning(bucket) {
            Ok(None) => return false,
            Ok(Some(_)) => self.load_archive_index(bucket),
            Err(e) => Err(e),
        };
        match loaded {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(bucket, error = %e, "listing a bucket's versions failed");
                report.failed += 1;
                false
            }
        }
    }

    fn expire_object(
        &self,
        bucket: &str,
        turn: &BucketTurn,
        info: &ObjectInfo,
        now: SystemTime,
        report: &mut LifecyclePassReport,
    ) {
        let due = |info: &ObjectInfo| turn.rules.object_due(info, now);
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

    fn abort_uploads(&self, turn: &BucketTurn, now: SystemTime, report: &mut LifecyclePassReport) {
        let bucket = turn.bucket.as_str();
        let uploads = match self.list_uploads_blocking(bucket) {
            Ok(uploads) => uploads,
            Err(e) => {
                tracing::warn!(bucket, error = %e, "listing a bucket's uploads failed");
                report.failed += 1;
                return;
            }
        };
        report.examined += uploads.len() as u64;
        for upload in uploads {
            if !turn.rules.upload_due(&upload.key, upload.initiated, now) {
                continue;
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
