//! Listings paged while keys come and go: every key present for the whole of a paged listing
//! appears in it exactly once (or the common prefix it rolls up into, once), in byte order,
//! whatever is written or deleted between and during its pages, for ListObjects (V1),
//! ListObjectsV2 and ListObjectVersions alike.

mod common;

use std::collections::BTreeSet;

use aws_sdk_s3::Client;
use aws_sdk_s3::types::{Delete, ObjectIdentifier};
use common::Server;
use futures::StreamExt;
use proptest::prelude::*;

/// The API and pagination style a client lists with.
#[derive(Clone, Copy, Debug)]
enum Style {
    /// ListObjects, resuming at `NextMarker`.
    V1,
    /// ListObjectsV2 with continuation tokens.
    V2,
    /// ListObjectsV2 resuming by `StartAfter` the last key listed.
    V2StartAfter,
    /// ListObjectVersions, resuming at `NextKeyMarker` and `NextVersionIdMarker`.
    Versions,
}

const STYLES: [Style; 4] = [Style::V1, Style::V2, Style::V2StartAfter, Style::Versions];

/// Where a paged listing stands: the resume point the client sends next.
#[derive(Default)]
struct Cursor {
    marker: Option<String>,
    version_id: Option<String>,
}

/// How a client lists: API and pagination style, page size and delimiter.
#[derive(Clone, Copy, Debug)]
struct Listing {
    style: Style,
    size: i32,
    delimiter: Option<&'static str>,
}

/// One page of a listing.
struct Page {
    /// Keys, in the order listed.
    keys: Vec<String>,
    /// Keys and common prefixes together, sorted.
    entries: Vec<String>,
    truncated: bool,
}

/// One page after `cursor` (which then moves on). Every object here holds its own key's
/// text, so each listed size must be its key's length: a listing answers what a read finds.
async fn page(s3: &Client, bucket: &str, listing: Listing, cursor: &mut Cursor) -> Page {
    let Listing { style, size, delimiter } = listing;
    let marker = cursor.marker.clone();
    let delimiter = delimiter.map(str::to_owned);
    let (listed, prefixes, truncated, next) = match style {
        Style::V1 => {
            let out = s3
                .list_objects()
                .bucket(bucket)
                .set_marker(marker)
                .set_delimiter(delimiter)
                .max_keys(size)
                .send()
                .await
                .unwrap();
            let listed: Vec<_> =
                out.contents().iter().map(|o| (o.key().unwrap().to_owned(), o.size())).collect();
            let prefixes = out.common_prefixes().iter().map(|p| p.prefix().unwrap().to_owned());
            let next = out.next_marker().map(str::to_owned);
            (listed, prefixes.collect(), out.is_truncated().unwrap_or(false), next)
        }
        Style::V2 | Style::V2StartAfter => {
            let by_token = matches!(style, Style::V2);
            let out = s3
                .list_objects_v2()
                .bucket(bucket)
                .set_continuation_token(marker.clone().filter(|_| by_token))
                .set_start_after(marker.filter(|_| !by_token))
                .set_delimiter(delimiter)
                .max_keys(size)
                .send()
                .await
                .unwrap();
            let listed: Vec<_> =
                out.contents().iter().map(|o| (o.key().unwrap().to_owned(), o.size())).collect();
            let prefixes: Vec<String> =
                out.common_prefixes().iter().map(|p| p.prefix().unwrap().to_owned()).collect();
            let next = if by_token {
                out.next_continuation_token().map(str::to_owned)
            } else {
                listed.iter().map(|(key, _)| key).chain(&prefixes).max().cloned()
            };
            (listed, prefixes, out.is_truncated().unwrap_or(false), next)
        }
        Style::Versions => {
            let out = s3
                .list_object_versions()
                .bucket(bucket)
                .set_key_marker(marker)
                .set_version_id_marker(cursor.version_id.clone())
                .set_delimiter(delimiter)
                .max_keys(size)
                .send()
                .await
                .unwrap();
            cursor.version_id = out.next_version_id_marker().map(str::to_owned);
            let listed: Vec<_> =
                out.versions().iter().map(|v| (v.key().unwrap().to_owned(), v.size())).collect();
            let prefixes = out.common_prefixes().iter().map(|p| p.prefix().unwrap().to_owned());
            let next = out.next_key_marker().map(str::to_owned);
            (listed, prefixes.collect(), out.is_truncated().unwrap_or(false), next)
        }
    };
    if truncated {
        cursor.marker = Some(next.expect("a resume point on a truncated page"));
    }
    for (key, size) in &listed {
        assert_eq!(*size, Some(key.len() as i64), "{style:?}: the size listed for {key:?}");
    }
    let keys: Vec<String> = listed.into_iter().map(|(key, _)| key).collect();
    let mut entries: Vec<String> = keys.iter().cloned().chain(prefixes).collect();
    entries.sort();
    Page { keys, entries, truncated }
}

