//! S3 protocol rules as clients rely on them, checked with the AWS SDK (or, where the SDK
//! cannot send the request, a hand-signed one) over loopback.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use common::{RawResponse, Server, http_date, raw_request, sign_v2, sign_v4, status};

/// A SigV2 header-signed GET of `/bucket/key` with the given date headers.
async fn sig_v2_get(
    server: &Server,
    key: &s3_endpoint::AccessKey,
    path: &str,
    date: Option<&str>,
    amz_date: Option<&str>,
) -> RawResponse {
    // With x-amz-date the Date line of the string to sign is empty.
    let date_line = if amz_date.is_some() { "" } else { date.unwrap_or("") };
    let amz_line = amz_date.map(|d| format!("x-amz-date:{d}\n")).unwrap_or_default();
    let string_to_sign = format!("GET\n\n\n{date_line}\n{amz_line}{path}");
    let auth =
        format!("AWS {}:{}", key.access_key_id, sign_v2(&key.secret_access_key, &string_to_sign));
    let mut headers = vec![("Authorization", auth.as_str())];
    if let Some(date) = date {
        headers.push(("Date", date));
    }
    if let Some(amz_date) = amz_date {
        headers.push(("x-amz-date", amz_date));
    }
    raw_request(server.addr, "GET", path, &headers, b"").await
}

#[tokio::test]
async fn sig_v2_requests_outside_the_clock_skew_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("clock", "obc-c").await;
    server
        .client(&key)
        .put_object()
        .bucket("clock")
        .key("k")
        .body(ByteStream::from_static(b"on time"))
        .send()
        .await
        .unwrap();
    let now = SystemTime::now();

    let fresh = sig_v2_get(&server, &key, "/clock/k", Some(&http_date(now)), None).await;
    assert_eq!(fresh.status, 200, "{}", fresh.text());
    assert_eq!(fresh.body, b"on time");
    assert!(fresh.header("x-amz-request-id").is_some_and(|id| !id.is_empty()));
    // Within the 15 minutes S3 tolerates, either way.
    let slightly_off = http_date(now - Duration::from_secs(10 * 60));
    assert_eq!(sig_v2_get(&server, &key, "/clock/k", Some(&slightly_off), None).await.status, 200);

    for (what, date) in [
        ("a day old", now - Duration::from_secs(24 * 3600)),
        ("an hour ahead", now + Duration::from_secs(3600)),
        ("16 minutes old", now - Duration::from_secs(16 * 60)),
    ] {
        let response = sig_v2_get(&server, &key, "/clock/k", Some(&http_date(date)), None).await;
        assert_eq!(response.status, 403, "{what}: {}", response.text());
        assert_eq!(response.error_code().as_deref(), Some("RequestTimeTooSkewed"), "{what}");
        assert!(response.text().contains("<RequestId>"), "{what}: {}", response.text());
    }

    // x-amz-date wins over Date, so a stale one is refused even beside a fresh Date.
    let stale = http_date(now - Duration::from_secs(24 * 3600));
    let response = sig_v2_get(&server, &key, "/clock/k", Some(&http_date(now)), Some(&stale)).await;
    assert_eq!(response.error_code().as_deref(), Some("RequestTimeTooSkewed"));
    let response = sig_v2_get(&server, &key, "/clock/k", Some(&stale), Some(&http_date(now))).await;
    assert_eq!(response.status, 200, "{}", response.text());

    // A weekday that does not match the date is tolerated; the date itself still counts.
    let response =
        sig_v2_get(&server, &key, "/clock/k", Some("Tue, 07 Jul 2010 21:53:04 GMT"), None).await;
    assert_eq!(response.error_code().as_deref(), Some("RequestTimeTooSkewed"));

    // Bucket-level requests: clients sign the resource as "/clock/" while sending "/clock";
    // both spellings are accepted, and a wrong signature still is not.
    for signed in ["/clock/", "/clock"] {
        let date = http_date(now);
        let string_to_sign = format!("GET\n\n\n{date}\n{signed}");
        let auth = format!(
            "AWS {}:{}",
            key.access_key_id,
            sign_v2(&key.secret_access_key, &string_to_sign)
        );
        let headers = [("Authorization", auth.as_str()), ("Date", date.as_str())];
        let response = raw_request(server.addr, "GET", "/clock", &headers, b"").await;
        assert_eq!(response.status, 200, "{signed}: {}", response.text());
        assert!(response.text().contains("<Key>k</Key>"), "{}", response.text());
    }
    let date = http_date(now);
    let auth = format!("AWS {}:{}", key.access_key_id, sign_v2("wrong", "GET\n\n\n\n/clock/"));
    let headers = [("Authorization", auth.as_str()), ("Date", date.as_str())];
    let response = raw_request(server.addr, "GET", "/clock", &headers, b"").await;
    assert_eq!(response.error_code().as_deref(), Some("SignatureDoesNotMatch"));

    // No date, an unreadable one or one before 1970: S3 refuses to authenticate.
    for date in [None, Some("yesterday"), Some("Tue, 07 Jul 1950 21:53:04 GMT")] {
        let response = sig_v2_get(&server, &key, "/clock/k", date, None).await;
        assert_eq!(response.status, 403, "{date:?}: {}", response.text());
        assert_eq!(response.error_code().as_deref(), Some("AccessDenied"), "{date:?}");
    }
    server.stop().await;
}

