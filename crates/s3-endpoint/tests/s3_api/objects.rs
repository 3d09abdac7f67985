//! Objects, listings and buckets: operations, isolation between keys, escapes refused, and a
//! restart.

use std::collections::HashMap;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    CompletedMultipartUpload, CompletedPart, Delete, MetadataDirective, ObjectIdentifier,
};

use crate::common::{Server, client_for, code, md5_hex, pattern};
use crate::{body, list_keys};

#[tokio::test]
async fn object_operations() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("data", "obc-a").await;
    let s3 = server.client(&key);

    s3.head_bucket().bucket("data").send().await.unwrap();

    // PutObject: ETag is the body's MD5; metadata and content type come back.
    let data = pattern(1, 100_000);
    let put = s3
        .put_object()
        .bucket("data")
        .key("dir/sub/file.bin")
        .content_type("application/x-test")
        .metadata("color", "blue")
        .metadata("Mixed-Case", "Value")
        .body(ByteStream::from(data.clone()))
        .send()
        .await
        .unwrap();
    assert_eq!(put.e_tag(), Some(format!("\"{}\"", md5_hex(&data)).as_str()));

    let head = s3.head_object().bucket("data").key("dir/sub/file.bin").send().await.unwrap();
    assert_eq!(head.content_length(), Some(100_000));
    assert_eq!(head.content_type(), Some("application/x-test"));
    assert_eq!(head.e_tag(), put.e_tag());
    let meta = head.metadata().unwrap();
    assert_eq!(meta.get("color").map(String::as_str), Some("blue"));
    assert_eq!(meta.get("mixed-case").map(String::as_str), Some("Value"));

    let got = s3.get_object().bucket("data").key("dir/sub/file.bin").send().await.unwrap();
    assert_eq!(got.e_tag(), put.e_tag());
    assert_eq!(got.metadata().unwrap().get("color").map(String::as_str), Some("blue"));
    assert_eq!(got.body.collect().await.unwrap().into_bytes().as_ref(), &data[..]);
    // The data is a plain file under the bucket directory.
    assert_eq!(std::fs::read(tmp.path().join("buckets/data/dir/sub/file.bin")).unwrap(), data);

    // Ranges: closed, open-ended, suffix; unsatisfiable is InvalidRange.
    for (range, expected) in [
        ("bytes=10-19", &data[10..20]),
        ("bytes=99990-", &data[99_990..]),
        ("bytes=-5", &data[99_995..]),
        ("bytes=99995-200000", &data[99_995..]),
    ] {
        let out = s3
            .get_object()
            .bucket("data")
            .key("dir/sub/file.bin")
            .range(range)
            .send()
            .await
            .unwrap();
        assert_eq!(out.content_length(), Some(expected.len() as i64), "{range}");
        assert!(out.content_range().unwrap().starts_with("bytes "), "{range}");
        assert_eq!(out.body.collect().await.unwrap().into_bytes().as_ref(), expected, "{range}");
    }
    let err = s3
        .get_object()
        .bucket("data")
        .key("dir/sub/file.bin")
        .range("bytes=100000-")
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "InvalidRange");

    // Missing keys.
    let err = s3.get_object().bucket("data").key("nope").send().await.unwrap_err();
    assert_eq!(code(&err), "NoSuchKey");
    let err = s3.head_object().bucket("data").key("nope").send().await.unwrap_err();
    assert_eq!(err.raw_response().map(|r| r.status().as_u16()), Some(404));
    // A prefix is not an object.
    let err = s3.get_object().bucket("data").key("dir/sub").send().await.unwrap_err();
    assert_eq!(code(&err), "NoSuchKey");

    // A key under an existing object's name is an S3 key like any other: it is kept beside
    // the bucket, and the object whose path it runs through stays a plain file.
    s3.put_object()
        .bucket("data")
        .key("dir/sub/file.bin/child")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap();
    assert_eq!(body(&s3, "data", "dir/sub/file.bin/child").await, b"x");
    assert_eq!(std::fs::read(tmp.path().join("buckets/data/dir/sub/file.bin")).unwrap(), data);
    s3.delete_object().bucket("data").key("dir/sub/file.bin/child").send().await.unwrap();

    // CopyObject keeps metadata by default and replaces it on request.
    let copy = s3
        .copy_object()
        .bucket("data")
        .key("copy/plain")
        .copy_source("data/dir/sub/file.bin")
        .send()
        .await
        .unwrap();
    assert_eq!(copy.copy_object_result().unwrap().e_tag(), put.e_tag());
    let head = s3.head_object().bucket("data").key("copy/plain").send().await.unwrap();
    assert_eq!(head.metadata().unwrap().get("color").map(String::as_str), Some("blue"));
    assert_eq!(head.content_type(), Some("application/x-test"));
    s3.copy_object()
        .bucket("data")
        .key("copy/replaced")
        .copy_source("data/dir/sub/file.bin")
        .metadata_directive(MetadataDirective::Replace)
        .content_type("text/plain")
        .metadata("shape", "round")
        .send()
        .await
        .unwrap();
    let head = s3.head_object().bucket("data").key("copy/replaced").send().await.unwrap();
    assert_eq!(head.content_type(), Some("text/plain"));
    assert_eq!(
        head.metadata().unwrap(),
        &HashMap::from([("shape".to_owned(), "round".to_owned())])
    );
    assert_eq!(body(&s3, "data", "copy/replaced").await, data);

    // Empty objects and folder markers.
    s3.put_object().bucket("data").key("empty").send().await.unwrap();
    assert!(body(&s3, "data", "empty").await.is_empty());
    s3.put_object().bucket("data").key("folder/").send().await.unwrap();
    s3.head_object().bucket("data").key("folder/").send().await.unwrap();

    // DeleteObject is idempotent and prunes empty directories.
    s3.delete_object().bucket("data").key("copy/plain").send().await.unwrap();
    s3.delete_object().bucket("data").key("copy/plain").send().await.unwrap();
    let err = s3.get_object().bucket("data").key("copy/plain").send().await.unwrap_err();
    assert_eq!(code(&err), "NoSuchKey");
    s3.delete_object().bucket("data").key("copy/replaced").send().await.unwrap();
    assert!(!tmp.path().join("buckets/data/copy").exists());

    // DeleteObjects, including a key that never existed.
    for k in ["batch/1", "batch/2", "batch/3"] {
        s3.put_object()
            .bucket("data")
            .key(k)
            .body(ByteStream::from_static(b"b"))
            .send()
            .await
            .unwrap();
    }
    let delete = Delete::builder()
        .objects(ObjectIdentifier::builder().key("batch/1").build().unwrap())
        .objects(ObjectIdentifier::builder().key("batch/2").build().unwrap())
        .objects(ObjectIdentifier::builder().key("batch/none").build().unwrap())
        .objects(ObjectIdentifier::builder().key("../escape").build().unwrap())
        .objects(ObjectIdentifier::builder().key("k".repeat(1025)).build().unwrap())
        .build()
        .unwrap();
    let out = s3.delete_objects().bucket("data").delete(delete).send().await.unwrap();
    let mut deleted: Vec<_> = out.deleted().iter().filter_map(|d| d.key()).collect();
    deleted.sort_unstable();
    assert_eq!(deleted, ["../escape", "batch/1", "batch/2", "batch/none"]);
    assert_eq!(out.errors().len(), 1);
    assert_eq!(out.errors()[0].code(), Some("KeyTooLongError"));
    let listed = s3.list_objects_v2().bucket("data").prefix("batch/").send().await.unwrap();
    assert_eq!(list_keys(&listed), ["batch/3"]);

    // Content-MD5 is checked.
    let err = s3
        .put_object()
        .bucket("data")
        .key("bad-md5")
        .content_md5("AAAAAAAAAAAAAAAAAAAAAA==")
        .body(ByteStream::from_static(b"hello"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "BadDigest");
    let err = s3.head_object().bucket("data").key("bad-md5").send().await.unwrap_err();
    assert_eq!(err.raw_response().map(|r| r.status().as_u16()), Some(404));

    // Invalid bucket names never reach the store.
    let err = s3.list_objects_v2().bucket("Bad_Name").send().await.unwrap_err();
    assert_eq!(code(&err), "InvalidBucketName");

    server.stop().await;
}

