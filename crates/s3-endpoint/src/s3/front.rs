//! The HTTP front of the endpoint, in front of `s3s`: a request id on every response and in
//! every error body, and the request-time rules of S3 that `s3s` does not enforce.
//!
//! `s3s` checks the clock skew of SigV4 requests and the expiry of presigned URLs, but not the
//! `Date` of SigV2 requests, nor the one-week ceiling of presigned URLs (`X-Amz-Expires` of
//! SigV4, `Expires` of SigV2); without these a captured request or URL would stay valid for
//! ever.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use http::header::{AUTHORIZATION, CONTENT_LENGTH, DATE, HeaderValue};
use http::{HeaderMap, Request};
use s3s::service::S3Service;
use s3s::{Body, HttpError, HttpResponse, S3Error, S3ErrorCode, s3_error};
use subtle::ConstantTimeEq;

use super::lifecycle::LifecycleSchedule;
use super::metrics::EndpointMetrics;
use super::zero_copy::FileSends;
use super::{attributes_etag, cors, spool};
use crate::store::BucketStore;
use crate::sts::{IdentityVerifier, MAX_BODY_LEN, StsError, WebIdentitySts};

/// Largest difference between a signed request's time and ours that S3 accepts.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(15 * 60);
/// Longest validity of a presigned SigV4 URL (`X-Amz-Expires`), one week as in S3.
pub const MAX_PRESIGNED_EXPIRY_SECS: u64 = 604_800;

/// Header carrying the request id, as S3 names it.
const REQUEST_ID_HEADER: &str = "x-amz-request-id";

/// The request id of the request being served, in its extensions, for handlers that want it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestId(pub String);

/// The endpoint as a hyper service: the `s3s` service behind request checks and request ids.
#[derive(Clone)]
pub struct Endpoint {
    s3: S3Service,
    store: Arc<BucketStore>,
    answers: Option<EndpointMetrics>,
    /// When the server runs the lifecycle pass.
    lifecycle: LifecycleSchedule,
    /// The connection this copy serves, for bodies sent from their files (HTTP/1 only).
    sends: Option<Arc<FileSends>>,
    /// `AssumeRoleWithWebIdentity`, when the binary gave a way to verify tokens.
    sts: Option<WebIdentitySts>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("s3", &self.s3).field("store", &self.store).finish()
    }
}

impl Endpoint {
    pub(super) fn new(s3: S3Service, store: Arc<BucketStore>) -> Self {
        let lifecycle = LifecycleSchedule::default();
        Self { s3, store, answers: None, lifecycle, sends: None, sts: None }
    }

    /// Answers STS `AssumeRoleWithWebIdentity` (a form `POST /`) for tokens `verifier` vouches
    /// for (see [`crate::sts`]); without it such requests are refused.
    pub fn web_identity(self, verifier: Arc<dyn IdentityVerifier>) -> Self {
        let sts = WebIdentitySts::new(self.store.clone(), verifier);
        Self { sts: Some(sts), ..self }
    }

    /// Counts every answer by status class in `metrics`
    /// (`bucket_provisioner_s3_responses_total`), for the endpoint's error-rate alert.
    pub fn counting_answers(self, metrics: EndpointMetrics) -> Self {
        Self { answers: Some(metrics), ..self }
    }

    /// Runs the lifecycle pass on `schedule` instead of every
    /// [`DEFAULT_LIFECYCLE_INTERVAL`](super::DEFAULT_LIFECYCLE_INTERVAL) on the system clock.
    pub fn lifecycle(self, schedule: LifecycleSchedule) -> Self {
        Self { lifecycle: schedule, ..self }
    }

    /// The store, the schedule and the metrics of the lifecycle worker the server runs for this
    /// endpoint.
    pub(super) fn lifecycle_worker(
        &self,
    ) -> (Arc<BucketStore>, LifecycleSchedule, Option<EndpointMetrics>) {
        (self.store.clone(), self.lifecycle.clone(), self.answers.clone())
    }

    /// This endpoint for one connection: its large GET bodies are sent from their files.
    pub(super) fn on_connection(&self, sends: Arc<FileSends>) -> Self {
        Self { sends: Some(sends), ..self.clone() }
    }

