//! A client of Garage's admin API v2: JSON over HTTP with the admin token as bearer token, sent
//! to whichever of a cluster's admin endpoints answers, and the translation of every failure
//! into a permanent or transient backend error.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bucket_provisioner::BackendError;
use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::endpoints::AdminEndpoints;
use crate::params::{SecretRef, ServiceUrl, TOKEN_KEY};

/// How long one admin request may take before Garage counts as unreachable.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting to one admin endpoint may take before the next one is tried: a node
/// that is gone must not hold up every call for the whole request timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The HTTP(S) client every admin API call of the process shares, with a count of the calls
/// and, for each list of endpoints, the one that answered last.
#[derive(Clone)]
pub struct AdminHttp {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    calls: Arc<AtomicU64>,
    answered: Arc<Mutex<HashMap<AdminEndpoints, ServiceUrl>>>,
}

impl AdminHttp {
    /// A client for `http://` and `https://` admin endpoints (the system's CA certificates).
    pub fn new() -> Self {
        let builder = hyper_rustls::HttpsConnectorBuilder::new();
        let builder = match builder.with_native_roots() {
            Ok(builder) => builder,
            // No CA certificates on the system: plain HTTP still works, https fails per call.
            Err(_) => hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(
                rustls::ClientConfig::builder()
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth(),
            ),
        };
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let connector = builder.https_or_http().enable_http1().wrap_connector(http);
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Self { client, calls: Arc::new(AtomicU64::new(0)), answered: Arc::default() }
    }

    /// Admin API requests sent so far (successful or not).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// `endpoints` in the order to try them: the one that answered last first, then the
    /// others as listed.
    fn order<'a>(&self, endpoints: &'a AdminEndpoints) -> Vec<&'a ServiceUrl> {
        let answered = self.answered.lock().unwrap_or_else(|e| e.into_inner());
        let last = answered.get(endpoints);
        let mut urls: Vec<&ServiceUrl> = endpoints.urls().iter().collect();
        urls.sort_by_key(|url| Some(*url) != last);
        urls
    }

    fn remember(&self, endpoints: &AdminEndpoints, url: &ServiceUrl) {
        let mut answered = self.answered.lock().unwrap_or_else(|e| e.into_inner());
        if answered.get(endpoints) != Some(url) {
            answered.insert(endpoints.clone(), url.clone());
        }
    }
}

impl Default for AdminHttp {
    fn default() -> Self {
        Self::new()
    }
}

/// A failed admin API call, before it is given meaning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdminError {
    /// No answer: connection refused, reset, timed out.
    Unreachable(String),
    /// Garage answered with an error (`code` as in its JSON error body, e.g. `NoSuchBucket`).
    Refused {
        /// The HTTP status.
        status: u16,
        /// Garage's error code, or `Http<status>` when the body had none.
        code: String,
        /// Garage's message.
        message: String,
    },
    /// Garage answered success with a body this client cannot read.
    Unexpected(String),
}

impl AdminError {
    /// Garage's error code, when it answered with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            AdminError::Refused { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Whether Garage refused the request as invalid (HTTP 400), as it refuses an alias that
    /// already exists.
    pub fn is_bad_request(&self) -> bool {
        matches!(self, AdminError::Refused { status: 400, .. })
    }

    /// Whether another node may do better: this one did not answer, or answered that it cannot
    /// serve now (5xx, 429: say, cut off from the others).
    fn try_another(&self) -> bool {
        match self {
            AdminError::Unreachable(_) => true,
            AdminError::Refused { status, .. } => *status >= 500 || *status == 429,
            AdminError::Unexpected(_) => false,
        }
    }

    /// The backend error for this failure of `action`, done with the token from `secret`.
    /// Unreachable and server-side failures (5xx: a quorum not reached while nodes are down,
    /// say) are transient; a refused token is permanent and names the Secret; every other
    /// refusal is permanent under a reason built from Garage's code.
    pub fn into_backend(
        self,
        action: &str,
        admin: &AdminEndpoints,
        secret: &SecretRef,
    ) -> BackendError {
        match self {
            AdminError::Unreachable(why) => BackendError::transient(format!(
                "{action}: Garage's admin API at {admin} is unreachable ({why}); retrying"
            )),
            AdminError::Refused { status, code, message } if status == 401 || status == 403 => {
                BackendError::permanent(
                    "GarageTokenRefused",
                    format!(
                        "{action}: Garage at {admin} refused the admin token in Secret {secret} \
                         (key {TOKEN_KEY}): {code}: {message}; put the cluster's admin token \
                         there (its [admin] admin_token, or a token scoped to the bucket and key \
                         calls), then edit the claim to retry"
                    ),
                )
            }
            AdminError::Refused { status, code, message } if status >= 500 || status == 429 => {
                BackendError::transient(format!(
                    "{action}: Garage answered {code}: {message} (HTTP {status}); retrying"
                ))
            }
            AdminError::Refused { status, code, message } => {
                let reason = if code.chars().all(|c| c.is_ascii_alphanumeric()) {
                    format!("Garage{code}")
                } else {
                    format!("GarageHttp{status}")
                };
                BackendError::permanent(
                    reason,
                    format!("{action}: Garage refused it: {code}: {message} (HTTP {status})"),
                )
            }
            AdminError::Unexpected(why) => BackendError::permanent(
                "GarageUnexpectedAnswer",
                format!(
                    "{action}: Garage at {admin} answered in a form this provisioner does not \
                     read ({why}); it speaks the admin API v2 of Garage 2.x"
                ),
            ),
        }
    }
}

