//! Answers that must be S3's, each as a client (the AWS SDK, or a signed raw request where the
//! SDK cannot send what other clients do) sees them on the wire.

mod common;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    BucketLocationConstraint, CompletedMultipartUpload, CompletedPart, CreateBucketConfiguration,
    ObjectAttributes,
};
use common::{Server, client_in_region, code, pattern, send_verbatim, sign_v4, status};
use s3_endpoint::AccessKey;

const ADMIN_ID: &str = "OPERATORCONFORM1";
const ADMIN_SECRET: &str = "operator-secret-conformance-01";

/// A header of a failed SDK call's response.
fn error_header<E>(
    err: &aws_sdk_s3::error::SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
    name: &str,
) -> Option<String> {
    err.raw_response().and_then(|r| r.headers().get(name)).map(str::to_owned)
}

/// `headers` with `x-amz-content-sha256: UNSIGNED-PAYLOAD`, signed for `key`.
fn sign(
    server: &Server,
    key: &AccessKey,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Vec<(String, String)> {
    let mut all = vec![("x-amz-content-sha256", "UNSIGNED-PAYLOAD")];
    all.extend_from_slice(headers);
    let signed = sign_v4(server.addr, key, method, path, &all, "UNSIGNED-PAYLOAD");
    all.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).chain(signed).collect()
}

fn request_head(server: &Server, method: &str, path: &str, headers: &[(String, String)]) -> String {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", server.addr);
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("Connection: close\r\n\r\n");
    head
}

#[tokio::test]
async fn failed_conditional_reads_carry_the_etag_and_last_modified() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("cond", "obc-c").await;
    let s3 = server.client(&key);
    let put = s3.put_object().bucket("cond").key("k").body(ByteStream::from_static(b"x")).send();
    let tag = put.await.unwrap().e_tag().unwrap().to_owned();
    let head = s3.head_object().bucket("cond").key("k").send().await.unwrap();
    let modified = head.last_modified().unwrap();
    let modified = modified.fmt(aws_sdk_s3::primitives::DateTimeFormat::HttpDate).unwrap();
    let later =
        aws_sdk_s3::primitives::DateTime::from_secs(head.last_modified().unwrap().secs() + 3600);
    let earlier =
        aws_sdk_s3::primitives::DateTime::from_secs(head.last_modified().unwrap().secs() - 3600);

    let err = s3.get_object().bucket("cond").key("k").if_none_match(&tag).send().await.unwrap_err();
    assert_eq!(status(&err), Some(304));
    assert_eq!(error_header(&err, "etag").as_deref(), Some(tag.as_str()));
    assert_eq!(error_header(&err, "last-modified").as_deref(), Some(modified.as_str()));

    let err =
        s3.head_object().bucket("cond").key("k").if_modified_since(later).send().await.unwrap_err();
    assert_eq!(status(&err), Some(304));
    assert_eq!(error_header(&err, "etag").as_deref(), Some(tag.as_str()));
    assert_eq!(error_header(&err, "last-modified").as_deref(), Some(modified.as_str()));

    let err = s3.get_object().bucket("cond").key("k").if_match("\"0\"").send().await.unwrap_err();
    assert_eq!(status(&err), Some(412));
    assert_eq!(code(&err), "PreconditionFailed");
    assert_eq!(error_header(&err, "etag").as_deref(), Some(tag.as_str()));
    assert_eq!(error_header(&err, "last-modified").as_deref(), Some(modified.as_str()));

    let err = s3
        .head_object()
        .bucket("cond")
        .key("k")
        .if_unmodified_since(earlier)
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&err), Some(412));
    assert_eq!(error_header(&err, "etag").as_deref(), Some(tag.as_str()));
}

