//! Versions and delete markers: writes, reads, deletes, copies and tags by version id, in
//! enabled and suspended buckets, and unversioned buckets answering as before.

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{BucketVersioningStatus, Delete, ObjectIdentifier, Tag, Tagging};

use super::common::{Server, code, status};
use super::{all_versions, get, put, set_versioning};

async fn enabled(server: &Server, bucket: &str) -> aws_sdk_s3::Client {
    let key = server.bucket_with_key(bucket, "obc-1").await;
    let s3 = server.client(&key);
    set_versioning(&s3, bucket, BucketVersioningStatus::Enabled).await;
    s3
}

#[tokio::test]
async fn every_write_is_a_new_version_readable_by_id() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let s3 = enabled(&server, "ver").await;
    let one = put(&s3, "ver", "k", b"one").await.expect("a version id");
    let two = put(&s3, "ver", "k", b"two").await.expect("a version id");
    assert_ne!(one, two);
    assert_eq!(get(&s3, "ver", "k", None).await.unwrap(), b"two");
    assert_eq!(get(&s3, "ver", "k", Some(&one)).await.unwrap(), b"one");
    assert_eq!(get(&s3, "ver", "k", Some(&two)).await.unwrap(), b"two");
    let head = s3.head_object().bucket("ver").key("k").version_id(&one).send().await.unwrap();
    assert_eq!((head.content_length(), head.version_id()), (Some(3), Some(one.as_str())));
    let got = s3.get_object().bucket("ver").key("k").send().await.unwrap();
    assert_eq!(got.version_id(), Some(two.as_str()), "GET names the version it serves");

    // A copy, from an old version, is a new version of its destination.
    let copy = s3
        .copy_object()
        .bucket("ver")
        .key("copy")
        .copy_source(format!("ver/k?versionId={one}"))
        .send()
        .await
        .unwrap();
    assert_eq!(copy.copy_source_version_id(), Some(one.as_str()));
    assert!(copy.version_id().is_some());
    assert_eq!(get(&s3, "ver", "copy", None).await.unwrap(), b"one");
    // A multipart upload completes into a version too.
    let upload = s3.create_multipart_upload().bucket("ver").key("k").send().await.unwrap();
    let id = upload.upload_id().unwrap();
    let part = s3
        .upload_part()
        .bucket("ver")
        .key("k")
        .upload_id(id)
        .part_number(1)
        .body(ByteStream::from_static(b"three"))
        .send()
        .await
        .unwrap();
    let done = aws_sdk_s3::types::CompletedMultipartUpload::builder()
        .parts(
            aws_sdk_s3::types::CompletedPart::builder()
                .part_number(1)
                .e_tag(part.e_tag().unwrap())
                .build(),
        )
        .build();
    let complete = s3
        .complete_multipart_upload()
        .bucket("ver")
        .key("k")
        .upload_id(id)
        .multipart_upload(done)
        .send()
        .await
        .unwrap();
    let three = complete.version_id().expect("a version id").to_owned();
    assert_eq!(get(&s3, "ver", "k", None).await.unwrap(), b"three");
    assert_eq!(get(&s3, "ver", "k", Some(&two)).await.unwrap(), b"two");
    let ids: Vec<_> = all_versions(&s3, "ver").await.into_iter().filter(|v| v.0 == "k").collect();
    let expect = [(three, true), (two, false), (one.clone(), false)];
    let got: Vec<_> = ids.iter().map(|v| (v.1.clone(), v.2)).collect();
    assert_eq!(got, expect);

    // Unknown and malformed ids.
    let missing = get(&s3, "ver", "k", Some("0123456789abcdef01234567")).await.unwrap_err();
    assert_eq!(missing, "NoSuchVersion");
    assert_eq!(get(&s3, "ver", "k", Some("nope")).await.unwrap_err(), "InvalidArgument");
    // Listings show current objects only.
    let listed = s3.list_objects_v2().bucket("ver").send().await.unwrap();
    let keys: Vec<_> = listed.contents().iter().map(|o| o.key().unwrap()).collect();
    assert_eq!(keys, ["copy", "k"]);
}