/// A SigV4 header-signed GET of `path` whose time is carried by `Date` alone (no
/// `x-amz-date`), as SigV4 allows; signed by hand since SDKs always send `x-amz-date`.
async fn sig_v4_get_with_date_only(
    server: &Server,
    key: &s3_endpoint::AccessKey,
    path: &str,
    at: SystemTime,
) -> RawResponse {
    use hmac::{KeyInit, Mac};
    use sha2::Digest as _;
    let hmac = |key: &[u8], data: &str| {
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
        mac.update(data.as_bytes());
        mac.finalize().into_bytes().to_vec()
    };
    let stamp = jiff::Timestamp::try_from(at).unwrap();
    let (day, time) =
        (stamp.strftime("%Y%m%d").to_string(), stamp.strftime("%Y%m%dT%H%M%SZ").to_string());
    let date = http_date(at);
    let host = server.addr.to_string();
    let payload = "UNSIGNED-PAYLOAD";
    let canonical = format!(
        "GET\n{path}\n\ndate:{date}\nhost:{host}\nx-amz-content-sha256:{payload}\n\ndate;host;x-amz-content-sha256\n{payload}"
    );
    let scope = format!("{day}/us-east-1/s3/aws4_request");
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{time}\n{scope}\n{}",
        hex::encode(sha2::Sha256::digest(canonical.as_bytes()))
    );
    let mut signing = hmac(format!("AWS4{}", key.secret_access_key).as_bytes(), &day);
    for part in ["us-east-1", "s3", "aws4_request"] {
        signing = hmac(&signing, part);
    }
    let signature = hex::encode(hmac(&signing, &to_sign));
    let auth = format!(
        "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders=date;host;x-amz-content-sha256, Signature={signature}",
        key.access_key_id
    );
    let headers = [
        ("Authorization", auth.as_str()),
        ("Date", date.as_str()),
        ("x-amz-content-sha256", payload),
    ];
    raw_request(server.addr, "GET", path, &headers, b"").await
}

#[tokio::test]
async fn sig_v4_time_may_come_from_the_date_header() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("dated", "obc-d").await;
    server
        .client(&key)
        .put_object()
        .bucket("dated")
        .key("k")
        .body(ByteStream::from_static(b"dated"))
        .send()
        .await
        .unwrap();
    let now = SystemTime::now();
    let response = sig_v4_get_with_date_only(&server, &key, "/dated/k", now).await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.body, b"dated");
    // The Date is still the request time: an old one is refused.
    let old =
        sig_v4_get_with_date_only(&server, &key, "/dated/k", now - Duration::from_secs(3600)).await;
    assert_eq!(old.error_code().as_deref(), Some("RequestTimeTooSkewed"), "{}", old.text());
    server.stop().await;
}

/// A presigned SigV4 GET URL valid for `expires_in` from `signed_at`, signed without the
/// SDK's own one-week ceiling so that longer lifetimes can be sent.
fn presign_v4(
    server: &Server,
    key: &s3_endpoint::AccessKey,
    path: &str,
    signed_at: SystemTime,
    expires_in: Duration,
) -> String {
    use aws_sigv4::http_request::{
        SignableBody, SignableRequest, SignatureLocation, SigningSettings, sign,
    };
    let identity = aws_sdk_s3::config::Credentials::new(
        &key.access_key_id,
        &key.secret_access_key,
        None,
        None,
        "test",
    )
    .into();
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(expires_in);
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("s3")
        .time(signed_at)
        .settings(settings)
        .build()
        .unwrap()
        .into();
    let host = server.addr.to_string();
    let url = format!("http://{host}{path}");
    let request = SignableRequest::new(
        "GET",
        url.as_str(),
        [("host", host.as_str())].into_iter(),
        SignableBody::UnsignedPayload,
    )
    .unwrap();
    let (instructions, _) = sign(request, &params).unwrap().into_parts();
    let query: Vec<String> = instructions
        .params()
        .iter()
        .map(|(name, value)| format!("{name}={}", encode_query(value)))
        .collect();
    format!("{path}?{}", query.join("&"))
}

