//! The other operations clients use: encryption refused, standard headers, canned ACLs,
//! listings of versions and uploads, UploadPartCopy, request ids, keys that are also prefixes.

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    CompletedMultipartUpload, CompletedPart, Delete, MetadataDirective, ObjectCannedAcl,
    ObjectIdentifier, ServerSideEncryption,
};

use crate::common::{Server, code, md5_hex, pattern, raw_request, status};
use crate::{PART, b64};

#[tokio::test]
async fn encryption_requests_are_refused_not_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("plain", "obc-e").await;
    let s3 = server.client(&key);
    s3.put_object()
        .bucket("plain")
        .key("existing")
        .body(ByteStream::from_static(b"clear"))
        .send()
        .await
        .unwrap();
    let sse_c_key = b64(&[7u8; 32]);
    let sse_c_md5 = b64(&<md5::Md5 as md5::Digest>::digest([7u8; 32]));

    for (what, err) in [
        (
            "SSE-S3",
            s3.put_object()
                .bucket("plain")
                .key("secret")
                .server_side_encryption(ServerSideEncryption::Aes256)
                .body(ByteStream::from_static(b"x"))
                .send()
                .await
                .map(drop)
                .unwrap_err(),
        ),
        (
            "SSE-KMS",
            s3.put_object()
                .bucket("plain")
                .key("secret")
                .server_side_encryption(ServerSideEncryption::AwsKms)
                .body(ByteStream::from_static(b"x"))
                .send()
                .await
                .map(drop)
                .unwrap_err(),
        ),
        (
            "SSE-C",
            s3.put_object()
                .bucket("plain")
                .key("secret")
                .sse_customer_algorithm("AES256")
                .sse_customer_key(&sse_c_key)
                .sse_customer_key_md5(&sse_c_md5)
                .body(ByteStream::from_static(b"x"))
                .send()
                .await
                .map(drop)
                .unwrap_err(),
        ),
    ] {
        assert_eq!(code(&err), "NotImplemented", "{what}");
        assert_eq!(status(&err), Some(501), "{what}");
    }
    let err = s3
        .create_multipart_upload()
        .bucket("plain")
        .key("secret")
        .server_side_encryption(ServerSideEncryption::Aes256)
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "NotImplemented");
    // Reading with an SSE-C key cannot mean anything here either.
    let err = s3
        .get_object()
        .bucket("plain")
        .key("existing")
        .sse_customer_algorithm("AES256")
        .sse_customer_key(&sse_c_key)
        .sse_customer_key_md5(&sse_c_md5)
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "NotImplemented");
    let err = s3.head_object().bucket("plain").key("secret").send().await.unwrap_err();
    assert_eq!(status(&err), Some(404), "nothing was stored in the clear");
    server.stop().await;
}

#[tokio::test]
async fn standard_headers_are_stored_and_returned() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("hdrs", "obc-h").await;
    let s3 = server.client(&key);
    let expires = aws_sdk_s3::primitives::DateTime::from_secs(2_000_000_000);
    s3.put_object()
        .bucket("hdrs")
        .key("page.html.gz")
        .content_type("text/html")
        .cache_control("max-age=60")
        .content_disposition("attachment; filename=\"page.html\"")
        .content_encoding("gzip")
        .content_language("de-CH")
        .expires(expires)
        .body(ByteStream::from_static(b"\x1f\x8b"))
        .send()
        .await
        .unwrap();
    let head = s3.head_object().bucket("hdrs").key("page.html.gz").send().await.unwrap();
    assert_eq!(head.content_type(), Some("text/html"));
    assert_eq!(head.cache_control(), Some("max-age=60"));
    assert_eq!(head.content_disposition(), Some("attachment; filename=\"page.html\""));
    assert_eq!(head.content_encoding(), Some("gzip"));
    assert_eq!(head.content_language(), Some("de-CH"));
    assert_eq!(head.expires_string(), Some("Wed, 18 May 2033 03:33:20 GMT"));
    let got = s3.get_object().bucket("hdrs").key("page.html.gz").send().await.unwrap();
    assert_eq!(got.cache_control(), Some("max-age=60"));
    assert_eq!(got.content_language(), Some("de-CH"));
    // response-* parameters override them for one GET.
    let got = s3
        .get_object()
        .bucket("hdrs")
        .key("page.html.gz")
        .response_content_type("application/octet-stream")
        .response_cache_control("no-cache")
        .response_content_disposition("inline")
        .send()
        .await
        .unwrap();
    assert_eq!(got.content_type(), Some("application/octet-stream"));
    assert_eq!(got.cache_control(), Some("no-cache"));
    assert_eq!(got.content_disposition(), Some("inline"));
    // A copy keeps them unless told to replace them.
    s3.copy_object()
        .bucket("hdrs")
        .key("copy")
        .copy_source("hdrs/page.html.gz")
        .send()
        .await
        .unwrap();
    let head = s3.head_object().bucket("hdrs").key("copy").send().await.unwrap();
    assert_eq!(head.content_encoding(), Some("gzip"));
    assert_eq!(head.cache_control(), Some("max-age=60"));
    server.stop().await;
}

