//! S3 protocol rules as clients rely on them, checked with the AWS SDK (or, where the SDK
//! cannot send the request, a hand-signed one) over loopback.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use common::{RawResponse, Server, http_date, raw_request, sign_v2};

/// A SigV2 header-signed GET of `/bucket/key` with the given date headers.
async fn sig_v2_get(
    server: &Server,
    key: &hostpath_provisioner::AccessKey,
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

    // No date, an unreadable one or one before 1970: S3 refuses to authenticate.
    for date in [None, Some("yesterday"), Some("Tue, 07 Jul 1950 21:53:04 GMT")] {
        let response = sig_v2_get(&server, &key, "/clock/k", date, None).await;
        assert_eq!(response.status, 403, "{date:?}: {}", response.text());
        assert_eq!(response.error_code().as_deref(), Some("AccessDenied"), "{date:?}");
    }
    server.stop().await;
}

/// A presigned SigV4 GET URL valid for `expires_in` from `signed_at`, signed without the
/// SDK's own one-week ceiling so that longer lifetimes can be sent.
fn presign_v4(
    server: &Server,
    key: &hostpath_provisioner::AccessKey,
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
    assert_eq!(response.status, 400, "{}", response.text());
    assert_eq!(response.error_code().as_deref(), Some("AuthorizationQueryParametersError"));

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