fn encode_query(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test]
async fn presigned_urls_follow_the_expiry_rules() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("signed", "obc-p").await;
    let s3 = server.client(&key);
    s3.put_object()
        .bucket("signed")
        .key("k")
        .body(ByteStream::from_static(b"presigned"))
        .send()
        .await
        .unwrap();
    let now = SystemTime::now();

    // The SDK's own presigning, up to the one-week maximum, works.
    let week = PresigningConfig::expires_in(Duration::from_secs(604_800)).unwrap();
    let url = s3.get_object().bucket("signed").key("k").presigned(week).await.unwrap();
    let path = url.uri().strip_prefix(&format!("http://{}", server.addr)).unwrap().to_owned();
    let response = raw_request(server.addr, "GET", &path, &[], b"").await;
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.body, b"presigned");
    let same = presign_v4(&server, &key, "/signed/k", now, Duration::from_secs(604_800));
    assert_eq!(raw_request(server.addr, "GET", &same, &[], b"").await.status, 200);

    // One second over a week is refused as S3 does, however valid the signature.
    let too_long = presign_v4(&server, &key, "/signed/k", now, Duration::from_secs(604_801));
    let response = raw_request(server.addr, "GET", &too_long, &[], b"").await;
    assert_eq!(response.status, 403, "{}", response.text());
    assert_eq!(response.error_code().as_deref(), Some("AuthorizationQueryParametersError"));
    // A negative expiry (what a client computing it from a past deadline sends) has expired;
    // the time is checked before the signature, so rewriting the signed value is enough here.
    let negative = presign_v4(&server, &key, "/signed/k", now, Duration::from_secs(7))
        .replace("X-Amz-Expires=7", "X-Amz-Expires=-7");
    assert!(negative.contains("X-Amz-Expires=-7"), "{negative}");
    let response = raw_request(server.addr, "GET", &negative, &[], b"").await;
    assert_eq!(response.status, 403, "{}", response.text());
    assert_eq!(response.error_code().as_deref(), Some("AccessDenied"));

    // An expired URL is refused.
    let hour_ago = presign_v4(
        &server,
        &key,
        "/signed/k",
        now - Duration::from_secs(2 * 3600),
        Duration::from_secs(3600),
    );
    let response = raw_request(server.addr, "GET", &hour_ago, &[], b"").await;
    assert_eq!(response.status, 403, "{}", response.text());
    assert_eq!(response.error_code().as_deref(), Some("AccessDenied"));

    // SigV2 presigned URLs: valid until their Expires, refused after.
    let presign_v2 = |expires: u64| {
        let signature = sign_v2(&key.secret_access_key, &format!("GET\n\n\n{expires}\n/signed/k"));
        format!(
            "/signed/k?AWSAccessKeyId={}&Expires={expires}&Signature={}",
            key.access_key_id,
            encode_query(&signature)
        )
    };
    let unix_now = now.duration_since(UNIX_EPOCH).unwrap().as_secs();
    let response = raw_request(server.addr, "GET", &presign_v2(unix_now + 60), &[], b"").await;
    assert_eq!(response.status, 200, "{}", response.text());
    let response = raw_request(server.addr, "GET", &presign_v2(unix_now - 60), &[], b"").await;
    assert_eq!(response.status, 403, "{}", response.text());
    assert_eq!(response.error_code().as_deref(), Some("AccessDenied"));

    server.stop().await;
}

// ---- Issue 10: checksums, parts, encryption, preconditions and the operations clients use.

use aws_sdk_s3::types::{
    ChecksumAlgorithm, ChecksumMode, ChecksumType, CompletedMultipartUpload, CompletedPart, Delete,
    MetadataDirective, ObjectAttributes, ObjectCannedAcl, ObjectIdentifier, ServerSideEncryption,
};
use base64::Engine as _;
use common::{code, md5_hex, pattern};

const PART: usize = 5 * 1024 * 1024;

fn b64(raw: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(raw)
}

/// The S3 checksum of `data` with `algorithm`, base64, computed independently of the server.
fn checksum_of(algorithm: &ChecksumAlgorithm, data: &[u8]) -> String {
    use sha1::Digest as _;
    let crc = |algorithm, width: usize| {
        let value = crc_fast::checksum(algorithm, data).to_be_bytes();
        b64(&value[8 - width..])
    };
    match algorithm {
        ChecksumAlgorithm::Crc32 => crc(crc_fast::CrcAlgorithm::Crc32IsoHdlc, 4),
        ChecksumAlgorithm::Crc32C => crc(crc_fast::CrcAlgorithm::Crc32Iscsi, 4),
        ChecksumAlgorithm::Crc64Nvme => crc(crc_fast::CrcAlgorithm::Crc64Nvme, 8),
        ChecksumAlgorithm::Sha1 => b64(&sha1::Sha1::digest(data)),
        ChecksumAlgorithm::Sha256 => b64(&sha2::Sha256::digest(data)),
        other => panic!("no such algorithm {other:?}"),
    }
}

fn raw_checksum(algorithm: &ChecksumAlgorithm, data: &[u8]) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(checksum_of(algorithm, data)).unwrap()
}

const ALGORITHMS: [ChecksumAlgorithm; 5] = [
    ChecksumAlgorithm::Crc32,
    ChecksumAlgorithm::Crc32C,
    ChecksumAlgorithm::Crc64Nvme,
    ChecksumAlgorithm::Sha1,
    ChecksumAlgorithm::Sha256,
];

fn stored_checksum(
    out: &aws_sdk_s3::operation::head_object::HeadObjectOutput,
    algorithm: &ChecksumAlgorithm,
) -> Option<String> {
    match algorithm {
        ChecksumAlgorithm::Crc32 => out.checksum_crc32(),
        ChecksumAlgorithm::Crc32C => out.checksum_crc32_c(),
        ChecksumAlgorithm::Crc64Nvme => out.checksum_crc64_nvme(),
        ChecksumAlgorithm::Sha1 => out.checksum_sha1(),
        ChecksumAlgorithm::Sha256 => out.checksum_sha256(),
        _ => None,
    }
    .map(str::to_owned)
}

