//! The S3 endpoint pods use to reach their buckets.
//!
//! Requests are parsed and SigV4-verified by `s3s`; secrets come from the store's key records
//! and its operator credential ([`KeyAuth`]), and every request is authorized before any handler
//! runs ([`BucketAccess`]): a claim key only on the bucket(s) it was issued for, never for
//! CreateBucket or DeleteBucket; the operator key (see [`crate::admin`]) on everything. Bodies
//! are streamed between the socket and the files in both directions; no object is ever held
//! whole in memory.
//!
//! In front of `s3s`, [`Endpoint`] adds request ids and the request-time rules `s3s` leaves
//! out (SigV2 clock skew, the one-week limit of presigned URLs, SigV2 bucket-level resources);
//! the `rules` module holds what sits between the wire and the store: checksums the client
//! sent, preconditions, the private-only ACLs and the refusal of server-side encryption.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::{Credentials, S3Auth, SecretKey};
use s3s::dto::*;
use s3s::service::S3ServiceBuilder;
use s3s::{S3, S3Error, S3ErrorCode, S3Request, S3Response, S3Result, StdError, s3_error};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::net::TcpListener;
use tokio_util::io::ReaderStream;

use crate::store::{
    BucketStore, Checksum, ChecksumAlgorithm, ChecksumType, CompleteRequest, CompletedPartSpec,
    CopySourceCheck, ListPage, ListQuery, ObjectAttrs, ObjectInfo, PutCheck, StoreError,
    UploadInfo, Writer,
};

mod front;
mod rules;

pub use front::{Endpoint, MAX_CLOCK_SKEW, MAX_PRESIGNED_EXPIRY_SECS, RequestId};

/// The error code of a write refused by a quota.
pub const QUOTA_EXCEEDED: &str = "QuotaExceeded";
/// Most keys one listing page returns, as in S3.
const MAX_KEYS: i32 = 1000;
/// Read size when streaming an object to a client.
const READ_CHUNK: usize = 64 * 1024;
/// How long in-flight requests may finish after shutdown is asked for.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves the S3 API for `store` on `listener` until `shutdown` completes, then lets requests in
/// flight finish (for at most 30 seconds).
pub async fn serve(
    listener: TcpListener,
    store: Arc<BucketStore>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let service = service(store);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // Slow clients must not hold connections open by dribbling headers.
    builder.http1().timer(TokioTimer::new()).header_read_timeout(Duration::from_secs(30));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors and the like: back off instead of spinning.
                        tracing::warn!(error = %e, "accepting an S3 connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                // Responses go out as headers then body; with Nagle's algorithm the body waits
                // for the client's delayed ACK (~40 ms a small GET, as the benchmark showed).
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(%peer, error = %e, "could not disable Nagle's algorithm");
                }
                let conn = builder.serve_connection(TokioIo::new(stream), service.clone());
                let conn = graceful.watch(conn.into_owned());
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!(%peer, error = %e, "S3 connection ended with an error");
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await.is_err() {
        tracing::warn!("S3 connections still open after the drain timeout; closing them");
    }
    Ok(())
}

/// The endpoint's service for `store`, with authentication, per-bucket authorization and
/// request ids, for callers that run their own HTTP server.
pub fn service(store: Arc<BucketStore>) -> Endpoint {
    let mut builder = S3ServiceBuilder::new(HostPathS3 { store: store.clone() });
    builder.set_auth(KeyAuth { store: store.clone() });
    builder.set_access(BucketAccess { store: store.clone() });
    Endpoint::new(builder.build(), store)
}

/// Looks up secrets of access keys in the store.
#[derive(Debug, Clone)]
pub struct KeyAuth {
    store: Arc<BucketStore>,
}

#[async_trait::async_trait]
impl S3Auth for KeyAuth {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        // Operator key ids cannot take the claim key prefix, so the two never shadow each other.
        if let Some(admin) = self.store.admin().filter(|a| a.access_key_id() == access_key) {
            return Ok(SecretKey::from(admin.secret_access_key().to_owned()));
        }
        match self.store.lookup_key(access_key) {
            Some(key) => Ok(SecretKey::from(key.secret_access_key)),
            None => Err(s3_error!(InvalidAccessKeyId, "the access key id does not exist")),
        }
    }
}

/// Lets a claim key reach only the bucket(s) it was issued for, and the operator key
/// everything.
#[derive(Debug, Clone)]
pub struct BucketAccess {
    store: Arc<BucketStore>,
}

/// Operations only the operator credential may use.
const OPERATOR_ONLY: [&str; 2] = ["CreateBucket", "DeleteBucket"];

impl BucketAccess {
    fn is_admin(&self, credentials: Option<&Credentials>) -> bool {
        credentials.is_some_and(|c| self.store.is_admin(&c.access_key))
    }

    fn allow(&self, credentials: Option<&Credentials>, bucket: &str) -> S3Result<()> {
        let Some(credentials) = credentials else {
            return Err(s3_error!(AccessDenied, "a signature is required"));
        };
        if self.store.is_admin(&credentials.access_key) {
            return Ok(());
        }
        match self.store.lookup_key(&credentials.access_key) {
            Some(key) if key.allows(bucket) => Ok(()),
            _ => Err(s3_error!(AccessDenied, "this key may not use bucket {bucket:?}")),
        }
    }

    /// Anonymous requests are never allowed (no bucket here is public), but a missing bucket
    /// is reported as missing, as S3 does.
    fn anonymous(&self, bucket: Option<&str>) -> S3Error {
        match bucket {
            Some(bucket) if !self.store.bucket_exists(bucket).unwrap_or(true) => {
                s3_error!(NoSuchBucket, "The specified bucket does not exist")
            }
            _ => s3_error!(AccessDenied, "Access Denied"),
        }
    }

    fn allow_source(&self, credentials: Option<&Credentials>, source: &CopySource) -> S3Result<()> {
        match source {
            CopySource::Bucket { bucket, .. } => self.allow(credentials, bucket),
            _ => Err(s3_error!(NotImplemented, "only bucket copy sources are supported")),
        }
    }
}

#[async_trait::async_trait]
impl S3Access for BucketAccess {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        let credentials = cx.credentials();
        if credentials.is_none() {
            // Creating a bucket anonymously is refused before asking whether it exists.
            let bucket =
                cx.s3_path().get_bucket_name().filter(|_| cx.s3_op().name() != "CreateBucket");
            return Err(self.anonymous(bucket));
        }
        if self.is_admin(credentials) {
            return rules::refuse_encryption(cx.headers());
        }
        // Decided by operation before the bucket: a claim key may not create or delete even
        // the bucket it was issued for.
        if OPERATOR_ONLY.contains(&cx.s3_op().name()) {
            return Err(s3_error!(
                AccessDenied,
                "only the operator credential may create or delete buckets"
            ));
        }
        match cx.s3_path().get_bucket_name() {
            Some(bucket) => {
                self.allow(credentials, bucket)?;
                rules::refuse_encryption(cx.headers())
            }
            // Service-level requests (ListBuckets) only need a known key; the handler shows
            // the key's own buckets.
            None => match credentials {
                Some(c) if self.store.lookup_key(&c.access_key).is_some() => Ok(()),
                _ => Err(s3_error!(AccessDenied, "a valid signature is required")),
            },
        }
    }

    async fn copy_object(&self, req: &mut S3Request<CopyObjectInput>) -> S3Result<()> {
        self.allow_source(req.credentials.as_ref(), &req.input.copy_source)
    }

    async fn upload_part_copy(&self, req: &mut S3Request<UploadPartCopyInput>) -> S3Result<()> {
        self.allow_source(req.credentials.as_ref(), &req.input.copy_source)
    }
}

