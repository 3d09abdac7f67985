//! Versioning against a model: random sequences of writes, deletes, deletes by version id and
//! switches between `Enabled` and `Suspended`, on a few keys (one of them a prefix of another),
//! after which the store's ListObjectVersions (whole and in pages of any size, with and without
//! a prefix and a delimiter, its set of keys with archived versions read from the disk before
//! or after the writes), ListObjects, reads of every key and version, and usage all agree with
//! a plain list of versions per key.

use std::collections::BTreeMap;
use std::io;

use bytes::Bytes;
use proptest::prelude::*;
use s3_endpoint::store::{ListQuery, ObjectAttrs, PutCheck, VersionQuery, Versioning};
use s3_endpoint::{BucketStore, Creator, StoreError, Usage, Writer};

const BUCKET: &str = "model";
const KEYS: [&str; 4] = ["a", "a/b", "b", "c/d"];

#[derive(Clone, Debug)]
enum Op {
    Put(usize, u8),
    Delete(usize),
    /// Removes the version at this position (modulo) of the key's history, newest first.
    DeleteVersion(usize, usize),
    Versioning(bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..KEYS.len(), 1u8..40).prop_map(|(k, n)| Op::Put(k, n)),
        2 => (0..KEYS.len()).prop_map(Op::Delete),
        2 => (0..KEYS.len(), 0usize..8).prop_map(|(k, i)| Op::DeleteVersion(k, i)),
        1 => any::<bool>().prop_map(Op::Versioning),
    ]
}

/// One version in the model: its id, and its body's length (`None`: a delete marker).
type Entry = (String, Option<u8>);

/// The versions (key and id, in order) and common prefixes ListObjectVersions gives under
/// `prefix` with the delimiter `/`, in pages of `page`.
async fn delimited(
    store: &BucketStore,
    prefix: &str,
    page: usize,
) -> Result<(Vec<(String, String)>, Vec<String>), TestCaseError> {
    let (mut versions, mut prefixes) = (Vec::new(), Vec::new());
    let (mut key_marker, mut version_id_marker) = (None, None);
    loop {
        let query = VersionQuery {
            prefix: prefix.to_owned(),
            delimiter: Some("/".to_owned()),
            key_marker: key_marker.clone(),
            version_id_marker: version_id_marker.clone(),
            max_keys: page,
        };
        let got = store.list_versions(BUCKET, query).await.unwrap();
        prop_assert!(got.versions.len() + got.common_prefixes.len() <= page);
        let listed = got.versions.iter().map(|v| (v.info.key.clone(), v.info.version_id.clone()));
        versions.extend(listed.map(|(key, id)| (key, id.unwrap())));
        prefixes.extend(got.common_prefixes.iter().cloned());
        if !got.is_truncated {
            return Ok((versions, prefixes));
        }
        key_marker = got.next_key_marker.clone();
        version_id_marker = got.next_version_id_marker.clone();
        prop_assert!(versions.len() + prefixes.len() <= 1000, "pages never end");
    }
}