#[tokio::test]
async fn checksums_are_verified_kept_and_returned() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("sums", "obc-s").await;
    let s3 = server.client(&key);
    let data = pattern(3, 300_000);

    for algorithm in ALGORITHMS {
        let name = format!("ok/{}", algorithm.as_str());
        // The SDK computes the checksum and sends it (a header or an aws-chunked trailer).
        let put = s3
            .put_object()
            .bucket("sums")
            .key(&name)
            .checksum_algorithm(algorithm.clone())
            .body(ByteStream::from(data.clone()))
            .send()
            .await
            .unwrap();
        let expected = checksum_of(&algorithm, &data);
        let head = s3
            .head_object()
            .bucket("sums")
            .key(&name)
            .checksum_mode(ChecksumMode::Enabled)
            .send()
            .await
            .unwrap();
        assert_eq!(stored_checksum(&head, &algorithm), Some(expected.clone()), "{algorithm:?}");
        assert_eq!(head.checksum_type(), Some(&ChecksumType::FullObject), "{algorithm:?}");
        let put_value = match algorithm {
            ChecksumAlgorithm::Crc32 => put.checksum_crc32(),
            ChecksumAlgorithm::Crc32C => put.checksum_crc32_c(),
            ChecksumAlgorithm::Crc64Nvme => put.checksum_crc64_nvme(),
            ChecksumAlgorithm::Sha1 => put.checksum_sha1(),
            _ => put.checksum_sha256(),
        };
        assert_eq!(put_value, Some(expected.as_str()), "{algorithm:?}");
        // With ChecksumMode the SDK validates the body against the returned checksum itself.
        let got = s3
            .get_object()
            .bucket("sums")
            .key(&name)
            .checksum_mode(ChecksumMode::Enabled)
            .send()
            .await
            .unwrap();
        assert_eq!(got.body.collect().await.unwrap().into_bytes().as_ref(), &data[..]);
        // Without it, no checksum is announced.
        let plain = s3.head_object().bucket("sums").key(&name).send().await.unwrap();
        assert_eq!(stored_checksum(&plain, &algorithm), None);

        // A wrong value in the header is refused and nothing is stored.
        let wrong = checksum_of(&algorithm, b"something else");
        let mut request = s3.put_object().bucket("sums").key(format!("bad/{}", algorithm.as_str()));
        request = match algorithm {
            ChecksumAlgorithm::Crc32 => request.checksum_crc32(wrong),
            ChecksumAlgorithm::Crc32C => request.checksum_crc32_c(wrong),
            ChecksumAlgorithm::Crc64Nvme => request.checksum_crc64_nvme(wrong),
            ChecksumAlgorithm::Sha1 => request.checksum_sha1(wrong),
            _ => request.checksum_sha256(wrong),
        };
        let err = request.body(ByteStream::from(data.clone())).send().await.unwrap_err();
        assert_eq!(code(&err), "BadDigest", "{algorithm:?}");
        let err = s3
            .head_object()
            .bucket("sums")
            .key(format!("bad/{}", algorithm.as_str()))
            .send()
            .await
            .unwrap_err();
        assert_eq!(status(&err), Some(404), "{algorithm:?}: nothing may be stored");
    }

    // A mismatch never replaces an existing object either.
    let err = s3
        .put_object()
        .bucket("sums")
        .key("ok/CRC32")
        .checksum_crc32(checksum_of(&ChecksumAlgorithm::Crc32, b"other"))
        .body(ByteStream::from_static(b"replacement"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "BadDigest");
    let out = s3.get_object().bucket("sums").key("ok/CRC32").send().await.unwrap();
    assert_eq!(out.body.collect().await.unwrap().into_bytes().as_ref(), &data[..]);

    // A value that is not a checksum of that algorithm at all.
    let err = s3
        .put_object()
        .bucket("sums")
        .key("bad/format")
        .checksum_crc32("not-base64!")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "InvalidRequest");
    assert!(!tmp.path().join("buckets/sums/bad").exists());
    server.stop().await;
}

/// Sends `data` as an aws-chunked `STREAMING-UNSIGNED-PAYLOAD-TRAILER` PUT (as current SDKs
/// do) whose trailer carries `trailer_value` for `x-amz-checksum-crc32`.
async fn put_with_trailer(
    server: &Server,
    key: &s3_endpoint::AccessKey,
    path: &str,
    data: &[u8],
    trailer_value: &str,
) -> RawResponse {
    let payload = "STREAMING-UNSIGNED-PAYLOAD-TRAILER";
    let decoded = data.len().to_string();
    let headers = [
        ("content-encoding", "aws-chunked"),
        ("x-amz-content-sha256", payload),
        ("x-amz-decoded-content-length", decoded.as_str()),
        ("x-amz-trailer", "x-amz-checksum-crc32"),
    ];
    let signed = sign_v4(server.addr, key, "PUT", path, &headers, payload);
    let mut body = format!("{:x}\r\n", data.len()).into_bytes();
    body.extend_from_slice(data);
    body.extend_from_slice(
        format!("\r\n0\r\nx-amz-checksum-crc32:{trailer_value}\r\n\r\n").as_bytes(),
    );
    let mut all: Vec<(&str, &str)> = headers.to_vec();
    all.extend(signed.iter().map(|(n, v)| (n.as_str(), v.as_str())));
    raw_request(server.addr, "PUT", path, &all, &body).await
}