    /// Serves one request; the body type is whatever `s3s` accepts.
    pub async fn call(&self, mut req: Request<Body>) -> Result<HttpResponse, HttpError> {
        let id = new_request_id();
        if is_sts_request(&req) {
            return Ok(with_request_id(self.answer_sts(req, &id).await, &id));
        }
        if req.method() == http::Method::OPTIONS {
            // A browser's preflight: unsigned, and not routed by `s3s` (see `cors`).
            let response = match cors::preflight(&self.store, &req).await {
                Ok(response) => response,
                Err(mut e) => {
                    e.set_request_id(id.clone());
                    e.to_http_response().map_err(|e| HttpError::new(Box::new(e)))?
                }
            };
            return Ok(with_request_id(response, &id));
        }
        let cross_origin = cors::ActualRequest::of(&req);
        if let Err(mut e) = check_request_time(req.headers(), req.uri(), SystemTime::now()) {
            e.set_request_id(id.clone());
            let response = e.to_http_response().map_err(|e| HttpError::new(Box::new(e)))?;
            return Ok(with_request_id(response, &id));
        }
        date_as_amz_date(req.headers_mut());
        self.bucket_root_for_sig_v2(&mut req);
        if spool::needs_length(&req, &self.store) {
            req = match spool::with_length(req, &self.store).await {
                Ok(req) => req,
                Err(mut e) => {
                    e.set_request_id(id.clone());
                    let response = e.to_http_response().map_err(|e| HttpError::new(Box::new(e)))?;
                    return Ok(with_request_id(response, &id));
                }
            };
        }
        req.extensions_mut().insert(RequestId(id.clone()));
        let attributes = attributes_etag::is_get_object_attributes(&req);
        let mut response = self.s3.call(req).await?;
        if attributes {
            response = attributes_etag::unquote_etag(response);
        }
        if let Some(cross_origin) = cross_origin {
            cross_origin.decorate(&self.store, &mut response).await;
        }
        Ok(with_request_id(response, &id))
    }
}

/// An STS request: a form `POST` to the root, which no S3 operation is.
fn is_sts_request(req: &Request<Body>) -> bool {
    let form = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    req.method() == http::Method::POST && req.uri().path() == "/" && form
}

impl Endpoint {
    /// The answer to an STS request, success or error, as an STS client reads it.
    async fn answer_sts(&self, req: Request<Body>, id: &str) -> HttpResponse {
        let answer = match &self.sts {
            None => Err(StsError::invalid_parameter(
                "AssumeRoleWithWebIdentity is not enabled on this endpoint",
            )),
            Some(sts) => match req.into_body().store_all_limited(MAX_BODY_LEN).await {
                Err(_) => Err(StsError::validation("the request body is too large")),
                Ok(form) => {
                    let now = SystemTime::now()
                        .duration_since(SystemTime::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs());
                    sts.assume(&form, now).await
                }
            },
        };
        let (status, xml, code) = match answer {
            Ok(assumed) => (http::StatusCode::OK, assumed.to_xml(id), "granted"),
            Err(refused) => (refused.status, refused.to_xml(id), refused.code),
        };
        if let Some(metrics) = &self.answers {
            metrics.web_identity(code);
        }
        let mut response = HttpResponse::new(Body::from(xml));
        *response.status_mut() = status;
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/xml"));
        response
    }

    /// SigV2 clients sign a bucket-level request's resource as `/bucket/` (as S3 defines it)
    /// even when they send the path `/bucket`, which `s3s` signs as sent. When the signature
    /// is the one over `/bucket/`, the path gets its slash, which means the same bucket.
    fn bucket_root_for_sig_v2(&self, req: &mut Request<Body>) {
        let Some(auth) = req.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
            return;
        };
        let Some((access_key, signature)) =
            auth.strip_prefix("AWS ").and_then(|rest| rest.trim().rsplit_once(':'))
        else {
            return;
        };
        let path = req.uri().path();
        let is_bucket_root = path.len() > 1 && !path[1..].contains('/');
        if !is_bucket_root {
            return;
        }
        let secret = match self.store.admin().filter(|a| a.access_key_id() == access_key) {
            Some(admin) => admin.secret_access_key().to_owned(),
            None => match self.store.lookup_key(access_key) {
                Some(key) => key.secret_access_key,
                None => return,
            },
        };
        let with_slash = format!("{path}/");
        let expected = sign_v2(&secret, &sig_v2_string_to_sign(req, &with_slash));
        if !bool::from(expected.as_bytes().ct_eq(signature.as_bytes())) {
            return;
        }
        let path_and_query = match req.uri().query() {
            Some(query) => format!("{with_slash}?{query}"),
            None => with_slash,
        };
        let mut parts = req.uri().clone().into_parts();
        if let Ok(rewritten) = path_and_query.parse() {
            parts.path_and_query = Some(rewritten);
            if let Ok(uri) = http::Uri::from_parts(parts) {
                *req.uri_mut() = uri;
            }
        }
    }
}

