//! `AssumeRoleWithWebIdentity` on the endpoint, through the AWS SDK's STS client, and the
//! session keys it grants through the S3 client: what each grants, what each refusal answers,
//! and that revoking or narrowing the role reaches sessions on their next request. Tokens are
//! vouched for by a verifier of the test's own; the apiserver's `TokenReview` is tested with the
//! hostPath provisioner on a real control plane.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_sdk_s3::config::{Credentials, Region};
use aws_sdk_s3::primitives::ByteStream;
use common::{Server, client_for, code};
use s3_endpoint::store::{KeyMode, WebIdentityAccess};
use s3_endpoint::sts::{IdentityVerifier, Unverified, VerifiedIdentity};
use s3_endpoint::{BucketStore, s3};
use tokio::sync::oneshot;

const APP: &str = "system:serviceaccount:team-a:app";
const OTHER: &str = "system:serviceaccount:team-b:app";

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// Vouches for the tokens it was given; `down` for every token when the provider is down.
struct Tokens(HashMap<&'static str, Result<VerifiedIdentity, Unverified>>);

#[async_trait::async_trait]
impl IdentityVerifier for Tokens {
    async fn verify(&self, token: &str) -> Result<VerifiedIdentity, Unverified> {
        self.0.get(token).cloned().unwrap_or_else(|| Err(Unverified::Invalid("unknown".into())))
    }
}

fn identity(subject: &str, lifetime: u64) -> Result<VerifiedIdentity, Unverified> {
    Ok(VerifiedIdentity {
        subject: subject.into(),
        audience: "bucket-provisioner".into(),
        expires_unix: now() + lifetime,
        uid: Some(format!("uid-of-{subject}")),
    })
}

fn tokens() -> Tokens {
    Tokens(HashMap::from([
        ("app", identity(APP, 3600)),
        ("app-short", identity(APP, 120)),
        ("other", identity(OTHER, 3600)),
        ("expired", Err(Unverified::Expired)),
        ("down", Err(Unverified::Unreachable("connection refused".into()))),
    ]))
}

async fn start(root: &std::path::Path) -> (Server, oneshot::Sender<()>) {
    let store = Arc::new(BucketStore::open(root.to_owned(), "test-identity").unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let endpoint = s3::service(store.clone()).web_identity(Arc::new(tokens()));
    tokio::spawn(s3::serve_endpoint(listener, endpoint, async move {
        let _ = stopped.await;
    }));
    (Server::unmanaged(addr, store), stop)
}

fn sts(server: &Server) -> aws_sdk_sts::Client {
    let config = aws_sdk_sts::Config::builder()
        .behavior_version_latest()
        .region(aws_sdk_sts::config::Region::new("us-east-1"))
        .endpoint_url(format!("http://{}", server.addr))
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .build();
    aws_sdk_sts::Client::from_conf(config)
}

fn role(user: &str) -> String {
    format!("arn:aws:iam::000000000000:role/{user}")
}

/// A bucket `bucket` of claim `user` whose key admits `APP`.
async fn claim(server: &Server, bucket: &str, user: &str) {
    server.bucket_with_key(bucket, user).await;
    let access = WebIdentityAccess { subjects: vec![APP.into()], ..Default::default() };
    server.store.set_web_identity(user, bucket, Some(access)).await.unwrap();
}

type Assumed =
    aws_sdk_sts::operation::assume_role_with_web_identity::AssumeRoleWithWebIdentityOutput;

async fn assume(
    server: &Server,
    user: &str,
    token: &str,
    duration: Option<i32>,
) -> Result<Assumed, String> {
    sts(server)
        .assume_role_with_web_identity()
        .role_arn(role(user))
        .role_session_name("pod-1")
        .web_identity_token(token)
        .set_duration_seconds(duration)
        .send()
        .await
        .map_err(|e| code(&e))
}

/// An S3 client signing with the session's key and, unless `token` says otherwise, its token.
fn session_client(server: &Server, assumed: &Assumed, token: Option<&str>) -> aws_sdk_s3::Client {
    let c = assumed.credentials().unwrap();
    let token = token.map(str::to_owned).unwrap_or_else(|| c.session_token().to_owned());
    let token = Some(token).filter(|t| !t.is_empty());
    let credentials =
        Credentials::new(c.access_key_id(), c.secret_access_key(), token, None, "session");
    let config = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .region(Region::new("us-east-1"))
        .endpoint_url(format!("http://{}", server.addr))
        .force_path_style(true)
        .credentials_provider(credentials)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

async fn put(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<(), String> {
    let body = ByteStream::from_static(b"data");
    s3.put_object()
        .bucket(bucket)
        .key(key)
        .body(body)
        .send()
        .await
        .map(|_| ())
        .map_err(|e| code(&e))
}

async fn get(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<Vec<u8>, String> {
    let out = s3.get_object().bucket(bucket).key(key).send().await.map_err(|e| code(&e))?;
    Ok(out.body.collect().await.unwrap().into_bytes().to_vec())
}

#[tokio::test]
async fn an_admitted_token_gets_a_session_of_its_claims_bucket_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _stop) = start(dir.path()).await;
    claim(&server, "bucket-a", "obc-a").await;
    server.bucket_with_key("bucket-b", "obc-b").await;

    let assumed = assume(&server, "obc-a", "app", None).await.unwrap();
    let credentials = assumed.credentials().unwrap();
    assert!(credentials.access_key_id().starts_with("ASIA"));
    let expires = credentials.expiration().secs() as u64;
    assert!((now() + 3500..=now() + 3600).contains(&expires), "one hour by default: {expires}");
    assert_eq!(assumed.subject_from_web_identity_token(), Some(APP));

    let s3 = session_client(&server, &assumed, None);
    put(&s3, "bucket-a", "k").await.unwrap();
    assert_eq!(get(&s3, "bucket-a", "k").await.unwrap(), b"data");
    let listed = s3.list_objects_v2().bucket("bucket-a").send().await.unwrap();
    assert_eq!(listed.key_count(), Some(1));
    assert_eq!(put(&s3, "bucket-b", "k").await.unwrap_err(), "AccessDenied");
    assert_eq!(get(&s3, "bucket-b", "k").await.unwrap_err(), "AccessDenied");
    let buckets = s3.list_buckets().send().await.unwrap();
    let names: Vec<_> = buckets.buckets().iter().filter_map(|b| b.name()).collect();
    assert_eq!(names, ["bucket-a"]);
}

#[tokio::test]
async fn a_session_key_without_its_token_or_with_another_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _stop) = start(dir.path()).await;
    claim(&server, "bucket-a", "obc-a").await;
    let assumed = assume(&server, "obc-a", "app", None).await.unwrap();
    let other = assume(&server, "obc-a", "app", None).await.unwrap();
    let without = session_client(&server, &assumed, Some(""));
    assert_eq!(put(&without, "bucket-a", "k").await.unwrap_err(), "AccessDenied");
    let foreign = other.credentials().unwrap().session_token().to_owned();
    let swapped = session_client(&server, &assumed, Some(&foreign));
    assert_eq!(put(&swapped, "bucket-a", "k").await.unwrap_err(), "InvalidToken");
}

#[tokio::test]
async fn each_refused_token_gets_the_code_sts_gives() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _stop) = start(dir.path()).await;
    claim(&server, "bucket-a", "obc-a").await;
    // A claim whose key admits no web identity, and a role no claim has.
    server.bucket_with_key("bucket-b", "obc-b").await;
    assert_eq!(assume(&server, "obc-a", "other", None).await.unwrap_err(), "AccessDenied");
    assert_eq!(assume(&server, "obc-b", "app", None).await.unwrap_err(), "AccessDenied");
    assert_eq!(assume(&server, "obc-none", "app", None).await.unwrap_err(), "AccessDenied");
    assert_eq!(assume(&server, "obc-a", "forged", None).await.unwrap_err(), "InvalidIdentityToken");
    assert_eq!(
        assume(&server, "obc-a", "expired", None).await.unwrap_err(),
        "ExpiredTokenException"
    );
    assert_eq!(assume(&server, "obc-a", "down", None).await.unwrap_err(), "IDPCommunicationError");
    assert_eq!(assume(&server, "obc-a", "app", Some(600)).await.unwrap_err(), "ValidationError");
    assert_eq!(assume(&server, "obc-a", "app", Some(7200)).await.unwrap_err(), "ValidationError");
}