#[tokio::test]
async fn object_attributes_include_the_object_size() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("attrs", "obc-a").await;
    let s3 = server.client(&key);
    let data = pattern(3, 1234);
    s3.put_object().bucket("attrs").key("k").body(data.clone().into()).send().await.unwrap();

    let single = s3
        .get_object_attributes()
        .bucket("attrs")
        .key("k")
        .object_attributes(ObjectAttributes::ObjectSize)
        .send()
        .await
        .unwrap();
    assert_eq!(single.object_size(), Some(1234));

    // Other clients send the attributes as one comma-separated header.
    for value in ["ETag,ObjectSize", "StorageClass, ObjectSize, ETag"] {
        let headers = sign(
            &server,
            &key,
            "GET",
            "/attrs/k?attributes",
            &[("x-amz-object-attributes", value)],
        );
        let response = send_verbatim(
            server.addr,
            &request_head(&server, "GET", "/attrs/k?attributes", &headers),
            b"",
        )
        .await;
        assert_eq!(response.status, 200, "{}", response.text());
        let text = response.text();
        assert!(text.contains("<ObjectSize>1234</ObjectSize>"), "{value}: {text}");
        assert!(text.contains("<ETag>"), "{value}: {text}");
    }
}

/// GetObjectAttributes answers the ETag without quotes (everywhere else it is quoted), as S3
/// does; s3-tests compare it with the PUT's ETag stripped of its quotes.
#[tokio::test]
async fn object_attributes_answer_the_etag_unquoted() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("etags", "obc-e").await;
    let s3 = server.client(&key);
    let attributes = |k: &'static str| {
        s3.get_object_attributes()
            .bucket("etags")
            .key(k)
            .object_attributes(ObjectAttributes::Etag)
            .object_attributes(ObjectAttributes::ObjectParts)
            .object_attributes(ObjectAttributes::Checksum)
            .send()
    };

    let put = s3.put_object().bucket("etags").key("simple").body(pattern(1, 10).into());
    let simple = put.send().await.unwrap().e_tag().unwrap().to_owned();
    let put = s3.put_object().bucket("etags").key("summed").body(pattern(2, 1024).into());
    let put = put.checksum_algorithm(aws_sdk_s3::types::ChecksumAlgorithm::Sha256);
    let summed = put.send().await.unwrap().e_tag().unwrap().to_owned();

    let upload = s3.create_multipart_upload().bucket("etags").key("multi").send().await.unwrap();
    let id = upload.upload_id().unwrap();
    let mut parts = Vec::new();
    for number in 1..=2 {
        let size = if number == 1 { 5 * 1024 * 1024 } else { 100 };
        let part = s3
            .upload_part()
            .bucket("etags")
            .key("multi")
            .upload_id(id)
            .part_number(number)
            .body(pattern(number as u64, size).into())
            .send()
            .await
            .unwrap();
        parts.push(
            CompletedPart::builder().part_number(number).e_tag(part.e_tag().unwrap()).build(),
        );
    }
    let done = s3
        .complete_multipart_upload()
        .bucket("etags")
        .key("multi")
        .upload_id(id)
        .multipart_upload(CompletedMultipartUpload::builder().set_parts(Some(parts)).build())
        .send()
        .await
        .unwrap();
    let multi = done.e_tag().unwrap().to_owned();

    for (k, etag) in [("simple", simple), ("summed", summed), ("multi", multi)] {
        assert!(etag.starts_with('"') && etag.ends_with('"'), "{k}: PUT answers {etag}");
        let attrs = attributes(k).await.unwrap();
        assert_eq!(attrs.e_tag(), Some(etag.trim_matches('"')), "{k}");
        let head = s3.head_object().bucket("etags").key(k).send().await.unwrap();
        assert_eq!(head.e_tag(), Some(etag.as_str()), "{k}: elsewhere the ETag stays quoted");
    }
}

