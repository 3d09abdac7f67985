//! Listing a bucket in S3 key order, with prefix, delimiter and pagination.
//!
//! The walk visits each directory's entries sorted by the key text they stand for (a directory
//! `a` as `a/`), which yields keys in byte order across the whole tree, so pagination can resume
//! after any key or common prefix. Subtrees that cannot match the prefix, that lie wholly before
//! the resume point, or that roll up into a common prefix already returned are never read.

use std::fs;
use std::io;
use std::path::PathBuf;

use super::attached::DataFile;
use super::dir_cache::{DirCache, Entries};
use super::{BucketStore, ObjectInfo, StoreError};

/// What to list.
#[derive(Clone, Debug, Default)]
pub struct ListQuery {
    /// Only keys starting with this.
    pub prefix: String,
    /// Roll keys up to the first occurrence of this after the prefix (usually `/`).
    pub delimiter: Option<String>,
    /// Resume after this key or common prefix (exclusive).
    pub after: Option<String>,
    /// At most this many objects and common prefixes together.
    pub max_keys: usize,
}

/// One page of a listing.
#[derive(Clone, Debug, Default)]
pub struct ListPage {
    /// Objects, in key order.
    pub objects: Vec<ObjectInfo>,
    /// Common prefixes, in order.
    pub common_prefixes: Vec<String>,
    /// Whether more entries follow.
    pub is_truncated: bool,
    /// The last key or prefix returned, to resume from when truncated.
    pub next_after: Option<String>,
}

enum Item {
    Object(String, PathBuf, fs::Metadata),
    Marker(String, fs::Metadata),
    /// An object kept beside the bucket (see `side`), already read.
    Side(ObjectInfo),
}

impl Item {
    fn key(&self) -> &str {
        match self {
            Item::Object(key, ..) | Item::Marker(key, _) => key,
            Item::Side(info) => &info.key,
        }
    }
}

/// The directory walk and the side objects, merged in key order. Where a key is in both, the
/// listing answers as a read does: the plain file wins (a crash between writing one and
/// removing the other), and so does a directory, but only where it is a folder marker. A
/// directory that is only the prefix of other keys is no object, and must not hide the side
/// object of the same key (`0/` with content, beside `0/1000`).
struct Merged<'a, F> {
    walker: Walker<'a>,
    /// The walker's next item, taken ahead to compare with the side's.
    pending: Option<Item>,
    side: std::vec::IntoIter<ObjectInfo>,
    next_side: Option<ObjectInfo>,
    /// Whether the directory of a key ending in '/' is a folder marker.
    is_marker: F,
}

impl<'a, F: Fn(&str) -> bool> Merged<'a, F> {
    fn new(walker: Walker<'a>, side: Vec<ObjectInfo>, is_marker: F) -> Self {
        let mut side = side.into_iter();
        let next_side = side.next();
        Self { walker, pending: None, side, next_side, is_marker }
    }

    fn next_item(&mut self) -> io::Result<Option<Item>> {
        if self.pending.is_none() {
            self.pending = self.walker.next_item()?;
        }
        let take_side = match (&self.pending, &self.next_side) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(plain), Some(side)) if plain.key() == side.key.as_str() => {
                let plain_wins = match plain {
                    Item::Marker(key, _) => (self.is_marker)(key),
                    _ => true,
                };
                if plain_wins {
                    // The plain copy shadows a leftover side copy.
                    self.next_side = self.side.next();
                } else {
                    // Only the directory's own entry goes: the walk has entered it already.
                    self.pending = None;
                }
                !plain_wins
            }
            (Some(plain), Some(side)) => side.key.as_str() < plain.key(),
        };
        if take_side {
            let side = self.next_side.take().map(Item::Side);
            self.next_side = self.side.next();
            return Ok(side);
        }
        Ok(self.pending.take())
    }

    fn skip_prefix(&mut self, prefix: &str) {
        if self.pending.as_ref().is_some_and(|p| p.key().starts_with(prefix)) {
            self.pending = None;
        }
        self.walker.skip_prefix(prefix);
        while self.next_side.as_ref().is_some_and(|s| s.key.starts_with(prefix)) {
            self.next_side = self.side.next();
        }
    }
}

struct Frame {
    dir: PathBuf,
    /// Key text of this directory, ending with '/' (empty for the bucket directory).
    key_prefix: String,
    /// (name as key text, is directory), sorted by key text.
    entries: Entries,
    next: usize,
}