/// One Garage cluster's admin endpoints with one token.
pub struct Admin<'a> {
    /// The shared client.
    pub http: &'a AdminHttp,
    /// The admin API, on one node or several.
    pub endpoints: &'a AdminEndpoints,
    /// The admin token.
    pub token: &'a str,
    /// The Secret it came from, for messages.
    pub secret: &'a SecretRef,
}

impl Admin<'_> {
    /// `GET /v2/<operation>?<query>`.
    pub async fn get<T: DeserializeOwned>(
        &self,
        operation: &str,
        query: &[(&str, &str)],
    ) -> Result<T, AdminError> {
        self.send(Method::GET, operation, query, None::<&()>).await
    }

    /// `POST /v2/<operation>?<query>` with `body` as JSON.
    pub async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        operation: &str,
        query: &[(&str, &str)],
        body: Option<&B>,
    ) -> Result<T, AdminError> {
        self.send(Method::POST, operation, query, body).await
    }

    /// The backend error for `error` of `action`.
    pub fn error(&self, action: &str, error: AdminError) -> BackendError {
        error.into_backend(action, self.endpoints, self.secret)
    }

    /// Sends the request to the endpoint that answered last, then to the others in turn while
    /// one does not answer or cannot serve. Garage's operations are all safe to repeat (the
    /// library repeats them too), so one cut off on a node that went away is sent again.
    async fn send<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        operation: &str,
        query: &[(&str, &str)],
        body: Option<&B>,
    ) -> Result<T, AdminError> {
        let mut path = format!("/v2/{operation}");
        for (i, (name, value)) in query.iter().enumerate() {
            path.push(if i == 0 { '?' } else { '&' });
            path.push_str(&format!("{name}={}", encode(value)));
        }
        let body = match body {
            Some(body) => Bytes::from(
                serde_json::to_vec(body).map_err(|e| AdminError::Unexpected(e.to_string()))?,
            ),
            None => Bytes::new(),
        };
        let mut unreachable = Vec::new();
        let mut refused = None;
        for url in self.http.order(self.endpoints) {
            match self.send_to(url, &method, operation, &path, body.clone()).await {
                Err(error) if error.try_another() => match error {
                    AdminError::Unreachable(why) => {
                        unreachable.push(format!("{}: {why}", url.url()))
                    }
                    other => refused = Some(other),
                },
                answer => {
                    self.http.remember(self.endpoints, url);
                    return answer;
                }
            }
        }
        Err(refused.unwrap_or_else(|| AdminError::Unreachable(unreachable.join("; "))))
    }

    async fn send_to<T: DeserializeOwned>(
        &self,
        url: &ServiceUrl,
        method: &Method,
        operation: &str,
        path: &str,
        body: Bytes,
    ) -> Result<T, AdminError> {
        let uri = format!("{}{path}", url.url());
        let request = Request::builder()
            .method(method.clone())
            .uri(&uri)
            .header(header::AUTHORIZATION, format!("Bearer {}", self.token))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(body))
            .map_err(|e| AdminError::Unexpected(format!("building the request: {e}")))?;
        self.http.calls.fetch_add(1, Ordering::Relaxed);
        let started = std::time::Instant::now();
        let exchange = async {
            let response = self
                .http
                .client
                .request(request)
                .await
                .map_err(|e| AdminError::Unreachable(error_chain(&e)))?;
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| AdminError::Unreachable(format!("reading the answer: {e}")))?
                .to_bytes();
            Ok::<_, AdminError>((status, bytes))
        };
        let (status, bytes) =
            tokio::time::timeout(REQUEST_TIMEOUT, exchange).await.map_err(|_| {
                AdminError::Unreachable(format!("no answer within {REQUEST_TIMEOUT:?}"))
            })??;
        // Where a claim's time goes: each call's wait for Garage, at debug level.
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        tracing::debug!(operation, endpoint = %url.url(), status = status.as_u16(), elapsed_ms,
            "Garage admin API call answered");
        if status.is_success() {
            // Some operations (DeleteKey, DeleteBucket) answer with an empty body.
            let text = if bytes.is_empty() { &b"null"[..] } else { &bytes[..] };
            return serde_json::from_slice(text).map_err(|e| {
                AdminError::Unexpected(format!("{operation}: {e}: {}", snippet(&bytes)))
            });
        }
        Err(refusal(status, &bytes))
    }
}