#[tokio::test]
async fn part_numbers_past_the_parts_are_invalid_part_number() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("parts", "obc-p").await;
    let s3 = server.client(&key);
    s3.put_object().bucket("parts").key("simple").body(pattern(1, 10).into()).send().await.unwrap();
    let one = s3.get_object().bucket("parts").key("simple").part_number(1).send().await.unwrap();
    assert_eq!(one.content_length(), Some(10));
    for number in [2, 3] {
        let err = s3
            .get_object()
            .bucket("parts")
            .key("simple")
            .part_number(number)
            .send()
            .await
            .unwrap_err();
        assert_eq!((code(&err).as_str(), status(&err)), ("InvalidPartNumber", Some(416)));
        let err = s3
            .head_object()
            .bucket("parts")
            .key("simple")
            .part_number(number)
            .send()
            .await
            .unwrap_err();
        assert_eq!(status(&err), Some(416));
    }

    let upload = s3.create_multipart_upload().bucket("parts").key("multi").send().await.unwrap();
    let id = upload.upload_id().unwrap();
    let mut parts = Vec::new();
    for number in 1..=2 {
        let size = if number == 1 { 5 * 1024 * 1024 } else { 100 };
        let part = s3
            .upload_part()
            .bucket("parts")
            .key("multi")
            .upload_id(id)
            .part_number(number)
            .body(pattern(number as u64, size).into())
            .send()
            .await
            .unwrap();
        parts.push(
            CompletedPart::builder().part_number(number).e_tag(part.e_tag().unwrap()).build(),
        );
    }
    s3.complete_multipart_upload()
        .bucket("parts")
        .key("multi")
        .upload_id(id)
        .multipart_upload(CompletedMultipartUpload::builder().set_parts(Some(parts)).build())
        .send()
        .await
        .unwrap();
    let second = s3.get_object().bucket("parts").key("multi").part_number(2).send().await.unwrap();
    assert_eq!(second.content_length(), Some(100));
    let err = s3.get_object().bucket("parts").key("multi").part_number(3).send().await.unwrap_err();
    assert_eq!((code(&err).as_str(), status(&err)), ("InvalidPartNumber", Some(416)));
}

#[tokio::test]
async fn a_chunked_put_without_a_content_length_is_stored() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("chunked", "obc-t").await;
    let s3 = server.client(&key);
    let data = pattern(9, 300_000);
    let mut body = Vec::new();
    for chunk in data.chunks(70_000) {
        body.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        body.extend_from_slice(chunk);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"0\r\n\r\n");
    let headers =
        sign(&server, &key, "PUT", "/chunked/streamed", &[("transfer-encoding", "chunked")]);
    let response = send_verbatim(
        server.addr,
        &request_head(&server, "PUT", "/chunked/streamed", &headers),
        &body,
    )
    .await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.header("etag"), Some(format!("\"{}\"", common::md5_hex(&data)).as_str()));
    let got = s3.get_object().bucket("chunked").key("streamed").send().await.unwrap();
    assert_eq!(got.body.collect().await.unwrap().into_bytes().as_ref(), data.as_slice());
}

#[tokio::test]
async fn content_encoding_comes_back_byte_for_byte_without_aws_chunked() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("enc", "obc-e").await;
    let s3 = server.client(&key);
    s3.put_object()
        .bucket("enc")
        .key("plain")
        .content_encoding("deflate, gzip")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap();
    let head = s3.head_object().bucket("enc").key("plain").send().await.unwrap();
    assert_eq!(head.content_encoding(), Some("deflate, gzip"));

    // An aws-chunked upload: only that token goes.
    let data = b"chunked and encoded";
    for (sent, kept) in [
        ("aws-chunked, deflate, gzip", Some("deflate, gzip")),
        ("deflate,  gzip,aws-chunked", Some("deflate,  gzip")),
        ("aws-chunked", None),
    ] {
        let decoded = data.len().to_string();
        let mut body = format!("{:x}\r\n", data.len()).into_bytes();
        body.extend_from_slice(data);
        body.extend_from_slice(
            format!("\r\n0\r\nx-amz-checksum-crc32:{}\r\n\r\n", crc32(data)).as_bytes(),
        );
        let mut headers: Vec<(String, String)> = [
            ("content-encoding", sent),
            ("x-amz-content-sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER"),
            ("x-amz-decoded-content-length", decoded.as_str()),
            ("x-amz-trailer", "x-amz-checksum-crc32"),
            ("content-length", body.len().to_string().as_str()),
        ]
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .into();
        headers.extend(sign_streaming(&server, &key, "/enc/chunked", sent, &decoded));
        let response = send_verbatim(
            server.addr,
            &request_head(&server, "PUT", "/enc/chunked", &headers),
            &body,
        )
        .await;
        assert_eq!(response.status, 200, "{sent}: {}", response.text());
        let head = s3.head_object().bucket("enc").key("chunked").send().await.unwrap();
        assert_eq!(head.content_encoding(), kept, "{sent}");
        let got = s3.get_object().bucket("enc").key("chunked").send().await.unwrap();
        assert_eq!(got.body.collect().await.unwrap().into_bytes().as_ref(), data);
    }
}

