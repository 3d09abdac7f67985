//! GetObjectAttributes' ETag without quotes, as S3 answers it there (and only there: every
//! other ETag, in headers and XML alike, is quoted). `s3s` writes every ETag of an XML body
//! quoted, so the answer is mended on its way out.

use bytes::{Bytes, BytesMut};
use http::header::{CONTENT_LENGTH, HeaderValue};
use http::{Method, Request};
use s3s::{Body, HttpResponse};

/// Whether `req` is a GetObjectAttributes request (`GET /bucket/key?attributes`; no bucket
/// operation is named so).
pub(super) fn is_get_object_attributes(req: &Request<Body>) -> bool {
    let asks = |query: &str| query.split('&').any(|p| p.split('=').next() == Some("attributes"));
    req.method() == Method::GET && req.uri().query().is_some_and(asks)
}

/// The answer with its top-level `<ETag>` unquoted; anything else is left as it is.
pub(super) fn unquote_etag(mut response: HttpResponse) -> HttpResponse {
    if !response.status().is_success() {
        return response;
    }
    let Some(body) = response.body().bytes() else { return response };
    let Some(unquoted) = unquoted(&body) else { return response };
    if response.headers().contains_key(CONTENT_LENGTH) {
        response.headers_mut().insert(CONTENT_LENGTH, HeaderValue::from(unquoted.len()));
    }
    *response.body_mut() = Body::from(unquoted);
    response
}

/// `body` with the quotes of its first `<ETag>"…"</ETag>` removed, when it has one.
fn unquoted(body: &[u8]) -> Option<Bytes> {
    const OPEN: &[u8] = b"<ETag>\"";
    const CLOSE: &[u8] = b"\"</ETag>";
    let start = body.windows(OPEN.len()).position(|w| w == OPEN)?;
    let value_start = start + OPEN.len();
    let value_len = body[value_start..].windows(CLOSE.len()).position(|w| w == CLOSE)?;
    let value_end = value_start + value_len;
    let mut out = BytesMut::with_capacity(body.len() - 2);
    out.extend_from_slice(&body[..start]);
    out.extend_from_slice(b"<ETag>");
    out.extend_from_slice(&body[value_start..value_end]);
    out.extend_from_slice(b"</ETag>");
    out.extend_from_slice(&body[value_end + CLOSE.len()..]);
    Some(out.freeze())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn any_body_is_answered_without_panic(
            body in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            if let Some(out) = unquoted(&body) {
                prop_assert_eq!(out.len(), body.len() - 2);
            }
        }

        #[test]
        fn the_etag_comes_out_as_it_went_in_wherever_it_sits(
            before in "[^<]{0,16}",
            value in "[0-9a-f]{0,32}(-[0-9]{1,5})?",
            after in "[ -~]{0,16}",
        ) {
            let body = format!("{before}<ETag>\"{value}\"</ETag>{after}");
            let out = unquoted(body.as_bytes()).unwrap();
            let expected = format!("{before}<ETag>{value}</ETag>{after}");
            prop_assert_eq!(&out[..], expected.as_bytes());
        }

        #[test]
        fn any_query_is_read_without_panic(query in "[ -~]{0,40}") {
            // Whatever a URI may carry; the rest cannot reach the endpoint.
            let uri = format!("/b/k?{query}");
            if let Ok(req) = Request::builder().method(Method::GET).uri(uri).body(Body::empty()) {
                let expected = req.uri().query().is_some_and(|q| {
                    q.split('&').any(|pair| pair == "attributes" || pair.starts_with("attributes="))
                });
                prop_assert_eq!(is_get_object_attributes(&req), expected);
            }
        }
    }

    #[test]
    fn only_the_etag_loses_its_quotes() {
        let body = b"<R><ETag>\"abc-2\"</ETag><ObjectSize>3</ObjectSize></R>";
        let out = unquoted(body).unwrap();
        assert_eq!(&out[..], b"<R><ETag>abc-2</ETag><ObjectSize>3</ObjectSize></R>");
        assert!(unquoted(b"<R><ObjectSize>3</ObjectSize></R>").is_none());
        assert!(unquoted(b"<R><ETag>\"open").is_none());
    }

    #[test]
    fn only_object_attribute_requests_are_recognised() {
        let req = |method: Method, uri: &str| {
            Request::builder().method(method).uri(uri).body(Body::empty()).unwrap()
        };
        assert!(is_get_object_attributes(&req(Method::GET, "/b/k?attributes")));
        assert!(is_get_object_attributes(&req(Method::GET, "/b/a/b?versionId=null&attributes=")));
        assert!(!is_get_object_attributes(&req(Method::GET, "/b/k?attributes-x")));
        assert!(!is_get_object_attributes(&req(Method::GET, "/b/k")));
        assert!(!is_get_object_attributes(&req(Method::HEAD, "/b/k?attributes")));
    }
}
