//! The pass's work is bounded and shared: one walk per bucket whatever its rules, a budget
//! spread over several passes from where each stopped (across a restart too), small buckets
//! served beside huge ones, and how far behind expiry runs reported.

use std::io;
use std::time::Duration;

use bytes::Bytes;

use super::*;
use crate::store::{
    Creator, Expiration, LifecycleConfig, LifecycleFilter, LifecycleRule, ListQuery, ObjectAttrs,
    PutCheck, Writer,
};

const DAY: Duration = Duration::from_secs(86_400);

async fn bucket(store: &BucketStore, bucket: &str, rules: Vec<LifecycleRule>) {
    let creator = Creator { user_id: "obc-1", delete_with_claim: true };
    store.create_bucket(bucket, creator).await.unwrap();
    store.set_bucket_lifecycle(bucket, Some(LifecycleConfig { rules })).await.unwrap();
}

async fn put(store: &BucketStore, bucket: &str, key: &str, body: &'static [u8]) {
    let body = futures::stream::iter([Ok::<_, io::Error>(Bytes::from_static(body))]);
    let (attrs, check) = (ObjectAttrs::default(), PutCheck::default());
    store.put_object(bucket, key, attrs, body, check, &Writer::Operator).await.unwrap();
}

async fn count(store: &BucketStore, bucket: &str) -> usize {
    let query = ListQuery { max_keys: 10_000, ..ListQuery::default() };
    store.list_objects(bucket, query).await.unwrap().objects.len()
}

fn expire(prefix: &str, days: i32) -> LifecycleRule {
    LifecycleRule {
        status: "Enabled".into(),
        filter: LifecycleFilter { prefix: Some(prefix.into()), ..LifecycleFilter::default() },
        expiration: Some(Expiration { days: Some(days), ..Expiration::default() }),
        ..LifecycleRule::default()
    }
}

fn open(root: &std::path::Path) -> BucketStore {
    BucketStore::open(root.to_owned(), "id").unwrap()
}

/// A thousand rules, none due, cost one listing of the bucket, not one per rule.
#[tokio::test]
async fn a_thousand_rules_walk_a_bucket_once() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    let rules = (0..MAX_RULES).map(|n| expire(&format!("r{n}/"), 3650)).collect();
    bucket(&store, "b-1", rules).await;
    for n in 0..50 {
        put(&store, "b-1", &format!("r{}/{n}", n % 7), b"x").await;
    }
    let pass = store.run_lifecycle_pass(SystemTime::now() + DAY).await.unwrap();
    assert_eq!((pass.listings, pass.examined, pass.expired), (1, 50, 0), "{pass:?}");
    assert_eq!(pass.unfinished, 0);
}

const MAX_RULES: usize = crate::store::MAX_LIFECYCLE_RULES;

/// A budget of ten objects walks twenty over two passes, the second going on where the first
/// stopped even after a restart: only what it had not examined yet is examined.
#[tokio::test]
async fn a_small_budget_expires_everything_over_several_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    let big_only = LifecycleRule {
        filter: LifecycleFilter { size_greater_than: Some(1), ..LifecycleFilter::default() },
        ..expire("", 1)
    };
    bucket(&store, "b-1", vec![big_only]).await;
    // Every other object is too small for the rule, and stays.
    for n in 0..20 {
        put(&store, "b-1", &format!("k{n:02}"), if n % 2 == 0 { b"due" } else { b"k" }).await;
    }
    let later = SystemTime::now() + 3 * DAY;
    let first = store.run_lifecycle_pass_within(later, 10).await.unwrap();
    assert_eq!((first.examined, first.expired, first.unfinished), (10, 5, 1), "{first:?}");
    assert_eq!(count(&store, "b-1").await, 15);

    drop(store);
    let store = open(tmp.path());
    let second = store.run_lifecycle_pass_within(later, 10).await.unwrap();
    let went_on = (second.examined, second.expired, second.unfinished);
    assert_eq!(went_on, (10, 5, 0), "went on after k09, and finished: {second:?}");
    assert_eq!(count(&store, "b-1").await, 10, "only the small ones are left");
    let third = store.run_lifecycle_pass_within(later, 10).await.unwrap();
    let again = (third.examined, third.expired, third.unfinished);
    assert_eq!(again, (10, 0, 0), "a new walk from the start: {third:?}");
}

/// A small bucket after a huge one is done in the first pass: the budget is shared in turns.
#[tokio::test]
async fn a_small_bucket_behind_a_huge_one_is_served_in_the_same_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    bucket(&store, "a-huge", vec![expire("", 1)]).await;
    bucket(&store, "b-small", vec![expire("", 1)]).await;
    for n in 0..60 {
        put(&store, "a-huge", &format!("k{n:02}"), b"x").await;
    }
    for n in 0..3 {
        put(&store, "b-small", &format!("k{n}"), b"x").await;
    }
    let later = SystemTime::now() + 3 * DAY;
    let pass = store.run_lifecycle_pass_within(later, 20).await.unwrap();
    assert_eq!(count(&store, "b-small").await, 0, "{pass:?}");
    assert_eq!((pass.expired, pass.unfinished), (20, 1), "{pass:?}");
    assert_eq!(count(&store, "a-huge").await, 43);
    let mut passes = 1;
    while count(&store, "a-huge").await > 0 {
        store.run_lifecycle_pass_within(later, 20).await.unwrap();
        passes += 1;
        assert!(passes <= 5, "the huge bucket is walked on, pass after pass");
    }
}

/// The lag is how long ago the walk that last covered every key began: it grows while a
/// budget leaves a bucket unfinished, and falls once the walk completes.
#[tokio::test]
async fn the_lag_says_how_far_behind_expiry_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    bucket(&store, "b-1", vec![expire("", 3650)]).await;
    for n in 0..5 {
        put(&store, "b-1", &format!("k{n}"), b"x").await;
    }
    let start = SystemTime::now();
    let hour = Duration::from_secs(3600);
    let pass = store.run_lifecycle_pass_within(start, 2).await.unwrap();
    assert_eq!((pass.lag, pass.unfinished), (Duration::ZERO, 1), "{pass:?}");
    let pass = store.run_lifecycle_pass_within(start + hour, 2).await.unwrap();
    assert_eq!((pass.lag, pass.unfinished), (hour, 1), "{pass:?}");
    // The walk started at `start` completes: expiry is as old as that start.
    let pass = store.run_lifecycle_pass_within(start + 2 * hour, 10).await.unwrap();
    assert_eq!((pass.lag, pass.unfinished), (2 * hour, 0), "{pass:?}");
    // A walk done within one pass leaves no lag.
    let pass = store.run_lifecycle_pass_within(start + 3 * hour, 10).await.unwrap();
    assert_eq!((pass.lag, pass.unfinished), (Duration::ZERO, 0), "{pass:?}");
}
