//! The lifecycle pass: every bucket's rules applied at a given time, within a budget of
//! objects examined. Objects a rule makes due are removed by the same path as DeleteObject (so
//! usage and quotas drop with them), each checked again under its commit lock (one written
//! since it was listed is a new object, and stays); uploads a rule makes due are aborted as
//! AbortMultipartUpload does.
//!
//! A bucket is walked once for all its rules (`lifecycle_match`), in slices (`lifecycle_slice`)
//! taken round-robin: each bucket still walking gets a share of what is left of the budget in
//! turn, so that a huge bucket cannot hold up a small one behind it. A bucket not finished when
//! the budget is spent goes on from where it stopped at the next pass (`lifecycle_walk`); the
//! next pass also starts after the bucket this one served last. In a versioned bucket,
//! expiring an object makes a delete marker (as DeleteObject does there), and
//! `lifecycle_versions` acts on noncurrent versions and lone delete markers.

use std::collections::VecDeque;
use std::fs;
use std::io;
use std::time::{Duration, SystemTime};

use super::lifecycle_file::LIFECYCLE_FILE;
use super::lifecycle_match::BucketRules;
use super::lifecycle_walk::{Walk, unix_secs};
use super::{BucketStore, StoreError};

/// Most objects one bucket examines in one turn, whatever the budget.
const TURN: u64 = 1000;

/// What one lifecycle pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LifecyclePassReport {
    /// Buckets whose rules were applied.
    pub buckets: u64,
    /// Objects, versions and uploads examined: what the budget counts.
    pub examined: u64,
    /// Pages of objects listed: one walk of a bucket lists each of its objects once, however
    /// many rules it has.
    pub listings: u64,
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
    /// Buckets whose walk the budget left unfinished, to go on at the next pass.
    pub unfinished: u64,
    /// How far behind expiry runs: of the buckets with rules, the longest time since the
    /// start of a bucket's last complete walk (else of its walk under way).
    pub lag: Duration,
    /// Whether the pass was stopped before it was done.
    pub stopped: bool,
}

/// How a bucket's turn ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TurnEnd {
    /// Its walk is complete.
    Done,
    /// Its walk goes on, at its next turn.
    More,
    /// It could not be walked (logged and counted): it waits for the next pass, where it stood.
    Failed,
}

/// One bucket taken up by a pass.
pub(super) struct BucketTurn {
    pub bucket: String,
    pub rules: BucketRules,
    pub walk: Walk,
}

impl BucketStore {
    /// Applies every bucket's lifecycle rules once, taking `now` as the time (for tests, any
    /// time; the endpoint's worker passes the clock's), with no budget.
    pub async fn run_lifecycle_pass(
        &self,
        now: SystemTime,
    ) -> Result<LifecyclePassReport, StoreError> {
        self.run_lifecycle_pass_within(now, u64::MAX).await
    }

    /// [`BucketStore::run_lifecycle_pass`] examining at most about `budget` objects (versions
    /// and uploads count too); buckets left unfinished go on at the next pass.
    pub async fn run_lifecycle_pass_within(
        &self,
        now: SystemTime,
        budget: u64,
    ) -> Result<LifecyclePassReport, StoreError> {
        self.blocking(move |store| Ok(store.lifecycle_pass_blocking(now, budget, &|| false))).await
    }

    /// [`BucketStore::run_lifecycle_pass_within`] off the async threads, stopping early
    /// (between two objects) once `stop` answers `true`.
    pub fn lifecycle_pass_blocking(
        &self,
        now: SystemTime,
        budget: u64,
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
        self.keep_walks_of(&buckets);
        let mut turns = self.turns(buckets, now, &mut report);
        let mut left = budget;
        let mut waiting = Vec::new();
        while let Some(mut turn) = turns.pop_front() {
            if stop() {
                report.stopped = true;
                turns.push_front(turn);
                break;
            }
            if left == 0 {
                turns.push_front(turn);
                break;
            }
            // An even share of what is left among the buckets still walking.
            let share = (left / (turns.len() as u64 + 1)).clamp(1, TURN);
            let (examined, expired, aborted) = (report.examined, report.expired, report.aborted);
            let end = self.walk_turn(&mut turn, share, now, stop, &mut report);
            // A turn costs something even when it found nothing, so that the pass always ends.
            left = left.saturating_sub((report.examined - examined).max(1));
            self.set_last_served(&turn.bucket);
            let (expired, aborted) = (report.expired - expired, report.aborted - aborted);
            if expired + aborted > 0 {
                tracing::info!(bucket = turn.bucket, expired, aborted, "lifecycle rules applied");
            }
            match end {
                TurnEnd::Done => {
                    let (started, persisted) = (turn.walk.started, turn.walk.persisted);
                    turn.walk = Walk { last_complete: started, persisted, ..Walk::default() };
                    report.lag = report.lag.max(turn.walk.lag(now));
                    self.keep(&turn, false, &mut report);
                }
                TurnEnd::More => turns.push_back(turn),
                TurnEnd::Failed => waiting.push(turn),
            }
        }
        for turn in turns.into_iter().chain(waiting) {
            report.unfinished += 1;
            report.lag = report.lag.max(turn.walk.lag(now));
            self.keep(&turn, true, &mut report);
        }
        report
    }

    /// The buckets with rules, starting after the one the last pass served last, with their
    /// rules and where their walks stand.
    fn turns(
        &self,
        mut buckets: Vec<String>,
        now: SystemTime,
        report: &mut LifecyclePassReport,
    ) -> VecDeque<BucketTurn> {
        if let Some(last) = self.last_served() {
            let next = buckets.partition_point(|b| *b <= last);
            buckets.rotate_left(next);
        }
        let mut turns = VecDeque::new();
        for bucket in buckets {
            match self.bucket_lifecycle_blocking(&bucket) {
                Ok(Some(config)) => {
                    report.buckets += 1;
                    let mut walk = self.walk_of(&bucket);
                    walk.started.get_or_insert(unix_secs(now));
                    turns.push_back(BucketTurn { rules: BucketRules::new(&config), walk, bucket });
                }
                // Gone, or its rules removed, since the listing.
                Ok(None) | Err(StoreError::NoSuchBucket(_)) => {}
                Err(e) => {
                    tracing::error!(bucket, error = %e, "reading a bucket's lifecycle rules failed");
                    report.failed += 1;
                }
            }
        }
        turns
    }

    fn keep(&self, turn: &BucketTurn, unfinished: bool, report: &mut LifecyclePassReport) {
        if let Err(e) = self.keep_walk(&turn.bucket, turn.walk.clone(), unfinished) {
            tracing::warn!(bucket = turn.bucket, error = %e, "keeping a lifecycle walk failed");
            report.failed += 1;
        }
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
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::store::object_lock::Bypass;
    use crate::store::{Creator, ObjectAttrs, ObjectInfo, PutCheck, Writer};

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

#[cfg(test)]
#[path = "lifecycle_pass_tests.rs"]
mod budget_tests;
