//! Quotas as S3 clients meet them: every write that would pass one is refused with
//! `QuotaExceeded` (403) and stores nothing, however the bytes come (PUT, copy, multipart).

mod common;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use common::{Server, client_for, pattern};
use s3_endpoint::{AdminCredentials, Quota};

const USER: &str = "obc-quota-user";

/// A bucket with a claim key limited by `claim`, and the bucket by `bucket`.
async fn limited(server: &Server, bucket: &str, claim: Quota, whole: Quota) -> Client {
    let key = server.bucket_with_key(bucket, USER).await;
    server.store.set_user_quota(USER, bucket, claim).await.unwrap();
    server.store.set_bucket_quota(bucket, USER, whole).await.unwrap();
    server.client(&key)
}

fn objects(max: u64) -> Quota {
    Quota { max_objects: Some(max), max_bytes: None }
}

fn bytes(max: u64) -> Quota {
    Quota { max_objects: None, max_bytes: Some(max) }
}

/// Asserts that `result` is the refusal of a quota: code, status and a message naming the key.
fn assert_refused<T, E: ProvideErrorMetadata + std::fmt::Debug>(
    result: Result<T, SdkError<E, HttpResponse>>,
    naming: &str,
) {
    let Err(error) = result else { panic!("the write was not refused") };
    let status = error.raw_response().map(|r| r.status().as_u16());
    let service = error.as_service_error().expect("an S3 error");
    assert_eq!(service.code(), Some("QuotaExceeded"), "{service:?}");
    assert_eq!(status, Some(403));
    let message = service.message().unwrap_or_default();
    assert!(message.contains(naming), "{message:?} should name {naming}");
}

async fn put(s3: &Client, bucket: &str, key: &str, body: Vec<u8>) -> Result<(), String> {
    s3.put_object()
        .bucket(bucket)
        .key(key)
        .body(ByteStream::from(body))
        .send()
        .await
        .map(drop)
        .map_err(|e| e.into_service_error().code().unwrap_or("unknown").to_owned())
}

async fn keys(s3: &Client, bucket: &str) -> Vec<String> {
    let listed = s3.list_objects_v2().bucket(bucket).send().await.unwrap();
    listed.contents().iter().filter_map(|o| o.key().map(str::to_owned)).collect()
}

#[tokio::test]
async fn put_past_a_quota_is_refused_and_stores_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let s3 =
        limited(&server, "puts", Quota { max_bytes: Some(1000), ..objects(2) }, objects(10)).await;
    put(&s3, "puts", "one", vec![1; 100]).await.unwrap();
    put(&s3, "puts", "two", vec![2; 100]).await.unwrap();
    let third = s3.put_object().bucket("puts").key("three").body(ByteStream::from_static(b"3"));
    assert_refused(third.send().await, "maxObjects");
    assert_eq!(
        s3.head_object()
            .bucket("puts")
            .key("three")
            .send()
            .await
            .unwrap_err()
            .raw_response()
            .map(|r| r.status().as_u16()),
        Some(404)
    );
    // Replacing an object adds none; past the byte quota it is refused all the same.
    put(&s3, "puts", "two", vec![3; 500]).await.unwrap();
    let big = s3.put_object().bucket("puts").key("two").body(ByteStream::from(vec![4; 1000]));
    assert_refused(big.send().await, "maxSize");
    let two = s3.get_object().bucket("puts").key("two").send().await.unwrap();
    assert_eq!(two.body.collect().await.unwrap().into_bytes().as_ref(), &[3; 500][..]);
    assert_eq!(keys(&s3, "puts").await, ["one", "two"]);

    // The bucket's own quota holds for every key on it.
    let other = server.store.issue_key("obc-other", "puts").await.unwrap();
    let other = server.client(&other);
    server.store.set_bucket_quota("puts", USER, objects(3)).await.unwrap();
    put(&other, "puts", "theirs", b"x".to_vec()).await.unwrap();
    let fourth = other.put_object().bucket("puts").key("more").body(ByteStream::from_static(b"4"));
    assert_refused(fourth.send().await, "bucketMaxObjects");

    // Deleting frees room; removing the quotas lifts them.
    s3.delete_object().bucket("puts").key("one").send().await.unwrap();
    put(&other, "puts", "more", b"4".to_vec()).await.unwrap();
    server.store.set_bucket_quota("puts", USER, Quota::default()).await.unwrap();
    server.store.set_user_quota(USER, "puts", Quota::default()).await.unwrap();
    for i in 0..5 {
        put(&s3, "puts", &format!("free/{i}"), vec![5; 300]).await.unwrap();
    }
}