#[tokio::test]
async fn aws_chunked_trailer_checksums_are_verified() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("trail", "obc-t").await;
    let s3 = server.client(&key);
    let data = pattern(5, 70_000);

    let good = checksum_of(&ChecksumAlgorithm::Crc32, &data);
    let response = put_with_trailer(&server, &key, "/trail/good", &data, &good).await;
    assert_eq!(response.status, 200, "{}", response.text());
    let head = s3
        .head_object()
        .bucket("trail")
        .key("good")
        .checksum_mode(ChecksumMode::Enabled)
        .send()
        .await
        .unwrap();
    assert_eq!(head.checksum_crc32(), Some(good.as_str()));
    assert_eq!(head.content_length(), Some(data.len() as i64));
    // aws-chunked describes the transfer only; it is not the object's Content-Encoding.
    assert_eq!(head.content_encoding(), None);

    let bad = checksum_of(&ChecksumAlgorithm::Crc32, b"tampered");
    let response = put_with_trailer(&server, &key, "/trail/bad", &data, &bad).await;
    assert_eq!(response.status, 400, "{}", response.text());
    assert_eq!(response.error_code().as_deref(), Some("BadDigest"));
    let err = s3.head_object().bucket("trail").key("bad").send().await.unwrap_err();
    assert_eq!(status(&err), Some(404));
    // Temporary files live one directory down, in the store's temporary directories.
    let shards = std::fs::read_dir(tmp.path().join(".provisioner/tmp")).unwrap();
    let leftovers: usize =
        shards.map(|shard| std::fs::read_dir(shard.unwrap().path()).unwrap().count()).sum();
    assert_eq!(leftovers, 0, "the refused body leaves no temporary file");
    server.stop().await;
}

/// Uploads `sizes` as parts of a new upload of `key` with `algorithm`; returns the upload id,
/// the completed parts (with their checksums) and the whole data.
async fn upload_with_checksums(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    algorithm: &ChecksumAlgorithm,
    kind: Option<ChecksumType>,
    sizes: &[usize],
) -> (String, Vec<CompletedPart>, Vec<u8>) {
    let upload = s3
        .create_multipart_upload()
        .bucket(bucket)
        .key(key)
        .checksum_algorithm(algorithm.clone())
        .set_checksum_type(kind)
        .send()
        .await
        .unwrap();
    let id = upload.upload_id().unwrap().to_owned();
    let (mut parts, mut whole) = (Vec::new(), Vec::new());
    for (i, size) in sizes.iter().enumerate() {
        let number = i as i32 + 1;
        let data = pattern(100 + number as u64, *size);
        whole.extend_from_slice(&data);
        let out = s3
            .upload_part()
            .bucket(bucket)
            .key(key)
            .upload_id(&id)
            .part_number(number)
            .checksum_algorithm(algorithm.clone())
            .body(ByteStream::from(data.clone()))
            .send()
            .await
            .unwrap();
        let part = CompletedPart::builder().part_number(number).e_tag(out.e_tag().unwrap());
        let part = match algorithm {
            ChecksumAlgorithm::Crc32 => {
                part.set_checksum_crc32(out.checksum_crc32().map(str::to_owned))
            }
            ChecksumAlgorithm::Crc32C => {
                part.set_checksum_crc32_c(out.checksum_crc32_c().map(str::to_owned))
            }
            ChecksumAlgorithm::Crc64Nvme => {
                part.set_checksum_crc64_nvme(out.checksum_crc64_nvme().map(str::to_owned))
            }
            ChecksumAlgorithm::Sha1 => {
                part.set_checksum_sha1(out.checksum_sha1().map(str::to_owned))
            }
            _ => part.set_checksum_sha256(out.checksum_sha256().map(str::to_owned)),
        };
        assert!(
            out.checksum_crc32()
                .or(out.checksum_crc32_c())
                .or(out.checksum_crc64_nvme())
                .or(out.checksum_sha1())
                .or(out.checksum_sha256())
                == Some(checksum_of(algorithm, &data).as_str()),
            "part {number} answers its checksum"
        );
        parts.push(part.build());
    }
    (id, parts, whole)
}

