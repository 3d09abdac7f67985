//! Request rules of S3 that sit between the wire and the store: checksums the client sent,
//! preconditions, canned ACLs and features this endpoint refuses rather than pretends to have.

use std::time::SystemTime;

use http::HeaderMap;
use http::header::{CONTENT_TYPE, ETAG, HeaderValue, LAST_MODIFIED};
use s3s::dto::{ETagCondition, Grantee, Owner, Permission, Timestamp, TimestampFormat};
use s3s::{S3Error, S3ErrorCode, S3Result, TrailingHeaders, s3_error};

use crate::store::{
    ChecksumAlgorithm, ChecksumCheck, ChecksumType, ExpectedChecksum, ObjectInfo, WriteCondition,
};

/// The values of the five `x-amz-checksum-*` fields of an input, in
/// [`ChecksumAlgorithm::ALL`] order.
pub type ChecksumFields<'a> = [Option<&'a String>; 5];

/// The checksum a request body must match: a `x-amz-checksum-*` header, or one announced in
/// `x-amz-trailer` and sent after an aws-chunked body, or just an algorithm to compute.
pub fn checksum_check(
    headers: &HeaderMap,
    fields: ChecksumFields<'_>,
    algorithm: Option<&str>,
    trailers: Option<&TrailingHeaders>,
) -> S3Result<Option<ChecksumCheck>> {
    let mut sent =
        ChecksumAlgorithm::ALL.into_iter().zip(fields).filter_map(|(a, v)| Some((a, v?)));
    let first = sent.next();
    if sent.next().is_some() {
        return Err(s3_error!(InvalidRequest, "Expecting a single x-amz-checksum- header"));
    }
    let declared = match algorithm {
        Some(name) => Some(ChecksumAlgorithm::from_name(name).ok_or_else(|| {
            s3_error!(InvalidRequest, "Checksum algorithm provided is unsupported: {name}")
        })?),
        None => None,
    };
    if let Some((algorithm, value)) = first {
        if declared.is_some_and(|d| d != algorithm) {
            return Err(s3_error!(
                InvalidRequest,
                "Value for x-amz-sdk-checksum-algorithm header is invalid."
            ));
        }
        if algorithm.decode(value).is_none() {
            return Err(s3_error!(
                InvalidRequest,
                "Value for {} header is invalid.",
                algorithm.header()
            ));
        }
        return Ok(Some(ChecksumCheck {
            algorithm,
            expected: ExpectedChecksum::Value(value.clone()),
        }));
    }
    let trailer = headers
        .get("x-amz-trailer")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase());
    if let Some(name) = trailer.filter(|n| n.starts_with("x-amz-checksum-")) {
        let algorithm = ChecksumAlgorithm::ALL
            .into_iter()
            .find(|a| a.header() == name)
            .ok_or_else(|| s3_error!(InvalidRequest, "unsupported trailer {name}"))?;
        let Some(trailers) = trailers.cloned() else {
            return Err(s3_error!(
                InvalidRequest,
                "x-amz-trailer needs an aws-chunked body (STREAMING-*-TRAILER)"
            ));
        };
        let read = move || {
            trailers.read(|h| {
                h.get(algorithm.header()).and_then(|v| v.to_str().ok()).map(str::to_owned)
            })?
        };
        return Ok(Some(ChecksumCheck {
            algorithm,
            expected: ExpectedChecksum::Trailer(Box::new(read)),
        }));
    }
    Ok(declared.map(|algorithm| ChecksumCheck { algorithm, expected: ExpectedChecksum::Compute }))
}

/// The algorithm and type a multipart upload is created with.
pub fn upload_checksum(
    algorithm: Option<&str>,
    kind: Option<&str>,
) -> S3Result<Option<(ChecksumAlgorithm, ChecksumType)>> {
    let kind = match kind {
        Some(name) => Some(ChecksumType::from_name(name).ok_or_else(|| {
            s3_error!(InvalidRequest, "Value for x-amz-checksum-type header is invalid.")
        })?),
        None => None,
    };
    let Some(name) = algorithm else {
        if kind.is_some() {
            return Err(s3_error!(
                InvalidRequest,
                "The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header."
            ));
        }
        return Ok(None);
    };
    let algorithm = ChecksumAlgorithm::from_name(name).ok_or_else(|| {
        s3_error!(InvalidRequest, "Checksum algorithm provided is unsupported: {name}")
    })?;
    let kind = kind.unwrap_or(if algorithm == ChecksumAlgorithm::Crc64Nvme {
        ChecksumType::FullObject
    } else {
        ChecksumType::Composite
    });
    Ok(Some((algorithm, kind)))
}

