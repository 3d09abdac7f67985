//! The lifecycle pass: run at chosen times (the store's own entry point, so that objects are
//! days old without waiting days), it removes exactly what the rules make due (by prefix,
//! tags, size and age; disabled rules do nothing), through the delete path, so that usage and
//! quotas drop; it aborts stale uploads and frees their parts; and the server's own worker,
//! started after a restart, acts on rules set before it, and reports in the endpoint's metrics
//! how its passes keep up.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    AbortIncompleteMultipartUpload, ExpirationStatus, LifecycleRule, LifecycleRuleAndOperator,
    LifecycleRuleFilter, Tag,
};
use s3_endpoint::s3::{EndpointMetrics, LifecycleSchedule, serve_endpoint, service};
use s3_endpoint::{BucketStore, Quota};

use super::{DAY, configuration, expire, keys, prefix, put};
use crate::common::{Server, client_for, code};

const USER: &str = "obc-expiry";

/// What `bucket` holds for the claim, as the meter counts it: (objects, bytes).
fn usage(store: &BucketStore, bucket: &str) -> (u64, u64) {
    let used = store.usage(bucket, Some(USER)).unwrap().1;
    (used.objects, used.bytes)
}

fn tag_filter(key: &str, value: &str) -> LifecycleRuleFilter {
    let tag = Tag::builder().key(key).value(value).build().unwrap();
    LifecycleRuleFilter::builder().tag(tag).build()
}

#[tokio::test]
async fn a_pass_expires_exactly_what_the_rules_make_due() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let s3 = server.client(&server.bucket_with_key("expiry", USER).await);
    let big_logs =
        LifecycleRuleAndOperator::builder().prefix("logs/").object_size_greater_than(100);
    let disabled = LifecycleRule::builder()
        .id("off")
        .status(ExpirationStatus::Disabled)
        .filter(prefix(""))
        .expiration(aws_sdk_s3::types::LifecycleExpiration::builder().days(1).build())
        .build()
        .unwrap();
    let rules = vec![
        expire("tmp", prefix("tmp/"), 30),
        expire("scratch", tag_filter("class", "scratch"), 10),
        expire("big-logs", LifecycleRuleFilter::builder().and(big_logs.build()).build(), 1),
        disabled,
    ];
    let put_rules = s3.put_bucket_lifecycle_configuration().bucket("expiry");
    put_rules.lifecycle_configuration(configuration(rules)).send().await.unwrap();
    // `tmp//side` cannot be a path (an empty segment): it is kept beside the bucket, and
    // expires all the same; `tmp/dir/` is a folder marker.
    for key in ["tmp/a", "tmp//side", "tmp-not-under-the-prefix", "keep/x"] {
        put(&s3, "expiry", key, b"12345", None).await;
    }
    put(&s3, "expiry", "tmp/dir/", b"", None).await;
    put(&s3, "expiry", "data/s", b"scratch", Some("class=scratch&team=a")).await;
    put(&s3, "expiry", "data/k", b"keep", Some("class=keep")).await;
    put(&s3, "expiry", "logs/big", &[7; 200], None).await;
    put(&s3, "expiry", "logs/small", &[7; 100], None).await;
    let all = keys(&s3, "expiry").await;
    assert_eq!(all.len(), 9);
    assert_eq!(usage(&server.store, "expiry"), (9, 5 * 4 + 7 + 4 + 300));

    let now = SystemTime::now();
    let store = &server.store;
    let pass = store.run_lifecycle_pass(now).await.unwrap();
    assert_eq!((pass.expired, pass.failed), (0, 0), "nothing is due yet: {pass:?}");
    assert_eq!(keys(&s3, "expiry").await, all);

    // Two days on, the big log (more than 100 bytes) is due; the small one and the rest not.
    let pass = store.run_lifecycle_pass(now + 2 * DAY).await.unwrap();
    assert_eq!((pass.expired, pass.failed), (1, 0), "{pass:?}");
    assert!(!keys(&s3, "expiry").await.contains(&"logs/big".to_owned()));
    assert_eq!(usage(store, "expiry"), (8, 5 * 4 + 7 + 4 + 100));

    // Twelve days on, the object tagged scratch; its neighbour tagged otherwise stays.
    let pass = store.run_lifecycle_pass(now + 12 * DAY).await.unwrap();
    assert_eq!((pass.expired, pass.failed), (1, 0), "{pass:?}");
    assert_eq!(usage(store, "expiry"), (7, 5 * 4 + 4 + 100));

    // A month on, everything under tmp/ (the marker and the object kept beside the bucket
    // too), and nothing else; the disabled rule never removed anything.
    let pass = store.run_lifecycle_pass(now + 32 * DAY).await.unwrap();
    assert_eq!((pass.expired, pass.failed), (3, 0), "{pass:?}");
    let left = keys(&s3, "expiry").await;
    assert_eq!(left, ["data/k", "keep/x", "logs/small", "tmp-not-under-the-prefix"]);
    assert_eq!(usage(store, "expiry"), (4, 5 * 2 + 4 + 100));
    let got = s3.get_object().bucket("expiry").key("data/k").send().await.unwrap();
    assert_eq!(got.body.collect().await.unwrap().into_bytes().as_ref(), b"keep");
    let pass = store.run_lifecycle_pass(now + 400 * DAY).await.unwrap();
    assert_eq!(pass.expired, 0, "a second pass finds nothing more: {pass:?}");

    // Age is each object's own: a file last changed 40 days ago is due now, a new one not.
    put(&s3, "expiry", "tmp/new", b"new", None).await;
    put(&s3, "expiry", "tmp/old", b"old", None).await;
    let old = store.bucket_path("expiry").unwrap().join("tmp/old");
    let file = std::fs::File::options().write(true).open(&old).unwrap();
    file.set_modified(now - 40 * DAY).unwrap();
    let pass = store.run_lifecycle_pass(SystemTime::now()).await.unwrap();
    assert_eq!((pass.expired, pass.failed), (1, 0), "{pass:?}");
    assert!(!old.exists());
    assert!(keys(&s3, "expiry").await.contains(&"tmp/new".to_owned()));
}