#[tokio::test]
async fn listing_prefixes_delimiters_and_pages() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("list", "obc-l").await;
    let s3 = server.client(&key);
    let keys = [
        "a-c",
        "a/b",
        "a/c/d",
        "a/c/e",
        "a0",
        "b",
        "photos/2024/jan.jpg",
        "photos/2024/feb.jpg",
        "photos/2025/mar.jpg",
        "photos/readme",
        "z y&<x>.txt",
    ];
    for k in keys {
        s3.put_object()
            .bucket("list")
            .key(k)
            .body(ByteStream::from_static(b"1"))
            .send()
            .await
            .unwrap();
    }
    let mut sorted = keys.to_vec();
    sorted.sort_unstable();

    let all = s3.list_objects_v2().bucket("list").send().await.unwrap();
    assert_eq!(list_keys(&all), sorted);
    assert_eq!(all.key_count(), Some(keys.len() as i32));
    assert_eq!(all.is_truncated(), Some(false));
    assert_eq!(all.contents()[0].size(), Some(1));
    assert_eq!(all.contents()[0].e_tag(), Some(format!("\"{}\"", md5_hex(b"1")).as_str()));

    // Delimiter: common prefixes for "directories".
    let top = s3.list_objects_v2().bucket("list").delimiter("/").send().await.unwrap();
    assert_eq!(list_keys(&top), ["a-c", "a0", "b", "z y&<x>.txt"]);
    let prefixes: Vec<_> = top.common_prefixes().iter().filter_map(|p| p.prefix()).collect();
    assert_eq!(prefixes, ["a/", "photos/"]);
    let photos =
        s3.list_objects_v2().bucket("list").prefix("photos/").delimiter("/").send().await.unwrap();
    assert_eq!(list_keys(&photos), ["photos/readme"]);
    let prefixes: Vec<_> = photos.common_prefixes().iter().filter_map(|p| p.prefix()).collect();
    assert_eq!(prefixes, ["photos/2024/", "photos/2025/"]);
    let prefix_only =
        s3.list_objects_v2().bucket("list").prefix("photos/2024/f").send().await.unwrap();
    assert_eq!(list_keys(&prefix_only), ["photos/2024/feb.jpg"]);

    // V2 pagination with continuation tokens, two at a time, over keys and prefixes.
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let out = s3
            .list_objects_v2()
            .bucket("list")
            .delimiter("/")
            .max_keys(2)
            .set_continuation_token(token.clone())
            .send()
            .await
            .unwrap();
        pages += 1;
        seen.extend(list_keys(&out));
        seen.extend(out.common_prefixes().iter().filter_map(|p| p.prefix().map(str::to_owned)));
        if out.is_truncated() != Some(true) {
            assert!(out.next_continuation_token().is_none());
            break;
        }
        token = out.next_continuation_token().map(str::to_owned);
        assert!(token.is_some());
    }
    seen.sort_unstable();
    assert_eq!(seen, ["a-c", "a/", "a0", "b", "photos/", "z y&<x>.txt"]);
    assert_eq!(pages, 3);

    // start-after.
    let after = s3
        .list_objects_v2()
        .bucket("list")
        .start_after("photos/2025/mar.jpg")
        .send()
        .await
        .unwrap();
    assert_eq!(list_keys(&after), ["photos/readme", "z y&<x>.txt"]);

    // V1 with marker and NextMarker.
    let mut seen = Vec::new();
    let mut marker: Option<String> = None;
    loop {
        let out = s3
            .list_objects()
            .bucket("list")
            .max_keys(4)
            .set_marker(marker.clone())
            .send()
            .await
            .unwrap();
        seen.extend(out.contents().iter().filter_map(|o| o.key().map(str::to_owned)));
        if out.is_truncated() != Some(true) {
            break;
        }
        marker = out.next_marker().map(str::to_owned);
    }
    assert_eq!(seen, sorted);

    // Pagination with the SDK's own paginator (ListObjectsV2, max-keys 3).
    let mut paginated = Vec::new();
    let mut pages = s3.list_objects_v2().bucket("list").max_keys(3).into_paginator().send();
    while let Some(page) = pages.next().await {
        paginated.extend(list_keys(&page.unwrap()));
    }
    assert_eq!(paginated, sorted);

    server.stop().await;
}

