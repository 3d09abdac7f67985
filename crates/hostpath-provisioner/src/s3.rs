//! The S3 endpoint pods use to reach their buckets.
//!
//! Requests are parsed and SigV4-verified by `s3s`; secrets come from the store's key records
//! and its operator credential ([`KeyAuth`]), and every request is authorized before any handler
//! runs ([`BucketAccess`]): a claim key only on the bucket(s) it was issued for, never for
//! CreateBucket or DeleteBucket; the operator key (see [`crate::admin`]) on everything. Bodies
//! are streamed between the socket and the files in both directions; no object is ever held
//! whole in memory.

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
    BucketStore, ListPage, ListQuery, ObjectAttrs, ObjectInfo, PutCheck, StoreError,
};

mod front;

pub use front::{Endpoint, MAX_CLOCK_SKEW, MAX_PRESIGNED_EXPIRY_SECS, RequestId};

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
    builder.set_access(BucketAccess { store });
    Endpoint::new(builder.build())
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
        if self.is_admin(credentials) {
            return Ok(());
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
            Some(bucket) => self.allow(credentials, bucket),
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
        StoreError::NotOurs { .. } | StoreError::Symlink(_) => S3ErrorCode::AccessDenied,
        StoreError::InvalidKey(_) | StoreError::KeyConflict(_) | StoreError::InvalidArgument(_) => {
            S3ErrorCode::InvalidArgument
        }
        StoreError::NoSuchUpload(_) => S3ErrorCode::NoSuchUpload,
        StoreError::InvalidPart(_) => S3ErrorCode::InvalidPart,
        StoreError::InvalidPartOrder => S3ErrorCode::InvalidPartOrder,
        StoreError::EntityTooSmall(_) => S3ErrorCode::EntityTooSmall,
        StoreError::BadDigest => S3ErrorCode::BadDigest,
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

fn attrs_of(content_type: Option<String>, metadata: Option<Metadata>) -> ObjectAttrs {
    ObjectAttrs { content_type, metadata: metadata.unwrap_or_default().into_iter().collect() }
}

fn metadata_of(attrs: &ObjectAttrs) -> Option<Metadata> {
    (!attrs.metadata.is_empty()).then(|| attrs.metadata.clone().into_iter().collect())
}

fn check_of(length: Option<i64>, md5: Option<&str>) -> S3Result<PutCheck> {
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
    Ok(PutCheck { length: length.and_then(|l| u64::try_from(l).ok()), md5 })
}

fn body_of(body: Option<StreamingBlob>) -> BoxStream<'static, Result<Bytes, StdError>> {
    match body {
        Some(body) => body.boxed(),
        None => futures::stream::empty().boxed(),
    }
}

