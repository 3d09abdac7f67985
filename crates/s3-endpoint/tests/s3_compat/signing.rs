//! Signatures as clients send them: SigV2 and SigV4 dates, and presigned URLs.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;

use crate::common::{RawResponse, Server, http_date, raw_request, sign_v2};

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
    // The week holds for SigV2 too: an `Expires` years ahead is refused, one a week ahead works.
    let week_v2 = presign_v2(unix_now + 604_800 - 60);
    assert_eq!(raw_request(server.addr, "GET", &week_v2, &[], b"").await.status, 200);
    let year_2100 = presign_v2(4_102_444_800);
    let response = raw_request(server.addr, "GET", &year_2100, &[], b"").await;
    assert_eq!(response.status, 403, "{}", response.text());
    assert_eq!(response.error_code().as_deref(), Some("AccessDenied"));

    // The parameter's name percent-encoded is the same parameter, with a valid signature.
    let encoded = presign_v4(&server, &key, "/signed/k", now, Duration::from_secs(99_999_999))
        .replace("X-Amz-Expires=", "X%2DAmz%2DExpires=");
    assert!(encoded.contains("X%2DAmz%2DExpires=99999999"), "{encoded}");
    let response = raw_request(server.addr, "GET", &encoded, &[], b"").await;
    assert_eq!(response.status, 403, "{}", response.text());
    assert_eq!(response.error_code().as_deref(), Some("AuthorizationQueryParametersError"));

    server.stop().await;
}