#[tokio::test]
async fn keys_are_isolated_per_bucket() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key_a = server.bucket_with_key("bucket-a", "obc-a").await;
    let key_b = server.bucket_with_key("bucket-b", "obc-b").await;
    let (a, b) = (server.client(&key_a), server.client(&key_b));
    a.put_object()
        .bucket("bucket-a")
        .key("secret")
        .body(ByteStream::from_static(b"A"))
        .send()
        .await
        .unwrap();
    b.put_object()
        .bucket("bucket-b")
        .key("secret")
        .body(ByteStream::from_static(b"B"))
        .send()
        .await
        .unwrap();

    let names = |out: aws_sdk_s3::operation::list_buckets::ListBucketsOutput| -> Vec<String> {
        out.buckets().iter().filter_map(|b| b.name().map(str::to_owned)).collect()
    };
    assert_eq!(names(a.list_buckets().send().await.unwrap()), ["bucket-a"]);
    assert_eq!(names(b.list_buckets().send().await.unwrap()), ["bucket-b"]);

    for (client, other) in [(&a, "bucket-b"), (&b, "bucket-a")] {
        let e = client.get_object().bucket(other).key("secret").send().await.unwrap_err();
        assert_eq!(code(&e), "AccessDenied");
        let e = client
            .put_object()
            .bucket(other)
            .key("planted")
            .body(ByteStream::from_static(b"x"))
            .send()
            .await
            .unwrap_err();
        assert_eq!(code(&e), "AccessDenied");
        let e = client.list_objects_v2().bucket(other).send().await.unwrap_err();
        assert_eq!(code(&e), "AccessDenied");
        let e = client.delete_object().bucket(other).key("secret").send().await.unwrap_err();
        assert_eq!(code(&e), "AccessDenied");
        let e = client.head_bucket().bucket(other).send().await.unwrap_err();
        assert_eq!(e.raw_response().map(|r| r.status().as_u16()), Some(403));
        let e = client.create_multipart_upload().bucket(other).key("m").send().await.unwrap_err();
        assert_eq!(code(&e), "AccessDenied");
        // Copying out of the other bucket into one's own is refused too.
        let own = if other == "bucket-a" { "bucket-b" } else { "bucket-a" };
        let e = client
            .copy_object()
            .bucket(own)
            .key("stolen")
            .copy_source(format!("{other}/secret"))
            .send()
            .await
            .unwrap_err();
        assert_eq!(code(&e), "AccessDenied");
    }
    assert_eq!(body(&a, "bucket-a", "secret").await, b"A");
    assert_eq!(body(&b, "bucket-b", "secret").await, b"B");
    assert!(!tmp.path().join("buckets/bucket-a/planted").exists());

    // Unknown keys, wrong secrets and unsigned requests get nowhere.
    let stranger = client_for(server.addr, "HPAKNOTAKEY000000000", "nothing");
    let e = stranger.list_buckets().send().await.unwrap_err();
    assert_eq!(code(&e), "InvalidAccessKeyId");
    let forged = client_for(server.addr, &key_a.access_key_id, &key_b.secret_access_key);
    let e = forged.get_object().bucket("bucket-a").key("secret").send().await.unwrap_err();
    assert_eq!(code(&e), "SignatureDoesNotMatch");
    let anonymous = reqwest_free_get(server.addr, "/bucket-a/secret").await;
    assert!(anonymous.starts_with("HTTP/1.1 403"), "{anonymous}");

    // A revoked key stops working at once.
    server.store.revoke_keys("obc-a").await.unwrap();
    let e = a.get_object().bucket("bucket-a").key("secret").send().await.unwrap_err();
    assert_eq!(code(&e), "InvalidAccessKeyId");

    server.stop().await;
}