/// The base64 CRC32 of `data`, as a checksum trailer carries it.
fn crc32(data: &[u8]) -> String {
    use base64::Engine as _;
    let value = crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32IsoHdlc, data) as u32;
    base64::engine::general_purpose::STANDARD.encode(value.to_be_bytes())
}

/// The `authorization` and `x-amz-date` of an aws-chunked PUT with an unsigned body.
fn sign_streaming(
    server: &Server,
    key: &AccessKey,
    path: &str,
    encoding: &str,
    decoded: &str,
) -> Vec<(String, String)> {
    let payload = "STREAMING-UNSIGNED-PAYLOAD-TRAILER";
    let headers = [
        ("x-amz-content-sha256", payload),
        ("content-encoding", encoding),
        ("x-amz-decoded-content-length", decoded),
        ("x-amz-trailer", "x-amz-checksum-crc32"),
    ];
    sign_v4(server.addr, key, "PUT", path, &headers, payload)
}

#[tokio::test]
async fn list_buckets_pages_by_max_buckets_continuation_token_and_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, admin) = Server::start_with_admin(tmp.path(), ADMIN_ID, ADMIN_SECRET).await;
    let names = ["logs-a", "logs-b", "logs-c", "photos-a", "photos-b"];
    for name in names {
        admin.create_bucket().bucket(name).send().await.unwrap();
    }

    let mut seen = Vec::new();
    let mut token = None;
    loop {
        let page = admin
            .list_buckets()
            .max_buckets(2)
            .set_continuation_token(token.clone())
            .send()
            .await
            .unwrap();
        assert!(page.buckets().len() <= 2);
        seen.extend(page.buckets().iter().map(|b| b.name().unwrap().to_owned()));
        token = page.continuation_token().map(str::to_owned);
        if token.is_none() {
            break;
        }
    }
    assert_eq!(seen, names);

    let logs = admin.list_buckets().prefix("logs-").send().await.unwrap();
    let listed: Vec<_> = logs.buckets().iter().map(|b| b.name().unwrap()).collect();
    assert_eq!(listed, ["logs-a", "logs-b", "logs-c"]);
    assert_eq!(logs.prefix(), Some("logs-"));
    let page = admin.list_buckets().prefix("photos-").max_buckets(1).send().await.unwrap();
    assert_eq!(page.buckets()[0].name(), Some("photos-a"));
    let rest = admin
        .list_buckets()
        .prefix("photos-")
        .continuation_token(page.continuation_token().unwrap())
        .send()
        .await
        .unwrap();
    let listed: Vec<_> = rest.buckets().iter().map(|b| b.name().unwrap()).collect();
    assert_eq!(listed, ["photos-b"]);
    assert_eq!(rest.continuation_token(), None);

    let err = admin.list_buckets().max_buckets(0).send().await.unwrap_err();
    assert_eq!(code(&err), "InvalidArgument");
    drop(server);
}