#[tokio::test]
async fn deletes_make_markers_and_deletes_by_id_remove_for_good() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let s3 = enabled(&server, "del").await;
    let one = put(&s3, "del", "k", b"one").await.unwrap();
    let two = put(&s3, "del", "k", b"two").await.unwrap();
    let deleted = s3.delete_object().bucket("del").key("k").send().await.unwrap();
    assert_eq!(deleted.delete_marker(), Some(true));
    let marker = deleted.version_id().expect("the marker's id").to_owned();
    // Reads as deleted, saying so.
    let err = s3.get_object().bucket("del").key("k").send().await.unwrap_err();
    assert_eq!((code(&err), status(&err)), ("NoSuchKey".to_owned(), Some(404)));
    let headers = err.raw_response().unwrap().headers();
    assert_eq!(headers.get("x-amz-delete-marker"), Some("true"));
    assert_eq!(headers.get("x-amz-version-id"), Some(marker.as_str()));
    let err = s3.head_object().bucket("del").key("k").send().await.unwrap_err();
    assert_eq!(status(&err), Some(404));
    // The marker asked for by id: nothing to serve.
    let err = s3.get_object().bucket("del").key("k").version_id(&marker).send().await.unwrap_err();
    assert_eq!(status(&err), Some(405));
    assert_eq!(err.raw_response().unwrap().headers().get("x-amz-delete-marker"), Some("true"));
    assert_eq!(get(&s3, "del", "k", Some(&two)).await.unwrap(), b"two");
    assert!(s3.list_objects_v2().bucket("del").send().await.unwrap().contents().is_empty());
    // A copy names a version to copy, never a marker.
    let copy =
        s3.copy_object().bucket("del").key("c").copy_source(format!("del/k?versionId={marker}"));
    assert_eq!(code(&copy.send().await.unwrap_err()), "InvalidRequest");
    let copy = s3.copy_object().bucket("del").key("c").copy_source("del/k");
    assert_eq!(code(&copy.send().await.unwrap_err()), "NoSuchKey");
    let attributes = s3
        .get_object_attributes()
        .bucket("del")
        .key("k")
        .version_id(&one)
        .object_attributes(aws_sdk_s3::types::ObjectAttributes::ObjectSize)
        .send()
        .await
        .unwrap();
    assert_eq!((attributes.object_size(), attributes.version_id()), (Some(3), Some(one.as_str())));

    // Removing the marker brings the newest version back.
    let removed =
        s3.delete_object().bucket("del").key("k").version_id(&marker).send().await.unwrap();
    assert_eq!(
        (removed.delete_marker(), removed.version_id()),
        (Some(true), Some(marker.as_str()))
    );
    assert_eq!(get(&s3, "del", "k", None).await.unwrap(), b"two");
    let listed = s3.list_objects_v2().bucket("del").send().await.unwrap();
    assert_eq!(listed.contents().len(), 1, "back in the listing");
    // Removing the current version makes the next newest current.
    s3.delete_object().bucket("del").key("k").version_id(&two).send().await.unwrap();
    assert_eq!(get(&s3, "del", "k", None).await.unwrap(), b"one");
    assert_eq!(get(&s3, "del", "k", Some(&two)).await.unwrap_err(), "NoSuchVersion");
    // A noncurrent version goes without touching the current one.
    let three = put(&s3, "del", "k", b"three").await.unwrap();
    s3.delete_object().bucket("del").key("k").version_id(&one).send().await.unwrap();
    assert_eq!(get(&s3, "del", "k", None).await.unwrap(), b"three");
    let left: Vec<_> = all_versions(&s3, "del").await.into_iter().map(|v| v.1).collect();
    assert_eq!(left, std::slice::from_ref(&three));

    // DeleteObjects: a marker for one key, a version by id for another.
    let other = put(&s3, "del", "o", b"o").await.unwrap();
    let batch = Delete::builder()
        .objects(ObjectIdentifier::builder().key("k").build().unwrap())
        .objects(ObjectIdentifier::builder().key("o").version_id(&other).build().unwrap())
        .build()
        .unwrap();
    let out = s3.delete_objects().bucket("del").delete(batch).send().await.unwrap();
    let by_key = |k: &str| out.deleted().iter().find(|d| d.key() == Some(k)).unwrap().clone();
    assert_eq!(by_key("k").delete_marker(), Some(true));
    assert!(by_key("k").delete_marker_version_id().is_some());
    assert_eq!(by_key("o").version_id(), Some(other.as_str()));
    assert_eq!(get(&s3, "del", "o", Some(&other)).await.unwrap_err(), "NoSuchVersion");
    assert_eq!(get(&s3, "del", "k", None).await.unwrap_err(), "NoSuchKey");
    assert_eq!(get(&s3, "del", "k", Some(&three)).await.unwrap(), b"three");
}

