//! Bucket CORS: rules set, read and removed through the SDK and refused as S3 refuses them; a
//! browser's preflight and its actual (presigned) requests answered per the rules, headers
//! checked exactly, off the wire; the rules kept across a restart and gone with the bucket.

use std::time::Duration;

use aws_sdk_s3::Client;
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CorsConfiguration, CorsRule};

use crate::common::{RawResponse, Server, code, raw_request};

const APP: &str = "https://app.example.com";

/// Two rules: uploads from the app (with the headers it sends), reads from any subdomain.
fn rules() -> CorsConfiguration {
    let upload = CorsRule::builder()
        .id("uploads")
        .allowed_origins(APP)
        .allowed_methods("PUT")
        .allowed_methods("POST")
        .allowed_headers("content-type")
        .allowed_headers("x-amz-*")
        .expose_headers("ETag")
        .expose_headers("x-amz-request-id")
        .max_age_seconds(3000)
        .build()
        .unwrap();
    let reads = CorsRule::builder()
        .allowed_origins("https://*.example.com")
        .allowed_methods("GET")
        .allowed_methods("HEAD")
        .build()
        .unwrap();
    let public = CorsRule::builder().allowed_origins("*").allowed_methods("GET").build().unwrap();
    CorsConfiguration::builder()
        .cors_rules(upload)
        .cors_rules(reads)
        .cors_rules(public)
        .build()
        .unwrap()
}

/// A browser's preflight: no signature, only what a browser sends.
async fn preflight(
    server: &Server,
    path: &str,
    origin: &str,
    method: &str,
    headers: Option<&str>,
) -> RawResponse {
    let mut sent = vec![("Origin", origin), ("Access-Control-Request-Method", method)];
    if let Some(headers) = headers {
        sent.push(("Access-Control-Request-Headers", headers));
    }
    raw_request(server.addr, "OPTIONS", path, &sent, b"").await
}

/// The `Access-Control-*` and `Vary` headers of a response, sorted by name.
fn cors_headers(response: &RawResponse) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = response
        .headers
        .iter()
        .filter(|(n, _)| n.starts_with("access-control-") || n == "vary")
        .cloned()
        .collect();
    found.sort();
    found
}

fn expected(list: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut list: Vec<(String, String)> =
        list.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect();
    list.sort();
    list
}

const VARY: (&str, &str) =
    ("vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method");

#[tokio::test]
async fn rules_round_trip_and_are_refused_as_s3_refuses_them() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("web", "obc-w").await;
    let s3 = server.client(&key);
    let err = s3.get_bucket_cors().bucket("web").send().await.unwrap_err();
    assert_eq!(code(&err), "NoSuchCORSConfiguration");
    s3.put_bucket_cors().bucket("web").cors_configuration(rules()).send().await.unwrap();
    let got = s3.get_bucket_cors().bucket("web").send().await.unwrap();
    assert_eq!(got.cors_rules(), rules().cors_rules());

    let bad = |rule: CorsRule| CorsConfiguration::builder().cors_rules(rule).build().unwrap();
    let rule = || CorsRule::builder().allowed_origins("*").allowed_methods("GET");
    let cases = [
        ("PATCH", bad(rule().allowed_methods("PATCH").build().unwrap()), "InvalidRequest"),
        (
            "get",
            bad(CorsRule::builder().allowed_origins("*").allowed_methods("get").build().unwrap()),
            "InvalidRequest",
        ),
        (
            "two wildcards",
            bad(CorsRule::builder()
                .allowed_origins("https://*.*.example")
                .allowed_methods("GET")
                .build()
                .unwrap()),
            "InvalidRequest",
        ),
        (
            "header wildcards",
            bad(rule().allowed_headers("x-*-*").build().unwrap()),
            "InvalidRequest",
        ),
        ("long id", bad(rule().id("i".repeat(256)).build().unwrap()), "InvalidArgument"),
        (
            "101 rules",
            CorsConfiguration::builder()
                .set_cors_rules(Some(vec![rule().build().unwrap(); 101]))
                .build()
                .unwrap(),
            "MalformedXML",
        ),
    ];
    for (what, config, wanted) in cases {
        let err = s3.put_bucket_cors().bucket("web").cors_configuration(config).send().await;
        assert_eq!(code(&err.unwrap_err()), wanted, "{what}");
    }
    let got = s3.get_bucket_cors().bucket("web").send().await.unwrap();
    assert_eq!(got.cors_rules(), rules().cors_rules(), "refusals changed nothing");
    let hundred = CorsConfiguration::builder()
        .set_cors_rules(Some(vec![rule().build().unwrap(); 100]))
        .build()
        .unwrap();
    s3.put_bucket_cors().bucket("web").cors_configuration(hundred).send().await.unwrap();

    s3.delete_bucket_cors().bucket("web").send().await.unwrap();
    let err = s3.get_bucket_cors().bucket("web").send().await.unwrap_err();
    assert_eq!(code(&err), "NoSuchCORSConfiguration");
    server.stop().await;
}

