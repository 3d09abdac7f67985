//! The lifecycle pass over versions: noncurrent versions expired by age and count, expiration
//! making delete markers, and lone delete markers removed.

use std::time::{Duration, SystemTime};

use aws_sdk_s3::types::{
    BucketLifecycleConfiguration, BucketVersioningStatus, ExpirationStatus, LifecycleExpiration,
    LifecycleRule, LifecycleRuleFilter, NoncurrentVersionExpiration,
};
use s3_endpoint::Usage;

use super::common::Server;
use super::{all_versions, get, put, set_versioning};

const DAY: Duration = Duration::from_secs(86_400);

async fn rules(s3: &aws_sdk_s3::Client, bucket: &str, rule: LifecycleRule) {
    let config = BucketLifecycleConfiguration::builder().rules(rule).build().unwrap();
    s3.put_bucket_lifecycle_configuration()
        .bucket(bucket)
        .lifecycle_configuration(config)
        .send()
        .await
        .unwrap();
}

fn rule(id: &str) -> aws_sdk_s3::types::builders::LifecycleRuleBuilder {
    LifecycleRule::builder()
        .id(id)
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().prefix("").build())
}

#[tokio::test]
async fn noncurrent_versions_go_by_age_keeping_the_newer_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("life", "obc-1").await;
    let s3 = server.client(&key);
    set_versioning(&s3, "life", BucketVersioningStatus::Enabled).await;
    let mut ids = Vec::new();
    for body in [b"1", b"2", b"3", b"4"] {
        ids.push(put(&s3, "life", "k", body).await.unwrap());
    }
    let noncurrent =
        NoncurrentVersionExpiration::builder().noncurrent_days(2).newer_noncurrent_versions(1);
    rules(
        &s3,
        "life",
        rule("old").noncurrent_version_expiration(noncurrent.build()).build().unwrap(),
    )
    .await;
    let report = server.store.run_lifecycle_pass(SystemTime::now()).await.unwrap();
    assert_eq!(report.expired, 0, "not noncurrent long enough yet");
    let later = SystemTime::now() + 4 * DAY;
    let report = server.store.run_lifecycle_pass(later).await.unwrap();
    assert_eq!(report.expired, 2, "{report:?}");
    let left: Vec<_> = all_versions(&s3, "life").await.into_iter().map(|v| v.1).collect();
    assert_eq!(left, [ids[3].clone(), ids[2].clone()], "the current and one newer noncurrent");
    assert_eq!(get(&s3, "life", "k", None).await.unwrap(), b"4");
    let (usage, _) = server.store.usage("life", None).unwrap();
    assert_eq!(usage, Usage { objects: 2, bytes: 2 });
}

#[tokio::test]
async fn expiration_makes_markers_and_lone_markers_go() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("marks", "obc-1").await;
    let s3 = server.client(&key);
    set_versioning(&s3, "marks", BucketVersioningStatus::Enabled).await;
    let one = put(&s3, "marks", "k", b"1").await.unwrap();
    let expire = LifecycleExpiration::builder().days(1).build();
    rules(&s3, "marks", rule("exp").expiration(expire).build().unwrap()).await;
    let report = server.store.run_lifecycle_pass(SystemTime::now() + 3 * DAY).await.unwrap();
    assert_eq!(report.expired, 1);
    assert_eq!(get(&s3, "marks", "k", None).await.unwrap_err(), "NoSuchKey");
    assert_eq!(get(&s3, "marks", "k", Some(&one)).await.unwrap(), b"1", "kept as noncurrent");
    let all = all_versions(&s3, "marks").await;
    assert_eq!(all.len(), 2);
    assert!(all[0].2 && all[0].3, "a marker is the latest: {all:?}");

    // With the version gone, the marker is alone: ExpiredObjectDeleteMarker removes it.
    let lone = LifecycleExpiration::builder().expired_object_delete_marker(true).build();
    rules(&s3, "marks", rule("lone").expiration(lone).build().unwrap()).await;
    let report = server.store.run_lifecycle_pass(SystemTime::now()).await.unwrap();
    assert_eq!(report.expired, 0, "a version still stands behind the marker");
    s3.delete_object().bucket("marks").key("k").version_id(&one).send().await.unwrap();
    let report = server.store.run_lifecycle_pass(SystemTime::now()).await.unwrap();
    assert_eq!(report.expired, 1);
    assert!(all_versions(&s3, "marks").await.is_empty());
}
