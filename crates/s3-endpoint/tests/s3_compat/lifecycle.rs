//! Lifecycle as S3 answers it: a rule sent without an `ID` is given one, objects a rule will
//! expire say so in `x-amz-expiration` on PUT, GET and HEAD, and a delete marker left alone
//! goes in the pass that leaves it alone, or by an expiration by age.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    BucketLifecycleConfiguration, BucketVersioningStatus, ExpirationStatus, LifecycleExpiration,
    LifecycleRule, LifecycleRuleFilter, NoncurrentVersionExpiration, VersioningConfiguration,
};

use crate::common::Server;

const DAY: u64 = 86_400;

fn rule(id: Option<&str>, prefix: &str) -> aws_sdk_s3::types::builders::LifecycleRuleBuilder {
    LifecycleRule::builder()
        .set_id(id.map(str::to_owned))
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().prefix(prefix).build())
}

fn after_days(days: i32) -> LifecycleExpiration {
    LifecycleExpiration::builder().days(days).build()
}

async fn set_rules(s3: &Client, bucket: &str, rules: Vec<LifecycleRule>) {
    let config = BucketLifecycleConfiguration::builder().set_rules(Some(rules)).build().unwrap();
    let put = s3.put_bucket_lifecycle_configuration().bucket(bucket);
    put.lifecycle_configuration(config).send().await.unwrap();
}

async fn put(s3: &Client, bucket: &str, key: &str) -> Option<String> {
    let put = s3.put_object().bucket(bucket).key(key).body(ByteStream::from_static(b"data"));
    put.send().await.unwrap().expiration().map(str::to_owned)
}

/// S3's expiry of an object written now, `days` after: the midnight UTC after that.
fn expiry_date(days: u64) -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let due = (now + days * DAY).div_ceil(DAY) * DAY;
    let due = jiff::Timestamp::from_second(i64::try_from(due).unwrap()).unwrap();
    due.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

#[tokio::test]
async fn a_rule_sent_without_an_id_is_given_one() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let s3 = server.client(&server.bucket_with_key("no-id", "obc-l").await);
    let unnamed = rule(None, "").expiration(after_days(2)).build().unwrap();
    let named = rule(Some("named"), "x/").expiration(after_days(1)).build().unwrap();
    set_rules(&s3, "no-id", vec![unnamed, named]).await;
    let get = || s3.get_bucket_lifecycle_configuration().bucket("no-id").send();
    let rules = get().await.unwrap().rules().to_vec();
    let id = rules[0].id().expect("S3 gives a rule without an ID one").to_owned();
    assert!(!id.is_empty());
    assert_eq!(rules[1].id(), Some("named"));
    assert_eq!(get().await.unwrap().rules()[0].id(), Some(id.as_str()), "kept, not made per GET");
    let header = put(&s3, "no-id", "k").await.unwrap();
    assert!(header.ends_with(&format!("rule-id=\"{id}\"")), "{header}");
}

#[tokio::test]
async fn objects_a_rule_will_expire_say_when_and_by_which_rule() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let s3 = server.client(&server.bucket_with_key("exp", "obc-l").await);
    assert_eq!(put(&s3, "exp", "tmp/before-rules").await, None);
    let soon = rule(Some("expire tmp"), "tmp/").expiration(after_days(1)).build().unwrap();
    let late = rule(Some("late"), "").expiration(after_days(30)).build().unwrap();
    set_rules(&s3, "exp", vec![late, soon]).await;

    // Of the two rules that take it, the earlier names it; its ID URL-encoded.
    let expected = format!("expiry-date=\"{}\", rule-id=\"expire%20tmp\"", expiry_date(1));
    assert_eq!(put(&s3, "exp", "tmp/a").await.as_deref(), Some(expected.as_str()));
    let head = s3.head_object().bucket("exp").key("tmp/a").send().await.unwrap();
    assert_eq!(head.expiration(), Some(expected.as_str()));
    let get = s3.get_object().bucket("exp").key("tmp/a").send().await.unwrap();
    assert_eq!(get.expiration(), Some(expected.as_str()));
    let expected = format!("expiry-date=\"{}\", rule-id=\"late\"", expiry_date(30));
    assert_eq!(put(&s3, "exp", "other").await.as_deref(), Some(expected.as_str()));

    s3.delete_bucket_lifecycle().bucket("exp").send().await.unwrap();
    let head = s3.head_object().bucket("exp").key("tmp/a").send().await.unwrap();
    assert_eq!(head.expiration(), None, "no rules, no expiry");
}

