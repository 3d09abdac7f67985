//! ListObjectVersions: every version and delete marker of a bucket in S3's order (keys
//! ascending, newest version first within a key), with prefix, delimiter and pagination by key
//! and version id.
//!
//! Keys with a current object come from the bucket's own listing (one page ahead is enough:
//! each key gives at least one entry); keys with archived versions from the store's sorted
//! set of them (see `version_index`), merged in key by key, so that a page reads the records
//! of the keys it lists and no others.

use std::collections::BTreeMap;
use std::path::Path;

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

/// Where the merge of keys with archived versions is.
struct ArchiveCursor {
    /// Only keys starting with this.
    prefix: String,
    /// Only entries after this (`key-marker`).
    marker: String,
    /// The last key taken.
    after: String,
    /// The common prefix whose keys are passed over.
    group: Option<String>,
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
        // Keys with archived versions are merged in as the page goes, so that it reads the
        // records of the keys it lists only.
        self.load_archive_index(bucket)?;
        let mut archive = ArchiveCursor {
            prefix: query.prefix.clone(),
            marker: marker.clone(),
            after: marker.clone(),
            group: None,
        };
        let mut archived = self.next_archived(bucket, &dir, &roll_up, &mut archive)?;
        let mut count = 0;
        loop {
            let from_list = entries.first_key_value().map(|(name, _)| name);
            let take_archived = match (from_list, &archived) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(listed), Some((name, _))) => name <= listed,
            };
            let (name, entry) = if take_archived {
                let (name, entry) = archived.take().expect("an archived entry is next");
                // Known to both: listed once.
                entries.remove(&name);
                archived = self.next_archived(bucket, &dir, &roll_up, &mut archive)?;
                (name, entry)
            } else {
                match entries.pop_first() {
                    Some(next) => next,
                    None => break,
                }
            };
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

    /// The next entry (a key, or a common prefix standing for keys) the keys with archived
    /// versions give after `cursor`; moves `cursor` past what it stands for.
    fn next_archived(
        &self,
        bucket: &str,
        dir: &Path,
        roll_up: &dyn Fn(&str) -> Option<String>,
        cursor: &mut ArchiveCursor,
    ) -> Result<Option<(String, Entry)>, StoreError> {
        let next = |after: &str| self.next_archived_key(bucket, &cursor.prefix, after);
        while let Some(key) = next(&cursor.after) {
            if cursor.group.as_ref().is_some_and(|group| key.starts_with(group.as_str())) {
                cursor.after = key;
                continue;
            }
            let Some(common) = roll_up(&key) else {
                cursor.after = key.clone();
                return Ok(Some((key, Entry::Key)));
            };
            // Past every key of the group at once: no key's next character is above this one.
            cursor.after = format!("{common}{}", char::MAX);
            if common <= cursor.marker {
                cursor.group = Some(common);
                continue;
            }
            // The set may name keys whose versions are gone: the group is listed only for a
            // key that still has some.
            let mut member = Some(key);
            while let Some(key) = member.filter(|k| k.starts_with(common.as_str())) {
                if !self.versions_of(bucket, dir, &key)?.is_empty() {
                    cursor.group = Some(common.clone());
                    return Ok(Some((common, Entry::Prefix)));
                }
                member = next(&key);
            }
            cursor.group = Some(common);
        }
        Ok(None)
    }

    /// Writer and size of every noncurrent version of `bucket` (delete markers count for
    /// nothing), for counting its usage from the disk.
    pub(super) fn archived_usage(
        &self,
        bucket: &str,
        dir: &Path,
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

#[cfg(test)]
mod tests {
    use std::io;

    use bytes::Bytes;

    use super::*;
    use crate::store::{Creator, ObjectAttrs, PutCheck, Versioning, Writer};

    async fn put(store: &BucketStore, key: &str) -> String {
        let body = futures::stream::iter([Ok::<_, io::Error>(Bytes::from_static(b"x"))]);
        let (attrs, check) = (ObjectAttrs::default(), PutCheck::default());
        let info = store.put_object("b-1", key, attrs, body, check, &Writer::Operator).await;
        info.unwrap().version_id.unwrap()
    }

    async fn marker(store: &BucketStore, key: &str) -> String {
        let deleted = store.delete_object_version("b-1", key, None).await.unwrap();
        assert!(deleted.delete_marker);
        deleted.version_id.unwrap()
    }

    /// Markers and versions interleave by age within a key, newest first, keys ascending.
    #[tokio::test]
    async fn versions_and_markers_are_listed_in_s3_order() {
        let tmp = tempfile::tempdir().unwrap();
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        let creator = Creator { user_id: "obc-1", delete_with_claim: true };
        store.create_bucket("b-1", creator).await.unwrap();
        store.set_bucket_versioning("b-1", Versioning::Enabled).await.unwrap();
        let v1 = put(&store, "b").await;
        let m1 = marker(&store, "b").await;
        let v2 = put(&store, "b").await;
        let m2 = marker(&store, "b").await;
        let a1 = put(&store, "a").await;
        let all = VersionQuery { max_keys: 100, ..VersionQuery::default() };
        let page = store.list_versions("b-1", all).await.unwrap();
        let got: Vec<_> = page
            .versions
            .iter()
            .map(|v| (v.info.key.as_str(), v.info.version_id.clone().unwrap(), v.is_latest))
            .collect();
        let expected = [
            ("a", a1, true),
            ("b", m2.clone(), true),
            ("b", v2, false),
            ("b", m1.clone(), false),
            ("b", v1, false),
        ];
        assert_eq!(got, expected);
        let markers: Vec<_> = page.versions.iter().filter(|v| v.delete_marker).collect();
        assert_eq!(markers.len(), 2);
        assert!(!page.is_truncated);
    }
}