#[tokio::test]
async fn suspended_buckets_replace_the_null_version_and_keep_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("sus", "obc-1").await;
    let s3 = server.client(&key);
    // Written before versioning was set: the null version.
    assert_eq!(put(&s3, "sus", "k", b"before").await, None, "no version ids yet");
    set_versioning(&s3, "sus", BucketVersioningStatus::Enabled).await;
    let kept = put(&s3, "sus", "k", b"kept").await.unwrap();
    assert_eq!(get(&s3, "sus", "k", Some("null")).await.unwrap(), b"before");
    set_versioning(&s3, "sus", BucketVersioningStatus::Suspended).await;
    // A write of the null version answers without a version id, as S3 does.
    assert_eq!(put(&s3, "sus", "k", b"null-1").await, None);
    assert_eq!(put(&s3, "sus", "k", b"null-2").await, None);
    assert_eq!(get(&s3, "sus", "k", None).await.unwrap(), b"null-2");
    assert_eq!(get(&s3, "sus", "k", Some("null")).await.unwrap(), b"null-2");
    assert_eq!(get(&s3, "sus", "k", Some(&kept)).await.unwrap(), b"kept");
    let ids: Vec<_> = all_versions(&s3, "sus").await.into_iter().map(|v| (v.1, v.2)).collect();
    assert_eq!(ids, [("null".to_owned(), true), (kept.clone(), false)], "one null version");
    // A delete makes a null marker, replacing the null version.
    let deleted = s3.delete_object().bucket("sus").key("k").send().await.unwrap();
    assert_eq!((deleted.delete_marker(), deleted.version_id()), (Some(true), Some("null")));
    let all = all_versions(&s3, "sus").await;
    assert_eq!(all.len(), 2);
    assert!(all.iter().any(|v| v.1 == "null" && v.3 && v.2), "{all:?}");
    assert_eq!(get(&s3, "sus", "k", None).await.unwrap_err(), "NoSuchKey");
    assert_eq!(get(&s3, "sus", "k", Some(&kept)).await.unwrap(), b"kept");
    // A write replaces the null marker.
    put(&s3, "sus", "k", b"null-3").await;
    let all = all_versions(&s3, "sus").await;
    assert_eq!(all.iter().filter(|v| v.3).count(), 0, "{all:?}");
    assert_eq!(get(&s3, "sus", "k", None).await.unwrap(), b"null-3");
}

#[tokio::test]
async fn tags_are_read_and_set_by_version() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let s3 = enabled(&server, "tags").await;
    let one = put(&s3, "tags", "k", b"one").await.unwrap();
    let two = put(&s3, "tags", "k", b"two").await.unwrap();
    let tagging = |v: &str| {
        Tagging::builder()
            .tag_set(Tag::builder().key("v").value(v).build().unwrap())
            .build()
            .unwrap()
    };
    let set =
        s3.put_object_tagging().bucket("tags").key("k").version_id(&one).tagging(tagging("old"));
    assert_eq!(set.send().await.unwrap().version_id(), Some(one.as_str()));
    s3.put_object_tagging().bucket("tags").key("k").tagging(tagging("new")).send().await.unwrap();
    let read = |id: String| {
        let s3 = s3.clone();
        async move {
            let got = s3.get_object_tagging().bucket("tags").key("k").version_id(&id);
            let got = got.send().await.unwrap();
            (got.version_id().map(str::to_owned), got.tag_set()[0].value().to_owned())
        }
    };
    assert_eq!(read(one.clone()).await, (Some(one.clone()), "old".to_owned()));
    assert_eq!(read(two.clone()).await, (Some(two.clone()), "new".to_owned()));
    assert_eq!(get(&s3, "tags", "k", Some(&one)).await.unwrap(), b"one", "bytes unchanged");
}

#[tokio::test]
async fn unversioned_buckets_answer_without_version_ids() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("plain", "obc-1").await;
    let s3 = server.client(&key);
    assert_eq!(put(&s3, "plain", "k", b"one").await, None);
    let got = s3.get_object().bucket("plain").key("k").send().await.unwrap();
    assert_eq!(got.version_id(), None);
    let deleted = s3.delete_object().bucket("plain").key("k").send().await.unwrap();
    assert_eq!((deleted.delete_marker(), deleted.version_id()), (None, None));
    assert_eq!(get(&s3, "plain", "k", None).await.unwrap_err(), "NoSuchKey");
    // No versions area is made for it.
    let meta = tmp.path().join(".provisioner/meta/plain/versions");
    assert!(!meta.exists());
    // The one version is "null", readable as such.
    put(&s3, "plain", "k", b"two").await;
    assert_eq!(get(&s3, "plain", "k", Some("null")).await.unwrap(), b"two");
    let listed = super::all_versions(&s3, "plain").await;
    assert_eq!(listed, [("k".to_owned(), "null".to_owned(), true, false)]);
}