async fn run(ops: Vec<Op>, page: usize, early: bool) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().unwrap();
    let store = BucketStore::open(tmp.path().to_owned(), "id").unwrap();
    let creator = Creator { user_id: "obc-1", delete_with_claim: true };
    store.create_bucket(BUCKET, creator).await.unwrap();
    store.set_bucket_versioning(BUCKET, Versioning::Enabled).await.unwrap();
    if early {
        // The store then learns of every key with archived versions from its own writes.
        let all = VersionQuery { max_keys: 1000, ..VersionQuery::default() };
        prop_assert!(store.list_versions(BUCKET, all).await.unwrap().versions.is_empty());
    }
    let mut suspended = false;
    // Newest last.
    let mut model: BTreeMap<&str, Vec<Entry>> = BTreeMap::new();
    for op in &ops {
        match *op {
            Op::Put(k, n) => {
                let body =
                    futures::stream::iter([Ok::<_, io::Error>(Bytes::from(vec![n; n as usize]))]);
                let (attrs, check) = (ObjectAttrs::default(), PutCheck::default());
                let info = store
                    .put_object(BUCKET, KEYS[k], attrs, body, check, &Writer::Operator)
                    .await
                    .unwrap();
                let id = info.version_id.unwrap();
                let history = model.entry(KEYS[k]).or_default();
                if suspended {
                    history.retain(|v| v.0 != "null");
                }
                history.push((id, Some(n)));
            }
            Op::Delete(k) => {
                let deleted = store.delete_object_version(BUCKET, KEYS[k], None).await.unwrap();
                prop_assert!(deleted.delete_marker);
                let history = model.entry(KEYS[k]).or_default();
                if suspended {
                    history.retain(|v| v.0 != "null");
                }
                history.push((deleted.version_id.unwrap(), None));
            }
            Op::DeleteVersion(k, i) => {
                let history = model.entry(KEYS[k]).or_default();
                if history.is_empty() {
                    continue;
                }
                let at = history.len() - 1 - i % history.len();
                let (id, _) = history.remove(at);
                store.delete_object_version(BUCKET, KEYS[k], Some(&id)).await.unwrap();
            }
            Op::Versioning(enabled) => {
                let state = if enabled { Versioning::Enabled } else { Versioning::Suspended };
                store.set_bucket_versioning(BUCKET, state).await.unwrap();
                suspended = !enabled;
            }
        }
    }

    // Every version, in S3's order.
    let expected: Vec<(String, String, bool, Option<u8>)> = model
        .iter()
        .flat_map(|(key, history)| {
            history
                .iter()
                .rev()
                .enumerate()
                .map(|(i, (id, n))| (key.to_string(), id.clone(), i == 0, *n))
        })
        .collect();
    let listed =
        |page: &s3_endpoint::store::VersionPage| -> Vec<(String, String, bool, Option<u8>)> {
            page.versions
                .iter()
                .map(|v| {
                    let size = (!v.delete_marker).then(|| u8::try_from(v.info.size).unwrap());
                    (v.info.key.clone(), v.info.version_id.clone().unwrap(), v.is_latest, size)
                })
                .collect()
        };
    let all = VersionQuery { max_keys: 1000, ..VersionQuery::default() };
    let whole = store.list_versions(BUCKET, all).await.unwrap();
    prop_assert_eq!(&listed(&whole), &expected, "ops: {:?}", ops);
    let mut paged = Vec::new();
    let (mut key_marker, mut version_id_marker) = (None, None);
    loop {
        let query = VersionQuery {
            key_marker: key_marker.clone(),
            version_id_marker: version_id_marker.clone(),
            max_keys: page,
            ..VersionQuery::default()
        };
        let got = store.list_versions(BUCKET, query).await.unwrap();
        prop_assert!(got.versions.len() <= page);
        paged.extend(listed(&got));
        if !got.is_truncated {
            break;
        }
        key_marker = got.next_key_marker.clone();
        version_id_marker = got.next_version_id_marker.clone();
        prop_assert!(paged.len() <= expected.len(), "pages never end");
    }
    prop_assert_eq!(&paged, &expected, "pages of {}", page);
    // Keys rolled up: a common prefix only while some key under it has versions left.
    for prefix in ["", "a", "a/", "c/"] {
        let (mut want_versions, mut want_prefixes) = (Vec::new(), Vec::new());
        for (key, id, _, _) in expected.iter().filter(|v| v.0.starts_with(prefix)) {
            match key[prefix.len()..].find('/') {
                Some(at) => want_prefixes.push(key[..prefix.len() + at + 1].to_owned()),
                None => want_versions.push((key.clone(), id.clone())),
            }
        }
        want_prefixes.dedup();
        let (versions, prefixes) = delimited(&store, prefix, page).await?;
        prop_assert_eq!(&versions, &want_versions, "under {:?}, pages of {}", prefix, page);
        prop_assert_eq!(&prefixes, &want_prefixes, "under {:?}, pages of {}", prefix, page);
    }

    // Current objects, reads, usage.
    let current: Vec<String> = model
        .iter()
        .filter(|(_, h)| h.last().is_some_and(|v| v.1.is_some()))
        .map(|(k, _)| k.to_string())
        .collect();
    let objects = store
        .list_objects(BUCKET, ListQuery { max_keys: 1000, ..ListQuery::default() })
        .await
        .unwrap();
    let keys: Vec<String> = objects.objects.iter().map(|o| o.key.clone()).collect();
    prop_assert_eq!(&keys, &current);
    for key in KEYS {
        let history = model.get(key).cloned().unwrap_or_default();
        match (store.open_object(BUCKET, key).await, history.last()) {
            (Ok((info, _)), Some((id, Some(n)))) => {
                prop_assert_eq!(info.size, u64::from(*n));
                prop_assert_eq!(info.version_id.as_ref(), Some(id));
            }
            (Err(StoreError::DeleteMarker { version_id, .. }), Some((id, None))) => {
                prop_assert_eq!(&version_id, id);
            }
            (Err(StoreError::NoSuchKey(_)), None) => {}
            (got, want) => prop_assert!(false, "{key}: read {got:?}, model {want:?}"),
        }
        for (id, n) in &history {
            let got = store.open_version(BUCKET, key, Some(id)).await;
            match (got, n) {
                (Ok((info, _)), Some(n)) => prop_assert_eq!(info.size, u64::from(*n)),
                (Err(StoreError::DeleteMarker { by_id: true, .. }), None) => {}
                (got, _) => prop_assert!(false, "{key} {id}: {got:?}"),
            }
        }
    }
    let (bytes, count) = model
        .values()
        .flatten()
        .filter_map(|v| v.1)
        .fold((0u64, 0u64), |(b, c), n| (b + u64::from(n), c + 1));
    let (usage, _) = store.usage(BUCKET, None).unwrap();
    prop_assert_eq!(usage, Usage { objects: count, bytes });
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 32,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_store_agrees_with_a_list_of_versions_per_key(
        ops in proptest::collection::vec(op(), 1..30),
        page in 1usize..6,
        early in any::<bool>(),
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(run(ops, page, early))?;
    }
}