async fn versioned(server: &Server, bucket: &str) -> Client {
    let s3 = server.client(&server.bucket_with_key(bucket, "obc-l").await);
    let enabled = VersioningConfiguration::builder().status(BucketVersioningStatus::Enabled);
    let set = s3.put_bucket_versioning().bucket(bucket);
    set.versioning_configuration(enabled.build()).send().await.unwrap();
    s3
}

/// (key, is a delete marker) of every version in `bucket`.
async fn versions(s3: &Client, bucket: &str) -> Vec<(String, bool)> {
    let listed = s3.list_object_versions().bucket(bucket).send().await.unwrap();
    let objects = listed.versions().iter().map(|v| (v.key().unwrap().to_owned(), false));
    let markers = listed.delete_markers().iter().map(|m| (m.key().unwrap().to_owned(), true));
    let mut all: Vec<_> = objects.chain(markers).collect();
    all.sort();
    all
}

/// The noncurrent version goes, and the marker it leaves alone goes in the same pass, whatever
/// the order of the rules that remove them.
#[tokio::test]
async fn a_marker_left_alone_by_a_pass_goes_in_that_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let s3 = versioned(&server, "markers").await;
    for key in ["test1/a", "test2/abc"] {
        put(&s3, "markers", key).await;
        s3.delete_object().bucket("markers").key(key).send().await.unwrap();
    }
    let lone = LifecycleExpiration::builder().expired_object_delete_marker(true).build();
    let noncurrent = NoncurrentVersionExpiration::builder().noncurrent_days(1).build();
    set_rules(
        &s3,
        "markers",
        vec![
            rule(Some("markers"), "test1/").expiration(lone).build().unwrap(),
            rule(Some("old"), "test1/").noncurrent_version_expiration(noncurrent).build().unwrap(),
        ],
    )
    .await;
    let later = SystemTime::now() + Duration::from_secs(3 * DAY);
    let pass = server.store.run_lifecycle_pass(later).await.unwrap();
    assert_eq!(pass.expired, 2, "{pass:?}");
    let left = versions(&s3, "markers").await;
    assert_eq!(left, [("test2/abc".to_owned(), false), ("test2/abc".to_owned(), true)]);
}

/// An expiration by age also cleans up a marker with nothing behind it, once it is that old.
#[tokio::test]
async fn an_expiration_by_age_removes_a_lone_marker() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let s3 = versioned(&server, "aged").await;
    let version = s3.put_object().bucket("aged").key("k").body(ByteStream::from_static(b"1"));
    let version = version.send().await.unwrap().version_id().unwrap().to_owned();
    s3.delete_object().bucket("aged").key("k").send().await.unwrap();
    s3.delete_object().bucket("aged").key("k").version_id(version).send().await.unwrap();
    set_rules(&s3, "aged", vec![rule(Some("age"), "").expiration(after_days(2)).build().unwrap()])
        .await;
    let store = &server.store;
    let pass = store.run_lifecycle_pass(SystemTime::now()).await.unwrap();
    assert_eq!(pass.expired, 0, "not old enough yet");
    assert_eq!(versions(&s3, "aged").await, [("k".to_owned(), true)]);
    let later = SystemTime::now() + Duration::from_secs(4 * DAY);
    let pass = store.run_lifecycle_pass(later).await.unwrap();
    assert_eq!(pass.expired, 1, "{pass:?}");
    assert_eq!(versions(&s3, "aged").await, []);
}