/// Lazily yields keys of a bucket in byte order, without following symlinks.
struct Walker<'a> {
    query: &'a ListQuery,
    cache: &'a DirCache,
    stack: Vec<Frame>,
    /// Directory entries looked at so far, which is what a page costs.
    examined: usize,
}

impl<'a> Walker<'a> {
    fn new(root: PathBuf, query: &'a ListQuery, cache: &'a DirCache) -> io::Result<Self> {
        let mut walker = Walker { query, cache, stack: Vec::new(), examined: 0 };
        walker.push(root, String::new())?;
        Ok(walker)
    }

    fn push(&mut self, dir: PathBuf, key_prefix: String) -> io::Result<()> {
        // Removed while listing: nothing to list there.
        let Some(entries) = self.cache.entries(&dir)? else { return Ok(()) };
        let next = first_relevant(&entries, &key_prefix, self.query);
        self.stack.push(Frame { dir, key_prefix, entries, next });
        Ok(())
    }

    fn next_item(&mut self) -> io::Result<Option<Item>> {
        let prefix = &self.query.prefix;
        let after = self.query.after.as_deref().unwrap_or("");
        loop {
            let Some(frame) = self.stack.last_mut() else { return Ok(None) };
            let Some((name, is_dir)) = frame.entries.get(frame.next).cloned() else {
                self.stack.pop();
                continue;
            };
            frame.next += 1;
            self.examined += 1;
            let key = format!("{}{name}", frame.key_prefix);
            // Sorted: once past the prefix, nothing further in this directory matches it.
            if key.as_str() > prefix.as_str() && !key.starts_with(prefix.as_str()) {
                frame.next = frame.entries.len();
                continue;
            }
            if !is_dir {
                if key.starts_with(prefix.as_str()) && key.as_str() > after {
                    let path = frame.dir.join(&name);
                    match fs::symlink_metadata(&path) {
                        Ok(meta) if meta.is_file() => {
                            return Ok(Some(Item::Object(key, path, meta)));
                        }
                        _ => continue,
                    }
                }
                continue;
            }
            // Descend only where keys can match the prefix and can come after the resume point.
            if !(key.starts_with(prefix.as_str()) || prefix.starts_with(&key)) {
                continue;
            }
            if key.as_str() < after && !after.starts_with(&key) {
                continue;
            }
            let dir = frame.dir.join(name.trim_end_matches('/'));
            let meta = fs::symlink_metadata(&dir);
            self.push(dir, key.clone())?;
            if let Ok(meta) = meta
                && meta.is_dir()
                && key.starts_with(prefix.as_str())
                && key.as_str() > after
            {
                return Ok(Some(Item::Marker(key, meta)));
            }
        }
    }

    /// Skips every remaining key that starts with `prefix` (they are contiguous in key order).
    fn skip_prefix(&mut self, prefix: &str) {
        while self.stack.last().is_some_and(|f| f.key_prefix.starts_with(prefix)) {
            self.stack.pop();
        }
        if let Some(frame) = self.stack.last_mut() {
            while frame
                .entries
                .get(frame.next)
                .is_some_and(|(name, _)| format!("{}{name}", frame.key_prefix).starts_with(prefix))
            {
                frame.next += 1;
            }
        }
    }
}

/// Where the walk of a directory whose keys start with `key_prefix` begins: past the entries
/// that sort before both the query's prefix and its resume point (found by binary search), but
/// at the directory holding either of them, which the walk must enter.
fn first_relevant(entries: &[(String, bool)], key_prefix: &str, query: &ListQuery) -> usize {
    let after = query.after.as_deref().unwrap_or("");
    let start_of = |bound: &str| {
        let Some(rest) = bound.strip_prefix(key_prefix) else {
            // The bound is outside this directory: before all of it, or after all of it (then
            // the walk never entered it).
            return 0;
        };
        let at = entries.partition_point(|(name, _)| name.as_str() < rest);
        match at.checked_sub(1).map(|i| &entries[i]) {
            Some((name, true)) if rest.starts_with(name.as_str()) => at - 1,
            _ => at,
        }
    };
    start_of(&query.prefix).max(start_of(after))
}

