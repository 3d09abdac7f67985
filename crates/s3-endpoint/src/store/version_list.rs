//! ListObjectVersions: every version and delete marker of a bucket in S3's order (keys
//! ascending, newest version first within a key), with prefix, delimiter and pagination by key
//! and version id.
//!
//! Keys with a current object come from the bucket's own listing (one page ahead is enough:
//! each key gives at least one entry); keys with archived versions from the versions area,
//! which is read whole, so a page costs what the bucket keeps of noncurrent versions.

use std::collections::BTreeMap;

use super::durable::entries_of;
use super::list::ListQuery;
use super::versions::Version;
use super::{BucketStore, ObjectInfo, StoreError};

/// What to list.
#[derive(Clone, Debug, Default)]
pub struct VersionQuery {
    /// Only keys starting with this.
    pub prefix: String,
    /// Roll keys up to the first occurrence of this after the prefix.
    pub delimiter: Option<String>,
    /// Resume at this key (`key-marker`)...
    pub key_marker: Option<String>,
    /// ...after this version of it (`version-id-marker`); without it, after the key.
    pub version_id_marker: Option<String>,
    /// At most this many versions, markers and common prefixes together.
    pub max_keys: usize,
}

/// One version or delete marker as listed.
#[derive(Clone, Debug)]
pub struct VersionEntry {
    /// Its info (key, size, ETag, version id...); a marker's has no bytes.
    pub info: ObjectInfo,
    /// Whether it is a delete marker.
    pub delete_marker: bool,
    /// Whether it is its key's newest version.
    pub is_latest: bool,
    /// Who it counts for (`None`: the operator, or nobody recorded).
    pub writer: Option<String>,
}

/// One page of ListObjectVersions.
#[derive(Clone, Debug, Default)]
pub struct VersionPage {
    /// Versions and markers, in S3's order.
    pub versions: Vec<VersionEntry>,
    /// Common prefixes, in order.
    pub common_prefixes: Vec<String>,
    /// Whether more follow.
    pub is_truncated: bool,
    /// Where the next page starts, when truncated: a key (or common prefix)...
    pub next_key_marker: Option<String>,
    /// ...and the last version id listed of it (none after a common prefix).
    pub next_version_id_marker: Option<String>,
}

enum Entry {
    Key,
    Prefix,
}

impl BucketStore {
    /// Lists the versions of `bucket` (see the module's rustdoc).
    pub async fn list_versions(
        &self,
        bucket: &str,
        query: VersionQuery,
    ) -> Result<VersionPage, StoreError> {
        let bucket = bucket.to_owned();
        self.blocking(move |store| store.list_versions_blocking(&bucket, &query)).await
    }