/// Server-side encryption is not implemented: objects are plain files. A request asking for
/// it (SSE-S3, SSE-KMS or SSE-C, on writes, reads or copies) is refused rather than stored
/// unencrypted or served without its key.
pub fn refuse_encryption(headers: &HeaderMap) -> S3Result<()> {
    let asks = headers.keys().any(|name| {
        let name = name.as_str();
        name.starts_with("x-amz-server-side-encryption")
            || name.starts_with("x-amz-copy-source-server-side-encryption")
    });
    if asks {
        return Err(s3_error!(
            NotImplemented,
            "A header you provided implies functionality that is not implemented: server-side \
             encryption is not supported by this endpoint"
        ));
    }
    Ok(())
}

/// Seconds since the epoch, the resolution of HTTP dates.
fn unix_secs(time: SystemTime) -> i64 {
    match time.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

fn timestamp_secs(ts: &Timestamp) -> i64 {
    time::OffsetDateTime::from(ts.clone()).unix_timestamp()
}

fn condition_holds(condition: &ETagCondition, etag: &str) -> bool {
    match condition.as_etag() {
        Some(wanted) => wanted.value() == etag,
        None => condition.is_any(),
    }
}

/// The four read preconditions of GetObject and HeadObject, with HTTP's precedence: a
/// matching `If-Match` overrides `If-Unmodified-Since`, a failing `If-None-Match` overrides
/// `If-Modified-Since`.
pub struct ReadConditions<'a> {
    /// `If-Match`.
    pub if_match: Option<&'a ETagCondition>,
    /// `If-None-Match`.
    pub if_none_match: Option<&'a ETagCondition>,
    /// `If-Modified-Since`.
    pub if_modified_since: Option<&'a Timestamp>,
    /// `If-Unmodified-Since`.
    pub if_unmodified_since: Option<&'a Timestamp>,
}

impl ReadConditions<'_> {
    /// `PreconditionFailed` (412) or `NotModified` (304) when the object does not qualify.
    /// `not_modified_code` is what a failing `If-None-Match` / `If-Modified-Since` gives:
    /// 304 for reads, 412 for the source of a copy.
    pub fn check(&self, info: &ObjectInfo, not_modified_code: S3ErrorCode) -> S3Result<()> {
        let modified = unix_secs(info.last_modified);
        match self.if_match {
            Some(condition) if !condition_holds(condition, &info.etag) => {
                return Err(s3_error!(PreconditionFailed, "If-Match did not match"));
            }
            Some(_) => {}
            None => {
                if self.if_unmodified_since.is_some_and(|t| modified > timestamp_secs(t)) {
                    return Err(s3_error!(
                        PreconditionFailed,
                        "modified since If-Unmodified-Since"
                    ));
                }
            }
        }
        match self.if_none_match {
            Some(condition) if condition_holds(condition, &info.etag) => {
                Err(S3Error::with_message(not_modified_code, "If-None-Match matched"))
            }
            Some(_) => Ok(()),
            None => {
                if self.if_modified_since.is_some_and(|t| modified <= timestamp_secs(t)) {
                    Err(S3Error::with_message(
                        not_modified_code,
                        "not modified since If-Modified-Since",
                    ))
                } else {
                    Ok(())
                }
            }
        }
    }
}

impl ReadConditions<'_> {
    /// [`ReadConditions::check`] for GetObject and HeadObject: a `304` or `412` carries the
    /// object's `ETag` and `Last-Modified`, which clients revalidating a cache read.
    pub fn check_read(&self, info: &ObjectInfo) -> S3Result<()> {
        self.check(info, S3ErrorCode::NotModified).map_err(|mut error| {
            let mut headers = HeaderMap::new();
            // s3s sends these instead of its own headers: a 412's XML body keeps its type.
            if error.code() != &S3ErrorCode::NotModified {
                headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/xml"));
            }
            if let Ok(etag) = HeaderValue::from_str(&format!("\"{}\"", info.etag)) {
                headers.insert(ETAG, etag);
            }
            let modified = expires_text(Some(&Timestamp::from(info.last_modified)));
            if let Some(modified) = modified.and_then(|m| HeaderValue::from_str(&m).ok()) {
                headers.insert(LAST_MODIFIED, modified);
            }
            error.set_headers(headers);
            error
        })
    }
}

