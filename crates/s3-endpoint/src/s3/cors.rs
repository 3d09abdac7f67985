//! CORS at the HTTP front: the browser's preflight `OPTIONS` answered from the bucket's rules,
//! and the `Access-Control-*` headers added to the answer of an actual request that carries an
//! `Origin` a rule allows.
//!
//! The preflight is answered here, before `s3s`, because `s3s` routes no `OPTIONS` request at
//! all, and because a browser sends it without any signature (it cannot sign: the page has no
//! secret), so it must not meet authentication. It reveals nothing but whether the rules the
//! bucket's owner set allow the request.
//!
//! A matching rule is answered with exactly these headers:
//!
//! | header | value |
//! |---|---|
//! | `Access-Control-Allow-Origin` | `*` when the rule's matching `AllowedOrigin` is `*`, else the request's `Origin` |
//! | `Access-Control-Allow-Credentials` | `true`, unless the origin answered is `*` |
//! | `Access-Control-Allow-Methods` | the rule's `AllowedMethod`s, joined by `, ` |
//! | `Access-Control-Allow-Headers` | preflight only: the requested headers, lower-cased, joined by `, ` (absent when none) |
//! | `Access-Control-Expose-Headers` | the rule's `ExposeHeader`s, joined by `, ` (absent when none) |
//! | `Access-Control-Max-Age` | the rule's `MaxAgeSeconds` (absent when unset) |
//! | `Vary` | `Origin, Access-Control-Request-Headers, Access-Control-Request-Method` |
//!
//! A preflight no rule allows is `403 AccessForbidden` (`CORSResponse: This CORS request is not
//! allowed...`), as in S3; an actual request no rule allows is served as usual, without the
//! headers, and the browser keeps its answer from the page.

use std::sync::Arc;

use http::header::{HeaderName, HeaderValue, ORIGIN, VARY};
use http::{Method, Request, StatusCode};
use s3s::{Body, HttpResponse, S3Error, S3ErrorCode};

use super::cors_rules::{CorsRequest, matching, wildcard_match};
use crate::store::{BucketStore, CorsRule, StoreError};

const REQUEST_METHOD: &str = "access-control-request-method";
const REQUEST_HEADERS: &str = "access-control-request-headers";
const VARY_VALUE: &str = "Origin, Access-Control-Request-Headers, Access-Control-Request-Method";

/// The message S3 gives a preflight that no rule allows.
pub const NOT_ALLOWED: &str = "CORSResponse: This CORS request is not allowed. This is usually \
    because the evalution of Origin, request method / Access-Control-Request-Method or \
    Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.";

/// The bucket a path-style request names, if any.
fn bucket_of<B>(req: &Request<B>) -> Option<String> {
    let name = req.uri().path().trim_start_matches('/').split('/').next()?;
    (!name.is_empty()).then(|| name.to_owned())
}

fn forbidden(message: &str) -> S3Error {
    let mut e =
        S3Error::with_message(S3ErrorCode::Custom("AccessForbidden".into()), message.to_owned());
    e.set_status_code(StatusCode::FORBIDDEN);
    e
}

fn bad_request(message: String) -> S3Error {
    let mut e = S3Error::with_message(S3ErrorCode::Custom("BadRequest".into()), message);
    e.set_status_code(StatusCode::BAD_REQUEST);
    e
}

/// Answers a preflight `OPTIONS` request from the rules of the bucket it names.
pub async fn preflight(
    store: &Arc<BucketStore>,
    req: &Request<Body>,
) -> Result<HttpResponse, S3Error> {
    let text = |name| req.headers().get(name).and_then(|v: &HeaderValue| v.to_str().ok());
    let Some(origin) = text(ORIGIN.as_str()) else {
        return Err(bad_request("Insufficient information. Origin request header needed.".into()));
    };
    let method = text(REQUEST_METHOD).unwrap_or("null");
    if Method::from_bytes(method.as_bytes()).is_err() || method == "null" {
        return Err(bad_request(format!("Invalid Access-Control-Request-Method: {method}")));
    }
    let headers = text(REQUEST_HEADERS)
        .map(|list| {
            list.split(',')
                .map(|h| h.trim().to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let Some(bucket) = bucket_of(req) else {
        return Err(forbidden("CORSResponse: Bucket not found"));
    };
    let config = match store.bucket_cors(&bucket).await {
        Ok(Some(config)) => config,
        Ok(None) => return Err(forbidden("CORSResponse: CORS is not enabled for this bucket.")),
        Err(StoreError::NoSuchBucket(_) | StoreError::InvalidBucketName(_)) => {
            return Err(forbidden("CORSResponse: Bucket not found"));
        }
        Err(e) => {
            tracing::error!(bucket, error = %e, "reading a bucket's CORS rules failed");
            return Err(S3Error::with_message(S3ErrorCode::InternalError, "internal error"));
        }
    };
    let request = CorsRequest { origin, method, headers };
    let Some(rule) = matching(&config, &request) else {
        return Err(forbidden(NOT_ALLOWED));
    };
    let mut response = HttpResponse::new(Body::empty());
    add_headers(response.headers_mut(), rule, origin, Some(&request.headers));
    Ok(response)
}

/// What an actual request needs to have its answer's CORS headers added: the bucket it names,
/// its `Origin` and its method. `None` without an `Origin` (not a cross-origin request).
#[derive(Debug)]
pub struct ActualRequest {
    bucket: String,
    origin: String,
    method: String,
}

impl ActualRequest {
    /// The request's, when it comes from a browser page of another origin.
    pub fn of<B>(req: &Request<B>) -> Option<Self> {
        let origin = req.headers().get(ORIGIN)?.to_str().ok()?.to_owned();
        let bucket = bucket_of(req)?;
        Some(Self { bucket, origin, method: req.method().as_str().to_owned() })
    }

    /// Adds the CORS headers of the first rule that allows this request to its answer.
    pub async fn decorate(&self, store: &Arc<BucketStore>, response: &mut HttpResponse) {
        let Ok(Some(config)) = store.bucket_cors(&self.bucket).await else { return };
        let request =
            CorsRequest { origin: &self.origin, method: &self.method, headers: Vec::new() };
        if let Some(rule) = matching(&config, &request) {
            add_headers(response.headers_mut(), rule, &self.origin, None);
        }
    }
}

fn add_headers(
    headers: &mut http::HeaderMap,
    rule: &CorsRule,
    origin: &str,
    requested: Option<&Vec<String>>,
) {
    let mut set = |name: &'static str, value: String| {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    };
    let any =
        rule.allowed_origins.iter().find(|o| wildcard_match(o, origin)).is_some_and(|o| o == "*");
    set("access-control-allow-origin", if any { "*".to_owned() } else { origin.to_owned() });
    if !any {
        set("access-control-allow-credentials", "true".to_owned());
    }
    set("access-control-allow-methods", rule.allowed_methods.join(", "));
    if let Some(requested) = requested.filter(|r| !r.is_empty()) {
        set("access-control-allow-headers", requested.join(", "));
    }
    if !rule.expose_headers.is_empty() {
        set("access-control-expose-headers", rule.expose_headers.join(", "));
    }
    if let Some(age) = rule.max_age_seconds {
        set("access-control-max-age", age.to_string());
    }
    headers.insert(VARY, HeaderValue::from_static(VARY_VALUE));
}