#[tokio::test]
async fn a_browser_preflight_is_answered_per_the_rules() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("web", "obc-w").await;
    let s3 = server.client(&key);

    // No rules yet: refused, as S3 refuses it.
    let none = preflight(&server, "/web/upload.bin", APP, "PUT", None).await;
    assert_eq!(none.status, 403, "{}", none.text());
    assert_eq!(none.error_code().as_deref(), Some("AccessForbidden"));
    assert!(none.text().contains("CORS is not enabled for this bucket"), "{}", none.text());

    s3.put_bucket_cors().bucket("web").cors_configuration(rules()).send().await.unwrap();
    let upload =
        preflight(&server, "/web/upload.bin", APP, "PUT", Some("Content-Type, X-Amz-Date")).await;
    assert_eq!(upload.status, 200, "{}", upload.text());
    assert_eq!(
        cors_headers(&upload),
        expected(&[
            ("access-control-allow-origin", APP),
            ("access-control-allow-credentials", "true"),
            ("access-control-allow-methods", "PUT, POST"),
            ("access-control-allow-headers", "content-type, x-amz-date"),
            ("access-control-expose-headers", "ETag, x-amz-request-id"),
            ("access-control-max-age", "3000"),
            VARY,
        ])
    );
    assert!(upload.header("x-amz-request-id").is_some());
    assert!(upload.body.is_empty());

    // The second rule, by subdomain.
    let read = preflight(&server, "/web/page.html", "https://cdn.example.com", "GET", None).await;
    assert_eq!(read.status, 200, "{}", read.text());
    assert_eq!(
        cors_headers(&read),
        expected(&[
            ("access-control-allow-origin", "https://cdn.example.com"),
            ("access-control-allow-credentials", "true"),
            ("access-control-allow-methods", "GET, HEAD"),
            VARY,
        ])
    );
    // The third, for anyone: `*`, and no credentials.
    let public = preflight(&server, "/web/page.html", "https://elsewhere.org", "GET", None).await;
    assert_eq!(
        cors_headers(&public),
        expected(&[
            ("access-control-allow-origin", "*"),
            ("access-control-allow-methods", "GET"),
            VARY
        ])
    );

    // Refused: a header no rule allows, a method no rule allows for the origin, an origin
    // differing in case.
    for (origin, method, headers) in [
        (APP, "PUT", Some("authorization")),
        ("https://elsewhere.org", "DELETE", None),
        ("https://APP.example.com", "PUT", None),
    ] {
        let refused = preflight(&server, "/web/k", origin, method, headers).await;
        assert_eq!(refused.status, 403, "{origin} {method} {headers:?}");
        assert_eq!(refused.error_code().as_deref(), Some("AccessForbidden"));
        assert!(refused.text().contains("CORSResponse: This CORS request is not allowed"));
        assert!(cors_headers(&refused).is_empty());
    }
    // Not a preflight at all.
    let bare = raw_request(server.addr, "OPTIONS", "/web/k", &[("Origin", APP)], b"").await;
    assert_eq!(bare.status, 400, "{}", bare.text());
    let bare = raw_request(
        server.addr,
        "OPTIONS",
        "/web/k",
        &[("Access-Control-Request-Method", "GET")],
        b"",
    )
    .await;
    assert_eq!(bare.status, 400, "{}", bare.text());
    let missing = preflight(&server, "/no-such-bucket/k", APP, "PUT", None).await;
    assert_eq!(missing.status, 403, "{}", missing.text());
    server.stop().await;
}

