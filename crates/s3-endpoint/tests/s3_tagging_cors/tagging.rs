//! Object tags: set on PUT, on a multipart upload and on copies, replaced and removed, read back
//! with their count, refused past S3's limits, kept across a restart, gone with their object.

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    CompletedMultipartUpload, CompletedPart, MetadataDirective, Tag, Tagging, TaggingDirective,
};

use crate::common::{Server, code, raw_request, sign_v4};
use crate::{pairs, tags};

fn tagging(list: &[(&str, &str)]) -> Tagging {
    let tags = list.iter().map(|(k, v)| Tag::builder().key(*k).value(*v).build().unwrap());
    Tagging::builder().set_tag_set(Some(tags.collect())).build().unwrap()
}

#[tokio::test]
async fn tags_round_trip_through_put_get_replace_and_delete() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("tags", "obc-t").await;
    let s3 = server.client(&key);
    let body = ByteStream::from_static(b"tagged");
    let put = s3.put_object().bucket("tags").key("k").tagging("team=web&note=two%20words&empty=");
    put.body(body).send().await.unwrap();
    // Listed by key, as S3 lists a tag set, not in the order given.
    let expected = pairs(&[("empty", ""), ("note", "two words"), ("team", "web")]);
    assert_eq!(tags(&s3, "tags", "k").await, expected);
    let got = s3.get_object().bucket("tags").key("k").send().await.unwrap();
    assert_eq!(got.tag_count(), Some(3));
    // HEAD sends the count too (the SDK's HeadObject has no field for it: read off the wire).
    let path = "/tags/k";
    let mut headers = vec![("x-amz-content-sha256", "UNSIGNED-PAYLOAD")];
    let signed = sign_v4(server.addr, &key, "HEAD", path, &headers, "UNSIGNED-PAYLOAD");
    let signed: Vec<(&str, &str)> = signed.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    headers.extend(signed);
    let head = raw_request(server.addr, "HEAD", path, &headers, b"").await;
    assert_eq!(head.status, 200, "{head:?}");
    assert_eq!(head.header("x-amz-tagging-count"), Some("3"));

    let replace = tagging(&[("b", "2"), ("a", "1")]);
    s3.put_object_tagging().bucket("tags").key("k").tagging(replace).send().await.unwrap();
    assert_eq!(tags(&s3, "tags", "k").await, pairs(&[("a", "1"), ("b", "2")]));
    // The object itself is untouched.
    let got = s3.get_object().bucket("tags").key("k").send().await.unwrap();
    assert_eq!(got.tag_count(), Some(2));
    assert_eq!(got.body.collect().await.unwrap().into_bytes().as_ref(), b"tagged");

    s3.delete_object_tagging().bucket("tags").key("k").send().await.unwrap();
    assert!(tags(&s3, "tags", "k").await.is_empty());
    let got = s3.get_object().bucket("tags").key("k").send().await.unwrap();
    assert_eq!(got.tag_count(), None, "no count without tags, as S3");

    let err = s3.get_object_tagging().bucket("tags").key("missing").send().await.unwrap_err();
    assert_eq!(code(&err), "NoSuchKey");
    let err = s3
        .put_object_tagging()
        .bucket("tags")
        .key("missing")
        .tagging(tagging(&[("a", "1")]))
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "NoSuchKey");
    server.stop().await;
}

