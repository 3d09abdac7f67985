//! Conversions between `s3s`'s request and response types and the store's, and the small
//! rules of S3's wire format (markers, tokens, ranges, encodings) they need.

use std::time::SystemTime;

use base64::Engine as _;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Result, StdError, s3_error};

use super::{QUOTA_EXCEEDED, rules};
use crate::store::{
    Checksum, CopySourceCheck, ListPage, NULL_VERSION, ObjectAttrs, ObjectInfo, PutCheck,
    StoreError,
};

/// Most keys one listing page returns, as in S3.
pub(super) const MAX_KEYS: i32 = 1000;

pub(super) fn s3_err(e: StoreError) -> S3Error {
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
        StoreError::BucketInUse { .. } | StoreError::InvalidBucketState(_) => {
            S3ErrorCode::InvalidBucketState
        }
        // As S3 answers a removal object lock forbids: 403 AccessDenied, saying why.
        StoreError::ObjectLocked(_) => S3ErrorCode::AccessDenied,
        StoreError::NotOurs { .. }
        | StoreError::NotCreator(_)
        | StoreError::Symlink(_)
        | StoreError::OverCeiling(_) => S3ErrorCode::AccessDenied,
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
        StoreError::NoSuchVersion { .. } => S3ErrorCode::NoSuchVersion,
        // S3 answers with the marker's headers: 404 when the key reads as deleted, 405 when
        // the marker itself was asked for.
        StoreError::DeleteMarker { version_id, by_id, .. } => {
            let (code, status, text) = if by_id {
                let text = "The specified method is not allowed against this resource.";
                (S3ErrorCode::MethodNotAllowed, http::StatusCode::METHOD_NOT_ALLOWED, text)
            } else {
                (
                    S3ErrorCode::NoSuchKey,
                    http::StatusCode::NOT_FOUND,
                    "The specified key does not exist.",
                )
            };
            let mut error = S3Error::with_message(code, text);
            error.set_status_code(status);
            let mut headers = http::HeaderMap::new();
            headers.insert("x-amz-delete-marker", http::HeaderValue::from_static("true"));
            if let Ok(id) = http::HeaderValue::from_str(&version_id) {
                headers.insert("x-amz-version-id", id);
            }
            error.set_headers(headers);
            return error;
        }
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

pub(super) fn timestamp(time: SystemTime) -> Timestamp {
    Timestamp::from(time)
}

pub(super) fn etag(value: &str) -> ETag {
    ETag::Strong(value.to_owned())
}

/// The `x-amz-version-id` a write (PutObject, CopyObject, CompleteMultipartUpload) answers
/// with: the id of the version it made, and none for the `null` version a write makes while
/// versioning is suspended, as S3 answers (PutObject's sample answer for a suspended bucket
/// has no version id, and s3-tests check there is none). Reads still name it `null`.
pub(super) fn written_version_id(info: &ObjectInfo) -> Option<String> {
    info.version_id.clone().filter(|id| id != NULL_VERSION)
}

/// The standard headers and user metadata a write sets.
pub(super) struct AttrsInput {
    pub(super) content_type: Option<String>,
    pub(super) metadata: Option<Metadata>,
    pub(super) cache_control: Option<String>,
    pub(super) content_disposition: Option<String>,
    pub(super) content_encoding: Option<String>,
    pub(super) content_language: Option<String>,
    pub(super) expires: Option<Timestamp>,
}

impl AttrsInput {
    pub(super) fn into_attrs(self) -> ObjectAttrs {
        ObjectAttrs {
            content_type: self.content_type,
            metadata: self.metadata.unwrap_or_default().into_iter().collect(),
            cache_control: self.cache_control,
            content_disposition: self.content_disposition,
            content_encoding: self.content_encoding.and_then(|e| without_aws_chunked(&e)),
            content_language: self.content_language,
            expires: rules::expires_text(self.expires.as_ref()),
            tags: Vec::new(),
            lock: crate::store::ObjectLock::default(),
        }
    }
}

/// A `Content-Encoding` as sent, less `aws-chunked`: that token only describes the transfer,
/// never how the object is encoded; the rest is kept byte for byte.
fn without_aws_chunked(encoding: &str) -> Option<String> {
    let is_transfer = |token: &str| token.trim().eq_ignore_ascii_case("aws-chunked");
    if !encoding.split(',').any(is_transfer) {
        return Some(encoding.to_owned()).filter(|e| !e.is_empty());
    }
    let kept: Vec<&str> = encoding.split(',').filter(|token| !is_transfer(token)).collect();
    Some(kept.join(",").trim().to_owned()).filter(|e| !e.is_empty())
}

macro_rules! attrs_input {
    ($input:expr) => {
        $crate::s3::convert::AttrsInput {
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
                $crate::store::ChecksumAlgorithm::Crc32 => $output.checksum_crc32 = value,
                $crate::store::ChecksumAlgorithm::Crc32c => $output.checksum_crc32c = value,
                $crate::store::ChecksumAlgorithm::Crc64Nvme => $output.checksum_crc64nvme = value,
                $crate::store::ChecksumAlgorithm::Sha1 => $output.checksum_sha1 = value,
                $crate::store::ChecksumAlgorithm::Sha256 => $output.checksum_sha256 = value,
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
        $output.expires = $crate::s3::rules::expires_of($attrs.expires.as_deref());
    };
}

pub(super) use {attrs_input, checksum_fields, set_checksum, set_standard_headers};

pub(super) fn checksum_type_of(checksum: Option<&Checksum>) -> Option<s3s::dto::ChecksumType> {
    checksum.map(|c| s3s::dto::ChecksumType::from(c.kind.name().to_owned()))
}

pub(super) fn metadata_of(attrs: &ObjectAttrs) -> Option<Metadata> {
    (!attrs.metadata.is_empty()).then(|| attrs.metadata.clone().into_iter().collect())
}

pub(super) fn check_of(
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

pub(super) fn body_of(body: Option<StreamingBlob>) -> BoxStream<'static, Result<Bytes, StdError>> {
    match body {
        Some(body) => body.boxed(),
        None => futures::stream::empty().boxed(),
    }
}

pub(super) fn object_of(info: ObjectInfo, url: bool, owner: Option<&Owner>) -> Object {
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
pub(super) fn encode_if(url: bool, text: &str) -> String {
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

pub(super) fn wants_url(encoding: Option<&EncodingType>) -> S3Result<bool> {
    match encoding.map(EncodingType::as_str) {
        None => Ok(false),
        Some(EncodingType::URL) => Ok(true),
        Some(_) => Err(s3_error!(InvalidArgument, "Invalid Encoding Method specified in Request")),
    }
}

pub(super) fn max_keys(requested: Option<i32>) -> S3Result<usize> {
    match requested {
        Some(n) if n < 0 => Err(s3_error!(InvalidArgument, "max-keys must not be negative")),
        Some(n) => Ok(usize::try_from(n.min(MAX_KEYS)).unwrap_or(0)),
        None => Ok(MAX_KEYS as usize),
    }
}

pub(super) fn prefixes_of(page: &ListPage, url: bool) -> Option<CommonPrefixList> {
    let list: CommonPrefixList = page
        .common_prefixes
        .iter()
        .map(|p| CommonPrefix { prefix: Some(encode_if(url, p)) })
        .collect();
    (!list.is_empty()).then_some(list)
}

/// Continuation tokens are the hex of the last key or prefix returned: opaque to clients and
/// safe in XML whatever the key holds.
pub(super) fn decode_token(token: &str) -> S3Result<String> {
    hex::decode(token)
        .ok()
        .and_then(|raw| String::from_utf8(raw).ok())
        .ok_or_else(|| s3_error!(InvalidArgument, "The continuation token provided is incorrect"))
}

/// `bytes=first-last` of UploadPartCopy, as (start, end exclusive).
pub(super) fn copy_range(text: &str) -> S3Result<(u64, u64)> {
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

/// The error a copy's source answers with (CopyObject, UploadPartCopy): a delete marker named
/// by its version id has nothing to copy, which S3 calls an invalid request.
pub(super) fn copy_source_err(e: StoreError) -> S3Error {
    match e {
        StoreError::DeleteMarker { by_id: true, .. } => s3_error!(
            InvalidRequest,
            "The source of a copy request may not specifically refer to a delete marker by \
             version id."
        ),
        e => s3_err(e),
    }
}

/// Checks `x-amz-copy-source-if-*` on the source the store opens; a failure is always 412.
pub(super) fn copy_source_check(
    if_match: Option<ETagCondition>,
    if_none_match: Option<ETagCondition>,
    if_modified_since: Option<Timestamp>,
    if_unmodified_since: Option<Timestamp>,
) -> CopySourceCheck {
    CopySourceCheck {
        version_id: None,
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
pub(super) fn page_of<T>(items: impl Iterator<Item = T>, max: Option<i32>) -> (Vec<T>, bool) {
    let max = usize::try_from(max.unwrap_or(MAX_KEYS).clamp(0, MAX_KEYS)).unwrap_or(0);
    let mut items = items.peekable();
    let page: Vec<T> = items.by_ref().take(max).collect();
    let more = items.peek().is_some();
    (page, more)
}

pub(super) fn owner_of_req<T>(req: &S3Request<T>) -> Owner {
    rules::owner_of(req.credentials.as_ref().map(|c| c.access_key.as_str()))
}