/// The S3 operations, over a [`BucketStore`].
#[derive(Debug, Clone)]
pub struct HostPathS3 {
    store: Arc<BucketStore>,
}

fn s3_err(e: StoreError) -> S3Error {
    let message = e.to_string();
    let code = match e {
        StoreError::InvalidBucketName(_) => S3ErrorCode::InvalidBucketName,
        StoreError::KeyTooLong => S3ErrorCode::KeyTooLongError,
        StoreError::NoSuchBucket(_) => S3ErrorCode::NoSuchBucket,
        StoreError::NoSuchKey(_) => S3ErrorCode::NoSuchKey,
        StoreError::BucketAlreadyExists(_) => S3ErrorCode::BucketAlreadyExists,
        StoreError::BucketAlreadyOwnedByYou(_) => S3ErrorCode::BucketAlreadyOwnedByYou,
        StoreError::BucketNotEmpty(_) => S3ErrorCode::BucketNotEmpty,
        // 409 Conflict: the request is fine, the bucket's current state forbids it.
        StoreError::BucketInUse { .. } => S3ErrorCode::InvalidBucketState,
        StoreError::NotOurs { .. } | StoreError::NotCreator(_) | StoreError::Symlink(_) => {
            S3ErrorCode::AccessDenied
        }
        // As Ceph's RGW answers a write past a quota: 403 QuotaExceeded.
        StoreError::QuotaExceeded(_) => {
            let mut error =
                S3Error::with_message(S3ErrorCode::Custom(QUOTA_EXCEEDED.into()), message);
            error.set_status_code(http::StatusCode::FORBIDDEN);
            return error;
        }
        StoreError::InvalidKey(_) | StoreError::KeyConflict(_) | StoreError::InvalidArgument(_) => {
            S3ErrorCode::InvalidArgument
        }
        StoreError::NoSuchUpload(_) => S3ErrorCode::NoSuchUpload,
        StoreError::InvalidPart(_) => S3ErrorCode::InvalidPart,
        StoreError::InvalidPartOrder => S3ErrorCode::InvalidPartOrder,
        StoreError::EntityTooSmall(_) => S3ErrorCode::EntityTooSmall,
        StoreError::BadDigest | StoreError::BadChecksum(_) => S3ErrorCode::BadDigest,
        StoreError::PreconditionFailed => S3ErrorCode::PreconditionFailed,
        StoreError::InvalidRequest(_) => S3ErrorCode::InvalidRequest,
        StoreError::InvalidRange(_) => S3ErrorCode::InvalidRange,
        StoreError::MalformedXml(_) => S3ErrorCode::MalformedXML,
        StoreError::IncompleteBody { .. } | StoreError::Body(_) => S3ErrorCode::IncompleteBody,
        StoreError::Corrupt { .. } | StoreError::Io(_) => {
            tracing::error!(error = %message, "S3 request failed in the store");
            return S3Error::with_message(S3ErrorCode::InternalError, "internal error");
        }
    };
    S3Error::with_message(code, message)
}

fn timestamp(time: SystemTime) -> Timestamp {
    Timestamp::from(time)
}

fn etag(value: &str) -> ETag {
    ETag::Strong(value.to_owned())
}

/// The standard headers and user metadata a write sets.
struct AttrsInput {
    content_type: Option<String>,
    metadata: Option<Metadata>,
    cache_control: Option<String>,
    content_disposition: Option<String>,
    content_encoding: Option<String>,
    content_language: Option<String>,
    expires: Option<Timestamp>,
}

impl AttrsInput {
    fn into_attrs(self) -> ObjectAttrs {
        ObjectAttrs {
            content_type: self.content_type,
            metadata: self.metadata.unwrap_or_default().into_iter().collect(),
            cache_control: self.cache_control,
            content_disposition: self.content_disposition,
            // aws-chunked only describes the transfer, never how the object is encoded.
            content_encoding: self
                .content_encoding
                .map(|e| {
                    e.split(',')
                        .map(str::trim)
                        .filter(|part| !part.eq_ignore_ascii_case("aws-chunked"))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .filter(|e| !e.is_empty()),
            content_language: self.content_language,
            expires: rules::expires_text(self.expires.as_ref()),
        }
    }
}

macro_rules! attrs_input {
    ($input:expr) => {
        AttrsInput {
            content_type: $input.content_type,
            metadata: $input.metadata,
            cache_control: $input.cache_control,
            content_disposition: $input.content_disposition,
            content_encoding: $input.content_encoding,
            content_language: $input.content_language,
            expires: $input.expires,
        }
    };
}

/// The five `x-amz-checksum-*` fields of an input or output, in `ChecksumAlgorithm::ALL`
/// order.
macro_rules! checksum_fields {
    ($input:expr) => {
        [
            $input.checksum_crc32.as_ref(),
            $input.checksum_crc32c.as_ref(),
            $input.checksum_crc64nvme.as_ref(),
            $input.checksum_sha1.as_ref(),
            $input.checksum_sha256.as_ref(),
        ]
    };
}

/// Sets the `checksum_*` output fields from a kept checksum.
macro_rules! set_checksum {
    ($output:expr, $checksum:expr) => {
        if let Some(checksum) = $checksum {
            let value = Some(checksum.value.clone());
            match checksum.algorithm {
                ChecksumAlgorithm::Crc32 => $output.checksum_crc32 = value,
                ChecksumAlgorithm::Crc32c => $output.checksum_crc32c = value,
                ChecksumAlgorithm::Crc64Nvme => $output.checksum_crc64nvme = value,
                ChecksumAlgorithm::Sha1 => $output.checksum_sha1 = value,
                ChecksumAlgorithm::Sha256 => $output.checksum_sha256 = value,
            }
        }
    };
}

/// Sets the standard headers of an object on a GetObject or HeadObject output.
macro_rules! set_standard_headers {
    ($output:expr, $attrs:expr) => {
        $output.content_type = $attrs.content_type.clone();
        $output.cache_control = $attrs.cache_control.clone();
        $output.content_disposition = $attrs.content_disposition.clone();
        $output.content_encoding = $attrs.content_encoding.clone();
        $output.content_language = $attrs.content_language.clone();
        $output.expires = rules::expires_of($attrs.expires.as_deref());
    };
}

fn checksum_type_of(checksum: Option<&Checksum>) -> Option<s3s::dto::ChecksumType> {
    checksum.map(|c| s3s::dto::ChecksumType::from(c.kind.name().to_owned()))
}

fn metadata_of(attrs: &ObjectAttrs) -> Option<Metadata> {
    (!attrs.metadata.is_empty()).then(|| attrs.metadata.clone().into_iter().collect())
}

fn check_of(
    headers: &http::HeaderMap,
    length: Option<i64>,
    md5: Option<&str>,
) -> S3Result<PutCheck> {
    // An empty Content-MD5 header is a malformed digest, not a missing one.
    let md5 = md5.or_else(|| headers.get("content-md5").map(|_| ""));
    let md5 = match md5 {
        None => None,
        Some(text) => {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|_| s3_error!(InvalidDigest, "Content-MD5 is not valid base64"))?;
            Some(
                <[u8; 16]>::try_from(raw.as_slice())
                    .map_err(|_| s3_error!(InvalidDigest, "Content-MD5 is not 16 bytes"))?,
            )
        }
    };
    Ok(PutCheck { length: length.and_then(|l| u64::try_from(l).ok()), md5, ..PutCheck::default() })
}

fn body_of(body: Option<StreamingBlob>) -> BoxStream<'static, Result<Bytes, StdError>> {
    match body {
        Some(body) => body.boxed(),
        None => futures::stream::empty().boxed(),
    }
}