#[tokio::test]
async fn a_session_ends_no_later_than_its_token_and_its_roles_longest_session() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _stop) = start(dir.path()).await;
    server.bucket_with_key("bucket-a", "obc-a").await;
    let access = WebIdentityAccess {
        subjects: vec![APP.into()],
        max_session_secs: 1800,
        ..Default::default()
    };
    server.store.set_web_identity("obc-a", "bucket-a", Some(access)).await.unwrap();
    let default = assume(&server, "obc-a", "app", None).await.unwrap();
    let expires = default.credentials().unwrap().expiration().secs() as u64;
    assert!(expires <= now() + 1800 && expires > now() + 1700, "{expires}");
    let short = assume(&server, "obc-a", "app-short", Some(900)).await.unwrap();
    let expires = short.credentials().unwrap().expiration().secs() as u64;
    assert!(expires <= now() + 120, "the token's own life bounds it: {expires}");
    assert_eq!(assume(&server, "obc-a", "app", Some(3600)).await.unwrap_err(), "ValidationError");
}

#[tokio::test]
async fn revoking_or_narrowing_the_role_reaches_its_sessions_on_the_next_request() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _stop) = start(dir.path()).await;
    claim(&server, "bucket-a", "obc-a").await;
    let assumed = assume(&server, "obc-a", "app", None).await.unwrap();
    let s3 = session_client(&server, &assumed, None);
    put(&s3, "bucket-a", "k").await.unwrap();

    // Narrowed: reads, no longer writes.
    server.store.set_key_mode("obc-a", "bucket-a", KeyMode::ReadOnly).await.unwrap();
    assert_eq!(put(&s3, "bucket-a", "k2").await.unwrap_err(), "AccessDenied");
    assert_eq!(get(&s3, "bucket-a", "k").await.unwrap(), b"data");
    server.store.set_key_mode("obc-a", "bucket-a", KeyMode::WriteOnly).await.unwrap();
    assert_eq!(get(&s3, "bucket-a", "k").await.unwrap_err(), "AccessDenied");
    put(&s3, "bucket-a", "k3").await.unwrap();

    // The subject dropped from the role: the session is gone.
    let none = WebIdentityAccess { subjects: vec![OTHER.into()], ..Default::default() };
    server.store.set_web_identity("obc-a", "bucket-a", Some(none)).await.unwrap();
    assert_eq!(put(&s3, "bucket-a", "k4").await.unwrap_err(), "InvalidAccessKeyId");
    assert_eq!(assume(&server, "obc-a", "app", None).await.unwrap_err(), "AccessDenied");

    // Admitted again, then the claim's keys revoked (the claim deleted).
    claim_again(&server).await;
    let again = assume(&server, "obc-a", "app", None).await.unwrap();
    let s3 = session_client(&server, &again, None);
    put(&s3, "bucket-a", "k5").await.unwrap();
    server.store.revoke_keys("obc-a").await.unwrap();
    assert_eq!(put(&s3, "bucket-a", "k6").await.unwrap_err(), "InvalidAccessKeyId");
}