#[tokio::test]
async fn canned_private_acls() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("acls", "obc-a").await;
    let s3 = server.client(&key);
    s3.put_object()
        .bucket("acls")
        .key("k")
        .acl(ObjectCannedAcl::Private)
        .body(ByteStream::from_static(b"private"))
        .send()
        .await
        .unwrap();

    let acl = s3.get_bucket_acl().bucket("acls").send().await.unwrap();
    assert_eq!(acl.owner().and_then(|o| o.id()), Some(key.access_key_id.as_str()));
    assert_eq!(acl.grants().len(), 1);
    assert_eq!(acl.grants()[0].permission().map(|p| p.as_str()), Some("FULL_CONTROL"));
    assert_eq!(acl.grants()[0].grantee().and_then(|g| g.id()), Some(key.access_key_id.as_str()));
    let acl = s3.get_object_acl().bucket("acls").key("k").send().await.unwrap();
    assert_eq!(acl.grants()[0].permission().map(|p| p.as_str()), Some("FULL_CONTROL"));
    let err = s3.get_object_acl().bucket("acls").key("missing").send().await.unwrap_err();
    assert_eq!(code(&err), "NoSuchKey");

    s3.put_bucket_acl()
        .bucket("acls")
        .acl(aws_sdk_s3::types::BucketCannedAcl::Private)
        .send()
        .await
        .unwrap();
    s3.put_object_acl().bucket("acls").key("k").acl(ObjectCannedAcl::Private).send().await.unwrap();
    // Anything public is refused, never silently kept private.
    let err = s3
        .put_bucket_acl()
        .bucket("acls")
        .acl(aws_sdk_s3::types::BucketCannedAcl::PublicRead)
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "AccessControlListNotSupported");
    let err = s3
        .put_object_acl()
        .bucket("acls")
        .key("k")
        .acl(ObjectCannedAcl::PublicReadWrite)
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "AccessControlListNotSupported");
    let err = s3
        .put_object()
        .bucket("acls")
        .key("public")
        .acl(ObjectCannedAcl::PublicRead)
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "AccessControlListNotSupported");
    let err = s3.head_object().bucket("acls").key("public").send().await.unwrap_err();
    assert_eq!(status(&err), Some(404));
    server.stop().await;
}

