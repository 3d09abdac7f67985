//! Usage and quotas count every version; permanent deletes lower them; a bucket keeping
//! versions or markers is not empty.

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::BucketVersioningStatus;
use s3_endpoint::{Quota, Usage};

use super::common::{Server, code};
use super::{put, set_versioning};

const ADMIN_ID: &str = "ADMINVERSIONS0000001";
const ADMIN_SECRET: &str = "admin-secret-for-versioning-tests-000000";

#[tokio::test]
async fn every_version_counts_and_permanent_deletes_free_it() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("use", "obc-1").await;
    let s3 = server.client(&key);
    set_versioning(&s3, "use", BucketVersioningStatus::Enabled).await;
    let one = put(&s3, "use", "k", &[1; 100]).await.unwrap();
    let two = put(&s3, "use", "k", &[2; 50]).await.unwrap();
    let usage = |server: &Server| server.store.usage("use", Some("obc-1")).unwrap();
    assert_eq!(usage(&server).0, Usage { objects: 2, bytes: 150 });
    let marker = s3.delete_object().bucket("use").key("k").send().await.unwrap();
    assert_eq!(usage(&server).0, Usage { objects: 2, bytes: 150 }, "markers count nothing");
    s3.delete_object().bucket("use").key("k").version_id(&one).send().await.unwrap();
    assert_eq!(usage(&server).0, Usage { objects: 1, bytes: 50 });
    assert_eq!(usage(&server).1, Usage { objects: 1, bytes: 50 }, "the claim's share too");
    let marker = marker.version_id().unwrap();
    s3.delete_object().bucket("use").key("k").version_id(marker).send().await.unwrap();
    s3.delete_object().bucket("use").key("k").version_id(&two).send().await.unwrap();
    assert_eq!(usage(&server).0, Usage::default());

    // Counted again from the disk alone: the same.
    put(&s3, "use", "k", &[3; 10]).await;
    put(&s3, "use", "k", &[4; 20]).await;
    s3.delete_object().bucket("use").key("k").send().await.unwrap();
    let before = usage(&server);
    server.stop().await;
    let usage_file = tmp.path().join(".provisioner/usage/use.json");
    std::fs::remove_file(&usage_file).unwrap();
    let server = Server::start(tmp.path()).await;
    assert_eq!(usage(&server), before);
    assert_eq!(before.0, Usage { objects: 2, bytes: 30 });
}

#[tokio::test]
async fn quotas_count_noncurrent_versions() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("quota", "obc-1").await;
    let quota = Quota { max_objects: Some(3), max_bytes: Some(1000) };
    server.store.set_user_quota("obc-1", "quota", quota).await.unwrap();
    let s3 = server.client(&key);
    set_versioning(&s3, "quota", BucketVersioningStatus::Enabled).await;
    let one = put(&s3, "quota", "k", b"1").await.unwrap();
    put(&s3, "quota", "k", b"2").await;
    put(&s3, "quota", "k", b"3").await;
    let fourth = s3.put_object().bucket("quota").key("k").body(ByteStream::from_static(b"4"));
    let err = fourth.send().await.unwrap_err();
    assert_eq!(code(&err), "QuotaExceeded", "three versions of one key fill a quota of three");
    // Deleting makes a marker, which frees nothing.
    s3.delete_object().bucket("quota").key("k").send().await.unwrap();
    let again = s3.put_object().bucket("quota").key("k").body(ByteStream::from_static(b"4"));
    assert_eq!(code(&again.send().await.unwrap_err()), "QuotaExceeded");
    // Removing a version for good does.
    s3.delete_object().bucket("quota").key("k").version_id(&one).send().await.unwrap();
    put(&s3, "quota", "k", b"4").await.unwrap();
}

#[tokio::test]
async fn a_bucket_keeping_versions_or_markers_is_not_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let (_server, admin) = Server::start_with_admin(tmp.path(), ADMIN_ID, ADMIN_SECRET).await;
    admin.create_bucket().bucket("full").send().await.unwrap();
    set_versioning(&admin, "full", BucketVersioningStatus::Enabled).await;
    let one = put(&admin, "full", "k", b"1").await.unwrap();
    let marker = admin.delete_object().bucket("full").key("k").send().await.unwrap();
    let marker = marker.version_id().unwrap().to_owned();
    let listed = admin.list_objects_v2().bucket("full").send().await.unwrap();
    assert!(listed.contents().is_empty());
    let err = admin.delete_bucket().bucket("full").send().await.unwrap_err();
    assert_eq!(code(&err), "BucketNotEmpty", "a version and a marker remain");
    admin.delete_object().bucket("full").key("k").version_id(&one).send().await.unwrap();
    let err = admin.delete_bucket().bucket("full").send().await.unwrap_err();
    assert_eq!(code(&err), "BucketNotEmpty", "a marker remains");
    admin.delete_object().bucket("full").key("k").version_id(&marker).send().await.unwrap();
    admin.delete_bucket().bucket("full").send().await.unwrap();
    // Made again, it starts unversioned.
    admin.create_bucket().bucket("full").send().await.unwrap();
    let state = admin.get_bucket_versioning().bucket("full").send().await.unwrap();
    assert_eq!(state.status(), None);
}