/// The region requests are taken for when they name none, and S3's default one.
pub const DEFAULT_REGION: &str = "us-east-1";

/// Where CreateBucket puts a bucket, as S3 decides it from the region the request is signed
/// for (`here`) and the `LocationConstraint` sent: the default region's endpoint creates buckets
/// for any other region (it is named by sending no constraint); a regional endpoint only for its
/// own region, which must be named. `None` is the default region.
pub fn bucket_location(here: &str, constraint: Option<String>) -> S3Result<Option<String>> {
    let incompatible = |named: &str| {
        s3_error!(
            IllegalLocationConstraintException,
            "The {named} location constraint is incompatible for the region specific endpoint \
             this request was sent to."
        )
    };
    match constraint {
        Some(c) if c == DEFAULT_REGION => Err(s3_error!(
            InvalidLocationConstraint,
            "The specified location-constraint is not valid"
        )),
        Some(c) if here == DEFAULT_REGION || c == here => Ok(Some(c)),
        Some(c) => Err(incompatible(&c)),
        None if here == DEFAULT_REGION => Ok(None),
        None => Err(incompatible("unspecified")),
    }
}

/// The conditional-write headers of PutObject and CompleteMultipartUpload.
pub fn write_condition(
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
) -> S3Result<Option<WriteCondition>> {
    match (if_match, if_none_match) {
        (Some(_), Some(_)) => {
            Err(s3_error!(NotImplemented, "If-Match and If-None-Match together are not supported"))
        }
        (None, Some(condition)) => match condition.as_etag() {
            Some(etag) => Ok(Some(WriteCondition::IfNoneMatch(etag.value().to_owned()))),
            None => Ok(Some(WriteCondition::IfNoneMatchAny)),
        },
        (Some(condition), None) => match condition.as_etag() {
            Some(etag) => Ok(Some(WriteCondition::IfMatch(etag.value().to_owned()))),
            None => Ok(Some(WriteCondition::IfMatch("*".to_owned()))),
        },
        (None, None) => Ok(None),
    }
}

/// The owner shown for buckets and objects: the account of the key making the request, as
/// with S3's default "bucket owner enforced" object ownership.
pub fn owner_of(access_key: Option<&str>) -> Owner {
    let id = access_key.unwrap_or_default().to_owned();
    Owner { display_name: Some(id.clone()), id: Some(id) }
}

/// The only ACL this endpoint has: the owner has full control, nobody else has anything.
pub fn private_acl(owner: Owner) -> (Owner, Vec<s3s::dto::Grant>) {
    let grantee = Grantee {
        display_name: owner.display_name.clone(),
        email_address: None,
        id: owner.id.clone(),
        type_: s3s::dto::Type::from_static(s3s::dto::Type::CANONICAL_USER),
        uri: None,
    };
    let grant = s3s::dto::Grant {
        grantee: Some(grantee),
        permission: Some(Permission::from_static(Permission::FULL_CONTROL)),
    };
    (owner, vec![grant])
}

/// Accepts the canned ACLs that mean "private to the owner"; anything granting more is
/// refused as on an S3 bucket whose object ownership is "bucket owner enforced".
pub fn require_private_acl(canned: Option<&str>, grants: &[Option<&String>]) -> S3Result<()> {
    let private = matches!(canned, None | Some("private" | "bucket-owner-full-control"));
    if !private || grants.iter().any(Option::is_some) {
        return Err(acl_not_supported());
    }
    Ok(())
}

/// The error S3 gives for ACLs on a bucket that does not use them.
pub fn acl_not_supported() -> S3Error {
    s3_error!(
        AccessControlListNotSupported,
        "The bucket does not allow ACLs: only the private ACL is supported"
    )
}

/// An `Expires` header value kept as the HTTP date text.
pub fn expires_text(expires: Option<&Timestamp>) -> Option<String> {
    let expires = expires?;
    let mut out = Vec::new();
    expires.format(TimestampFormat::HttpDate, &mut out).ok()?;
    String::from_utf8(out).ok()
}

/// The `Expires` of an object for output.
pub fn expires_of(text: Option<&str>) -> Option<Timestamp> {
    Timestamp::parse(TimestampFormat::HttpDate, text?).ok()
}