#[tokio::test]
async fn listing_versions_uploads_and_details() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("lists", "obc-l").await;
    let s3 = server.client(&key);
    for k in ["a/1", "a/2", "b", "c d"] {
        s3.put_object()
            .bucket("lists")
            .key(k)
            .body(ByteStream::from_static(b"1"))
            .send()
            .await
            .unwrap();
    }

    // ListObjectVersions of an unversioned bucket: each object once, version "null".
    let versions = s3.list_object_versions().bucket("lists").send().await.unwrap();
    let listed: Vec<_> = versions
        .versions()
        .iter()
        .map(|v| (v.key().unwrap(), v.version_id().unwrap(), v.is_latest().unwrap()))
        .collect();
    assert_eq!(
        listed,
        [("a/1", "null", true), ("a/2", "null", true), ("b", "null", true), ("c d", "null", true)]
    );
    let page = s3.list_object_versions().bucket("lists").max_keys(2).send().await.unwrap();
    assert_eq!(page.is_truncated(), Some(true));
    assert_eq!(page.next_key_marker(), Some("a/2"));
    let rest = s3
        .list_object_versions()
        .bucket("lists")
        .key_marker("a/2")
        .version_id_marker("null")
        .send()
        .await
        .unwrap();
    let keys: Vec<_> = rest.versions().iter().filter_map(|v| v.key()).collect();
    assert_eq!(keys, ["b", "c d"]);
    let rolled = s3.list_object_versions().bucket("lists").delimiter("/").send().await.unwrap();
    assert_eq!(rolled.common_prefixes()[0].prefix(), Some("a/"));

    // V1: Marker is echoed, owners are shown; V2 shows them only with FetchOwner.
    let v1 = s3.list_objects().bucket("lists").send().await.unwrap();
    assert_eq!(v1.marker(), Some(""));
    assert_eq!(v1.contents()[0].owner().and_then(|o| o.id()), Some(key.access_key_id.as_str()));
    let v2 = s3.list_objects_v2().bucket("lists").send().await.unwrap();
    assert!(v2.contents()[0].owner().is_none());
    let v2 = s3.list_objects_v2().bucket("lists").fetch_owner(true).send().await.unwrap();
    assert!(v2.contents()[0].owner().is_some());
    // An empty delimiter is no delimiter, and is not echoed.
    let raw = s3.list_objects().bucket("lists").delimiter("").send().await.unwrap();
    assert_eq!(raw.delimiter(), None);
    assert_eq!(raw.contents().len(), 4);
    // Keys come back encoded only when asked to.
    let plain = s3.list_objects_v2().bucket("lists").prefix("c").send().await.unwrap();
    assert_eq!(plain.contents()[0].key(), Some("c d"));
    let err = s3
        .list_objects_v2()
        .bucket("lists")
        .encoding_type("base64".into())
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "InvalidArgument");

    // ListMultipartUploads: in key order, with markers and prefixes.
    let mut ids = Vec::new();
    for k in ["up/x", "up/y", "up/y", "z"] {
        let out = s3.create_multipart_upload().bucket("lists").key(k).send().await.unwrap();
        ids.push(out.upload_id().unwrap().to_owned());
    }
    let uploads = s3.list_multipart_uploads().bucket("lists").send().await.unwrap();
    let keys: Vec<_> = uploads.uploads().iter().filter_map(|u| u.key()).collect();
    assert_eq!(keys, ["up/x", "up/y", "up/y", "z"]);
    assert!(uploads.uploads().iter().all(|u| u.initiated().is_some()));
    let page = s3.list_multipart_uploads().bucket("lists").max_uploads(2).send().await.unwrap();
    assert_eq!(page.is_truncated(), Some(true));
    let next = s3
        .list_multipart_uploads()
        .bucket("lists")
        .key_marker(page.next_key_marker().unwrap())
        .upload_id_marker(page.next_upload_id_marker().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(next.uploads().len(), 2);
    let prefixed = s3.list_multipart_uploads().bucket("lists").delimiter("/").send().await.unwrap();
    assert_eq!(prefixed.common_prefixes()[0].prefix(), Some("up/"));
    assert_eq!(prefixed.uploads().len(), 1);
    s3.abort_multipart_upload().bucket("lists").key("z").upload_id(&ids[3]).send().await.unwrap();
    let uploads = s3.list_multipart_uploads().bucket("lists").prefix("z").send().await.unwrap();
    assert!(uploads.uploads().is_empty());
    server.stop().await;
}

