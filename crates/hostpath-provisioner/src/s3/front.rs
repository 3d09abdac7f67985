//! The HTTP front of the endpoint, in front of `s3s`: a request id on every response and in
//! every error body, and the request-time rules of S3 that `s3s` does not enforce.
//!
//! `s3s` checks the clock skew of SigV4 requests and the expiry of presigned URLs, but not the
//! `Date` of SigV2 requests, nor the one-week ceiling of `X-Amz-Expires`; without these a
//! captured request or URL would stay valid for ever.

use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;
use http::header::{AUTHORIZATION, CONTENT_LENGTH, DATE, HeaderValue};
use http::{HeaderMap, Request};
use s3s::service::S3Service;
use s3s::{Body, HttpError, HttpResponse, S3Error, S3ErrorCode, s3_error};

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
#[derive(Clone, Debug)]
pub struct Endpoint {
    s3: S3Service,
}

impl Endpoint {
    pub(super) fn new(s3: S3Service) -> Self {
        Self { s3 }
    }

    /// Serves one request; the body type is whatever `s3s` accepts.
    pub async fn call(&self, mut req: Request<Body>) -> Result<HttpResponse, HttpError> {
        let id = new_request_id();
        if let Err(mut e) = check_request_time(req.headers(), req.uri(), SystemTime::now()) {
            e.set_request_id(id.clone());
            let response = e.to_http_response().map_err(|e| HttpError::new(Box::new(e)))?;
            return Ok(with_request_id(response, &id));
        }
        req.extensions_mut().insert(RequestId(id.clone()));
        let response = self.s3.call(req).await?;
        Ok(with_request_id(response, &id))
    }
}

impl hyper::service::Service<Request<hyper::body::Incoming>> for Endpoint {
    type Response = HttpResponse;
    type Error = HttpError;
    type Future = BoxFuture<'static, Result<HttpResponse, HttpError>>;

    fn call(&self, req: Request<hyper::body::Incoming>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { this.call(req.map(Body::from)).await })
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
    if let Some(expires) = query_value(uri, "X-Amz-Expires")
        && query_value(uri, "X-Amz-Signature").is_some()
    {
        let expires: i64 = expires.parse().map_err(|_| {
            S3Error::with_message(
                S3ErrorCode::AuthorizationQueryParametersError,
                "X-Amz-Expires should be a number",
            )
        })?;
        if expires < 0 {
            return Err(S3Error::with_message(
                S3ErrorCode::AuthorizationQueryParametersError,
                "X-Amz-Expires must be non-negative",
            ));
        }
        if expires.unsigned_abs() > MAX_PRESIGNED_EXPIRY_SECS {
            return Err(S3Error::with_message(
                S3ErrorCode::AuthorizationQueryParametersError,
                "X-Amz-Expires must be less than a week (in seconds) that is; 604800",
            ));
        }
    }
    Ok(())
}

/// `Authorization: AWS <key>:<signature>`, as opposed to `AWS4-HMAC-SHA256 ...`.
fn is_sig_v2_header_auth(headers: &HeaderMap) -> bool {
    headers.get(AUTHORIZATION).is_some_and(|v| v.as_bytes().starts_with(b"AWS "))
}

/// The raw value of query parameter `name`, if present.
fn query_value<'a>(uri: &'a http::Uri, name: &str) -> Option<&'a str> {
    uri.query()?.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (key == name).then_some(value)
    })
}

/// Parses the RFC 2822 / RFC 1123 dates HTTP clients send (`Tue, 27 Mar 2007 19:36:42 +0000`
/// or `... GMT`).
fn parse_http_date(text: &str) -> Option<SystemTime> {
    let zoned = jiff::fmt::rfc2822::parse(text.trim()).ok()?;
    Some(SystemTime::from(zoned.timestamp()))
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