fn object_of(info: ObjectInfo, url: bool, owner: Option<&Owner>) -> Object {
    Object {
        key: Some(encode_if(url, &info.key)),
        size: i64::try_from(info.size).ok(),
        e_tag: Some(etag(&info.etag)),
        last_modified: Some(timestamp(info.last_modified)),
        storage_class: Some(ObjectStorageClass::from_static(ObjectStorageClass::STANDARD)),
        checksum_algorithm: info
            .checksum
            .as_ref()
            .map(|c| vec![s3s::dto::ChecksumAlgorithm::from(c.algorithm.name().to_owned())]),
        checksum_type: checksum_type_of(info.checksum.as_ref()),
        owner: owner.cloned(),
        ..Object::default()
    }
}

/// Percent-encodes `text` when the client asked for `encoding-type=url`.
fn encode_if(url: bool, text: &str) -> String {
    if !url {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn wants_url(encoding: Option<&EncodingType>) -> S3Result<bool> {
    match encoding.map(EncodingType::as_str) {
        None => Ok(false),
        Some(EncodingType::URL) => Ok(true),
        Some(_) => Err(s3_error!(InvalidArgument, "Invalid Encoding Method specified in Request")),
    }
}

fn max_keys(requested: Option<i32>) -> S3Result<usize> {
    match requested {
        Some(n) if n < 0 => Err(s3_error!(InvalidArgument, "max-keys must not be negative")),
        Some(n) => Ok(usize::try_from(n.min(MAX_KEYS)).unwrap_or(0)),
        None => Ok(MAX_KEYS as usize),
    }
}

fn prefixes_of(page: &ListPage, url: bool) -> Option<CommonPrefixList> {
    let list: CommonPrefixList = page
        .common_prefixes
        .iter()
        .map(|p| CommonPrefix { prefix: Some(encode_if(url, p)) })
        .collect();
    (!list.is_empty()).then_some(list)
}

/// Continuation tokens are the hex of the last key or prefix returned: opaque to clients and
/// safe in XML whatever the key holds.
fn decode_token(token: &str) -> S3Result<String> {
    hex::decode(token)
        .ok()
        .and_then(|raw| String::from_utf8(raw).ok())
        .ok_or_else(|| s3_error!(InvalidArgument, "The continuation token provided is incorrect"))
}

/// `bytes=first-last` of UploadPartCopy, as (start, end exclusive).
fn copy_range(text: &str) -> S3Result<(u64, u64)> {
    let invalid = || {
        s3_error!(
            InvalidArgument,
            "The x-amz-copy-source-range value must be of the form bytes=first-last where first \
             and last are the zero-based offsets of the first and last bytes to copy"
        )
    };
    let (first, last) =
        text.strip_prefix("bytes=").and_then(|r| r.split_once('-')).ok_or_else(invalid)?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(first) || !digits(last) {
        return Err(invalid());
    }
    let (first, last): (u64, u64) =
        (first.parse().map_err(|_| invalid())?, last.parse().map_err(|_| invalid())?);
    if last < first {
        return Err(invalid());
    }
    Ok((first, last + 1))
}

/// Checks `x-amz-copy-source-if-*` on the source the store opens; a failure is always 412.
fn copy_source_check(
    if_match: Option<ETagCondition>,
    if_none_match: Option<ETagCondition>,
    if_modified_since: Option<Timestamp>,
    if_unmodified_since: Option<Timestamp>,
) -> CopySourceCheck {
    CopySourceCheck {
        check: Box::new(move |info: &ObjectInfo| {
            let conditions = rules::ReadConditions {
                if_match: if_match.as_ref(),
                if_none_match: if_none_match.as_ref(),
                if_modified_since: if_modified_since.as_ref(),
                if_unmodified_since: if_unmodified_since.as_ref(),
            };
            conditions
                .check(info, S3ErrorCode::PreconditionFailed)
                .map_err(|_| StoreError::PreconditionFailed)
        }),
    }
}

/// A page of at most `max` (clamped to 0..=1000) items after `marker`, and whether more follow.
fn page_of<T>(items: impl Iterator<Item = T>, max: Option<i32>) -> (Vec<T>, bool) {
    let max = usize::try_from(max.unwrap_or(MAX_KEYS).clamp(0, MAX_KEYS)).unwrap_or(0);
    let mut items = items.peekable();
    let page: Vec<T> = items.by_ref().take(max).collect();
    let more = items.peek().is_some();
    (page, more)
}

impl HostPathS3 {
    /// Repeats the access check's verdict for operator-only handlers, so that they stay safe
    /// even if the service were built without [`BucketAccess`].
    fn require_admin<T>(&self, req: &S3Request<T>) -> S3Result<()> {
        match &req.credentials {
            Some(c) if self.store.is_admin(&c.access_key) => Ok(()),
            _ => Err(s3_error!(AccessDenied, "only the operator credential may do this")),
        }
    }

    /// Who writes with this request's key, for usage and quotas: the operator, or a claim's
    /// user (a key revoked since the access check is denied).
    fn writer_of<T>(&self, req: &S3Request<T>) -> S3Result<Writer> {
        let key = req.credentials.as_ref().map(|c| c.access_key.as_str()).unwrap_or_default();
        if self.store.is_admin(key) {
            return Ok(Writer::Operator);
        }
        match self.store.user_of_key(key) {
            Some(user) => Ok(Writer::Claim(user)),
            None => Err(s3_error!(AccessDenied, "the access key id does not exist any more")),
        }
    }

    /// `NoSuchBucket` unless `bucket` exists.
    fn require_bucket(&self, bucket: &str) -> S3Result<()> {
        if self.store.bucket_exists(bucket).map_err(s3_err)? {
            Ok(())
        } else {
            Err(s3_error!(NoSuchBucket))
        }
    }

    /// When `bucket` was created: from its record, else its directory's modification time.
    fn created(&self, bucket: &str) -> SystemTime {
        match self.store.bucket_record(bucket) {
            Some(record) => UNIX_EPOCH + Duration::from_secs(record.created_unix),
            None => self
                .store
                .bucket_path(bucket)
                .ok()
                .and_then(|p| std::fs::metadata(p).ok())
                .and_then(|m| m.modified().ok())
                .unwrap_or(UNIX_EPOCH),
        }
    }

    async fn list(
        &self,
        bucket: &str,
        prefix: Option<String>,
        delimiter: Option<String>,
        after: Option<String>,
        max: Option<i32>,
    ) -> S3Result<ListPage> {
        let query = ListQuery {
            prefix: prefix.unwrap_or_default(),
            delimiter,
            after: after.filter(|a| !a.is_empty()),
            max_keys: max_keys(max)?,
        };
        self.store.list_objects(bucket, query).await.map_err(s3_err)
    }
}

fn owner_of_req<T>(req: &S3Request<T>) -> Owner {
    rules::owner_of(req.credentials.as_ref().map(|c| c.access_key.as_str()))
}

/// The part of an object GetObject serves: a range, a part, or all of it, and whether the
/// answer is partial.
struct Served {
    start: u64,
    end: u64,
    partial: bool,
}

fn served_part(info: &ObjectInfo, range: Option<&Range>, part: Option<i32>) -> S3Result<Served> {
    match (range, part) {
        (Some(_), Some(_)) => Err(s3_error!(
            InvalidRequest,
            "Cannot specify both Range header and partNumber query parameter"
        )),
        (Some(range), None) => {
            let r = range.check(info.size)?;
            Ok(Served { start: r.start, end: r.end, partial: true })
        }
        (None, Some(number)) => {
            let not_satisfiable = || {
                let mut e = S3Error::with_message(
                    S3ErrorCode::Custom("InvalidPartNumber".into()),
                    "The requested partnumber is not satisfiable",
                );
                e.set_status_code(http::StatusCode::RANGE_NOT_SATISFIABLE);
                e
            };
            let index = usize::try_from(number).ok().and_then(|n| n.checked_sub(1));
            let Some(index) = index else {
                return Err(s3_error!(
                    InvalidArgument,
                    "Part number must be an integer between 1 and 10000, inclusive"
                ));
            };
            if info.part_sizes.is_empty() {
                // A simple upload is its own single part.
                return if index == 0 {
                    Ok(Served { start: 0, end: info.size, partial: true })
                } else {
                    Err(not_satisfiable())
                };
            }
            let size = *info.part_sizes.get(index).ok_or_else(not_satisfiable)?;
            let start: u64 = info.part_sizes[..index].iter().sum();
            Ok(Served { start, end: start + size, partial: true })
        }
        (None, None) => Ok(Served { start: 0, end: info.size, partial: false }),
    }
}

/// The checksum of part `number` of a multipart object, when its upload kept them.
fn part_checksum(info: &ObjectInfo, number: Option<i32>) -> Option<Checksum> {
    let index = usize::try_from(number?).ok()?.checked_sub(1)?;
    let algorithm = info.checksum.as_ref()?.algorithm;
    let value = info.part_checksums.get(index)?.clone();
    Some(Checksum { algorithm, value, kind: ChecksumType::FullObject })
}

#[async_trait::async_trait]
impl S3 for HostPathS3 {
    async fn list_buckets(
        &self,
        req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
        let owner = owner_of_req(&req);
        let access_key = req.credentials.as_ref().map(|c| c.access_key.as_str());
        let names = match access_key {
            Some(id) if self.store.is_admin(id) => {
                self.store.bucket_names().await.map_err(s3_err)?
            }
            Some(id) => {
                let key = self.store.lookup_key(id).ok_or_else(|| s3_error!(AccessDenied))?;
                let mut names = Vec::new();
                for name in key.buckets {
                    if self.store.bucket_exists(&name).map_err(s3_err)? {
                        names.push(name);
                    }
                }
                names
            }
            None => return Err(s3_error!(AccessDenied)),
        };
        let buckets = names
            .into_iter()
            .map(|name| Bucket {
                creation_date: Some(timestamp(self.created(&name))),
                name: Some(name),
                ..Bucket::default()
            })
            .collect();
        Ok(S3Response::new(ListBucketsOutput {
            buckets: Some(buckets),
            owner: Some(owner),
            ..Default::default()
        }))
    }

    async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        self.require_admin(&req)?;
        let region = req.region.as_ref().map(|r| r.as_str().to_owned());
        let input = req.input;
        if input.object_lock_enabled_for_bucket == Some(true) {
            return Err(s3_error!(NotImplemented, "object lock is not supported"));
        }
        // ACLs and ownership controls are accepted and ignored: buckets here are never public,
        // whatever the operator asks for at creation (GetBucketAcl shows them private).
        let constraint = input
            .create_bucket_configuration
            .as_ref()
            .and_then(|c| c.location_constraint.as_ref())
            .map(|c| c.as_str().to_owned());
        let here = region.unwrap_or_else(|| "us-east-1".to_owned());
        if let Some(constraint) = constraint.filter(|c| !c.is_empty())
            && constraint != here
        {
            return Err(s3_error!(
                IllegalLocationConstraintException,
                "The {constraint} location constraint is incompatible for the region \
                 specific endpoint this request was sent to."
            ));
        }
        match self.store.create_operator_bucket(&input.bucket).await {
            Ok(_) => {}
            // S3's legacy rule in us-east-1: creating again a bucket one owns answers 200 (and
            // changes nothing here); every other region answers BucketAlreadyOwnedByYou.
            Err(StoreError::BucketAlreadyOwnedByYou(_)) if here == "us-east-1" => {}
            Err(e) => return Err(s3_err(e)),
        }
        Ok(S3Response::new(CreateBucketOutput { location: Some(format!("/{}", input.bucket)) }))
    }

    async fn delete_bucket(
        &self,
        req: S3Request<DeleteBucketInput>,
    ) -> S3Result<S3Response<DeleteBucketOutput>> {
        self.require_admin(&req)?;
        self.store.delete_empty_bucket(&req.input.bucket).await.map_err(s3_err)?;
        Ok(S3Response::new(DeleteBucketOutput::default()))
    }

    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        self.require_bucket(&req.input.bucket)?;
        Ok(S3Response::new(HeadBucketOutput::default()))
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        self.require_bucket(&req.input.bucket)?;
        // us-east-1 is shown as an empty constraint, as S3 does.
        let constraint = req
            .region
            .as_ref()
            .map(|r| r.as_str().to_owned())
            .filter(|r| r != "us-east-1" && !r.is_empty())
            .map(BucketLocationConstraint::from);
        Ok(S3Response::new(GetBucketLocationOutput { location_constraint: constraint }))
    }

    async fn get_bucket_acl(
        &self,
        req: S3Request<GetBucketAclInput>,
    ) -> S3Result<S3Response<GetBucketAclOutput>> {
        self.require_bucket(&req.input.bucket)?;
        let (owner, grants) = rules::private_acl(owner_of_req(&req));
        Ok(S3Response::new(GetBucketAclOutput { owner: Some(owner), grants: Some(grants) }))
    }

    async fn put_bucket_acl(
        &self,
        req: S3Request<PutBucketAclInput>,
    ) -> S3Result<S3Response<PutBucketAclOutput>> {
        self.require_bucket(&req.input.bucket)?;
        let owner = owner_of_req(&req);
        let input = &req.input;
        rules::require_private_acl(
            input.acl.as_ref().map(BucketCannedACL::as_str),
            &[
                input.grant_full_control.as_ref(),
                input.grant_read.as_ref(),
                input.grant_read_acp.as_ref(),
                input.grant_write.as_ref(),
                input.grant_write_acp.as_ref(),
            ],
        )?;
        require_owner_only_policy(input.access_control_policy.as_ref(), &owner)?;
        Ok(S3Response::new(PutBucketAclOutput::default()))
    }

    async fn get_object_acl(
        &self,
        req: S3Request<GetObjectAclInput>,
    ) -> S3Result<S3Response<GetObjectAclOutput>> {
        self.store.head_object(&req.input.bucket, &req.input.key).await.map_err(s3_err)?;
        let (owner, grants) = rules::private_acl(owner_of_req(&req));
        Ok(S3Response::new(GetObjectAclOutput {
            owner: Some(owner),
            grants: Some(grants),
            ..Default::default()
        }))
    }

    async fn put_object_acl(
        &self,
        req: S3Request<PutObjectAclInput>,
    ) -> S3Result<S3Response<PutObjectAclOutput>> {
        self.store.head_object(&req.input.bucket, &req.input.key).await.map_err(s3_err)?;
        let owner = owner_of_req(&req);
        let input = &req.input;
        rules::require_private_acl(
            input.acl.as_ref().map(ObjectCannedACL::as_str),
            &[
                input.grant_full_control.as_ref(),
                input.grant_read.as_ref(),
                input.grant_read_acp.as_ref(),
                input.grant_write.as_ref(),
                input.grant_write_acp.as_ref(),
            ],
        )?;
        require_owner_only_policy(input.access_control_policy.as_ref(), &owner)?;
        Ok(S3Response::new(PutObjectAclOutput::default()))
    }

    async fn list_objects(
        &self,
        req: S3Request<ListObjectsInput>,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        let owner = owner_of_req(&req);
        let input = req.input;
        let url = wants_url(input.encoding_type.as_ref())?;
        let page = self
            .list(
                &input.bucket,
                input.prefix.clone(),
                input.delimiter.clone(),
                input.marker.clone(),
                input.max_keys,
            )
            .await?;
        let common_prefixes = prefixes_of(&page, url);
        // S3 documents NextMarker for delimited listings only; it is sent whenever the page is
        // truncated, which clients paging by it rely on.
        let next_marker = page.next_after.as_deref().map(|m| encode_if(url, m));
        Ok(S3Response::new(ListObjectsOutput {
            name: Some(input.bucket),
            // V1 clients (botocore among them) decode Delimiter and markers, never Prefix.
            prefix: Some(input.prefix.clone().unwrap_or_default()),
            delimiter: input.delimiter.filter(|d| !d.is_empty()).map(|d| encode_if(url, &d)),
            marker: Some(encode_if(url, input.marker.as_deref().unwrap_or_default())),
            max_keys: Some(input.max_keys.unwrap_or(MAX_KEYS)),
            is_truncated: Some(page.is_truncated),
            next_marker,
            common_prefixes,
            contents: Some(
                page.objects.into_iter().map(|o| object_of(o, url, Some(&owner))).collect(),
            ),
            encoding_type: input.encoding_type,
            ..Default::default()
        }))
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        let owner = owner_of_req(&req);
        let input = req.input;
        let url = wants_url(input.encoding_type.as_ref())?;
        let after = match input.continuation_token.as_deref() {
            Some(token) => Some(decode_token(token)?),
            None => input.start_after.clone(),
        };
        let page = self
            .list(
                &input.bucket,
                input.prefix.clone(),
                input.delimiter.clone(),
                after,
                input.max_keys,
            )
            .await?;
        let common_prefixes = prefixes_of(&page, url);
        let key_count = page.objects.len() + page.common_prefixes.len();
        let owner = (input.fetch_owner == Some(true)).then_some(owner);
        Ok(S3Response::new(ListObjectsV2Output {
            name: Some(input.bucket),
            prefix: Some(encode_if(url, input.prefix.as_deref().unwrap_or_default())),
            delimiter: input.delimiter.filter(|d| !d.is_empty()).map(|d| encode_if(url, &d)),
            max_keys: Some(input.max_keys.unwrap_or(MAX_KEYS)),
            key_count: i32::try_from(key_count).ok(),
            continuation_token: input.continuation_token,
            start_after: input.start_after.map(|s| encode_if(url, &s)),
            is_truncated: Some(page.is_truncated),
            next_continuation_token: page.next_after.as_deref().map(|k| hex::encode(k.as_bytes())),
            common_prefixes,
            contents: Some(
                page.objects.into_iter().map(|o| object_of(o, url, owner.as_ref())).collect(),
            ),
            encoding_type: input.encoding_type,
            ..Default::default()
        }))
    }

    async fn list_object_versions(
        &self,
        req: S3Request<ListObjectVersionsInput>,
    ) -> S3Result<S3Response<ListObjectVersionsOutput>> {
        // Buckets here are never versioned: every object is its own only version, "null".
        let owner = owner_of_req(&req);
        let input = req.input;
        let url = wants_url(input.encoding_type.as_ref())?;
        let page = self
            .list(
                &input.bucket,
                input.prefix.clone(),
                input.delimiter.clone(),
                input.key_marker.clone(),
                input.max_keys,
            )
            .await?;
        let common_prefixes = prefixes_of(&page, url);
        let versions = page
            .objects
            .into_iter()
            .map(|info| ObjectVersion {
                key: Some(encode_if(url, &info.key)),
                version_id: Some("null".to_owned()),
                is_latest: Some(true),
                e_tag: Some(etag(&info.etag)),
                size: i64::try_from(info.size).ok(),
                last_modified: Some(timestamp(info.last_modified)),
                storage_class: Some(ObjectVersionStorageClass::from_static(
                    ObjectVersionStorageClass::STANDARD,
                )),
                checksum_type: checksum_type_of(info.checksum.as_ref()),
                owner: Some(owner.clone()),
                ..ObjectVersion::default()
            })
            .collect();
        let truncated = page.is_truncated;
        Ok(S3Response::new(ListObjectVersionsOutput {
            name: Some(input.bucket),
            prefix: Some(encode_if(url, input.prefix.as_deref().unwrap_or_default())),
            delimiter: input.delimiter.filter(|d| !d.is_empty()).map(|d| encode_if(url, &d)),
            key_marker: Some(encode_if(url, input.key_marker.as_deref().unwrap_or_default())),
            version_id_marker: Some(input.version_id_marker.unwrap_or_default()),
            max_keys: Some(input.max_keys.unwrap_or(MAX_KEYS)),
            is_truncated: Some(truncated),
            next_key_marker: page.next_after.as_deref().map(|k| encode_if(url, k)),
            next_version_id_marker: truncated.then(|| "null".to_owned()),
            versions: Some(versions),
            common_prefixes,
            encoding_type: input.encoding_type,
            ..Default::default()
        }))
    }

    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let writer = self.writer_of(&req)?;
        let input = req.input;
        rules::require_private_acl(
            input.acl.as_ref().map(ObjectCannedACL::as_str),
            &[
                input.grant_full_control.as_ref(),
                input.grant_read.as_ref(),
                input.grant_read_acp.as_ref(),
                input.grant_write_acp.as_ref(),
            ],
        )?;
        let mut check = check_of(&req.headers, input.content_length, input.content_md5.as_deref())?;
        check.checksum = rules::checksum_check(
            &req.headers,
            checksum_fields!(input),
            input.checksum_algorithm.as_ref().map(s3s::dto::ChecksumAlgorithm::as_str),
            req.trailing_headers.as_ref(),
        )?;
        check.condition =
            rules::write_condition(input.if_match.as_ref(), input.if_none_match.as_ref())?;
        let body = body_of(input.body);
        let attrs = attrs_input!(input).into_attrs();
        let info = self
            .store
            .put_object(&input.bucket, &input.key, attrs, body, check, &writer)
            .await
            .map_err(s3_err)?;
        let mut output = PutObjectOutput {
            e_tag: Some(etag(&info.etag)),
            size: i64::try_from(info.size).ok(),
            checksum_type: checksum_type_of(info.checksum.as_ref()),
            ..Default::default()
        };
        set_checksum!(output, info.checksum.as_ref());
        Ok(S3Response::new(output))
    }

    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        let input = req.input;
        let (info, file) =
            self.store.open_object(&input.bucket, &input.key).await.map_err(s3_err)?;
        rules::ReadConditions {
            if_match: input.if_match.as_ref(),
            if_none_match: input.if_none_match.as_ref(),
            if_modified_since: input.if_modified_since.as_ref(),
            if_unmodified_since: input.if_unmodified_since.as_ref(),
        }
        .check(&info, S3ErrorCode::NotModified)?;
        let served = served_part(&info, input.range.as_ref(), input.part_number)?;
        let (start, end) = (served.start, served.end);
        let body = match file {
            Some(mut file) => {
                if start > 0 {
                    file.seek(io::SeekFrom::Start(start)).await.map_err(|e| s3_err(e.into()))?;
                }
                // Streamed in fixed-size reads, only the requested range.
                let reader = file.take(end - start);
                Some(StreamingBlob::wrap(ReaderStream::with_capacity(reader, READ_CHUNK)))
            }
            None => None,
        };
        let content_range = served
            .partial
            .then(|| format!("bytes {start}-{}/{}", end.saturating_sub(1), info.size));
        // A checksum describes the whole object (or, with partNumber, a part): never a range.
        let whole = !served.partial || (input.part_number.is_some() && info.part_sizes.len() <= 1);
        let checksum_enabled =
            input.checksum_mode.as_ref().is_some_and(|m| m.as_str() == ChecksumMode::ENABLED);
        let mut output = GetObjectOutput {
            body,
            content_length: i64::try_from(end - start).ok(),
            content_range,
            accept_ranges: Some("bytes".to_owned()),
            e_tag: Some(etag(&info.etag)),
            last_modified: Some(timestamp(info.last_modified)),
            metadata: metadata_of(&info.attrs),
            parts_count: info.parts.and_then(|p| i32::try_from(p).ok()),
            storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
            ..Default::default()
        };
        set_standard_headers!(output, info.attrs);
        if checksum_enabled && whole {
            output.checksum_type = checksum_type_of(info.checksum.as_ref());
            set_checksum!(output, info.checksum.as_ref());
        } else if checksum_enabled && let Some(part) = part_checksum(&info, input.part_number) {
            // One part of a multipart object: that part's own checksum.
            output.checksum_type = checksum_type_of(Some(&part));
            set_checksum!(output, Some(&part));
        }
        // The response-* query parameters override what the object was stored with.
        if let Some(v) = input.response_content_type {
            output.content_type = Some(v);
        }
        if let Some(v) = input.response_cache_control {
            output.cache_control = Some(v);
        }
        if let Some(v) = input.response_content_disposition {
            output.content_disposition = Some(v);
        }
        if let Some(v) = input.response_content_encoding {
            output.content_encoding = Some(v);
        }
        if let Some(v) = input.response_content_language {
            output.content_language = Some(v);
        }
        if let Some(v) = input.response_expires {
            output.expires = Some(v);
        }
        Ok(S3Response::new(output))
    }

    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        let input = req.input;
        let info = self.store.head_object(&input.bucket, &input.key).await.map_err(s3_err)?;
        rules::ReadConditions {
            if_match: input.if_match.as_ref(),
            if_none_match: input.if_none_match.as_ref(),
            if_modified_since: input.if_modified_since.as_ref(),
            if_unmodified_since: input.if_unmodified_since.as_ref(),
        }
        .check(&info, S3ErrorCode::NotModified)?;
        let served = served_part(&info, input.range.as_ref(), input.part_number)?;
        let checksum_enabled =
            input.checksum_mode.as_ref().is_some_and(|m| m.as_str() == ChecksumMode::ENABLED);
        let mut output = HeadObjectOutput {
            content_length: i64::try_from(served.end - served.start).ok(),
            content_range: served.partial.then(|| {
                format!("bytes {}-{}/{}", served.start, served.end.saturating_sub(1), info.size)
            }),
            accept_ranges: Some("bytes".to_owned()),
            e_tag: Some(etag(&info.etag)),
            last_modified: Some(timestamp(info.last_modified)),
            metadata: metadata_of(&info.attrs),
            parts_count: info.parts.and_then(|p| i32::try_from(p).ok()),
            storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
            ..Default::default()
        };
        set_standard_headers!(output, info.attrs);
        if checksum_enabled && !served.partial {
            output.checksum_type = checksum_type_of(info.checksum.as_ref());
            set_checksum!(output, info.checksum.as_ref());
        } else if checksum_enabled && let Some(part) = part_checksum(&info, input.part_number) {
            output.checksum_type = checksum_type_of(Some(&part));
            set_checksum!(output, Some(&part));
        }
        Ok(S3Response::new(output))
    }

    async fn get_object_attributes(
        &self,
        req: S3Request<GetObjectAttributesInput>,
    ) -> S3Result<S3Response<GetObjectAttributesOutput>> {
        let input = req.input;
        let info = self.store.head_object(&input.bucket, &input.key).await.map_err(s3_err)?;
        let wants = |name: &str| input.object_attributes.iter().any(|a| a.as_str() == name);
        let mut output = GetObjectAttributesOutput {
            last_modified: Some(timestamp(info.last_modified)),
            ..Default::default()
        };
        if wants(ObjectAttributes::ETAG) {
            output.e_tag = Some(etag(&info.etag));
        }
        if wants(ObjectAttributes::OBJECT_SIZE) {
            output.object_size = i64::try_from(info.size).ok();
        }
        if wants(ObjectAttributes::STORAGE_CLASS) {
            output.storage_class = Some(StorageClass::from_static(StorageClass::STANDARD));
        }
        if wants(ObjectAttributes::CHECKSUM)
            && let Some(checksum) = &info.checksum
        {
            let mut out = s3s::dto::Checksum {
                checksum_type: checksum_type_of(Some(checksum)),
                ..Default::default()
            };
            set_checksum!(out, Some(checksum));
            output.checksum = Some(out);
        }
        if wants(ObjectAttributes::OBJECT_PARTS) && !info.part_sizes.is_empty() {
            let marker = input.part_number_marker.unwrap_or(0).max(0);
            let algorithm = info.checksum.as_ref().map(|c| c.algorithm);
            let parts = info.part_sizes.iter().enumerate().filter_map(|(i, size)| {
                let number = i32::try_from(i + 1).ok()?;
                (number > marker).then(|| {
                    let mut part = ObjectPart {
                        part_number: Some(number),
                        size: i64::try_from(*size).ok(),
                        ..Default::default()
                    };
                    if let (Some(algorithm), Some(value)) = (algorithm, info.part_checksums.get(i))
                    {
                        let checksum = Checksum {
                            algorithm,
                            value: value.clone(),
                            kind: ChecksumType::FullObject,
                        };
                        set_checksum!(part, Some(&checksum));
                    }
                    part
                })
            });
            let (page, truncated) = page_of(parts, input.max_parts);
            output.object_parts = Some(GetObjectAttributesParts {
                total_parts_count: i32::try_from(info.part_sizes.len()).ok(),
                part_number_marker: Some(marker),
                next_part_number_marker: page.last().and_then(|p| p.part_number),
                max_parts: Some(input.max_parts.unwrap_or(MAX_KEYS)),
                is_truncated: Some(truncated),
                parts: Some(page),
            });
        }
        Ok(S3Response::new(output))
    }

    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        let input = req.input;
        self.store.delete_object(&input.bucket, &input.key).await.map_err(s3_err)?;
        Ok(S3Response::new(DeleteObjectOutput::default()))
    }

    async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let input = req.input;
        if input.delete.objects.len() > MAX_KEYS as usize {
            return Err(s3_error!(
                MalformedXML,
                "The XML you provided was not well-formed or did not validate against our \
                 published schema: at most 1000 keys can be deleted at once"
            ));
        }
        self.require_bucket(&input.bucket)?;
        let quiet = input.delete.quiet.unwrap_or(false);
        let (mut deleted, mut errors) = (Vec::new(), Vec::new());
        for object in input.delete.objects {
            match self.store.delete_object(&input.bucket, &object.key).await {
                Ok(()) => {
                    if !quiet {
                        deleted.push(DeletedObject {
                            key: Some(object.key),
                            ..DeletedObject::default()
                        });
                    }
                }
                Err(e) => {
                    let e = s3_err(e);
                    errors.push(Error {
                        code: Some(e.code().as_str().to_owned()),
                        key: Some(object.key),
                        message: e.message().map(str::to_owned),
                        ..Error::default()
                    });
                }
            }
        }
        Ok(S3Response::new(DeleteObjectsOutput {
            deleted: Some(deleted),
            errors: (!errors.is_empty()).then_some(errors),
            ..Default::default()
        }))
    }

    async fn copy_object(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        let writer = self.writer_of(&req)?;
        let input = req.input;
        let CopySource::Bucket { bucket: src_bucket, key: src_key, version_id } =
            &input.copy_source
        else {
            return Err(s3_error!(NotImplemented, "only bucket copy sources are supported"));
        };
        if version_id.as_deref().is_some_and(|v| v != "null") {
            return Err(s3_error!(NoSuchVersion, "buckets here are not versioned"));
        }
        rules::require_private_acl(
            input.acl.as_ref().map(ObjectCannedACL::as_str),
            &[
                input.grant_full_control.as_ref(),
                input.grant_read.as_ref(),
                input.grant_read_acp.as_ref(),
                input.grant_write_acp.as_ref(),
            ],
        )?;
        let replace = input
            .metadata_directive
            .as_ref()
            .is_some_and(|d| d.as_str() == MetadataDirective::REPLACE);
        let source_check = copy_source_check(
            input.copy_source_if_match.clone(),
            input.copy_source_if_none_match.clone(),
            input.copy_source_if_modified_since.clone(),
            input.copy_source_if_unmodified_since.clone(),
        );
        let (src_bucket, src_key) = (src_bucket.to_string(), src_key.to_string());
        let attrs = replace.then(|| attrs_input!(input).into_attrs());
        let (dst_bucket, dst_key) = (&input.bucket, &input.key);
        let info = self
            .store
            .copy_object(&src_bucket, &src_key, dst_bucket, dst_key, attrs, source_check, &writer)
            .await
            .map_err(s3_err)?;
        let mut result = CopyObjectResult {
            e_tag: Some(etag(&info.etag)),
            last_modified: Some(timestamp(info.last_modified)),
            checksum_type: checksum_type_of(info.checksum.as_ref()),
            ..Default::default()
        };
        set_checksum!(result, info.checksum.as_ref());
        Ok(S3Response::new(CopyObjectOutput {
            copy_object_result: Some(result),
            ..Default::default()
        }))
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        let writer = self.writer_of(&req)?;
        let input = req.input;
        rules::require_private_acl(
            input.acl.as_ref().map(ObjectCannedACL::as_str),
            &[
                input.grant_full_control.as_ref(),
                input.grant_read.as_ref(),
                input.grant_read_acp.as_ref(),
                input.grant_write_acp.as_ref(),
            ],
        )?;
        let checksum = rules::upload_checksum(
            input.checksum_algorithm.as_ref().map(s3s::dto::ChecksumAlgorithm::as_str),
            input.checksum_type.as_ref().map(s3s::dto::ChecksumType::as_str),
        )?;
        let (bucket, key) = (input.bucket.clone(), input.key.clone());
        let attrs = attrs_input!(input).into_attrs();
        let id = self
            .store
            .create_upload(&bucket, &key, attrs, checksum, &writer)
            .await
            .map_err(s3_err)?;
        Ok(S3Response::new(CreateMultipartUploadOutput {
            bucket: Some(bucket),
            key: Some(key),
            upload_id: Some(id),
            checksum_algorithm: checksum
                .map(|(a, _)| s3s::dto::ChecksumAlgorithm::from(a.name().to_owned())),
            checksum_type: checksum.map(|(_, t)| s3s::dto::ChecksumType::from(t.name().to_owned())),
            ..Default::default()
        }))
    }

    async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        let writer = self.writer_of(&req)?;
        let input = req.input;
        let mut check = check_of(&req.headers, input.content_length, input.content_md5.as_deref())?;
        check.checksum = rules::checksum_check(
            &req.headers,
            checksum_fields!(input),
            input.checksum_algorithm.as_ref().map(s3s::dto::ChecksumAlgorithm::as_str),
            req.trailing_headers.as_ref(),
        )?;
        let part = self
            .store
            .upload_part(
                &input.bucket,
                &input.key,
                &input.upload_id,
                input.part_number,
                body_of(input.body),
                check,
                &writer,
            )
            .await
            .map_err(s3_err)?;
        let mut output = UploadPartOutput { e_tag: Some(etag(&part.etag)), ..Default::default() };
        set_checksum!(output, part.checksum.as_ref());
        Ok(S3Response::new(output))
    }

    async fn upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        let writer = self.writer_of(&req)?;
        let input = req.input;
        let CopySource::Bucket { bucket: src_bucket, key: src_key, version_id } =
            &input.copy_source
        else {
            return Err(s3_error!(NotImplemented, "only bucket copy sources are supported"));
        };
        if version_id.as_deref().is_some_and(|v| v != "null") {
            return Err(s3_error!(NoSuchVersion, "buckets here are not versioned"));
        }
        let range = input.copy_source_range.as_deref().map(copy_range).transpose()?;
        let source_check = copy_source_check(
            input.copy_source_if_match.clone(),
            input.copy_source_if_none_match.clone(),
            input.copy_source_if_modified_since.clone(),
            input.copy_source_if_unmodified_since.clone(),
        );
        let part = self
            .store
            .upload_part_copy(
                &input.bucket,
                &input.key,
                &input.upload_id,
                input.part_number,
                (src_bucket, src_key),
                range,
                source_check,
                &writer,
            )
            .await
            .map_err(s3_err)?;
        let mut result = CopyPartResult {
            e_tag: Some(etag(&part.etag)),
            last_modified: Some(timestamp(part.last_modified)),
            ..Default::default()
        };
        set_checksum!(result, part.checksum.as_ref());
        Ok(S3Response::new(UploadPartCopyOutput {
            copy_part_result: Some(result),
            ..Default::default()
        }))
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let writer = self.writer_of(&req)?;
        let input = req.input;
        let mut parts = Vec::new();
        for part in
            input.multipart_upload.as_ref().and_then(|m| m.parts.clone()).unwrap_or_default()
        {
            let (Some(number), Some(tag)) = (part.part_number, part.e_tag.as_ref()) else {
                return Err(s3_error!(InvalidPart, "every part needs a PartNumber and an ETag"));
            };
            let number = u32::try_from(number).map_err(|_| s3_error!(InvalidPart))?;
            let checksum = ChecksumAlgorithm::ALL
                .into_iter()
                .zip(checksum_fields!(part))
                .find_map(|(a, v)| Some((a, v?.clone())));
            parts.push(CompletedPartSpec { number, etag: tag.value().to_owned(), checksum });
        }
        let checksum = ChecksumAlgorithm::ALL
            .into_iter()
            .zip(checksum_fields!(input))
            .find_map(|(a, v)| Some((a, v?.clone())));
        let condition =
            rules::write_condition(input.if_match.as_ref(), input.if_none_match.as_ref())?;
        let request = CompleteRequest { parts, checksum, condition };
        let info = self
            .store
            .complete_upload(&input.bucket, &input.key, &input.upload_id, request, &writer)
            .await
            .map_err(s3_err)?;
        let mut output = CompleteMultipartUploadOutput {
            location: Some(format!("/{}/{}", input.bucket, input.key)),
            bucket: Some(input.bucket),
            key: Some(input.key),
            e_tag: Some(etag(&info.etag)),
            checksum_type: checksum_type_of(info.checksum.as_ref()),
            ..Default::default()
        };
        set_checksum!(output, info.checksum.as_ref());
        Ok(S3Response::new(output))
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        let input = req.input;
        self.store
            .abort_upload(&input.bucket, &input.key, &input.upload_id)
            .await
            .map_err(s3_err)?;
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
    }

    async fn list_parts(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        let owner = owner_of_req(&req);
        let input = req.input;
        let (upload, all) = self
            .store
            .list_parts(&input.bucket, &input.key, &input.upload_id)
            .await
            .map_err(s3_err)?;
        let marker = input.part_number_marker.unwrap_or(0).max(0);
        let rest = all.into_iter().filter(|p| i64::from(p.part_number) > i64::from(marker));
        let (page, is_truncated) = page_of(rest, input.max_parts);
        let next_marker = page.last().and_then(|p| i32::try_from(p.part_number).ok());
        let parts = page
            .into_iter()
            .map(|p| {
                let mut part = Part {
                    e_tag: Some(etag(&p.etag)),
                    last_modified: Some(timestamp(p.last_modified)),
                    part_number: i32::try_from(p.part_number).ok(),
                    size: i64::try_from(p.size).ok(),
                    ..Part::default()
                };
                set_checksum!(part, p.checksum.as_ref());
                part
            })
            .collect();
        Ok(S3Response::new(ListPartsOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(input.upload_id),
            part_number_marker: input.part_number_marker,
            max_parts: Some(input.max_parts.unwrap_or(MAX_KEYS).clamp(0, MAX_KEYS)),
            is_truncated: Some(is_truncated),
            next_part_number_marker: if is_truncated { next_marker } else { None },
            parts: Some(parts),
            checksum_algorithm: upload
                .checksum_algorithm
                .map(|a| s3s::dto::ChecksumAlgorithm::from(a.name().to_owned())),
            checksum_type: upload
                .checksum_type
                .map(|t| s3s::dto::ChecksumType::from(t.name().to_owned())),
            initiator: Some(Initiator {
                id: owner.id.clone(),
                display_name: owner.display_name.clone(),
            }),
            owner: Some(owner),
            storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
            ..Default::default()
        }))
    }

    async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        let owner = owner_of_req(&req);
        let input = req.input;
        let url = wants_url(input.encoding_type.as_ref())?;
        let prefix = input.prefix.clone().unwrap_or_default();
        let delimiter = input.delimiter.clone().filter(|d| !d.is_empty());
        let key_marker = input.key_marker.clone().unwrap_or_default();
        let id_marker = input.upload_id_marker.clone().filter(|_| !key_marker.is_empty());
        let all = self.store.list_uploads(&input.bucket).await.map_err(s3_err)?;
        let max =
            usize::try_from(input.max_uploads.unwrap_or(MAX_KEYS).clamp(0, MAX_KEYS)).unwrap_or(0);
        let (mut uploads, mut prefixes): (Vec<UploadInfo>, Vec<String>) = (Vec::new(), Vec::new());
        let mut truncated = false;
        // Uploads of one key are listed by start time, not by id: the marker key's later uploads
        // are those after the marker upload in that order (by id only should it be gone).
        let marker_listed =
            id_marker.as_ref().is_some_and(|id| all.iter().any(|u| u.upload_id == *id));
        let mut past_marker = false;
        for upload in all.into_iter().filter(|u| u.key.starts_with(&prefix)) {
            let after = match &id_marker {
                Some(id) if upload.key == key_marker && marker_listed => {
                    let after = past_marker;
                    past_marker |= upload.upload_id == *id;
                    after
                }
                Some(id) => {
                    upload.key > key_marker || (upload.key == key_marker && upload.upload_id > *id)
                }
                None => upload.key > key_marker,
            };
            if !after {
                continue;
            }
            let rolled = delimiter.as_deref().and_then(|d| {
                upload.key[prefix.len()..]
                    .find(d)
                    .map(|at| upload.key[..prefix.len() + at + d.len()].to_owned())
            });
            if let Some(common) = &rolled
                && prefixes.last() == Some(common)
            {
                continue;
            }
            if uploads.len() + prefixes.len() == max {
                truncated = true;
                break;
            }
            match rolled {
                Some(common) => prefixes.push(common),
                None => uploads.push(upload),
            }
        }
        let next_key = uploads.last().map(|u| u.key.clone());
        let next_id = uploads.last().map(|u| u.upload_id.clone());
        let list = uploads
            .into_iter()
            .map(|u| MultipartUpload {
                key: Some(encode_if(url, &u.key)),
                upload_id: Some(u.upload_id),
                initiated: Some(timestamp(u.initiated)),
                initiator: Some(Initiator {
                    id: owner.id.clone(),
                    display_name: owner.display_name.clone(),
                }),
                owner: Some(owner.clone()),
                storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
                checksum_algorithm: u
                    .checksum_algorithm
                    .map(|a| s3s::dto::ChecksumAlgorithm::from(a.name().to_owned())),
                checksum_type: u
                    .checksum_type
                    .map(|t| s3s::dto::ChecksumType::from(t.name().to_owned())),
            })
            .collect();
        let common_prefixes: CommonPrefixList =
            prefixes.iter().map(|p| CommonPrefix { prefix: Some(encode_if(url, p)) }).collect();
        Ok(S3Response::new(ListMultipartUploadsOutput {
            bucket: Some(input.bucket),
            prefix: Some(encode_if(url, &prefix)),
            delimiter: input.delimiter.filter(|d| !d.is_empty()).map(|d| encode_if(url, &d)),
            key_marker: Some(encode_if(url, &key_marker)),
            upload_id_marker: Some(input.upload_id_marker.unwrap_or_default()),
            max_uploads: Some(input.max_uploads.unwrap_or(MAX_KEYS)),
            is_truncated: Some(truncated),
            next_key_marker: if truncated { next_key.map(|k| encode_if(url, &k)) } else { None },
            next_upload_id_marker: if truncated { next_id } else { None },
            uploads: Some(list),
            common_prefixes: (!common_prefixes.is_empty()).then_some(common_prefixes),
            encoding_type: input.encoding_type,
            ..Default::default()
        }))
    }
}

/// An AccessControlPolicy body may only restate the private ACL: the owner with full control.
fn require_owner_only_policy(policy: Option<&AccessControlPolicy>, owner: &Owner) -> S3Result<()> {
    let Some(policy) = policy else { return Ok(()) };
    let grants = policy.grants.as_deref().unwrap_or_default();
    let owner_only = grants.iter().all(|grant| {
        let full =
            grant.permission.as_ref().is_some_and(|p| p.as_str() == Permission::FULL_CONTROL);
        let to_owner = grant.grantee.as_ref().is_some_and(|g| g.id.is_some() && g.id == owner.id);
        full && to_owner
    });
    if owner_only { Ok(()) } else { Err(rules::acl_not_supported()) }
}