#[tokio::test]
async fn multipart_checksums_composite_and_full_object() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("mpsum", "obc-m").await;
    let s3 = server.client(&key);
    let sizes = [PART, 1234];

    // SHA-256 parts: the object's checksum is the composite of the parts' checksums.
    let algorithm = ChecksumAlgorithm::Sha256;
    let (id, parts, whole) =
        upload_with_checksums(&s3, "mpsum", "composite", &algorithm, None, &sizes).await;
    // A part named with a checksum it does not have is refused.
    let mut forged = parts.clone();
    forged[1] = CompletedPart::builder()
        .part_number(2)
        .e_tag(parts[1].e_tag().unwrap())
        .checksum_sha256(checksum_of(&algorithm, b"not the part"))
        .build();
    let err = s3
        .complete_multipart_upload()
        .bucket("mpsum")
        .key("composite")
        .upload_id(&id)
        .multipart_upload(CompletedMultipartUpload::builder().set_parts(Some(forged)).build())
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "InvalidPart");
    let done = s3
        .complete_multipart_upload()
        .bucket("mpsum")
        .key("composite")
        .upload_id(&id)
        .multipart_upload(
            CompletedMultipartUpload::builder().set_parts(Some(parts.clone())).build(),
        )
        .send()
        .await
        .unwrap();
    let mut of_parts = Vec::new();
    for (i, size) in sizes.iter().enumerate() {
        of_parts.extend(raw_checksum(&algorithm, &pattern(101 + i as u64, *size)));
    }
    let composite = format!("{}-2", checksum_of(&algorithm, &of_parts));
    assert_eq!(done.checksum_sha256(), Some(composite.as_str()));
    let head = s3
        .head_object()
        .bucket("mpsum")
        .key("composite")
        .checksum_mode(ChecksumMode::Enabled)
        .send()
        .await
        .unwrap();
    assert_eq!(head.checksum_sha256(), Some(composite.as_str()));
    assert_eq!(head.checksum_type(), Some(&ChecksumType::Composite));

    // GetObjectAttributes: the checksum, the size and each part with its checksum.
    let attrs = s3
        .get_object_attributes()
        .bucket("mpsum")
        .key("composite")
        .object_attributes(ObjectAttributes::Checksum)
        .object_attributes(ObjectAttributes::ObjectParts)
        .object_attributes(ObjectAttributes::ObjectSize)
        .object_attributes(ObjectAttributes::Etag)
        .send()
        .await
        .unwrap();
    assert_eq!(attrs.object_size(), Some(whole.len() as i64));
    assert_eq!(attrs.checksum().and_then(|c| c.checksum_sha256()), Some(composite.as_str()));
    assert_eq!(attrs.checksum().and_then(|c| c.checksum_type()), Some(&ChecksumType::Composite));
    let object_parts = attrs.object_parts().unwrap();
    assert_eq!(object_parts.total_parts_count(), Some(2));
    let listed: Vec<_> = object_parts
        .parts()
        .iter()
        .map(|p| (p.part_number(), p.size(), p.checksum_sha256().map(str::to_owned)))
        .collect();
    assert_eq!(
        listed,
        [
            (Some(1), Some(PART as i64), Some(checksum_of(&algorithm, &pattern(101, PART)))),
            (Some(2), Some(1234), Some(checksum_of(&algorithm, &pattern(102, 1234)))),
        ]
    );

    // CRC64NVME: a whole-object checksum, combined from the parts without a second read.
    let algorithm = ChecksumAlgorithm::Crc64Nvme;
    let (id, parts, whole) = upload_with_checksums(
        &s3,
        "mpsum",
        "full",
        &algorithm,
        Some(ChecksumType::FullObject),
        &sizes,
    )
    .await;
    let done = s3
        .complete_multipart_upload()
        .bucket("mpsum")
        .key("full")
        .upload_id(&id)
        .multipart_upload(CompletedMultipartUpload::builder().set_parts(Some(parts)).build())
        .send()
        .await
        .unwrap();
    assert_eq!(done.checksum_crc64_nvme(), Some(checksum_of(&algorithm, &whole).as_str()));
    assert_eq!(done.checksum_type(), Some(&ChecksumType::FullObject));
    // The SDK validates the whole body against it.
    let got = s3
        .get_object()
        .bucket("mpsum")
        .key("full")
        .checksum_mode(ChecksumMode::Enabled)
        .send()
        .await
        .unwrap();
    assert_eq!(got.checksum_crc64_nvme(), Some(checksum_of(&algorithm, &whole).as_str()));
    assert_eq!(got.body.collect().await.unwrap().into_bytes().len(), whole.len());

    // A part checksum of another algorithm than the upload's is refused.
    let upload = s3
        .create_multipart_upload()
        .bucket("mpsum")
        .key("mixed")
        .checksum_algorithm(ChecksumAlgorithm::Crc32)
        .send()
        .await
        .unwrap();
    let err = s3
        .upload_part()
        .bucket("mpsum")
        .key("mixed")
        .upload_id(upload.upload_id().unwrap())
        .part_number(1)
        .checksum_sha1(checksum_of(&ChecksumAlgorithm::Sha1, b"x"))
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "InvalidRequest");
    // A wrong part checksum is BadDigest and stores no part.
    let err = s3
        .upload_part()
        .bucket("mpsum")
        .key("mixed")
        .upload_id(upload.upload_id().unwrap())
        .part_number(1)
        .checksum_crc32(checksum_of(&ChecksumAlgorithm::Crc32, b"y"))
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "BadDigest");
    let listed = s3
        .list_parts()
        .bucket("mpsum")
        .key("mixed")
        .upload_id(upload.upload_id().unwrap())
        .send()
        .await
        .unwrap();
    assert!(listed.parts().is_empty());
    assert_eq!(listed.checksum_algorithm(), Some(&ChecksumAlgorithm::Crc32));
    server.stop().await;
}

