//! Which keys of each bucket have archived versions, in memory and sorted, so that a page of
//! ListObjectVersions reads the records of the keys it lists, not the whole versions area.
//!
//! A bucket's set is read from the disk the first time its versions are listed, and kept
//! current by the store's own writes (the store is the only writer of the versions area): a
//! key is noted before its first record is written, so the set never misses a key on the disk,
//! whatever order a read from the disk and a write take. Keys whose versions are all removed
//! stay in the set: listing one finds nothing to list, at the cost of one directory read, and
//! nothing needs to decide safely against a concurrent write when a key may leave it. A crash
//! loses only this memory; a deleted bucket's set stays too (a bucket made again under its
//! name finds nothing under the keys left from before).

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::{Mutex, PoisonError};

use super::{BucketStore, StoreError};

/// The sets of keys with archived versions, by bucket.
#[derive(Debug, Default)]
pub(super) struct ArchiveIndex {
    buckets: Mutex<HashMap<String, Keys>>,
}

#[derive(Debug, Default)]
struct Keys {
    /// Whether the disk's keys were added (before that, only the keys written since).
    loaded: bool,
    keys: BTreeSet<String>,
}

impl ArchiveIndex {
    /// Notes that `key` of `bucket` has (or is about to have) an archived version.
    pub(super) fn note(&self, bucket: &str, key: &str) {
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        let keys = &mut buckets.entry(bucket.to_owned()).or_default().keys;
        if !keys.contains(key) {
            keys.insert(key.to_owned());
        }
    }

    fn is_loaded(&self, bucket: &str) -> bool {
        let buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        buckets.get(bucket).is_some_and(|k| k.loaded)
    }

    /// Adds the keys read from the disk to those noted meanwhile.
    fn load(&self, bucket: &str, found: Vec<String>) {
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        let keys = buckets.entry(bucket.to_owned()).or_default();
        keys.keys.extend(found);
        keys.loaded = true;
    }

    /// The first key of `bucket` after `after` that starts with `prefix`.
    fn next_after(&self, bucket: &str, prefix: &str, after: &str) -> Option<String> {
        let buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        let keys = &buckets.get(bucket)?.keys;
        // The keys with the prefix are one run, starting at the prefix itself.
        let from = if after < prefix {
            (Bound::Included(prefix), Bound::Unbounded)
        } else {
            (Bound::Excluded(after), Bound::Unbounded)
        };
        keys.range::<str, _>(from).next().filter(|k| k.starts_with(prefix)).cloned()
    }
}

impl BucketStore {
    /// Notes `key` of `bucket` as having archived versions; before its record is written.
    pub(super) fn note_archived(&self, bucket: &str, key: &str) {
        self.inner.archive_index.note(bucket, key);
    }

    /// Reads `bucket`'s keys with archived versions from the disk, the first time only.
    pub(super) fn load_archive_index(&self, bucket: &str) -> Result<(), StoreError> {
        if !self.inner.archive_index.is_loaded(bucket) {
            let found = self.archived_keys(bucket, "")?;
            self.inner.archive_index.load(bucket, found);
        }
        Ok(())
    }

    /// The first key of `bucket` with archived versions after `after` that starts with
    /// `prefix` (after [`Self::load_archive_index`]; possibly one whose versions are gone).
    pub(super) fn next_archived_key(
        &self,
        bucket: &str,
        prefix: &str,
        after: &str,
    ) -> Option<String> {
        self.inner.archive_index.next_after(bucket, prefix, after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(keys: &[&str]) -> ArchiveIndex {
        let index = ArchiveIndex::default();
        index.load("b", keys.iter().map(|k| (*k).to_owned()).collect());
        index
    }

    /// Keys come in byte order, from the prefix on, and stop where the prefix's run ends.
    #[test]
    fn keys_follow_in_order_within_the_prefix() {
        let index = index(&["a", "b/1", "b/2", "c"]);
        assert_eq!(index.next_after("b", "b/", "").as_deref(), Some("b/1"));
        assert_eq!(index.next_after("b", "b/", "b/1").as_deref(), Some("b/2"));
        assert_eq!(index.next_after("b", "b/", "b/2"), None);
        assert_eq!(index.next_after("b", "", "b/2").as_deref(), Some("c"));
        assert_eq!(index.next_after("b", "b/", "c"), None);
        assert_eq!(index.next_after("other", "", ""), None);
    }

    /// A key noted while the disk is read is kept when the disk's keys are added.
    #[test]
    fn keys_noted_before_the_load_are_kept() {
        let index = ArchiveIndex::default();
        index.note("b", "new");
        assert!(!index.is_loaded("b"));
        index.load("b", vec!["old".to_owned()]);
        assert!(index.is_loaded("b"));
        assert_eq!(index.next_after("b", "", "").as_deref(), Some("new"));
        assert_eq!(index.next_after("b", "", "new").as_deref(), Some("old"));
    }
}