/// Base64 HMAC-SHA1, the SigV2 signature.
fn sign_v2(secret: &str, string_to_sign: &str) -> String {
    use base64::Engine as _;
    use hmac::{KeyInit, Mac};
    let Ok(mut mac) = hmac::Hmac::<sha1::Sha1>::new_from_slice(secret.as_bytes()) else {
        return String::new();
    };
    mac.update(string_to_sign.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

impl hyper::service::Service<Request<hyper::body::Incoming>> for Endpoint {
    type Response = HttpResponse;
    type Error = HttpError;
    type Future = BoxFuture<'static, Result<HttpResponse, HttpError>>;

    fn call(&self, req: Request<hyper::body::Incoming>) -> Self::Future {
        let this = self.clone();
        let mut req = req.map(Body::from);
        // HTTP/2 frames a body's bytes itself: only HTTP/1 passes them to the socket as they are.
        if let Some(sends) = &self.sends
            && req.version() <= http::Version::HTTP_11
        {
            req.extensions_mut().insert(sends.clone());
        }
        Box::pin(async move {
            let answer = this.call(req).await;
            if let (Some(metrics), Ok(response)) = (&this.answers, &answer) {
                metrics.answered(response.status().as_u16());
            }
            answer
        })
    }
}

/// 16 random upper-case hex digits, the shape of S3's request ids.
fn new_request_id() -> String {
    hex::encode_upper(rand::random::<[u8; 8]>())
}

/// Adds the request id header, and the `RequestId` element to an error body that lacks it
/// (errors raised inside `s3s`, before any handler ran).
fn with_request_id(mut response: HttpResponse, id: &str) -> HttpResponse {
    if let Ok(value) = HeaderValue::from_str(id) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    if !response.status().is_client_error() && !response.status().is_server_error() {
        return response;
    }
    let Some(body) = response.body().bytes() else { return response };
    let Some(with_id) = insert_request_id(&body, id) else { return response };
    if response.headers().contains_key(CONTENT_LENGTH) {
        response.headers_mut().insert(CONTENT_LENGTH, HeaderValue::from(with_id.len()));
    }
    *response.body_mut() = Body::from(with_id);
    response
}

fn insert_request_id(body: &[u8], id: &str) -> Option<Bytes> {
    const END: &[u8] = b"</Error>";
    if body.windows(b"<RequestId>".len()).any(|w| w == b"<RequestId>") {
        return None;
    }
    let at = body.windows(END.len()).rposition(|w| w == END)?;
    let mut out = BytesMut::with_capacity(body.len() + id.len() + 24);
    out.extend_from_slice(&body[..at]);
    out.extend_from_slice(format!("<RequestId>{id}</RequestId>").as_bytes());
    out.extend_from_slice(&body[at..]);
    Some(out.freeze())
}

/// Refuses SigV2 requests signed too far from our clock and presigned SigV4 URLs valid for
/// longer than S3 allows, before any signature work.
pub fn check_request_time(
    headers: &HeaderMap,
    uri: &http::Uri,
    now: SystemTime,
) -> Result<(), S3Error> {
    if is_sig_v2_header_auth(headers) {
        // In SigV2, x-amz-date replaces Date when both are sent.
        let date = headers.get("x-amz-date").or_else(|| headers.get(DATE));
        let signed_at = date.and_then(|v| v.to_str().ok()).and_then(parse_http_date);
        let Some(signed_at) = signed_at.filter(|t| *t >= SystemTime::UNIX_EPOCH) else {
            return Err(s3_error!(
                AccessDenied,
                "AWS authentication requires a valid Date or x-amz-date header"
            ));
        };
        let skew = now.duration_since(signed_at).unwrap_or_else(|e| e.duration());
        if skew > MAX_CLOCK_SKEW {
            return Err(s3_error!(
                RequestTimeTooSkewed,
                "The difference between the request time and the current time is too large."
            ));
        }
    }
    // Decoded as `s3s` decodes them, every occurrence: `X%2DAmz%2DExpires` is the same name.
    let query = query_pairs(uri);
    let values = |name: &'static str| query.iter().filter(move |(k, _)| k == name).map(|(_, v)| v);
    let has = |name: &'static str| values(name).next().is_some();
    if has("Signature") && has("AWSAccessKeyId") {
        // A SigV2 presigned URL: its `Expires` is a time, held to the same week from now.
        let now = now.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs();
        for expires in values("Expires") {
            if expires.parse::<u64>().is_ok_and(|at| at > now + MAX_PRESIGNED_EXPIRY_SECS) {
                return Err(s3_error!(
                    AccessDenied,
                    "Expires must be within a week (604800 seconds) of the current time"
                ));
            }
        }
    }
    if !has("X-Amz-Signature") {
        return Ok(());
    }
    for expires in values("X-Amz-Expires") {
        let expires: i64 = expires.parse().map_err(|_| {
            S3Error::with_message(
                S3ErrorCode::AuthorizationQueryParametersError,
                "X-Amz-Expires should be a number",
            )
        })?;
        if expires < 0 {
            // A URL that expired before it was made.
            return Err(s3_error!(AccessDenied, "Request has expired"));
        }
        if expires.unsigned_abs() > MAX_PRESIGNED_EXPIRY_SECS {
            // S3's code, with the 403 that clients and conformance suites expect of an
            // authorization failure.
            let mut error = S3Error::with_message(
                S3ErrorCode::AuthorizationQueryParametersError,
                "X-Amz-Expires must be less than a week (in seconds) that is; 604800",
            );
            error.set_status_code(http::StatusCode::FORBIDDEN);
            return Err(error);
        }
    }
    Ok(())
}

/// `Authorization: AWS <key>:<signature>`, as opposed to `AWS4-HMAC-SHA256 ...`.
fn is_sig_v2_header_auth(headers: &HeaderMap) -> bool {
    headers.get(AUTHORIZATION).is_some_and(|v| v.as_bytes().starts_with(b"AWS "))
}

/// The query's parameters, decoded as `s3s` decodes them (none when it cannot be: `s3s` then
/// refuses the request itself).
fn query_pairs(uri: &http::Uri) -> Vec<(String, String)> {
    let Some(query) = uri.query() else { return Vec::new() };
    // Without an escape a name reads as written, and every limit here is on an `Expires`: most
    // requests skip the decoding.
    if !query.contains('%') && !query.contains("Expires") {
        return Vec::new();
    }
    serde_urlencoded::from_str(query).unwrap_or_default()
}

/// Parses the RFC 2822 / RFC 1123 dates HTTP clients send (`Tue, 27 Mar 2007 19:36:42 +0000`
/// or `... GMT`). A weekday that does not match the date is tolerated, as S3 does.
fn parse_http_date(text: &str) -> Option<SystemTime> {
    const PARSER: jiff::fmt::rfc2822::DateTimeParser =
        jiff::fmt::rfc2822::DateTimeParser::new().relaxed_weekday(true);
    let zoned = PARSER.parse_zoned(text.trim()).ok()?;
    Some(SystemTime::from(zoned.timestamp()))
}

/// SigV4 allows the request time in `Date` when `x-amz-date` is absent; `s3s` only reads
/// `x-amz-date`, so it is filled in from `Date` (the signature still covers `Date`, which the
/// client listed among its signed headers).
fn date_as_amz_date(headers: &mut HeaderMap) {
    let sig_v4 =
        headers.get(AUTHORIZATION).is_some_and(|v| v.as_bytes().starts_with(b"AWS4-HMAC-SHA256 "));
    if !sig_v4 || headers.contains_key("x-amz-date") {
        return;
    }
    let Some(date) = headers.get(DATE).and_then(|v| v.to_str().ok()).and_then(parse_http_date)
    else {
        return;
    };
    let Ok(timestamp) = jiff::Timestamp::try_from(date) else { return };
    let text = timestamp.strftime("%Y%m%dT%H%M%SZ").to_string();
    if let Ok(value) = HeaderValue::from_str(&text) {
        headers.insert("x-amz-date", value);
    }
}

/// The sub-resources that SigV2 signs, in the order it signs them.
const SIGNED_SUBRESOURCES: [&str; 35] = [
    "accelerate",
    "acl",
    "analytics",
    "cors",
    "defaultObjectAcl",
    "delete",
    "inventory",
    "lifecycle",
    "location",
    "logging",
    "metrics",
    "notification",
    "object-lock",
    "partNumber",
    "policy",
    "replication",
    "requestPayment",
    "response-cache-control",
    "response-content-disposition",
    "response-content-encoding",
    "response-content-language",
    "response-content-type",
    "response-expires",
    "restore",
    "select",
    "select-type",
    "storageClass",
    "tagging",
    "torrent",
    "uploadId",
    "uploads",
    "versionId",
    "versioning",
    "versions",
    "website",
];

/// The SigV2 string to sign of a request, with `resource` as its path.
fn sig_v2_string_to_sign(req: &Request<Body>, resource: &str) -> String {
    let headers = req.headers();
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("");
    let date = if headers.contains_key("x-amz-date") { "" } else { text("date") };
    let mut out = format!(
        "{}\n{}\n{}\n{date}\n",
        req.method().as_str(),
        text("content-md5"),
        text("content-type")
    );
    let mut amz: Vec<(&str, Vec<&str>)> = Vec::new();
    for name in headers.keys().filter(|n| n.as_str().starts_with("x-amz-")) {
        let values = headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(str::trim);
        amz.push((name.as_str(), values.collect()));
    }
    amz.sort_by(|a, b| a.0.cmp(b.0));
    for (name, values) in amz {
        out.push_str(&format!("{name}:{}\n", values.join(",")));
    }
    out.push_str(resource);
    let query = req.uri().query().unwrap_or("");
    let mut first = true;
    for wanted in SIGNED_SUBRESOURCES {
        let found = query.split('&').find_map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (key == wanted).then(|| percent_decode(value))
        });
        if let Some(value) = found {
            out.push(if first { '?' } else { '&' });
            first = false;
            out.push_str(wanted);
            if !value.is_empty() {
                out.push('=');
                out.push_str(&value);
            }
        }
    }
    out
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2_headers(date: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, HeaderValue::from_static("AWS key:c2lnbmF0dXJl"));
        headers.insert(DATE, HeaderValue::from_str(date).unwrap());
        headers
    }

    #[test]
    fn request_ids_go_into_error_bodies_once() {
        let body = b"<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code></Error>";
        let with_id = insert_request_id(body, "ABC").unwrap();
        assert_eq!(
            &with_id[..],
            b"<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><RequestId>ABC</RequestId></Error>"
        );
        assert!(insert_request_id(&with_id, "ABC").is_none());
        assert!(insert_request_id(b"<ListBucketResult/>", "ABC").is_none());
    }

    #[test]
    fn dates_parse_in_both_zone_spellings() {
        let gmt = parse_http_date("Tue, 27 Mar 2007 19:36:42 GMT").unwrap();
        let offset = parse_http_date("Tue, 27 Mar 2007 19:36:42 +0000").unwrap();
        assert_eq!(gmt, offset);
        assert_eq!(gmt, SystemTime::UNIX_EPOCH + Duration::from_secs(1_175_024_202));
        assert!(parse_http_date("yesterday").is_none());
    }

    #[test]
    fn sig_v2_time_edges() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_175_024_202);
        let uri = http::Uri::from_static("/b/k");
        let at = |offset: i64| {
            let t = if offset >= 0 {
                now + Duration::from_secs(offset.unsigned_abs())
            } else {
                now - Duration::from_secs(offset.unsigned_abs())
            };
            jiff::fmt::rfc2822::to_string(
                &jiff::Timestamp::try_from(t).unwrap().to_zoned(jiff::tz::TimeZone::UTC),
            )
            .unwrap()
        };
        assert!(check_request_time(&v2_headers(&at(-900)), &uri, now).is_ok());
        assert!(check_request_time(&v2_headers(&at(900)), &uri, now).is_ok());
        for offset in [-901, 901] {
            let e = check_request_time(&v2_headers(&at(offset)), &uri, now).unwrap_err();
            assert_eq!(e.code(), &S3ErrorCode::RequestTimeTooSkewed, "{offset}");
        }
    }
}