#[tokio::test]
async fn upload_part_copy_and_multipart_edges() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("copies", "obc-c").await;
    let s3 = server.client(&key);
    let source = pattern(9, PART + 100);
    s3.put_object()
        .bucket("copies")
        .key("source")
        .body(ByteStream::from(source.clone()))
        .send()
        .await
        .unwrap();

    let upload = s3.create_multipart_upload().bucket("copies").key("dest").send().await.unwrap();
    let id = upload.upload_id().unwrap();
    let first = s3
        .upload_part_copy()
        .bucket("copies")
        .key("dest")
        .upload_id(id)
        .part_number(1)
        .copy_source("copies/source")
        .copy_source_range(format!("bytes=0-{}", PART - 1))
        .send()
        .await
        .unwrap();
    let second = s3
        .upload_part_copy()
        .bucket("copies")
        .key("dest")
        .upload_id(id)
        .part_number(2)
        .copy_source("copies/source")
        .copy_source_range(format!("bytes={PART}-{}", PART + 99))
        .send()
        .await
        .unwrap();
    assert_eq!(
        second.copy_part_result().and_then(|r| r.e_tag()),
        Some(format!("\"{}\"", md5_hex(&source[PART..])).as_str())
    );
    for bad in ["bytes=0", "0-5", "bytes=hello-world", "bytes=5-1"] {
        let err = s3
            .upload_part_copy()
            .bucket("copies")
            .key("dest")
            .upload_id(id)
            .part_number(3)
            .copy_source("copies/source")
            .copy_source_range(bad)
            .send()
            .await
            .unwrap_err();
        assert_eq!(code(&err), "InvalidArgument", "{bad}");
    }
    let err = s3
        .upload_part_copy()
        .bucket("copies")
        .key("dest")
        .upload_id(id)
        .part_number(3)
        .copy_source("copies/source")
        .copy_source_range(format!("bytes=0-{}", PART + 100))
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "InvalidRange");
    let parts = CompletedMultipartUpload::builder()
        .parts(
            CompletedPart::builder()
                .part_number(1)
                .e_tag(first.copy_part_result().unwrap().e_tag().unwrap())
                .build(),
        )
        .parts(
            CompletedPart::builder()
                .part_number(2)
                .e_tag(second.copy_part_result().unwrap().e_tag().unwrap())
                .build(),
        )
        .build();
    let done = s3
        .complete_multipart_upload()
        .bucket("copies")
        .key("dest")
        .upload_id(id)
        .multipart_upload(parts.clone())
        .send()
        .await
        .unwrap();
    let out = s3.get_object().bucket("copies").key("dest").send().await.unwrap();
    assert_eq!(out.body.collect().await.unwrap().into_bytes().as_ref(), &source[..]);
    // Completing again (a client retrying a lost answer) returns the same object.
    let again = s3
        .complete_multipart_upload()
        .bucket("copies")
        .key("dest")
        .upload_id(id)
        .multipart_upload(parts)
        .send()
        .await
        .unwrap();
    assert_eq!(again.e_tag(), done.e_tag());

    // A part listed twice (re-sent while the first send was under way) means its last upload.
    let upload = s3.create_multipart_upload().bucket("copies").key("resent").send().await.unwrap();
    let id = upload.upload_id().unwrap();
    let mut tags = Vec::new();
    for body in [&b"first send"[..], b"second send"] {
        let out = s3
            .upload_part()
            .bucket("copies")
            .key("resent")
            .upload_id(id)
            .part_number(1)
            .body(ByteStream::from(body.to_vec()))
            .send()
            .await
            .unwrap();
        tags.push(out.e_tag().unwrap().to_owned());
    }
    let listed = CompletedMultipartUpload::builder()
        .parts(CompletedPart::builder().part_number(1).e_tag(&tags[0]).build())
        .parts(CompletedPart::builder().part_number(1).e_tag(&tags[1]).build())
        .build();
    s3.complete_multipart_upload()
        .bucket("copies")
        .key("resent")
        .upload_id(id)
        .multipart_upload(listed)
        .send()
        .await
        .unwrap();
    let out = s3.get_object().bucket("copies").key("resent").send().await.unwrap();
    assert_eq!(out.body.collect().await.unwrap().into_bytes().as_ref(), b"second send");

    // Copying an object onto itself must change something.
    let err = s3
        .copy_object()
        .bucket("copies")
        .key("source")
        .copy_source("copies/source")
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "InvalidRequest");
    s3.copy_object()
        .bucket("copies")
        .key("source")
        .copy_source("copies/source")
        .metadata_directive(MetadataDirective::Replace)
        .metadata("touched", "yes")
        .send()
        .await
        .unwrap();
    // Copy preconditions on the source.
    let err = s3
        .copy_object()
        .bucket("copies")
        .key("copy")
        .copy_source("copies/source")
        .copy_source_if_match("\"nope\"")
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&err), Some(412));

    // DeleteObjects takes at most 1000 keys.
    let many: Vec<_> = (0..1001)
        .map(|i| ObjectIdentifier::builder().key(format!("k{i}")).build().unwrap())
        .collect();
    let err = s3
        .delete_objects()
        .bucket("copies")
        .delete(Delete::builder().set_objects(Some(many)).build().unwrap())
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "MalformedXML");
    server.stop().await;
}