async fn claim_again(server: &Server) {
    let access = WebIdentityAccess { subjects: vec![APP.into()], ..Default::default() };
    server.store.set_web_identity("obc-a", "bucket-a", Some(access)).await.unwrap();
}

#[tokio::test]
async fn a_sessions_only_claims_static_key_signs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _stop) = start(dir.path()).await;
    let key = server.bucket_with_key("bucket-a", "obc-a").await;
    let access =
        WebIdentityAccess { subjects: vec![APP.into()], sessions_only: true, ..Default::default() };
    server.store.set_web_identity("obc-a", "bucket-a", Some(access)).await.unwrap();
    let static_key = client_for(server.addr, &key.access_key_id, &key.secret_access_key);
    assert_eq!(put(&static_key, "bucket-a", "k").await.unwrap_err(), "InvalidAccessKeyId");
    let assumed = assume(&server, "obc-a", "app", None).await.unwrap();
    put(&session_client(&server, &assumed, None), "bucket-a", "k").await.unwrap();
}

#[tokio::test]
async fn sessions_outlive_a_restart_of_the_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (server, stop) = start(dir.path()).await;
    claim(&server, "bucket-a", "obc-a").await;
    let assumed = assume(&server, "obc-a", "app", None).await.unwrap();
    drop(stop);
    drop(server);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let (server, _stop) = start(dir.path()).await;
    let s3 = session_client(&server, &assumed, None);
    put(&s3, "bucket-a", "after-restart").await.unwrap();
}