/// A raw unsigned GET, to check anonymous access without an SDK.
async fn reqwest_free_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    conn.read_to_string(&mut response).await.unwrap();
    response
}

#[tokio::test]
async fn path_escapes_and_symlinks_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), b"outside secret").unwrap();

    let server = Server::start(&root).await;
    let key = server.bucket_with_key("jail", "obc-j").await;
    let s3 = server.client(&key);
    let bucket_dir = root.join("buckets/jail");
    std::os::unix::fs::symlink(outside.join("secret.txt"), bucket_dir.join("link")).unwrap();
    std::os::unix::fs::symlink(&outside, bucket_dir.join("linkdir")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("buckets/evil")).unwrap();

    // Keys that are not safe relative paths are still S3 keys: they are stored under the
    // bookkeeping directory by a hash of the key, never at the path they spell.
    for odd in ["../escape", "a/../../escape", "../../outside/secret.txt", "./x", "a//b"] {
        let e = s3.get_object().bucket("jail").key(odd).send().await.unwrap_err();
        assert_eq!(code(&e), "NoSuchKey", "{odd}: {e:?}");
        s3.put_object()
            .bucket("jail")
            .key(odd)
            .body(ByteStream::from(format!("kept: {odd}").into_bytes()))
            .send()
            .await
            .unwrap();
        let out = s3.get_object().bucket("jail").key(odd).send().await.unwrap();
        let kept = out.body.collect().await.unwrap().into_bytes();
        assert_eq!(kept.as_ref(), format!("kept: {odd}").as_bytes());
    }
    let listed = s3.list_objects_v2().bucket("jail").send().await.unwrap();
    let mut odd_keys = list_keys(&listed);
    odd_keys.sort_unstable();
    assert_eq!(
        odd_keys,
        ["../../outside/secret.txt", "../escape", "./x", "a/../../escape", "a//b"]
    );
    for odd in odd_keys {
        s3.delete_object().bucket("jail").key(odd).send().await.unwrap();
    }
    assert!(!root.join("buckets/escape").exists());
    assert!(!root.join("escape").exists());
    assert!(!tmp.path().join("escape").exists());

    // Symlinks inside the bucket are never followed, for reading, writing, copying or listing.
    for link in ["link", "linkdir/secret.txt"] {
        let e = s3.get_object().bucket("jail").key(link).send().await.unwrap_err();
        assert_eq!(code(&e), "AccessDenied", "{link}");
        let e = s3
            .copy_object()
            .bucket("jail")
            .key("copied")
            .copy_source(format!("jail/{link}"))
            .send()
            .await
            .unwrap_err();
        assert_eq!(code(&e), "AccessDenied", "{link}");
    }
    for target in ["link", "linkdir/new.txt", "linkdir/secret.txt"] {
        let e = s3
            .put_object()
            .bucket("jail")
            .key(target)
            .body(ByteStream::from_static(b"pwned"))
            .send()
            .await
            .unwrap_err();
        assert_eq!(code(&e), "AccessDenied", "{target}");
    }
    let e = s3.delete_object().bucket("jail").key("linkdir/secret.txt").send().await.unwrap_err();
    assert_eq!(code(&e), "AccessDenied");
    let upload =
        s3.create_multipart_upload().bucket("jail").key("linkdir/mp").send().await.unwrap();
    let part = s3
        .upload_part()
        .bucket("jail")
        .key("linkdir/mp")
        .upload_id(upload.upload_id().unwrap())
        .part_number(1)
        .body(ByteStream::from_static(b"pwned"))
        .send()
        .await
        .unwrap();
    let e = s3
        .complete_multipart_upload()
        .bucket("jail")
        .key("linkdir/mp")
        .upload_id(upload.upload_id().unwrap())
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .parts(CompletedPart::builder().part_number(1).e_tag(part.e_tag().unwrap()).build())
                .build(),
        )
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&e), "AccessDenied");
    let listed = s3.list_objects_v2().bucket("jail").send().await.unwrap();
    assert!(list_keys(&listed).is_empty(), "{:?}", list_keys(&listed));

    // Outside is untouched.
    let entries: Vec<_> =
        std::fs::read_dir(&outside).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(entries, ["secret.txt"]);
    assert_eq!(std::fs::read(outside.join("secret.txt")).unwrap(), b"outside secret");

    // A symlinked bucket directory is not a bucket, even for a key issued on it.
    assert!(!server.store.bucket_exists("evil").unwrap());
    assert!(server.store.issue_key("obc-e", "evil").await.is_err());

    server.stop().await;
}