#[tokio::test]
async fn multipart_past_a_quota_is_refused_part_by_part_and_at_completion() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let part = pattern(1, 5 << 20);
    let s3 = limited(&server, "parts", bytes(12 << 20), Quota::default()).await;
    let upload = s3.create_multipart_upload().bucket("parts").key("big").send().await.unwrap();
    let id = upload.upload_id().unwrap();
    let send_part = |number: i32| {
        s3.upload_part()
            .bucket("parts")
            .key("big")
            .upload_id(id)
            .part_number(number)
            .body(ByteStream::from(part.clone()))
            .send()
    };
    let first = send_part(1).await.unwrap();
    let second = send_part(2).await.unwrap();
    // Parts take room before they are an object: a third would pass 12 MiB.
    assert_refused(send_part(3).await, "maxSize");
    let listed = s3.list_parts().bucket("parts").key("big").upload_id(id).send().await.unwrap();
    assert_eq!(listed.parts().len(), 2, "the refused part was not kept");
    // Sending a part again replaces it, within the quota.
    let second = send_part(2).await.map(|_| second).unwrap();

    // The object made of the parts takes no more room than they did, but is one more object.
    server.store.set_user_quota(USER, "parts", objects(1)).await.unwrap();
    put(&s3, "parts", "small", b"s".to_vec()).await.unwrap();
    let completed = CompletedMultipartUpload::builder()
        .parts(CompletedPart::builder().part_number(1).e_tag(first.e_tag().unwrap()).build())
        .parts(CompletedPart::builder().part_number(2).e_tag(second.e_tag().unwrap()).build())
        .build();
    let complete = s3
        .complete_multipart_upload()
        .bucket("parts")
        .key("big")
        .upload_id(id)
        .multipart_upload(completed.clone());
    assert_refused(complete.send().await, "maxObjects");
    assert_eq!(keys(&s3, "parts").await, ["small"]);
    s3.delete_object().bucket("parts").key("small").send().await.unwrap();
    s3.complete_multipart_upload()
        .bucket("parts")
        .key("big")
        .upload_id(id)
        .multipart_upload(completed)
        .send()
        .await
        .unwrap();
    let usage = server.store.usage("parts", Some(USER)).unwrap().1;
    assert_eq!((usage.objects, usage.bytes), (1, 10 << 20), "the parts' room went to the object");
}

#[tokio::test]
async fn copies_past_a_quota_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let s3 = limited(&server, "copies", bytes(1000), Quota::default()).await;
    put(&s3, "copies", "source", vec![7; 600]).await.unwrap();
    let copy = s3.copy_object().bucket("copies").key("copy").copy_source("copies/source");
    assert_refused(copy.send().await, "maxSize");
    assert_eq!(keys(&s3, "copies").await, ["source"]);

    server.store.set_user_quota(USER, "copies", bytes(6 << 20)).await.unwrap();
    put(&s3, "copies", "source", pattern(2, 5 << 20)).await.unwrap();
    let upload = s3.create_multipart_upload().bucket("copies").key("joined").send().await.unwrap();
    let part_copy = || {
        s3.upload_part_copy()
            .bucket("copies")
            .key("joined")
            .upload_id(upload.upload_id().unwrap())
            .part_number(1)
            .copy_source("copies/source")
    };
    assert_refused(part_copy().send().await, "maxSize");
    part_copy().copy_source_range("bytes=0-1023").send().await.unwrap();
}

#[tokio::test]
async fn concurrent_writers_stop_exactly_at_the_quota() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let s3 = limited(&server, "racing", Quota::default(), objects(5)).await;
    let writes: Vec<_> = (0..16)
        .map(|i| {
            let s3 = s3.clone();
            tokio::spawn(async move { put(&s3, "racing", &format!("k{i}"), vec![1; 4096]).await })
        })
        .collect();
    let mut refused = 0;
    for write in writes {
        match write.await.unwrap() {
            Ok(()) => {}
            Err(code) if code == "QuotaExceeded" => refused += 1,
            Err(code) => panic!("{code}"),
        }
    }
    assert_eq!(refused, 11);
    assert_eq!(keys(&s3, "racing").await.len(), 5);
}

#[tokio::test]
async fn the_operator_is_not_held_by_quotas_but_its_objects_count() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let s3 = limited(&server, "restored", objects(1), objects(2)).await;
    server.store.set_admin(Some(AdminCredentials::new("OPERATOR", "operator-secret-1").unwrap()));
    let operator = client_for(server.addr, "OPERATOR", "operator-secret-1");
    for i in 0..3 {
        put(&operator, "restored", &format!("backup/{i}"), b"b".to_vec()).await.unwrap();
    }
    let claim = s3.put_object().bucket("restored").key("mine").body(ByteStream::from_static(b"m"));
    assert_refused(claim.send().await, "bucketMaxObjects");
    let (bucket, of_claim) = server.store.usage("restored", Some(USER)).unwrap();
    assert_eq!((bucket.objects, of_claim.objects), (3, 0));
}