#[tokio::test]
async fn expired_objects_free_their_quota() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let s3 = server.client(&server.bucket_with_key("full", USER).await);
    let quota = Quota { max_objects: Some(3), max_bytes: None };
    server.store.set_bucket_quota("full", USER, quota).await.unwrap();
    let put_rules = s3.put_bucket_lifecycle_configuration().bucket("full");
    let rules = configuration(vec![expire("tmp", prefix("tmp/"), 1)]);
    put_rules.lifecycle_configuration(rules).send().await.unwrap();
    for key in ["tmp/1", "tmp/2", "kept"] {
        put(&s3, "full", key, b"x", None).await;
    }
    let refused = s3.put_object().bucket("full").key("more").body(ByteStream::from_static(b"y"));
    assert_eq!(code(&refused.send().await.unwrap_err()), "QuotaExceeded");

    let pass = server.store.run_lifecycle_pass(SystemTime::now() + 2 * DAY).await.unwrap();
    assert_eq!(pass.expired, 2, "{pass:?}");
    assert_eq!(usage(&server.store, "full"), (1, 1));
    put(&s3, "full", "more", b"y", None).await;
    assert_eq!(keys(&s3, "full").await, ["kept", "more"]);
}

#[tokio::test]
async fn stale_uploads_are_aborted_and_their_parts_freed() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let s3 = server.client(&server.bucket_with_key("uploads", USER).await);
    let abort = LifecycleRule::builder()
        .id("abort")
        .status(ExpirationStatus::Enabled)
        .filter(prefix("up/"))
        .abort_incomplete_multipart_upload(
            AbortIncompleteMultipartUpload::builder().days_after_initiation(7).build(),
        )
        .build()
        .unwrap();
    let put_rules = s3.put_bucket_lifecycle_configuration().bucket("uploads");
    put_rules.lifecycle_configuration(configuration(vec![abort])).send().await.unwrap();
    let mut ids = Vec::new();
    for key in ["up/stale", "other/kept"] {
        let created = s3.create_multipart_upload().bucket("uploads").key(key).send().await;
        let id = created.unwrap().upload_id().unwrap().to_owned();
        let part = s3.upload_part().bucket("uploads").key(key).upload_id(&id).part_number(1);
        part.body(ByteStream::from(vec![1; 1000])).send().await.unwrap();
        ids.push(id);
    }
    assert_eq!(usage(&server.store, "uploads").1, 2000, "parts take their room");

    let now = SystemTime::now();
    let pass = server.store.run_lifecycle_pass(now + 3 * DAY).await.unwrap();
    assert_eq!(pass.aborted, 0, "not stale yet: {pass:?}");
    let pass = server.store.run_lifecycle_pass(now + 9 * DAY).await.unwrap();
    assert_eq!((pass.aborted, pass.failed), (1, 0), "{pass:?}");
    let listed = s3.list_multipart_uploads().bucket("uploads").send().await.unwrap();
    let left: Vec<&str> = listed.uploads().iter().filter_map(|u| u.key()).collect();
    assert_eq!(left, ["other/kept"]);
    assert_eq!(usage(&server.store, "uploads").1, 1000, "the aborted upload's part is freed");
    let late = s3.upload_part().bucket("uploads").key("up/stale").upload_id(&ids[0]);
    let late = late.part_number(2).body(ByteStream::from_static(b"late")).send().await;
    assert_eq!(code(&late.unwrap_err()), "NoSuchUpload");
}