/// Garage's JSON error body (`{"code", "message", ...}`), or the status and a bit of the body.
fn refusal(status: StatusCode, body: &[u8]) -> AdminError {
    #[derive(serde::Deserialize)]
    struct ErrorBody {
        code: String,
        #[serde(default)]
        message: String,
    }
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(parsed) => AdminError::Refused {
            status: status.as_u16(),
            code: parsed.code,
            message: parsed.message,
        },
        Err(_) => AdminError::Refused {
            status: status.as_u16(),
            code: format!("Http{}", status.as_u16()),
            message: snippet(body),
        },
    }
}

fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(200) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Percent-encodes a query value (bucket ids, aliases and key ids are plain, but never trust).
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url() -> AdminEndpoints {
        AdminEndpoints::one(ServiceUrl { scheme: "http".into(), host: "garage".into(), port: 3903 })
    }

    fn secret() -> SecretRef {
        SecretRef { namespace: "infra".into(), name: "garage-admin".into() }
    }

    fn refused(status: u16, code: &str) -> AdminError {
        AdminError::Refused { status, code: code.into(), message: "said Garage".into() }
    }

    #[test]
    fn every_failure_has_a_meaning() {
        let unreachable = AdminError::Unreachable("connection refused".into());
        let error = unreachable.into_backend("CreateBucket b", &url(), &secret());
        assert!(!error.is_permanent() && error.to_string().contains("unreachable"), "{error}");

        let token = refused(403, "AccessDenied").into_backend("CreateBucket b", &url(), &secret());
        assert!(token.is_permanent());
        assert!(token.to_string().contains("Secret infra/garage-admin"), "{token}");
        assert!(
            matches!(&token, BackendError::Permanent { reason, .. } if reason == "GarageTokenRefused")
        );

        let quorum = refused(503, "ServiceUnavailable").into_backend("x", &url(), &secret());
        assert!(!quorum.is_permanent());
        let internal = refused(500, "InternalError").into_backend("x", &url(), &secret());
        assert!(!internal.is_permanent());

        let bad = refused(400, "InvalidRequest").into_backend("x", &url(), &secret());
        assert!(
            matches!(&bad, BackendError::Permanent { reason, .. } if reason == "GarageInvalidRequest")
        );
        let odd = refused(418, "I'm a teapot").into_backend("x", &url(), &secret());
        assert!(
            matches!(&odd, BackendError::Permanent { reason, .. } if reason == "GarageHttp418")
        );
        let unread =
            AdminError::Unexpected("missing field".into()).into_backend("x", &url(), &secret());
        assert!(unread.is_permanent());
    }

    #[test]
    fn error_bodies_are_read_and_others_summarised() {
        let body = br#"{"code":"NoSuchBucket","message":"Bucket not found: b","region":"garage","path":"/v2/GetBucketInfo"}"#;
        assert_eq!(refusal(StatusCode::NOT_FOUND, body).code(), Some("NoSuchBucket"));
        let html = refusal(StatusCode::BAD_GATEWAY, b"<html>bad gateway</html>");
        assert_eq!(html.code(), Some("Http502"));
    }

    #[test]
    fn the_endpoint_that_answered_last_is_tried_first() {
        let endpoints = AdminEndpoints::parse("http://a:1,http://b:2,http://c:3").unwrap();
        let http = AdminHttp::new();
        let hosts = |http: &AdminHttp| -> Vec<String> {
            http.order(&endpoints).iter().map(|u| u.host.clone()).collect()
        };
        assert_eq!(hosts(&http), ["a", "b", "c"]);
        http.remember(&endpoints, &endpoints.urls()[1]);
        assert_eq!(hosts(&http), ["b", "a", "c"]);
        assert!(AdminError::Unreachable("refused".into()).try_another());
        assert!(refused(503, "ServiceUnavailable").try_another());
        assert!(!refused(404, "NoSuchBucket").try_another());
        assert!(!refused(403, "AccessDenied").try_another());
    }

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(encode("obc-1.delete"), "obc-1.delete");
        assert_eq!(encode("a b&c"), "a%20b%26c");
    }
}