#[tokio::test]
async fn get_object_by_part_number() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("parts", "obc-p").await;
    let s3 = server.client(&key);
    let sizes = [PART, PART + 17, 999];
    let (id, parts, whole) =
        upload_with_checksums(&s3, "parts", "big", &ChecksumAlgorithm::Crc32, None, &sizes).await;
    let done = s3
        .complete_multipart_upload()
        .bucket("parts")
        .key("big")
        .upload_id(&id)
        .multipart_upload(CompletedMultipartUpload::builder().set_parts(Some(parts)).build())
        .send()
        .await
        .unwrap();

    let mut offset = 0;
    for (i, size) in sizes.iter().enumerate() {
        let number = i as i32 + 1;
        // With ChecksumMode the part's own checksum comes back, and the SDK checks the bytes.
        let out = s3
            .get_object()
            .bucket("parts")
            .key("big")
            .part_number(number)
            .checksum_mode(ChecksumMode::Enabled)
            .send()
            .await
            .unwrap();
        let out_checksum = out.checksum_crc32().map(str::to_owned);
        assert_eq!(
            out_checksum,
            Some(checksum_of(&ChecksumAlgorithm::Crc32, &whole[offset..offset + size])),
            "part {number}"
        );
        assert_eq!(out.parts_count(), Some(3), "part {number}");
        assert_eq!(out.content_length(), Some(*size as i64), "part {number}");
        assert_eq!(
            out.content_range(),
            Some(format!("bytes {offset}-{}/{}", offset + size - 1, whole.len()).as_str())
        );
        assert_eq!(out.e_tag(), done.e_tag(), "the ETag is the object's");
        let bytes = out.body.collect().await.unwrap().into_bytes();
        assert_eq!(bytes.as_ref(), &whole[offset..offset + size], "part {number}");
        let head = s3
            .head_object()
            .bucket("parts")
            .key("big")
            .part_number(number)
            .checksum_mode(ChecksumMode::Enabled)
            .send()
            .await
            .unwrap();
        assert_eq!(head.content_length(), Some(*size as i64));
        assert_eq!(head.checksum_crc32(), out_checksum.as_deref(), "part {number}");
        assert_eq!(head.parts_count(), Some(3));
        offset += size;
    }
    // The same through the raw protocol: 206 and x-amz-mp-parts-count.
    let head = s3.head_object().bucket("parts").key("big").part_number(2).send().await.unwrap();
    assert_eq!(head.parts_count(), Some(3));

    let err = s3.get_object().bucket("parts").key("big").part_number(4).send().await.unwrap_err();
    assert_eq!(code(&err), "InvalidPartNumber");
    assert_eq!(status(&err), Some(416));
    let err = s3
        .get_object()
        .bucket("parts")
        .key("big")
        .part_number(1)
        .range("bytes=0-1")
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "InvalidRequest");

    // A simple object is its own part 1.
    s3.put_object()
        .bucket("parts")
        .key("small")
        .body(ByteStream::from_static(b"single"))
        .send()
        .await
        .unwrap();
    let out = s3.get_object().bucket("parts").key("small").part_number(1).send().await.unwrap();
    assert_eq!(out.body.collect().await.unwrap().into_bytes().as_ref(), b"single");
    let err = s3.get_object().bucket("parts").key("small").part_number(2).send().await.unwrap_err();
    assert_eq!(code(&err), "InvalidPartNumber");
    server.stop().await;
}

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
async fn conditional_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("cond", "obc-c").await;
    let s3 = server.client(&key);
    let put = s3
        .put_object()
        .bucket("cond")
        .key("k")
        .body(ByteStream::from_static(b"versioned by etag"))
        .send()
        .await
        .unwrap();
    let tag = put.e_tag().unwrap().to_owned();
    let head = s3.head_object().bucket("cond").key("k").send().await.unwrap();
    let modified = head.last_modified().unwrap().to_owned();
    let secs = |offset: i64| aws_sdk_s3::primitives::DateTime::from_secs(modified.secs() + offset);

    // If-Match.
    let out = s3.get_object().bucket("cond").key("k").if_match(&tag).send().await.unwrap();
    assert_eq!(out.e_tag(), Some(tag.as_str()));
    s3.get_object().bucket("cond").key("k").if_match("*").send().await.unwrap();
    let err =
        s3.get_object().bucket("cond").key("k").if_match("\"nope\"").send().await.unwrap_err();
    assert_eq!(status(&err), Some(412));
    assert_eq!(code(&err), "PreconditionFailed");
    // If-None-Match.
    let err = s3.get_object().bucket("cond").key("k").if_none_match(&tag).send().await.unwrap_err();
    assert_eq!(status(&err), Some(304));
    let err =
        s3.head_object().bucket("cond").key("k").if_none_match(&tag).send().await.unwrap_err();
    assert_eq!(status(&err), Some(304));
    s3.get_object().bucket("cond").key("k").if_none_match("\"other\"").send().await.unwrap();
    // If-Modified-Since / If-Unmodified-Since, at second resolution.
    let err = s3
        .get_object()
        .bucket("cond")
        .key("k")
        .if_modified_since(secs(0))
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&err), Some(304));
    s3.get_object().bucket("cond").key("k").if_modified_since(secs(-60)).send().await.unwrap();
    s3.get_object().bucket("cond").key("k").if_unmodified_since(secs(0)).send().await.unwrap();
    let err = s3
        .head_object()
        .bucket("cond")
        .key("k")
        .if_unmodified_since(secs(-60))
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&err), Some(412));
    // Precedence: a matching If-Match wins over a failing If-Unmodified-Since, and a matching
    // If-None-Match over a passing If-Modified-Since.
    s3.get_object()
        .bucket("cond")
        .key("k")
        .if_match(&tag)
        .if_unmodified_since(secs(-60))
        .send()
        .await
        .unwrap();
    let err = s3
        .get_object()
        .bucket("cond")
        .key("k")
        .if_none_match(&tag)
        .if_modified_since(secs(-60))
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&err), Some(304));
    server.stop().await;
}