#[tokio::test]
async fn keys_and_objects_survive_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("durable", "obc-d").await;
    server
        .client(&key)
        .put_object()
        .bucket("durable")
        .key("kept")
        .metadata("k", "v")
        .body(ByteStream::from_static(b"still here"))
        .send()
        .await
        .unwrap();
    let old_addr = server.addr;
    server.stop().await;

    let server = Server::start(tmp.path()).await;
    assert_ne!(server.addr, old_addr);
    assert_eq!(server.store.issue_key("obc-d", "durable").await.unwrap(), key);
    let s3 = server.client(&key);
    let out = s3.get_object().bucket("durable").key("kept").send().await.unwrap();
    assert_eq!(out.metadata().unwrap().get("k").map(String::as_str), Some("v"));
    assert_eq!(out.body.collect().await.unwrap().into_bytes().as_ref(), b"still here");
    server.stop().await;
}

#[tokio::test]
async fn bucket_removed_behind_our_back_is_no_such_bucket() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    std::fs::create_dir(tmp.path().join("buckets/handmade")).unwrap();
    std::fs::write(tmp.path().join("buckets/handmade/existing.txt"), b"by operator").unwrap();
    let key = server.store.issue_key("obc-h", "handmade").await.unwrap();
    let s3 = server.client(&key);
    // Files placed by an operator are objects too (with a derived ETag).
    let out = s3.get_object().bucket("handmade").key("existing.txt").send().await.unwrap();
    assert!(out.e_tag().is_some());
    assert_eq!(out.body.collect().await.unwrap().into_bytes().as_ref(), b"by operator");

    std::fs::remove_dir_all(tmp.path().join("buckets/handmade")).unwrap();
    let e = s3.list_objects_v2().bucket("handmade").send().await.unwrap_err();
    assert_eq!(code(&e), "NoSuchBucket");
    let e = s3.head_bucket().bucket("handmade").send().await.unwrap_err();
    assert_eq!(e.raw_response().map(|r| r.status().as_u16()), Some(404));
    server.stop().await;
}