impl BucketStore {
    /// Lists `bucket` as S3 does: keys under `query.prefix` in byte order, rolled up into common
    /// prefixes at `query.delimiter`, starting after `query.after`, at most `query.max_keys`
    /// entries. Symlinks and files with non-UTF-8 names are not objects and are skipped.
    pub async fn list_objects(
        &self,
        bucket: &str,
        query: ListQuery,
    ) -> Result<ListPage, StoreError> {
        let bucket = bucket.to_owned();
        self.blocking(move |store| store.list_blocking(&bucket, &query)).await
    }

    pub(super) fn list_blocking(
        &self,
        bucket: &str,
        query: &ListQuery,
    ) -> Result<ListPage, StoreError> {
        let dir = self.bucket_dir(bucket)?;
        let mut page = ListPage::default();
        if query.max_keys == 0 {
            return Ok(page);
        }
        let after = query.after.clone().unwrap_or_default();
        let delimiter = query.delimiter.as_deref().filter(|d| !d.is_empty());
        let side = self.side_objects(bucket, &query.prefix, &after)?;
        let walk = Walker::new(dir, query, &self.inner.dir_cache)?;
        let mut walker =
            Merged::new(walk, side, |key: &str| self.read_meta(bucket, key, None).is_some());
        let mut count = 0;
        while let Some(item) = walker.next_item()? {
            let key = item.key().to_owned();
            let rolled_up = delimiter.and_then(|d| {
                let rest = &key[query.prefix.len()..];
                rest.find(d).map(|at| key[..query.prefix.len() + at + d.len()].to_owned())
            });
            if let Some(common) = rolled_up {
                walker.skip_prefix(&common);
                // A prefix returned on an earlier page is the resume point itself.
                if common <= after {
                    continue;
                }
                if count == query.max_keys {
                    page.is_truncated = true;
                    break;
                }
                page.next_after = Some(common.clone());
                page.common_prefixes.push(common);
                count += 1;
                continue;
            }
            let info = match item {
                Item::Object(key, path, meta) => {
                    Some(self.object_info(bucket, &key, DataFile::Path(&path), &meta))
                }
                Item::Marker(key, meta) => self.marker_info(bucket, &key, &meta),
                Item::Side(info) => Some(info),
            };
            let Some(info) = info else { continue };
            if count == query.max_keys {
                page.is_truncated = true;
                break;
            }
            page.next_after = Some(info.key.clone());
            page.objects.push(info);
            count += 1;
        }
        if !page.is_truncated {
            page.next_after = None;
        }
        Ok(page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ObjectAttrs, PutCheck, Writer};

    async fn put(store: &BucketStore, key: &str) {
        let data = if key.ends_with('/') { String::new() } else { key.to_owned() };
        put_bytes(store, key, data).await;
    }

    async fn put_bytes(store: &BucketStore, key: &str, data: String) {
        let body = futures::stream::iter([Ok::<_, io::Error>(bytes::Bytes::from(data))]);
        store
            .put_object(
                "b-1",
                key,
                ObjectAttrs::default(),
                body,
                PutCheck::default(),
                &Writer::Operator,
            )
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_page_costs_what_it_returns_not_the_directory_size() {
        let tmp = tempfile::tempdir().unwrap();
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        let creator = super::super::Creator { user_id: "obc-1", delete_with_claim: true };
        store.create_bucket("b-1", creator).await.unwrap();
        // Written behind the store's back: only the walk is measured.
        let dir = store.bucket_dir("b-1").unwrap();
        std::fs::create_dir_all(dir.join("flat")).unwrap();
        for i in 0..3000 {
            std::fs::write(dir.join(format!("flat/{i:05}")), b"").unwrap();
        }
        std::fs::write(dir.join("other"), b"").unwrap();
        let walk = |prefix: &str, after: &str| {
            let query = ListQuery {
                prefix: prefix.to_owned(),
                after: Some(after.to_owned()),
                ..ListQuery::default()
            };
            let mut walker = Walker::new(dir.clone(), &query, &store.inner.dir_cache).unwrap();
            let mut keys = Vec::new();
            while keys.len() < 10 {
                match walker.next_item().unwrap() {
                    Some(item) => keys.push(item.key().to_owned()),
                    None => break,
                }
            }
            (keys, walker.examined)
        };
        let (keys, examined) = walk("", "flat/02000");
        assert_eq!(keys.first().map(String::as_str), Some("flat/02001"));
        assert_eq!(keys.len(), 10);
        assert!(examined < 40, "{examined} entries looked at for a page of 10");
        let (keys, examined) = walk("flat/029", "");
        assert_eq!(keys.len(), 10);
        assert_eq!(keys[0], "flat/02900");
        assert!(examined < 40, "{examined} entries looked at for a page of 10");
        let (keys, examined) = walk("o", "");
        assert_eq!(keys, ["other"]);
        assert!(examined < 10, "{examined} entries looked at past the prefix");
    }

    fn keys(page: &ListPage) -> Vec<&str> {
        page.objects.iter().map(|o| o.key.as_str()).collect()
    }

    #[tokio::test]
    async fn order_prefixes_and_pages() {
        let tmp = tempfile::tempdir().unwrap();
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        let creator = super::super::Creator { user_id: "obc-1", delete_with_claim: true };
        store.create_bucket("b-1", creator).await.unwrap();
        for key in ["a/b", "a-c", "a0", "a/c/d", "b", "a/c/e", "dir/", "dir/x"] {
            put(&store, key).await;
        }
        let all = |after: Option<&str>, max| ListQuery {
            after: after.map(str::to_owned),
            max_keys: max,
            ..ListQuery::default()
        };
        let page = store.list_objects("b-1", all(None, 1000)).await.unwrap();
        assert_eq!(keys(&page), ["a-c", "a/b", "a/c/d", "a/c/e", "a0", "b", "dir/", "dir/x"]);
        assert!(!page.is_truncated);

        let page = store.list_objects("b-1", all(Some("a/b"), 2)).await.unwrap();
        assert_eq!(keys(&page), ["a/c/d", "a/c/e"]);
        assert!(page.is_truncated);
        assert_eq!(page.next_after.as_deref(), Some("a/c/e"));

        let delimited = |prefix: &str, after: Option<&str>, max| ListQuery {
            prefix: prefix.to_owned(),
            delimiter: Some("/".to_owned()),
            after: after.map(str::to_owned),
            max_keys: max,
        };
        let page = store.list_objects("b-1", delimited("", None, 1000)).await.unwrap();
        assert_eq!(keys(&page), ["a-c", "a0", "b"]);
        assert_eq!(page.common_prefixes, ["a/", "dir/"]);

        let page = store.list_objects("b-1", delimited("a/", None, 1000)).await.unwrap();
        assert_eq!(keys(&page), ["a/b"]);
        assert_eq!(page.common_prefixes, ["a/c/"]);

        // Paging one entry at a time never repeats a common prefix.
        let mut seen = Vec::new();
        let mut after = None;
        loop {
            let page = store.list_objects("b-1", delimited("", after.as_deref(), 1)).await.unwrap();
            seen.extend(page.objects.iter().map(|o| o.key.clone()));
            seen.extend(page.common_prefixes.iter().cloned());
            if !page.is_truncated {
                break;
            }
            after = page.next_after;
        }
        assert_eq!(seen, ["a-c", "a/", "a0", "b", "dir/"]);
    }

    #[tokio::test]
    async fn a_key_ending_in_slash_with_bytes_is_listed_beside_the_keys_below_it() {
        let tmp = tempfile::tempdir().unwrap();
        let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
        let creator = super::super::Creator { user_id: "obc-1", delete_with_claim: true };
        store.create_bucket("b-1", creator).await.unwrap();
        // Kept beside the bucket, while its directory holds the keys below it.
        put_bytes(&store, "0/", "0/".to_owned()).await;
        for key in ["0/1000", "0/1001", "1999#", "empty/", "empty/x"] {
            put(&store, key).await;
        }
        let expected = ["0/", "0/1000", "0/1001", "1999#", "empty/", "empty/x"];
        let all = ListQuery { max_keys: 1000, ..ListQuery::default() };
        let page = store.list_objects("b-1", all).await.unwrap();
        assert_eq!(keys(&page), expected);
        assert_eq!(page.objects[0].size, 2, "the object's bytes, not its directory");
        let mut seen = Vec::new();
        let mut after = None;
        loop {
            let query = ListQuery { after: after.clone(), max_keys: 1, ..ListQuery::default() };
            let page = store.list_objects("b-1", query).await.unwrap();
            seen.extend(page.objects.iter().map(|o| o.key.clone()));
            if !page.is_truncated {
                break;
            }
            after = page.next_after;
        }
        assert_eq!(seen, expected);
    }
}