#[tokio::test]
async fn location_constraints_are_answered_as_s3_does() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, admin) = Server::start_with_admin(tmp.path(), ADMIN_ID, ADMIN_SECRET).await;
    let in_eu = client_in_region(server.addr, ADMIN_ID, ADMIN_SECRET, "eu-west-1");
    let constraint = |c: BucketLocationConstraint| {
        CreateBucketConfiguration::builder().location_constraint(c).build()
    };
    let location = |client: aws_sdk_s3::Client, bucket: &'static str| async move {
        let out = client.get_bucket_location().bucket(bucket).send().await.unwrap();
        out.location_constraint().map(|c| c.as_str().to_owned())
    };

    // The default region: no constraint, shown as none; us-east-1 named is not a constraint.
    admin.create_bucket().bucket("default-one").send().await.unwrap();
    assert_eq!(location(admin.clone(), "default-one").await.unwrap_or_default(), "");
    let err = admin
        .create_bucket()
        .bucket("named-us-east-1")
        .create_bucket_configuration(constraint(BucketLocationConstraint::from("us-east-1")))
        .send()
        .await
        .unwrap_err();
    assert_eq!((code(&err).as_str(), status(&err)), ("InvalidLocationConstraint", Some(400)));
    // The default region's endpoint creates buckets for other regions.
    admin
        .create_bucket()
        .bucket("from-default")
        .create_bucket_configuration(constraint(BucketLocationConstraint::EuWest1))
        .send()
        .await
        .unwrap();
    assert_eq!(location(admin.clone(), "from-default").await.as_deref(), Some("eu-west-1"));
    assert_eq!(location(in_eu.clone(), "from-default").await.as_deref(), Some("eu-west-1"));

    // A regional endpoint: its own region named, nothing else (not even the unspecified one).
    in_eu
        .create_bucket()
        .bucket("in-eu")
        .create_bucket_configuration(constraint(BucketLocationConstraint::EuWest1))
        .send()
        .await
        .unwrap();
    assert_eq!(location(in_eu.clone(), "in-eu").await.as_deref(), Some("eu-west-1"));
    assert_eq!(location(admin.clone(), "in-eu").await.as_deref(), Some("eu-west-1"));
    for configuration in [None, Some(constraint(BucketLocationConstraint::UsWest2))] {
        let err = in_eu
            .create_bucket()
            .bucket("not-in-eu")
            .set_create_bucket_configuration(configuration)
            .send()
            .await
            .unwrap_err();
        assert_eq!(
            (code(&err).as_str(), status(&err)),
            ("IllegalLocationConstraintException", Some(400))
        );
    }
    assert!(!tmp.path().join("buckets/not-in-eu").exists());
    assert!(!tmp.path().join("buckets/named-us-east-1").exists());
}

#[tokio::test]
async fn creating_a_bucket_another_key_owns_is_bucket_already_exists() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let mine = server.bucket_with_key("mine", "obc-m").await;
    let theirs = server.bucket_with_key("theirs", "obc-t").await;
    let s3 = server.client(&mine);

    let err = s3.create_bucket().bucket("theirs").send().await.unwrap_err();
    assert_eq!((code(&err).as_str(), status(&err)), ("BucketAlreadyExists", Some(409)));
    // Claim keys still create nothing.
    let err = s3.create_bucket().bucket("fresh").send().await.unwrap_err();
    assert_eq!((code(&err).as_str(), status(&err)), ("AccessDenied", Some(403)));
    assert!(!tmp.path().join("buckets/fresh").exists());
    // Its own bucket, elsewhere than the default region: already owned, nothing changed.
    let in_eu =
        client_in_region(server.addr, &mine.access_key_id, &mine.secret_access_key, "eu-west-1");
    let err = in_eu
        .create_bucket()
        .bucket("mine")
        .create_bucket_configuration(
            CreateBucketConfiguration::builder()
                .location_constraint(BucketLocationConstraint::EuWest1)
                .build(),
        )
        .send()
        .await
        .unwrap_err();
    assert_eq!((code(&err).as_str(), status(&err)), ("BucketAlreadyOwnedByYou", Some(409)));
    // Deleting stays the operator's.
    let err = server.client(&theirs).delete_bucket().bucket("mine").send().await.unwrap_err();
    assert_eq!(status(&err), Some(403));
    let err = s3.delete_bucket().bucket("mine").send().await.unwrap_err();
    assert_eq!(status(&err), Some(403));
    assert!(tmp.path().join("buckets/mine").exists());
}
