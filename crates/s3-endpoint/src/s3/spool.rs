//! PUTs sent with `Transfer-Encoding: chunked` and no `Content-Length` (not aws-chunked).
//!
//! `s3s` refuses them (`MissingContentLength`) because it must know a body's length before
//! reading it, to verify its hash or its size; S3-compatible servers accept them. The body is
//! written to an unnamed scratch file first and handed on with its length, never held in memory.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use http::header::{AUTHORIZATION, CONTENT_LENGTH, HeaderValue, TRANSFER_ENCODING};
use http::{Method, Request};
use s3s::stream::{ByteStream, DynByteStream, RemainingLength};
use s3s::{Body, S3Result, StdError, s3_error};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
use tokio_util::io::ReaderStream;

use crate::store::BucketStore;

/// S3's largest single PUT.
const MAX_PUT_SIZE: u64 = 5 * 1024 * 1024 * 1024;
/// Read size when the scratch file is handed on.
const READ_CHUNK: usize = 1024 * 1024;

/// Whether `req` is a PUT whose body has no announced length, signed by a key the store knows.
/// Only those are spooled: nobody without a key id can make the endpoint write to its disk.
pub fn needs_length(req: &Request<Body>, store: &BucketStore) -> bool {
    let headers = req.headers();
    let chunked = headers
        .get_all(TRANSFER_ENCODING)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.to_ascii_lowercase().contains("chunked")));
    let streaming = headers
        .get("x-amz-content-sha256")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("STREAMING-"));
    req.method() == Method::PUT
        && chunked
        && !streaming
        && !headers.contains_key(CONTENT_LENGTH)
        && signing_key(req).is_some_and(|id| store.is_admin(id) || store.lookup_key(id).is_some())
}

/// The access key id a SigV4 request (header or presigned) names.
fn signing_key(req: &Request<Body>) -> Option<&str> {
    let credential = match req.headers().get(AUTHORIZATION) {
        Some(auth) => auth.to_str().ok()?.split("Credential=").nth(1)?,
        None => req.uri().query()?.split('&').find_map(|p| p.strip_prefix("X-Amz-Credential="))?,
    };
    credential.split(['/', '%']).next().filter(|id| !id.is_empty())
}

/// `req` with its body spooled to a scratch file and its `Content-Length` set.
pub async fn with_length(mut req: Request<Body>, store: &BucketStore) -> S3Result<Request<Body>> {
    let io_error = |e: std::io::Error| {
        tracing::error!(error = %e, "spooling a request body failed");
        s3_error!(InternalError, "internal error")
    };
    let file = store.scratch_file().await.map_err(|e| {
        tracing::error!(error = %e, "no scratch file for a request body");
        s3_error!(InternalError, "internal error")
    })?;
    let mut file = tokio::fs::File::from_std(file);
    let mut body = std::mem::replace(req.body_mut(), Body::empty());
    let mut length: u64 = 0;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| s3_error!(IncompleteBody, "reading the body failed: {e}"))?;
        length += chunk.len() as u64;
        if length > MAX_PUT_SIZE {
            return Err(s3_error!(EntityTooLarge, "a single PUT is at most 5 GiB"));
        }
        file.write_all(&chunk).await.map_err(io_error)?;
    }
    file.rewind().await.map_err(io_error)?;
    req.headers_mut().insert(CONTENT_LENGTH, HeaderValue::from(length));
    let remaining = usize::try_from(length).unwrap_or(usize::MAX);
    let stream = ReaderStream::with_capacity(file.take(length), READ_CHUNK);
    let sized: DynByteStream = Box::pin(KnownLength { stream, remaining });
    *req.body_mut() = Body::from(sized);
    Ok(req)
}

/// A stream of known length, which `s3s` asks for.
struct KnownLength<S> {
    stream: S,
    remaining: usize,
}

impl<S> Stream for KnownLength<S>
where
    S: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    type Item = Result<Bytes, StdError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.stream.poll_next_unpin(cx);
        if let Poll::Ready(Some(Ok(chunk))) = &polled {
            self.remaining = self.remaining.saturating_sub(chunk.len());
        }
        polled.map(|item| item.map(|r| r.map_err(StdError::from)))
    }
}

impl<S> ByteStream for KnownLength<S>
where
    S: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    fn remaining_length(&self) -> RemainingLength {
        RemainingLength::new_exact(self.remaining)
    }
}
