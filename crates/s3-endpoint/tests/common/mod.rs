//! Starting the S3 endpoint on loopback and talking to it with the AWS SDK.

#![allow(dead_code)] // each test binary uses its own subset

pub mod strace;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::{Credentials, Region};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use s3_endpoint::{AccessKey, AdminCredentials, BucketStore, Creator};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A running endpoint; stops when dropped or by [`Server::stop`].
pub struct Server {
    pub addr: SocketAddr,
    pub store: Arc<BucketStore>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Server {
    /// Opens the store under `root` and serves it on 127.0.0.1 at a free port.
    pub async fn start(root: &Path) -> Self {
        let store = Arc::new(BucketStore::open(root.to_owned(), "test-identity").unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stopped.await;
        };
        let task = tokio::spawn(s3_endpoint::serve(listener, store.clone(), shutdown));
        Server { addr, store, stop: Some(stop), task: Some(task) }
    }

    /// A server run by its caller (with its own service and shutdown), for the helpers here.
    pub fn unmanaged(addr: SocketAddr, store: Arc<BucketStore>) -> Self {
        Server { addr, store, stop: None, task: None }
    }

    /// Asks the server to stop and waits for it.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.unwrap();
        }
    }

    /// A bucket created by the provisioner and a key for `user` on it.
    pub async fn bucket_with_key(&self, bucket: &str, user: &str) -> AccessKey {
        let creator = Creator { user_id: user, delete_with_claim: true };
        self.store.create_bucket(bucket, creator).await.unwrap();
        self.store.issue_key(user, bucket).await.unwrap()
    }

    /// An SDK client signing with `key`.
    /// A server whose store has the operator credential `id`/`secret`, and an SDK client signing
    /// with it.
    pub async fn start_with_admin(root: &Path, id: &str, secret: &str) -> (Self, Client) {
        let server = Self::start(root).await;
        server.store.set_admin(Some(AdminCredentials::new(id, secret).unwrap()));
        let admin = client_for(server.addr, id, secret);
        (server, admin)
    }

    pub fn client(&self, key: &AccessKey) -> Client {
        client_for(self.addr, &key.access_key_id, &key.secret_access_key)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// An SDK client for the endpoint at `addr`, path-style, plain HTTP.
pub fn client_for(addr: SocketAddr, access_key_id: &str, secret: &str) -> Client {
    client_in_region(addr, access_key_id, secret, "us-east-1")
}

/// [`client_for`], signing for `region`.
pub fn client_in_region(
    addr: SocketAddr,
    access_key_id: &str,
    secret: &str,
    region: &str,
) -> Client {
    let credentials = Credentials::new(access_key_id, secret, None, None, "test");
    let config = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .region(Region::new(region.to_owned()))
        .endpoint_url(format!("http://{addr}"))
        .force_path_style(true)
        .credentials_provider(credentials)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .build();
    Client::from_conf(config)
}

/// The S3 error code of a failed call.
pub fn code<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> String {
    err.as_service_error().and_then(|e| e.code()).unwrap_or("<no code>").to_owned()
}

/// Deterministic pseudo-random bytes, so tests need no fixtures.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let word = state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
        let take = word.len().min(len - out.len());
        out.extend_from_slice(&word[..take]);
    }
    out
}

/// Hex MD5 of `data`.
pub fn md5_hex(data: &[u8]) -> String {
    use md5::Digest;
    hex::encode(md5::Md5::digest(data))
}

/// A response read off the wire by [`raw_request`].
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    /// Header lines as sent, names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The first value of header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The `<Code>` of an S3 error body.
    pub fn error_code(&self) -> Option<String> {
        let text = self.text();
        let start = text.find("<Code>")? + "<Code>".len();
        let end = text[start..].find("</Code>")? + start;
        Some(text[start..end].to_owned())
    }
}

/// Sends one HTTP/1.1 request with exactly the given headers (plus Host and Content-Length)
/// and reads the whole response, for requests an SDK cannot be made to send.
pub async fn raw_request(
    addr: SocketAddr,
    method: &str,
    path_and_query: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> RawResponse {
    let mut head = format!("{method} {path_and_query} HTTP/1.1\r\nHost: {addr}\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\nConnection: close\r\n\r\n", body.len()));
    send_verbatim(addr, &head, body).await
}

/// Sends `head` (request line and header lines, blank line included) and `body` exactly as
/// given, nothing added, and reads the whole response.
pub async fn send_verbatim(addr: SocketAddr, head: &str, body: &[u8]) -> RawResponse {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(body).await.unwrap();
    let mut response = Vec::new();
    conn.read_to_end(&mut response).await.unwrap();
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").expect("a complete response");
    let head = String::from_utf8(response[..split].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    RawResponse { status, headers, body: response[split + 4..].to_vec() }
}

/// The SigV4 headers (`authorization`, `x-amz-date`) of `method path` signed by `key` in
/// us-east-1 over `headers` (Host is added) and the payload hash `payload` as sent in
/// `x-amz-content-sha256` (`UNSIGNED-PAYLOAD`, `STREAMING-UNSIGNED-PAYLOAD-TRAILER`, …).
pub fn sign_v4(
    addr: SocketAddr,
    key: &AccessKey,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    payload: &str,
) -> Vec<(String, String)> {
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
    let identity =
        Credentials::new(&key.access_key_id, &key.secret_access_key, None, None, "test").into();
    let host = addr.to_string();
    let mut all = vec![("host", host.as_str())];
    all.extend_from_slice(headers);
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("s3")
        .time(std::time::SystemTime::now())
        .settings(SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let url = format!("http://{host}{path}");
    let body = SignableBody::Precomputed(payload.to_owned());
    let request = SignableRequest::new(method, url.as_str(), all.iter().copied(), body).unwrap();
    let (instructions, _) = sign(request, &params).unwrap().into_parts();
    instructions.headers().map(|(n, v)| (n.to_owned(), v.to_owned())).collect()
}

/// The HTTP status of a failed SDK call.
pub fn status<E>(err: &SdkError<E, aws_sdk_s3::config::http::HttpResponse>) -> Option<u16> {
    err.raw_response().map(|r| r.status().as_u16())
}

/// A SigV2 signature (base64 HMAC-SHA1 of `string_to_sign`), as old S3 clients compute it.
pub fn sign_v2(secret: &str, string_to_sign: &str) -> String {
    use base64::Engine as _;
    use hmac::{KeyInit, Mac};
    let mut mac = hmac::Hmac::<sha1::Sha1>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(string_to_sign.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// `time` as an HTTP date (`Tue, 27 Mar 2007 19:36:42 +0000`).
pub fn http_date(time: std::time::SystemTime) -> String {
    let zoned = jiff::Timestamp::try_from(time).unwrap().to_zoned(jiff::tz::TimeZone::UTC);
    jiff::fmt::rfc2822::to_string(&zoned).unwrap()
}