#[tokio::test]
async fn tags_past_s3_limits_are_refused_and_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("limits", "obc-l").await;
    let s3 = server.client(&key);
    let body = || ByteStream::from_static(b"x");
    s3.put_object().bucket("limits").key("k").tagging("keep=1").body(body()).send().await.unwrap();

    let eleven: Vec<(String, String)> = (0..11).map(|i| (format!("k{i}"), "v".into())).collect();
    let eleven_ref: Vec<(&str, &str)> =
        eleven.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let long_key = "k".repeat(129);
    let long_value = "v".repeat(257);
    // 64 characters outside the BMP are 128 UTF-16 units: the longest key there is.
    let widest_key = "😀".repeat(64);
    let too_wide_key = "😀".repeat(65);
    let refused: [(&str, Vec<(&str, &str)>); 6] = [
        ("eleven tags", eleven_ref),
        ("a 129-unit key", vec![(long_key.as_str(), "v")]),
        ("a 257-unit value", vec![("k", long_value.as_str())]),
        ("a key twice", vec![("k", "1"), ("k", "2")]),
        ("an aws: key", vec![("aws:cost", "1")]),
        ("65 wide characters", vec![(too_wide_key.as_str(), "v")]),
    ];
    for (what, list) in &refused {
        let err = s3
            .put_object_tagging()
            .bucket("limits")
            .key("k")
            .tagging(tagging(list))
            .send()
            .await
            .unwrap_err();
        assert_eq!(code(&err), "InvalidTag", "PutObjectTagging with {what}");
        let header: Vec<String> =
            list.iter().map(|(k, v)| format!("{}={}", urlencode(k), urlencode(v))).collect();
        let err = s3
            .put_object()
            .bucket("limits")
            .key(format!("new-{what}"))
            .tagging(header.join("&"))
            .body(body())
            .send()
            .await
            .unwrap_err();
        assert_eq!(code(&err), "InvalidTag", "PutObject with {what}");
        let head = s3.head_object().bucket("limits").key(format!("new-{what}")).send().await;
        assert!(head.is_err(), "{what}: nothing stored");
    }
    assert_eq!(tags(&s3, "limits", "k").await, pairs(&[("keep", "1")]), "tags unchanged");
    let err = s3
        .put_object()
        .bucket("limits")
        .key("bad-encoding")
        .tagging("a=%zz")
        .body(body())
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "InvalidArgument");

    // At the limits exactly: accepted.
    let ten: Vec<(String, String)> = (0..10).map(|i| (format!("k{i}"), "v".repeat(256))).collect();
    let mut ten_ref: Vec<(&str, &str)> =
        ten.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    ten_ref[0].0 = &widest_key;
    let longest_key = "k".repeat(128);
    ten_ref[1].0 = &longest_key;
    s3.put_object_tagging()
        .bucket("limits")
        .key("k")
        .tagging(tagging(&ten_ref))
        .send()
        .await
        .unwrap();
    let mut by_key = pairs(&ten_ref);
    by_key.sort();
    assert_eq!(tags(&s3, "limits", "k").await, by_key);
    server.stop().await;
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn copies_take_or_replace_tags_by_their_directive() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("copies", "obc-c").await;
    let s3 = server.client(&key);
    let put = s3.put_object().bucket("copies").key("src").tagging("from=source");
    put.content_type("text/plain").body(ByteStream::from_static(b"s")).send().await.unwrap();
    let copy = |to: &str| s3.copy_object().bucket("copies").key(to).copy_source("copies/src");

    copy("default").send().await.unwrap();
    assert_eq!(tags(&s3, "copies", "default").await, pairs(&[("from", "source")]));
    copy("copied")
        .tagging_directive(TaggingDirective::Copy)
        .tagging("ignored=1")
        .send()
        .await
        .unwrap();
    assert_eq!(tags(&s3, "copies", "copied").await, pairs(&[("from", "source")]));
    copy("replaced")
        .tagging_directive(TaggingDirective::Replace)
        .tagging("to=dest")
        .send()
        .await
        .unwrap();
    assert_eq!(tags(&s3, "copies", "replaced").await, pairs(&[("to", "dest")]));
    copy("cleared").tagging_directive(TaggingDirective::Replace).send().await.unwrap();
    assert!(tags(&s3, "copies", "cleared").await.is_empty());
    // New metadata, the source's tags: the two directives are independent.
    copy("new-metadata")
        .metadata_directive(MetadataDirective::Replace)
        .content_type("application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(tags(&s3, "copies", "new-metadata").await, pairs(&[("from", "source")]));
    let head = s3.head_object().bucket("copies").key("new-metadata").send().await.unwrap();
    assert_eq!(head.content_type(), Some("application/json"));
    // Tags kept, metadata taken from the source.
    let head = s3.head_object().bucket("copies").key("replaced").send().await.unwrap();
    assert_eq!(head.content_type(), Some("text/plain"));
    let err =
        copy("bad").tagging_directive(TaggingDirective::Replace).tagging("aws:x=1").send().await;
    assert_eq!(code(&err.unwrap_err()), "InvalidTag");
    server.stop().await;
}

#[tokio::test]
async fn a_multipart_upload_carries_its_tags_to_the_object() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("multi", "obc-m").await;
    let s3 = server.client(&key);
    let created = s3
        .create_multipart_upload()
        .bucket("multi")
        .key("big")
        .tagging("kind=backup&day=mon")
        .send()
        .await
        .unwrap();
    let id = created.upload_id().unwrap();
    let body = ByteStream::from(crate::common::pattern(3, 1024));
    let part = s3.upload_part().bucket("multi").key("big").upload_id(id).part_number(1);
    let etag = part.body(body).send().await.unwrap().e_tag.unwrap();
    let parts = CompletedMultipartUpload::builder()
        .parts(CompletedPart::builder().part_number(1).e_tag(etag).build())
        .build();
    let complete = s3.complete_multipart_upload().bucket("multi").key("big").upload_id(id);
    complete.multipart_upload(parts).send().await.unwrap();
    assert_eq!(tags(&s3, "multi", "big").await, pairs(&[("day", "mon"), ("kind", "backup")]));
    let err = s3
        .create_multipart_upload()
        .bucket("multi")
        .key("bad")
        .tagging("aws:x=1")
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "InvalidTag");
    server.stop().await;
}

#[tokio::test]
async fn tags_outlive_a_restart_and_go_with_their_object() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("kept", "obc-k").await;
    let s3 = server.client(&key);
    let put = s3.put_object().bucket("kept").key("k").tagging("a=1");
    put.body(ByteStream::from_static(b"x")).send().await.unwrap();
    s3.put_object_tagging()
        .bucket("kept")
        .key("k")
        .tagging(tagging(&[("b", "2")]))
        .send()
        .await
        .unwrap();
    server.stop().await;

    let server = Server::start(tmp.path()).await;
    let s3 = server.client(&key);
    assert_eq!(tags(&s3, "kept", "k").await, pairs(&[("b", "2")]));
    s3.delete_object().bucket("kept").key("k").send().await.unwrap();
    let err = s3.get_object_tagging().bucket("kept").key("k").send().await.unwrap_err();
    assert_eq!(code(&err), "NoSuchKey");
    // A new object at the key starts without tags; tags count in no usage.
    s3.put_object()
        .bucket("kept")
        .key("k")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap();
    assert!(tags(&s3, "kept", "k").await.is_empty());
    let (usage, _) = server.store.usage("kept", None).unwrap();
    assert_eq!((usage.objects, usage.bytes), (1, 1));
    server.stop().await;
}
