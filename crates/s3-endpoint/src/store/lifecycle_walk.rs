//! Where each bucket's lifecycle walk stands between passes. A pass has a budget of objects to
//! examine; a bucket it leaves unfinished is walked on from the key it stopped after, by the
//! next pass, instead of from its first key again. The position is kept in memory and, while a
//! walk is unfinished, in `.provisioner/meta/<bucket>/lifecycle-walk.json` (written once per
//! pass, not per object), so that a restart does not send a huge bucket back to its start. A
//! lost or stale position only makes a walk do again what it did: every decision is taken
//! again on the objects themselves.
//!
//! How far behind expiry runs follows from the same record: a key is examined at the latest
//! when the walk after the one that last passed it gets to it, so expiry in a bucket is as old
//! as the start of its last complete walk.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::config_file::{read_config, replace_config};
use super::{BucketStore, StoreError};

/// The file's name in the bucket's metadata directory.
const WALK_FILE: &str = "lifecycle-walk.json";

/// One bucket's walk.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Walk {
    /// The last key handled: the walk goes on after it (`None`: from the first key).
    pub after: Option<String>,
    /// When this walk started (seconds since the epoch, on the pass's clock); `None` until a
    /// pass first takes the bucket up.
    pub started: Option<u64>,
    /// Whether this walk already looked at the bucket's uploads.
    pub uploads_done: bool,
    /// When the last complete walk started.
    pub last_complete: Option<u64>,
    /// Whether this walk is on the disk.
    #[serde(skip)]
    pub persisted: bool,
}

impl Walk {
    /// How long ago, at `now`, the bucket's expiry was up to date: the start of its last
    /// complete walk, else of the walk under way.
    pub(super) fn lag(&self, now: SystemTime) -> Duration {
        // Whole seconds, as the walk's times are kept.
        let since = self.last_complete.or(self.started).unwrap_or(u64::MAX);
        Duration::from_secs(unix_secs(now).saturating_sub(since))
    }
}

/// The walks of the buckets with lifecycle rules, and the bucket the last pass served last.
#[derive(Debug, Default)]
pub(super) struct WalkProgress {
    state: Mutex<Progress>,
}

#[derive(Debug, Default)]
struct Progress {
    walks: HashMap<String, Walk>,
    last_served: Option<String>,
}

impl WalkProgress {
    /// Forgets `bucket`, which is going (a bucket made again under its name walks from its
    /// start).
    pub(super) fn forget(&self, bucket: &str) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).walks.remove(bucket);
    }
}

impl BucketStore {
    fn walk_path(&self, bucket: &str) -> PathBuf {
        self.inner.state_dir().join("meta").join(bucket).join(WALK_FILE)
    }

    /// The walk of `bucket` where the last pass left it (from memory, else from the disk, else
    /// a new one).
    pub(super) fn walk_of(&self, bucket: &str) -> Walk {
        let progress = &self.inner.lifecycle_walks;
        if let Some(walk) =
            progress.state.lock().unwrap_or_else(PoisonError::into_inner).walks.get(bucket)
        {
            return walk.clone();
        }
        match read_config::<Walk>(self.walk_path(bucket)) {
            Ok(Some(walk)) => Walk { persisted: true, ..walk },
            Ok(None) => Walk::default(),
            Err(e) => {
                tracing::warn!(bucket, error = %e, "an unreadable lifecycle walk starts again");
                Walk::default()
            }
        }
    }

    /// Keeps `walk` as where `bucket` stands; on the disk too when `persist` (an unfinished
    /// walk at the end of a pass), and off it once the walk is complete.
    pub(super) fn keep_walk(
        &self,
        bucket: &str,
        mut walk: Walk,
        persist: bool,
    ) -> Result<(), StoreError> {
        let path = self.walk_path(bucket);
        let result = if persist {
            replace_config(&path, Some(&walk)).map(|()| walk.persisted = true)
        } else if walk.persisted && walk.after.is_none() {
            replace_config::<Walk>(&path, None).map(|()| walk.persisted = false)
        } else {
            Ok(())
        };
        let progress = &self.inner.lifecycle_walks;
        progress
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .walks
            .insert(bucket.to_owned(), walk);
        result
    }

    /// Forgets the walks of buckets no longer among `buckets` (their rules removed).
    pub(super) fn keep_walks_of(&self, buckets: &[String]) {
        let mut state =
            self.inner.lifecycle_walks.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.walks.retain(|bucket, _| buckets.contains(bucket));
    }

    /// The bucket the last pass served last: the next one starts after it.
    pub(super) fn last_served(&self) -> Option<String> {
        self.inner
            .lifecycle_walks
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last_served
            .clone()
    }

    pub(super) fn set_last_served(&self, bucket: &str) {
        let mut state =
            self.inner.lifecycle_walks.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.last_served = Some(bucket.to_owned());
    }
}

/// Seconds since the epoch of `at`.
pub(super) fn unix_secs(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_counts_from_the_last_complete_walk_else_the_current_one() {
        let at = |secs| UNIX_EPOCH + Duration::from_secs(secs);
        assert_eq!(Walk::default().lag(at(100)), Duration::ZERO, "never taken up");
        let walk = Walk { started: Some(40), ..Walk::default() };
        assert_eq!(walk.lag(at(100)), Duration::from_secs(60));
        let walk = Walk { started: Some(90), last_complete: Some(10), ..Walk::default() };
        assert_eq!(walk.lag(at(100)), Duration::from_secs(90));
        assert_eq!(walk.lag(at(5)), Duration::ZERO, "a clock set back");
    }
}