    fn list_versions_blocking(
        &self,
        bucket: &str,
        query: &VersionQuery,
    ) -> Result<VersionPage, StoreError> {
        let dir = self.bucket_dir(bucket)?;
        let mut page = VersionPage::default();
        if query.max_keys == 0 {
            return Ok(page);
        }
        let delimiter = query.delimiter.as_deref().filter(|d| !d.is_empty());
        let marker = query.key_marker.clone().unwrap_or_default();
        let roll_up = |key: &str| {
            delimiter.and_then(|d| {
                let rest = &key[query.prefix.len()..];
                rest.find(d).map(|at| key[..query.prefix.len() + at + d.len()].to_owned())
            })
        };
        let mut entries: BTreeMap<String, Entry> = BTreeMap::new();
        // The key of the version-id-marker is resumed within.
        if let Some(key) = &query.key_marker
            && query.version_id_marker.is_some()
            && key.starts_with(&query.prefix)
        {
            entries.insert(key.clone(), Entry::Key);
        }
        let listed = self.list_blocking(
            bucket,
            &ListQuery {
                prefix: query.prefix.clone(),
                delimiter: delimiter.map(str::to_owned),
                after: query.key_marker.clone().filter(|m| !m.is_empty()),
                max_keys: query.max_keys + 1,
            },
        )?;
        // Past the last entry listed, keys with current objects may be missing.
        let horizon = listed.is_truncated.then(|| listed.next_after.clone()).flatten();
        for object in listed.objects {
            entries.insert(object.key, Entry::Key);
        }
        for common in listed.common_prefixes {
            entries.insert(common, Entry::Prefix);
        }
        for key in self.archived_keys(bucket, &query.prefix)? {
            match roll_up(&key) {
                Some(common) if common.as_str() > marker.as_str() => {
                    entries.insert(common, Entry::Prefix);
                }
                Some(_) => {}
                None if key > marker => {
                    entries.insert(key, Entry::Key);
                }
                None => {}
            }
        }
        let mut count = 0;
        for (name, entry) in entries {
            if horizon.as_ref().is_some_and(|h| &name > h) {
                break;
            }
            match entry {
                Entry::Prefix => {
                    if count == query.max_keys {
                        page.is_truncated = true;
                        return Ok(page);
                    }
                    page.next_key_marker = Some(name.clone());
                    page.next_version_id_marker = None;
                    page.common_prefixes.push(name);
                    count += 1;
                }
                Entry::Key => {
                    let history = self.versions_of(bucket, &dir, &name)?;
                    let skip = match (&query.version_id_marker, &query.key_marker) {
                        (Some(id), Some(key)) if *key == name => history
                            .iter()
                            .position(|v| v.stamp().id == *id)
                            .map_or(history.len(), |at| at + 1),
                        _ => 0,
                    };
                    for (index, version) in history.iter().enumerate().skip(skip) {
                        if count == query.max_keys {
                            page.is_truncated = true;
                            return Ok(page);
                        }
                        page.next_key_marker = Some(name.clone());
                        page.next_version_id_marker = Some(version.stamp().id.clone());
                        page.versions.push(entry_of(version, index == 0));
                        count += 1;
                    }
                }
            }
        }
        if horizon.is_some() {
            page.is_truncated = true;
        }
        Ok(page)
    }

    /// Writer and size of every noncurrent version of `bucket` (delete markers count for
    /// nothing), for counting its usage from the disk.
    pub(super) fn archived_usage(
        &self,
        bucket: &str,
        dir: &std::path::Path,
    ) -> Result<Vec<(Option<String>, u64)>, StoreError> {
        let mut found = Vec::new();
        for shard in entries_of(&self.versions_root(bucket))? {
            for key_dir in entries_of(&shard?.path())? {
                let versions = self.archived_versions(&key_dir?.path(), None)?;
                let Some(key) = versions.first().map(|v| v.meta.key.clone()) else { continue };
                // A crash's duplicate of the version in place is counted there.
                let in_place = self.version_in_place(bucket, dir, &key)?;
                let in_place = in_place.as_ref().map(|v| v.stamp().order.as_str());
                for version in &versions {
                    if version.meta.key == key
                        && !version.is_marker()
                        && Some(version.stamp().order.as_str()) != in_place
                    {
                        found.push((version.meta.writer.clone(), version.meta.size));
                    }
                }
            }
        }
        Ok(found)
    }

    /// The keys under `prefix` that have archived versions, sorted.
    pub(super) fn archived_keys(
        &self,
        bucket: &str,
        prefix: &str,
    ) -> Result<Vec<String>, StoreError> {
        let mut keys = Vec::new();
        for shard in entries_of(&self.versions_root(bucket))? {
            for key_dir in entries_of(&shard?.path())? {
                let versions = self.archived_versions(&key_dir?.path(), None)?;
                if let Some(version) = versions.first()
                    && version.meta.key.starts_with(prefix)
                {
                    keys.push(version.meta.key.clone());
                }
            }
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }
}

fn entry_of(version: &Version, is_latest: bool) -> VersionEntry {
    VersionEntry {
        info: version.info(),
        delete_marker: version.is_marker(),
        is_latest,
        writer: version.meta.writer.clone(),
    }
}