/// Stores each key with its own text as its body, as s3-tests does (so a key ending in `/` is
/// not an empty folder marker).
async fn put_all(s3: &Client, bucket: &str, keys: &[String]) {
    let mut puts = futures::stream::iter(keys.iter().map(|key| {
        s3.put_object().bucket(bucket).key(key).body(key.as_bytes().to_vec().into()).send()
    }))
    .buffer_unordered(16);
    while let Some(put) = puts.next().await {
        put.unwrap();
    }
}

async fn delete_all(s3: &Client, bucket: &str, keys: &[String]) {
    if keys.is_empty() {
        return;
    }
    let objects = keys
        .iter()
        .map(|k| ObjectIdentifier::builder().key(k).version_id("null").build().unwrap())
        .collect();
    let delete = Delete::builder().set_objects(Some(objects)).quiet(true).build().unwrap();
    let out = s3.delete_objects().bucket(bucket).delete(delete).send().await.unwrap();
    assert!(out.errors().is_empty(), "{:?}", out.errors());
}

/// Asserts that pages come in strictly increasing byte order, across pages too.
fn check_order(listed: &[String], page: &[String], context: &str) {
    let mut last = listed.last();
    for key in page {
        assert!(last.is_none_or(|l| l < key), "{context}: {key:?} listed after {last:?}");
        last = Some(key);
    }
}

/// The keys of ceph/s3-tests' `test_bucket_list_delimiter_not_skip_special`.
fn not_skip_special_keys() -> Vec<String> {
    let mut keys = vec!["0/".to_owned()];
    keys.extend((1000..1999).map(|i| format!("0/{i}")));
    keys.extend(["1999", "1999#", "1999+", "2000"].map(str::to_owned));
    keys
}

/// s3-tests' cleanup: pages of 128, each deleted with DeleteObjects before the next is asked.
async fn clean_up_page_by_page(style: Style) {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("special", "obc-c").await;
    let s3 = server.client(&key);
    let mut keys = not_skip_special_keys();
    put_all(&s3, "special", &keys).await;
    keys.sort();

    let context = format!("{style:?}");
    // A read finds `0/` with its bytes; a listing must find it too.
    let head = s3.head_object().bucket("special").key("0/").send().await.unwrap();
    assert_eq!(head.content_length(), Some(2));
    let listing = Listing { style, size: 128, delimiter: None };
    let (mut listed, mut cursor) = (Vec::new(), Cursor::default());
    loop {
        let page = page(&s3, "special", listing, &mut cursor).await;
        check_order(&listed, &page.keys, &context);
        delete_all(&s3, "special", &page.keys).await;
        listed.extend(page.keys);
        if !page.truncated {
            break;
        }
    }
    let missed: Vec<_> = keys.iter().filter(|k| !listed.contains(k)).collect();
    assert!(missed.is_empty(), "{context}: never listed: {missed:?}");
    assert_eq!(listed, keys, "{context}");
    let left = s3.list_objects_v2().bucket("special").send().await.unwrap();
    assert_eq!(left.key_count(), Some(0), "{context}: left behind: {:?}", left.contents());
}

#[tokio::test]
async fn a_cleanup_deleting_each_page_of_versions_lists_every_key() {
    clean_up_page_by_page(Style::Versions).await;
}

#[tokio::test]
async fn a_cleanup_deleting_each_page_by_marker_lists_every_key() {
    clean_up_page_by_page(Style::V1).await;
}

#[tokio::test]
async fn a_cleanup_deleting_each_page_by_token_or_start_after_lists_every_key() {
    clean_up_page_by_page(Style::V2).await;
    clean_up_page_by_page(Style::V2StartAfter).await;
}

/// A directory large enough that its sorted entries are kept between pages: keys written and
/// deleted in it between pages (each after the kept entries have settled) must neither hide a
/// key kept throughout nor list one twice.
#[tokio::test]
async fn a_large_directory_changing_between_pages_lists_every_key_once() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("large", "obc-l").await;
    let s3 = server.client(&key);
    let stable: Vec<String> = (0..1500).map(|i| format!("d/{:05}", i * 2)).collect();
    put_all(&s3, "large", &stable).await;
    for style in STYLES {
        let listing = Listing { style, size: 100, delimiter: None };
        let (mut listed, mut cursor) = (Vec::<String>::new(), Cursor::default());
        for round in 0.. {
            // Settled: the next page reads the directory from the kept entries, if unchanged.
            tokio::time::sleep(std::time::Duration::from_millis(30)).await;
            let page = page(&s3, "large", listing, &mut cursor).await;
            check_order(&listed, &page.keys, &format!("{style:?}"));
            listed.extend(page.keys);
            if !page.truncated {
                break;
            }
            // Odd keys around the resume point and far from it come and go.
            let last: usize = listed.last().unwrap()[2..].parse().unwrap();
            let near = [last.saturating_sub(1), last + 1, last + 3, ((last + 1501) % 3000) | 1];
            let near: Vec<String> = near.iter().map(|i| format!("d/{:05}", i | 1)).collect();
            if round % 2 == 0 {
                put_all(&s3, "large", &near).await;
            } else {
                delete_all(&s3, "large", &near).await;
            }
        }
        let kept: Vec<&String> = listed.iter().filter(|k| stable.contains(k)).collect();
        assert_eq!(kept.len(), stable.len(), "{style:?}: every key kept throughout, once");
    }
}