#[tokio::test]
async fn errors_carry_request_ids_and_anonymous_gets_s3_statuses() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("ids", "obc-i").await;
    let s3 = server.client(&key);
    use aws_sdk_s3::operation::RequestId as _;
    let err = s3.get_object().bucket("ids").key("missing").send().await.unwrap_err();
    let raw_id =
        err.raw_response().and_then(|r| r.headers().get("x-amz-request-id")).map(str::to_owned);
    assert!(raw_id.as_deref().is_some_and(|id| id.len() == 16), "{raw_id:?}");
    assert_eq!(err.request_id(), raw_id.as_deref(), "the id clients log is the one sent");
    let raw = raw_request(server.addr, "GET", "/ids/missing", &[], b"").await;
    assert!(raw.text().contains("<RequestId>"), "{}", raw.text());

    // Anonymous: a missing bucket is 404, an existing one (or its keys) 403.
    let raw = raw_request(server.addr, "GET", "/no-such-bucket/k", &[], b"").await;
    assert_eq!(raw.status, 404, "{}", raw.text());
    assert_eq!(raw.error_code().as_deref(), Some("NoSuchBucket"));
    for path in ["/ids/missing", "/ids", "/"] {
        let raw = raw_request(server.addr, "GET", path, &[], b"").await;
        assert_eq!(raw.status, 403, "{path}: {}", raw.text());
        assert_eq!(raw.error_code().as_deref(), Some("AccessDenied"), "{path}");
    }
    let raw = raw_request(server.addr, "PUT", "/ids/planted", &[], b"x").await;
    assert_eq!(raw.status, 403);
    assert!(!tmp.path().join("buckets/ids/planted").exists());

    // us-east-1 is an empty LocationConstraint.
    let location = s3.get_bucket_location().bucket("ids").send().await.unwrap();
    assert!(location.location_constraint().is_none_or(|c| c.as_str().is_empty()));
    server.stop().await;
}