/// The endpoint served with `schedule` on the store under `root`, as a binary serves it,
/// counting into `metrics` if given.
async fn serve_with(
    root: &std::path::Path,
    schedule: LifecycleSchedule,
    metrics: Option<EndpointMetrics>,
) -> (Server, impl Drop) {
    let store = Arc::new(BucketStore::open(root.to_owned(), "test-identity").unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut endpoint = service(store.clone()).lifecycle(schedule);
    if let Some(metrics) = metrics {
        endpoint = endpoint.counting_answers(metrics);
    }
    let task = tokio::spawn(serve_endpoint(listener, endpoint, async move {
        let _ = stopped.await;
    }));
    let server = Server::unmanaged(addr, store);
    (server, Stops(Some(stop), task))
}

struct Stops(Option<tokio::sync::oneshot::Sender<()>>, tokio::task::JoinHandle<()>);

impl Drop for Stops {
    fn drop(&mut self) {
        if let Some(stop) = self.0.take() {
            let _ = stop.send(());
        }
        self.1.abort();
    }
}

#[tokio::test]
async fn the_server_applies_rules_set_before_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("restart", USER).await;
    let s3 = server.client(&key);
    let rules = configuration(vec![expire("tmp", prefix("tmp/"), 30)]);
    let put_rules = s3.put_bucket_lifecycle_configuration().bucket("restart");
    put_rules.lifecycle_configuration(rules).send().await.unwrap();
    for key in ["tmp/1", "tmp/2", "keep"] {
        put(&s3, "restart", key, b"x", None).await;
    }
    // The default schedule's first pass (at start, on the system clock) found nothing due.
    assert_eq!(keys(&s3, "restart").await.len(), 3);
    server.stop().await;

    // Restarted with a clock 40 days ahead: its worker finds the rules on disk, and acts.
    let ahead = LifecycleSchedule::every(Duration::from_millis(50))
        .with_clock(|| SystemTime::now() + 40 * DAY);
    let (server, _stops) = serve_with(tmp.path(), ahead, None).await;
    let s3 = client_for(server.addr, &key.access_key_id, &key.secret_access_key);
    let mut left = keys(&s3, "restart").await;
    for _ in 0..200 {
        if left == ["keep"] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        left = keys(&s3, "restart").await;
    }
    assert_eq!(left, ["keep"], "the worker expired what was due, and only that");
    assert_eq!(usage(&server.store, "restart"), (1, 1));
}

/// The worker's passes, on a budget of one object each, report what they examined, how many
/// buckets they left unfinished and how far behind expiry runs.
#[tokio::test]
async fn the_server_reports_how_its_passes_keep_up() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let s3 = server.client(&server.bucket_with_key("metered", USER).await);
    let put_rules = s3.put_bucket_lifecycle_configuration().bucket("metered");
    let rules = configuration(vec![expire("later", prefix(""), 30)]);
    put_rules.lifecycle_configuration(rules).send().await.unwrap();
    for key in ["a", "b", "c"] {
        put(&s3, "metered", key, b"x", None).await;
    }
    server.stop().await;

    let mut registry = prometheus_client::registry::Registry::with_prefix("bucket_provisioner");
    let metrics = EndpointMetrics::register(&mut registry);
    let schedule = LifecycleSchedule::every(Duration::from_millis(20)).with_budget(1);
    let (_server, _stops) = serve_with(tmp.path(), schedule, Some(metrics)).await;
    let examined = |text: &str| {
        let line = text.lines().find(|l| l.starts_with("bucket_provisioner_s3_lifecycle_objects"));
        line.and_then(|l| l.split(' ').nth(1)?.parse::<u64>().ok()).unwrap_or(0)
    };
    let mut text = String::new();
    for _ in 0..500 {
        text.clear();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        if examined(&text) >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(examined(&text) >= 3, "a walk of three objects, one a pass:\n{text}");
    assert!(text.contains("\nbucket_provisioner_s3_lifecycle_lag_seconds "), "{text}");
    assert!(text.contains("\nbucket_provisioner_s3_lifecycle_unfinished_buckets "), "{text}");
}