#[tokio::test]
async fn conditional_writes_are_atomic() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("locks", "obc-l").await;
    let s3 = server.client(&key);

    let first = s3
        .put_object()
        .bucket("locks")
        .key("lock")
        .if_none_match("*")
        .body(ByteStream::from_static(b"first"))
        .send()
        .await
        .unwrap();
    let err = s3
        .put_object()
        .bucket("locks")
        .key("lock")
        .if_none_match("*")
        .body(ByteStream::from_static(b"second"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&err), Some(412));
    assert_eq!(code(&err), "PreconditionFailed");
    // If-Match swaps only the version the writer saw.
    let err = s3
        .put_object()
        .bucket("locks")
        .key("lock")
        .if_match("\"00000000000000000000000000000000\"")
        .body(ByteStream::from_static(b"stale"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&err), Some(412));
    s3.put_object()
        .bucket("locks")
        .key("lock")
        .if_match(first.e_tag().unwrap())
        .body(ByteStream::from_static(b"swapped"))
        .send()
        .await
        .unwrap();
    let out = s3.get_object().bucket("locks").key("lock").send().await.unwrap();
    assert_eq!(out.body.collect().await.unwrap().into_bytes().as_ref(), b"swapped");
    let err = s3
        .put_object()
        .bucket("locks")
        .key("absent")
        .if_match(first.e_tag().unwrap())
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&err), "NoSuchKey");

    // If-None-Match with an ETag writes unless the current object has that ETag.
    let current = s3.head_object().bucket("locks").key("lock").send().await.unwrap();
    let err = s3
        .put_object()
        .bucket("locks")
        .key("lock")
        .if_none_match(current.e_tag().unwrap())
        .body(ByteStream::from_static(b"unchanged"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&err), Some(412));

    // Many writers racing for one lock object: exactly one wins.
    let mut racers = Vec::new();
    for i in 0..12 {
        let s3 = s3.clone();
        racers.push(tokio::spawn(async move {
            s3.put_object()
                .bucket("locks")
                .key("race")
                .if_none_match("*")
                .body(ByteStream::from(format!("writer {i}").into_bytes()))
                .send()
                .await
                .map(|_| i)
        }));
    }
    let mut winners = Vec::new();
    for racer in racers {
        match racer.await.unwrap() {
            Ok(i) => winners.push(i),
            Err(e) => assert_eq!(status(&e), Some(412)),
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let out = s3.get_object().bucket("locks").key("race").send().await.unwrap();
    let text = out.body.collect().await.unwrap().into_bytes();
    assert_eq!(text.as_ref(), format!("writer {}", winners[0]).as_bytes());

    // CompleteMultipartUpload honours If-None-Match too, and leaves the object alone.
    let upload = s3.create_multipart_upload().bucket("locks").key("lock").send().await.unwrap();
    let id = upload.upload_id().unwrap();
    let part = s3
        .upload_part()
        .bucket("locks")
        .key("lock")
        .upload_id(id)
        .part_number(1)
        .body(ByteStream::from_static(b"multipart"))
        .send()
        .await
        .unwrap();
    let complete = CompletedMultipartUpload::builder()
        .parts(CompletedPart::builder().part_number(1).e_tag(part.e_tag().unwrap()).build())
        .build();
    let err = s3
        .complete_multipart_upload()
        .bucket("locks")
        .key("lock")
        .upload_id(id)
        .if_none_match("*")
        .multipart_upload(complete.clone())
        .send()
        .await
        .unwrap_err();
    assert_eq!(status(&err), Some(412));
    let out = s3.get_object().bucket("locks").key("lock").send().await.unwrap();
    assert_eq!(out.body.collect().await.unwrap().into_bytes().as_ref(), b"swapped");
    let current = s3.head_object().bucket("locks").key("lock").send().await.unwrap();
    s3.complete_multipart_upload()
        .bucket("locks")
        .key("lock")
        .upload_id(id)
        .if_match(current.e_tag().unwrap())
        .multipart_upload(complete)
        .send()
        .await
        .unwrap();
    let out = s3.get_object().bucket("locks").key("lock").send().await.unwrap();
    assert_eq!(out.body.collect().await.unwrap().into_bytes().as_ref(), b"multipart");
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
    let admin = common::client_for(server.addr, "operator", "operator-secret");
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