#[tokio::test]
async fn keys_that_are_both_an_object_and_a_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("tree", "obc-t").await;
    let s3 = server.client(&key);
    let put = |k: &'static str, v: &'static [u8]| {
        let s3 = s3.clone();
        async move {
            s3.put_object()
                .bucket("tree")
                .key(k)
                .body(ByteStream::from_static(v))
                .send()
                .await
                .unwrap();
        }
    };
    let get = |k: &'static str| {
        let s3 = s3.clone();
        async move {
            let out = s3.get_object().bucket("tree").key(k).send().await.unwrap();
            out.body.collect().await.unwrap().into_bytes().to_vec()
        }
    };
    // Object first, then a key below it; and the other way round.
    put("a", b"object a").await;
    put("a/b", b"object a/b").await;
    put("foo/bar/xyzzy", b"deep").await;
    put("foo/bar", b"middle").await;
    put("foo/bar/", b"").await;
    // A key ending in '/' may hold bytes too.
    put("notes/", b"not a folder").await;
    assert_eq!(get("notes/").await, b"not a folder");
    s3.delete_object().bucket("tree").key("notes/").send().await.unwrap();
    assert_eq!(get("a").await, b"object a");
    assert_eq!(get("a/b").await, b"object a/b");
    assert_eq!(get("foo/bar/xyzzy").await, b"deep");
    assert_eq!(get("foo/bar").await, b"middle");
    // Where a key can be a plain file, it is one.
    let bucket_dir = tmp.path().join("buckets/tree");
    assert_eq!(std::fs::read(bucket_dir.join("a")).unwrap(), b"object a");
    assert_eq!(std::fs::read(bucket_dir.join("foo/bar/xyzzy")).unwrap(), b"deep");

    let all = s3.list_objects_v2().bucket("tree").send().await.unwrap();
    let keys: Vec<_> = all.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(keys, ["a", "a/b", "foo/bar", "foo/bar/", "foo/bar/xyzzy"]);
    let top = s3.list_objects_v2().bucket("tree").delimiter("/").send().await.unwrap();
    let keys: Vec<_> = top.contents().iter().filter_map(|o| o.key()).collect();
    let prefixes: Vec<_> = top.common_prefixes().iter().filter_map(|p| p.prefix()).collect();
    assert_eq!((keys, prefixes), (vec!["a"], vec!["a/", "foo/"]));
    let inner =
        s3.list_objects_v2().bucket("tree").prefix("foo/").delimiter("/").send().await.unwrap();
    let keys: Vec<_> = inner.contents().iter().filter_map(|o| o.key()).collect();
    let prefixes: Vec<_> = inner.common_prefixes().iter().filter_map(|p| p.prefix()).collect();
    assert_eq!((keys, prefixes), (vec!["foo/bar"], vec!["foo/bar/"]));
    // One key per page, across both kinds of storage.
    let mut paged = Vec::new();
    let mut pages = s3.list_objects_v2().bucket("tree").max_keys(1).into_paginator().send();
    while let Some(page) = pages.next().await {
        paged.extend(page.unwrap().contents().iter().filter_map(|o| o.key().map(str::to_owned)));
    }
    assert_eq!(paged, ["a", "a/b", "foo/bar", "foo/bar/", "foo/bar/xyzzy"]);

    // Overwrites and deletes reach the right copy; the others stay.
    put("a/b", b"rewritten").await;
    assert_eq!(get("a/b").await, b"rewritten");
    s3.delete_object().bucket("tree").key("a").send().await.unwrap();
    assert_eq!(get("a/b").await, b"rewritten");
    let err = s3.get_object().bucket("tree").key("a").send().await.unwrap_err();
    assert_eq!(code(&err), "NoSuchKey");
    // With `a` gone, `a/b` can become a plain file on its next write.
    put("a/b", b"plain now").await;
    assert_eq!(std::fs::read(bucket_dir.join("a/b")).unwrap(), b"plain now");
    let all = s3.list_objects_v2().bucket("tree").prefix("a").send().await.unwrap();
    let keys: Vec<_> = all.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(keys, ["a/b"], "the earlier copy is gone");

    // Writers of a key and of a key below it, racing: both always end up readable.
    let mut racers = Vec::new();
    for round in 0..10 {
        for k in ["race/p", "race/p/q"] {
            let s3 = s3.clone();
            racers.push(tokio::spawn(async move {
                s3.put_object()
                    .bucket("tree")
                    .key(k)
                    .body(ByteStream::from(format!("{k} {round}").into_bytes()))
                    .send()
                    .await
                    .unwrap();
                if round % 3 == 0 {
                    s3.delete_object().bucket("tree").key(k).send().await.unwrap();
                }
            }));
        }
    }
    for racer in racers {
        racer.await.unwrap();
    }
    put("race/p", b"final p").await;
    put("race/p/q", b"final q").await;
    assert_eq!(get("race/p").await, b"final p");
    assert_eq!(get("race/p/q").await, b"final q");
    let listed = s3.list_objects_v2().bucket("tree").prefix("race/").send().await.unwrap();
    let keys: Vec<_> = listed.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(keys, ["race/p", "race/p/q"], "one copy of each key");

    // The operator cannot delete a bucket that still holds such objects.
    server.store.set_admin(Some(
        s3_endpoint::AdminCredentials::new("operator", "operator-secret").unwrap(),
    ));
    let admin = crate::common::client_for(server.addr, "operator", "operator-secret");
    admin.create_bucket().bucket("static").send().await.unwrap();
    admin
        .put_object()
        .bucket("static")
        .key("x//y")
        .body(ByteStream::from_static(b"odd"))
        .send()
        .await
        .unwrap();
    let err = admin.delete_bucket().bucket("static").send().await.unwrap_err();
    assert_eq!(code(&err), "BucketNotEmpty");
    admin.delete_object().bucket("static").key("x//y").send().await.unwrap();
    admin.delete_bucket().bucket("static").send().await.unwrap();

    // Everything survives a restart.
    let addr_before = server.addr;
    server.stop().await;
    let server = Server::start(tmp.path()).await;
    assert_ne!(server.addr, addr_before);
    let s3 = server.client(&key);
    for (k, v) in [("foo/bar", &b"middle"[..]), ("foo/bar/xyzzy", b"deep"), ("a/b", b"plain now")] {
        let out = s3.get_object().bucket("tree").key(k).send().await.unwrap();
        assert_eq!(out.body.collect().await.unwrap().into_bytes().as_ref(), v, "{k}");
    }
    server.stop().await;
}
