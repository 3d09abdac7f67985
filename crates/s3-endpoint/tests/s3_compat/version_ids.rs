//! Which answers carry `x-amz-version-id` and `x-amz-delete-marker`, as S3 sends them: a write
//! names the version it made only while versioning is enabled (the `null` version a write makes
//! in a suspended bucket goes unnamed, as in S3's sample answers and s3-tests'
//! test_versioning_bucket_*_return_version_id), reads name the `null` version; a bucket that
//! never had versioning names no version and no delete marker.

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    BucketVersioningStatus, CompletedMultipartUpload, CompletedPart, VersioningConfiguration,
};

use crate::common::Server;

async fn set_versioning(s3: &Client, bucket: &str, status: BucketVersioningStatus) {
    let config = VersioningConfiguration::builder().status(status).build();
    s3.put_bucket_versioning()
        .bucket(bucket)
        .versioning_configuration(config)
        .send()
        .await
        .unwrap();
}

/// The version ids PutObject, CopyObject and CompleteMultipartUpload answer with, in that order.
async fn written_ids(s3: &Client, bucket: &str) -> [Option<String>; 3] {
    let put = s3.put_object().bucket(bucket).key("put").body(ByteStream::from_static(b"p"));
    let put = put.send().await.unwrap();
    let copy = s3.copy_object().bucket(bucket).key("copy").copy_source(format!("{bucket}/put"));
    let copy = copy.send().await.unwrap();
    let upload = s3.create_multipart_upload().bucket(bucket).key("multi").send().await.unwrap();
    let upload_id = upload.upload_id().unwrap();
    let part = s3
        .upload_part()
        .bucket(bucket)
        .key("multi")
        .upload_id(upload_id)
        .part_number(1)
        .body(ByteStream::from_static(b"part"))
        .send()
        .await
        .unwrap();
    let part = CompletedPart::builder().part_number(1).e_tag(part.e_tag().unwrap()).build();
    let done = s3
        .complete_multipart_upload()
        .bucket(bucket)
        .key("multi")
        .upload_id(upload_id)
        .multipart_upload(CompletedMultipartUpload::builder().parts(part).build())
        .send()
        .await
        .unwrap();
    [put.version_id, copy.version_id, done.version_id]
}

#[tokio::test]
async fn writes_name_a_version_only_while_versioning_is_enabled() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let running = &server;
    let client = |bucket: &'static str| async move {
        running.client(&running.bucket_with_key(bucket, &format!("obc-{bucket}")).await)
    };
    let s3 = client("never").await;
    assert_eq!(written_ids(&s3, "never").await, [None, None, None], "never versioned");

    let s3 = client("suspended").await;
    set_versioning(&s3, "suspended", BucketVersioningStatus::Suspended).await;
    assert_eq!(written_ids(&s3, "suspended").await, [None, None, None], "suspended from the start");
    // The version written is still the null one, and reads name it so.
    let got = s3.head_object().bucket("suspended").key("put").send().await.unwrap();
    assert_eq!(got.version_id(), Some("null"));

    let s3 = client("enabled").await;
    set_versioning(&s3, "enabled", BucketVersioningStatus::Enabled).await;
    let ids = written_ids(&s3, "enabled").await;
    assert!(ids.iter().all(|id| id.as_deref().is_some_and(|id| id != "null")), "{ids:?}");

    let s3 = client("re-suspended").await;
    set_versioning(&s3, "re-suspended", BucketVersioningStatus::Enabled).await;
    set_versioning(&s3, "re-suspended", BucketVersioningStatus::Suspended).await;
    assert_eq!(written_ids(&s3, "re-suspended").await, [None, None, None], "suspended again");
    let listed = s3.list_object_versions().bucket("re-suspended").send().await.unwrap();
    let ids: Vec<_> = listed.versions().iter().map(|v| v.version_id().unwrap()).collect();
    assert_eq!(ids, ["null"; 3], "each write made the null version");
    server.stop().await;
}

#[tokio::test]
async fn deletes_say_delete_marker_only_where_one_is_made_or_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("plain", "obc-d").await;
    let s3 = server.client(&key);
    s3.put_object()
        .bucket("plain")
        .key("k")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap();
    let deleted = s3.delete_object().bucket("plain").key("k").send().await.unwrap();
    assert_eq!((deleted.delete_marker(), deleted.version_id()), (None, None), "unversioned");

    let key = server.bucket_with_key("versioned", "obc-dv").await;
    let s3 = server.client(&key);
    set_versioning(&s3, "versioned", BucketVersioningStatus::Enabled).await;
    let put = s3.put_object().bucket("versioned").key("k").body(ByteStream::from_static(b"x"));
    let version = put.send().await.unwrap().version_id.unwrap();
    let marker = s3.delete_object().bucket("versioned").key("k").send().await.unwrap();
    assert_eq!(marker.delete_marker(), Some(true), "a marker made");
    let marker_id = marker.version_id().unwrap().to_owned();
    let removed = s3.delete_object().bucket("versioned").key("k").version_id(&marker_id);
    let removed = removed.send().await.unwrap();
    assert_eq!(removed.delete_marker(), Some(true), "a marker removed");
    assert_eq!(removed.version_id(), Some(marker_id.as_str()));
    let removed = s3.delete_object().bucket("versioned").key("k").version_id(&version);
    let removed = removed.send().await.unwrap();
    assert_eq!(removed.delete_marker(), None, "a version removed is no marker");
    assert_eq!(removed.version_id(), Some(version.as_str()));
    server.stop().await;
}