/// Keys from characters that sort around `/` (`#`, `+`, `-`, `.` before it; `0`, `9`, `a`
/// after), so that a directory walk and byte order differ, keys are prefixes of others and
/// hold empty or dot segments.
fn key_strategy() -> impl Strategy<Value = String> {
    proptest::collection::vec(proptest::sample::select(b"ab09/#+-.".to_vec()), 1..7)
        .prop_map(|bytes| bytes.into_iter().map(char::from).collect())
}

/// One change made by another client while the listing pages: put or delete a key.
#[derive(Clone, Debug)]
enum Change {
    Put(String),
    Delete(String),
}

/// What another client changes while one page is read: a few puts and deletes.
fn batch_strategy() -> impl Strategy<Value = Vec<Change>> {
    let change =
        prop_oneof![key_strategy().prop_map(Change::Put), key_strategy().prop_map(Change::Delete)];
    proptest::collection::vec(change, 0..4)
}

/// What `key` is listed as under `delimiter`: itself, or the common prefix it rolls up into.
fn entry_of(key: &str, delimiter: Option<&str>) -> String {
    let at = delimiter.and_then(|d| key.find(d).map(|at| at + d.len()));
    key[..at.unwrap_or(key.len())].to_owned()
}

/// A listing of `stable` keys (kept for its whole run) while other keys are put and deleted
/// between and during its pages; with `delete_listed`, each page's keys are deleted before
/// the next page is asked, as a cleanup does.
async fn page_through_churn(
    listing: Listing,
    stable: &BTreeSet<String>,
    others: &[String],
    changes: &[Vec<Change>],
    delete_listed: bool,
) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("churn", "obc-c").await;
    let s3 = server.client(&key);
    let stable_keys: Vec<String> = stable.iter().cloned().collect();
    put_all(&s3, "churn", &stable_keys).await;
    let others: Vec<String> = others.iter().filter(|k| !stable.contains(*k)).cloned().collect();
    put_all(&s3, "churn", &others).await;

    let context = format!("{listing:?} delete_listed {delete_listed}");
    let (mut listed, mut cursor) = (Vec::<String>::new(), Cursor::default());
    for round in 0..10_000 {
        // Another client's changes to other keys, made while the page is read.
        let batch = changes.get(round % changes.len().max(1)).cloned().unwrap_or_default();
        let (mut puts, mut deletes) = (Vec::new(), Vec::new());
        for change in batch {
            match change {
                Change::Put(k) if !stable.contains(&k) => puts.push(k),
                Change::Delete(k) if !stable.contains(&k) => deletes.push(k),
                _ => {}
            }
        }
        let churn = async {
            put_all(&s3, "churn", &puts).await;
            for key in &deletes {
                s3.delete_object().bucket("churn").key(key).send().await.unwrap();
            }
        };
        let (page, ()) = tokio::join!(page(&s3, "churn", listing, &mut cursor), churn);
        for entry in &page.entries {
            prop_assert!(
                listed.last().is_none_or(|l| l < entry),
                "{context}: {entry:?} listed after {:?}",
                listed.last()
            );
            listed.push(entry.clone());
        }
        if delete_listed {
            delete_all(&s3, "churn", &page.keys).await;
        }
        if !page.truncated {
            let listed: BTreeSet<&String> = listed.iter().collect();
            let missed: BTreeSet<String> = stable
                .iter()
                .map(|k| entry_of(k, listing.delimiter))
                .filter(|entry| !listed.contains(entry))
                .collect();
            prop_assert!(missed.is_empty(), "{context}: never listed: {missed:?}");
            return Ok(());
        }
    }
    Err(TestCaseError::fail(format!("{context}: the listing never ended")))
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_key_present_throughout_is_listed_once_in_order_whatever_changes(
        stable in proptest::collection::btree_set(key_strategy(), 1..30),
        others in proptest::collection::vec(key_strategy(), 0..15),
        changes in proptest::collection::vec(batch_strategy(), 1..6),
        size in 1i32..8,
        style in proptest::sample::select(STYLES.to_vec()),
        delimiter in proptest::option::of(Just("/")),
        delete_listed in any::<bool>(),
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listing = Listing { style, size, delimiter };
        runtime.block_on(page_through_churn(listing, &stable, &others, &changes, delete_listed))?;
    }
}