/// The path and query of a presigned URL, as a page would fetch it.
fn path_of(uri: &str, server: &Server) -> String {
    uri.strip_prefix(&format!("http://{}", server.addr)).unwrap().to_owned()
}

async fn presigned_get(s3: &Client, server: &Server, key: &str) -> String {
    let config = PresigningConfig::expires_in(Duration::from_secs(300)).unwrap();
    let request = s3.get_object().bucket("web").key(key).presigned(config).await.unwrap();
    path_of(request.uri(), server)
}

#[tokio::test]
async fn actual_cross_origin_requests_get_the_headers_of_their_rule() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(tmp.path()).await;
    let key = server.bucket_with_key("web", "obc-w").await;
    let s3 = server.client(&key);
    s3.put_bucket_cors().bucket("web").cors_configuration(rules()).send().await.unwrap();

    // A browser upload with a presigned PUT URL.
    let config = PresigningConfig::expires_in(Duration::from_secs(300)).unwrap();
    let put = s3.put_object().bucket("web").key("from-browser").presigned(config).await.unwrap();
    let path = path_of(put.uri(), &server);
    let uploaded = raw_request(server.addr, "PUT", &path, &[("Origin", APP)], b"hello").await;
    assert_eq!(uploaded.status, 200, "{}", uploaded.text());
    assert_eq!(
        cors_headers(&uploaded),
        expected(&[
            ("access-control-allow-origin", APP),
            ("access-control-allow-credentials", "true"),
            ("access-control-allow-methods", "PUT, POST"),
            ("access-control-expose-headers", "ETag, x-amz-request-id"),
            ("access-control-max-age", "3000"),
            VARY,
        ])
    );
    let path = presigned_get(&s3, &server, "from-browser").await;
    let read =
        raw_request(server.addr, "GET", &path, &[("Origin", "https://cdn.example.com")], b"").await;
    assert_eq!((read.status, read.body.as_slice()), (200, &b"hello"[..]));
    assert_eq!(read.header("access-control-allow-origin"), Some("https://cdn.example.com"));
    // No Origin: not a cross-origin request, no CORS headers.
    let plain = raw_request(server.addr, "GET", &path, &[], b"").await;
    assert_eq!(plain.status, 200);
    assert!(cors_headers(&plain).is_empty(), "{:?}", plain.headers);
    // An origin no rule allows for DELETE: the request is served, the browser gets no headers.
    s3.put_object()
        .bucket("web")
        .key("gone")
        .body(ByteStream::from_static(b"x"))
        .send()
        .await
        .unwrap();
    let config = PresigningConfig::expires_in(Duration::from_secs(300)).unwrap();
    let delete = s3.delete_object().bucket("web").key("gone").presigned(config).await.unwrap();
    let path = path_of(delete.uri(), &server);
    let deleted =
        raw_request(server.addr, "DELETE", &path, &[("Origin", "https://evil.example.org")], b"")
            .await;
    assert_eq!(deleted.status, 204);
    assert!(cors_headers(&deleted).is_empty(), "{:?}", deleted.headers);
    server.stop().await;
}

#[tokio::test]
async fn rules_outlive_a_restart_and_go_with_their_bucket() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, admin) =
        Server::start_with_admin(tmp.path(), "OPERATORKEY", "operator-secret-1234").await;
    admin.create_bucket().bucket("site").send().await.unwrap();
    admin.put_bucket_cors().bucket("site").cors_configuration(rules()).send().await.unwrap();
    server.stop().await;

    let (server, admin) =
        Server::start_with_admin(tmp.path(), "OPERATORKEY", "operator-secret-1234").await;
    let got = admin.get_bucket_cors().bucket("site").send().await.unwrap();
    assert_eq!(got.cors_rules(), rules().cors_rules());
    let answered = preflight(&server, "/site/k", APP, "POST", None).await;
    assert_eq!(answered.status, 200, "{}", answered.text());

    admin.delete_bucket().bucket("site").send().await.unwrap();
    admin.create_bucket().bucket("site").send().await.unwrap();
    let err = admin.get_bucket_cors().bucket("site").send().await.unwrap_err();
    assert_eq!(code(&err), "NoSuchCORSConfiguration", "a new bucket of the name has no rules");
    let refused = preflight(&server, "/site/k", APP, "POST", None).await;
    assert_eq!(refused.status, 403);
    server.stop().await;
}