#[tokio::test]
async fn a_malformed_or_oversized_request_is_answered_with_an_sts_error() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _stop) = start(dir.path()).await;
    let http = reqwest_free_post(&server, "Action=Nothing").await;
    assert!(http.0 == 400 && http.1.contains("<Code>InvalidAction</Code>"), "{http:?}");
    let huge = format!("Action=AssumeRoleWithWebIdentity&WebIdentityToken={}", "a".repeat(40_000));
    let http = reqwest_free_post(&server, &huge).await;
    assert!(http.0 == 400 && http.1.contains("<Code>ValidationError</Code>"), "{http:?}");
}

/// A form POST to the endpoint's root over a plain socket: the status and the body.
async fn reqwest_free_post(server: &Server, body: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let request = format!(
        "POST / HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        server.addr,
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, answer)
}

#[tokio::test]
async fn sessions_of_an_identity_that_is_gone_end_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _stop) = start(dir.path()).await;
    claim(&server, "bucket-a", "obc-a").await;
    let first = assume(&server, "obc-a", "app", None).await.unwrap();
    let second = assume(&server, "obc-a", "app", None).await.unwrap();
    let (first, second) =
        (session_client(&server, &first, None), session_client(&server, &second, None));
    put(&first, "bucket-a", "k").await.unwrap();
    // The identity made again under its name (another uid): its earlier sessions end.
    let ended = server
        .store
        .retain_sessions(|s| s.subject != APP || s.subject_uid.as_deref() == Some("new-uid"))
        .await
        .unwrap();
    assert_eq!(ended, 2);
    assert_eq!(put(&first, "bucket-a", "k").await.unwrap_err(), "InvalidAccessKeyId");
    assert_eq!(put(&second, "bucket-a", "k").await.unwrap_err(), "InvalidAccessKeyId");
}

#[tokio::test]
async fn a_session_minted_for_an_identity_heard_gone_or_remade_is_worth_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _stop) = start(dir.path()).await;
    claim(&server, "bucket-a", "obc-a").await;
    server.store.identity_heard(APP, Some("new-uid".into()));
    // The issuer still vouches for a token of the identity's previous uid.
    let stale = assume(&server, "obc-a", "app", None).await.unwrap();
    let stale = session_client(&server, &stale, None);
    assert_eq!(put(&stale, "bucket-a", "k").await.unwrap_err(), "InvalidAccessKeyId");
    server.store.identity_heard(APP, Some(format!("uid-of-{APP}")));
    put(&stale, "bucket-a", "k").await.unwrap();
    server.store.identity_heard(APP, None);
    assert_eq!(put(&stale, "bucket-a", "k").await.unwrap_err(), "InvalidAccessKeyId");
}