fn object_of(info: ObjectInfo, url: bool) -> Object {
    Object {
        key: Some(encode_if(url, &info.key)),
        size: i64::try_from(info.size).ok(),
        e_tag: Some(etag(&info.etag)),
        last_modified: Some(timestamp(info.last_modified)),
        storage_class: Some(ObjectStorageClass::from_static(ObjectStorageClass::STANDARD)),
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
        .ok_or_else(|| s3_error!(InvalidArgument, "invalid continuation token"))
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

#[async_trait::async_trait]
impl S3 for HostPathS3 {
    async fn list_buckets(
        &self,
        req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
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
        Ok(S3Response::new(ListBucketsOutput { buckets: Some(buckets), ..Default::default() }))
    }

    async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        self.require_admin(&req)?;
        let input = req.input;
        if input.object_lock_enabled_for_bucket == Some(true) {
            return Err(s3_error!(NotImplemented, "object lock is not supported"));
        }
        // ACLs, ownership controls and the location constraint are accepted and ignored:
        // buckets here are never public and live where the endpoint runs.
        self.store.create_operator_bucket(&input.bucket).await.map_err(s3_err)?;
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
        Ok(S3Response::new(GetBucketLocationOutput::default()))
    }

    async fn list_objects(
        &self,
        req: S3Request<ListObjectsInput>,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        let input = req.input;
        let url = input.encoding_type.as_ref().is_some_and(|e| e.as_str() == EncodingType::URL);
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
        Ok(S3Response::new(ListObjectsOutput {
            name: Some(input.bucket),
            prefix: Some(encode_if(url, input.prefix.as_deref().unwrap_or_default())),
            delimiter: input.delimiter.map(|d| encode_if(url, &d)),
            marker: input.marker.map(|m| encode_if(url, &m)),
            max_keys: Some(input.max_keys.unwrap_or(MAX_KEYS)),
            is_truncated: Some(page.is_truncated),
            next_marker: page.next_after.as_deref().map(|m| encode_if(url, m)),
            common_prefixes,
            contents: Some(page.objects.into_iter().map(|o| object_of(o, url)).collect()),
            encoding_type: input.encoding_type,
            ..Default::default()
        }))
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        let input = req.input;
        let url = input.encoding_type.as_ref().is_some_and(|e| e.as_str() == EncodingType::URL);
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
        Ok(S3Response::new(ListObjectsV2Output {
            name: Some(input.bucket),
            prefix: Some(encode_if(url, input.prefix.as_deref().unwrap_or_default())),
            delimiter: input.delimiter.map(|d| encode_if(url, &d)),
            max_keys: Some(input.max_keys.unwrap_or(MAX_KEYS)),
            key_count: i32::try_from(key_count).ok(),
            continuation_token: input.continuation_token,
            start_after: input.start_after.map(|s| encode_if(url, &s)),
            is_truncated: Some(page.is_truncated),
            next_continuation_token: page.next_after.as_deref().map(|k| hex::encode(k.as_bytes())),
            common_prefixes,
            contents: Some(page.objects.into_iter().map(|o| object_of(o, url)).collect()),
            encoding_type: input.encoding_type,
            ..Default::default()
        }))
    }

    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let input = req.input;
        let check = check_of(input.content_length, input.content_md5.as_deref())?;
        let attrs = attrs_of(input.content_type, input.metadata);
        let info = self
            .store
            .put_object(&input.bucket, &input.key, attrs, body_of(input.body), check)
            .await
            .map_err(s3_err)?;
        Ok(S3Response::new(PutObjectOutput {
            e_tag: Some(etag(&info.etag)),
            size: i64::try_from(info.size).ok(),
            ..Default::default()
        }))
    }

    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        let input = req.input;
        let (info, file) =
            self.store.open_object(&input.bucket, &input.key).await.map_err(s3_err)?;
        let range = match &input.range {
            Some(range) => Some(range.check(info.size)?),
            None => None,
        };
        let (start, end) = range.as_ref().map_or((0, info.size), |r| (r.start, r.end));
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
        let content_range = range.map(|_| format!("bytes {start}-{}/{}", end - 1, info.size));
        Ok(S3Response::new(GetObjectOutput {
            body,
            content_length: i64::try_from(end - start).ok(),
            content_range,
            accept_ranges: Some("bytes".to_owned()),
            content_type: info.attrs.content_type.clone(),
            e_tag: Some(etag(&info.etag)),
            last_modified: Some(timestamp(info.last_modified)),
            metadata: metadata_of(&info.attrs),
            parts_count: info.parts.and_then(|p| i32::try_from(p).ok()),
            ..Default::default()
        }))
    }

    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        let input = req.input;
        let info = self.store.head_object(&input.bucket, &input.key).await.map_err(s3_err)?;
        Ok(S3Response::new(HeadObjectOutput {
            content_length: i64::try_from(info.size).ok(),
            accept_ranges: Some("bytes".to_owned()),
            content_type: info.attrs.content_type.clone(),
            e_tag: Some(etag(&info.etag)),
            last_modified: Some(timestamp(info.last_modified)),
            metadata: metadata_of(&info.attrs),
            parts_count: info.parts.and_then(|p| i32::try_from(p).ok()),
            ..Default::default()
        }))
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
        let input = req.input;
        let CopySource::Bucket { bucket: src_bucket, key: src_key, .. } = &input.copy_source else {
            return Err(s3_error!(NotImplemented, "only bucket copy sources are supported"));
        };
        let replace = input
            .metadata_directive
            .as_ref()
            .is_some_and(|d| d.as_str() == MetadataDirective::REPLACE);
        let attrs = replace.then(|| attrs_of(input.content_type, input.metadata));
        let info = self
            .store
            .copy_object(src_bucket, src_key, &input.bucket, &input.key, attrs)
            .await
            .map_err(s3_err)?;
        Ok(S3Response::new(CopyObjectOutput {
            copy_object_result: Some(CopyObjectResult {
                e_tag: Some(etag(&info.etag)),
                last_modified: Some(timestamp(info.last_modified)),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        let input = req.input;
        let attrs = attrs_of(input.content_type, input.metadata);
        let id =
            self.store.create_upload(&input.bucket, &input.key, attrs).await.map_err(s3_err)?;
        Ok(S3Response::new(CreateMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(id),
            ..Default::default()
        }))
    }

    async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        let input = req.input;
        let check = check_of(input.content_length, input.content_md5.as_deref())?;
        let etag_hex = self
            .store
            .upload_part(
                &input.bucket,
                &input.key,
                &input.upload_id,
                input.part_number,
                body_of(input.body),
                check,
            )
            .await
            .map_err(s3_err)?;
        Ok(S3Response::new(UploadPartOutput { e_tag: Some(etag(&etag_hex)), ..Default::default() }))
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let input = req.input;
        let mut parts = Vec::new();
        for part in input.multipart_upload.and_then(|m| m.parts).unwrap_or_default() {
            let (Some(number), Some(tag)) = (part.part_number, part.e_tag) else {
                return Err(s3_error!(InvalidPart, "every part needs a PartNumber and an ETag"));
            };
            let number = u32::try_from(number).map_err(|_| s3_error!(InvalidPart))?;
            parts.push((number, tag.value().to_owned()));
        }
        let info = self
            .store
            .complete_upload(&input.bucket, &input.key, &input.upload_id, parts)
            .await
            .map_err(s3_err)?;
        Ok(S3Response::new(CompleteMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            e_tag: Some(etag(&info.etag)),
            ..Default::default()
        }))
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
        let input = req.input;
        let all = self
            .store
            .list_parts(&input.bucket, &input.key, &input.upload_id)
            .await
            .map_err(s3_err)?;
        let marker = input.part_number_marker.unwrap_or(0).max(0);
        let max =
            usize::try_from(input.max_parts.unwrap_or(MAX_KEYS).clamp(0, MAX_KEYS)).unwrap_or(0);
        let mut rest = all.into_iter().filter(|p| i64::from(p.part_number) > i64::from(marker));
        let page: Vec<_> = rest.by_ref().take(max).collect();
        let is_truncated = rest.next().is_some();
        let next_marker = page.last().and_then(|p| i32::try_from(p.part_number).ok());
        let parts = page
            .into_iter()
            .map(|p| Part {
                e_tag: Some(etag(&p.etag)),
                last_modified: Some(timestamp(p.last_modified)),
                part_number: i32::try_from(p.part_number).ok(),
                size: i64::try_from(p.size).ok(),
                ..Part::default()
            })
            .collect();
        Ok(S3Response::new(ListPartsOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(input.upload_id),
            part_number_marker: input.part_number_marker,
            max_parts: Some(i32::try_from(max).unwrap_or(MAX_KEYS)),
            is_truncated: Some(is_truncated),
            next_part_number_marker: if is_truncated { next_marker } else { None },
            parts: Some(parts),
            ..Default::default()
        }))
    }
}
