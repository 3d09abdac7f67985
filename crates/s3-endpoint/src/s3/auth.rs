//! Authentication and authorization: secrets of access keys from the store, and which key may
//! do what on which bucket, decided before any handler runs.
//!
//! A claim key's access mode decides which operations it may use on its bucket:
//!
//! | operations | `ReadWrite` | `ReadOnly` | `WriteOnly` |
//! |---|---|---|---|
//! | HeadBucket, GetBucketLocation, ListParts (of an upload whose id it knows) | yes | yes | yes |
//! | GetObject, HeadObject, GetObjectAttributes, List{Objects,ObjectsV2,ObjectVersions,MultipartUploads}, Get{Bucket,Object}Acl, GetObjectTagging, GetBucketCors, GetBucketLifecycleConfiguration, GetObjectLockConfiguration, GetObjectRetention, GetObjectLegalHold, GetBucketVersioning, GetBucketTagging, GetPublicAccessBlock, the source of a copy | yes | yes | no |
//! | PutObject, CopyObject, CreateMultipartUpload, UploadPart(Copy), CompleteMultipartUpload, AbortMultipartUpload, Put{Bucket,Object}Acl, Put/DeleteObjectTagging | yes | no | yes |
//! | DeleteObject, DeleteObjects, Put/DeleteBucketCors, PutBucketLifecycleConfiguration, DeleteBucketLifecycle, PutObjectLockConfiguration, PutObjectRetention, PutObjectLegalHold, Put/DeleteBucketTagging, Put/DeletePublicAccessBlock, and anything not named here | yes | no | no |
//!
//! Bucket-wide settings (lifecycle and CORS rules, versioning, object lock settings and legal
//! holds, the bucket's tags, its public access block) take more: a full-access key of the claim
//! that created the bucket, and a setting its StorageClass allows (see
//! [`crate::store::BucketSetting`]); a key of a claim sharing the bucket changes none of them,
//! so it leaves nothing behind when it goes.
//!
//! A write-only key may overwrite what it wrote (a PUT is a PUT) and abort its own uploads, but
//! not delete: a workload that cannot read a bucket has no business emptying it. Tags belong to
//! an object as its metadata does, so whoever may write the object may set or clear them. CORS
//! rules decide what every browser page may do with the bucket: like any other bucket
//! configuration, only a full-access key (or the operator) may change them; so do lifecycle
//! rules, which delete objects, and object lock settings (a bucket's default retention, an
//! object's retention or legal hold), which decide what may not be deleted. A preflight
//! `OPTIONS` is unsigned and never reaches this check (see `cors`).

use std::sync::Arc;

use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::{Credentials, S3Auth, SecretKey};
use s3s::dto::*;
use s3s::{S3Error, S3Request, S3Result, s3_error};

use super::rules;
use crate::store::{BucketSetting, BucketStore, KeyMode, bucket_setting_refusal};

/// Looks up secrets of access keys in the store.
#[derive(Debug, Clone)]
pub struct KeyAuth {
    pub(super) store: Arc<BucketStore>,
}

#[async_trait::async_trait]
impl S3Auth for KeyAuth {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        // Operator key ids cannot take the claim key prefix, so the two never shadow each other.
        if let Some(admin) = self.store.admin().filter(|a| a.access_key_id() == access_key) {
            return Ok(SecretKey::from(admin.secret_access_key().to_owned()));
        }
        match self.store.lookup_key(access_key) {
            // A key whose claim takes sessions only is never signed with itself.
            Some(key) if key.web_identity.as_ref().is_some_and(|w| w.sessions_only) => {
                Err(s3_error!(InvalidAccessKeyId, "the access key id does not exist"))
            }
            Some(key) => Ok(SecretKey::from(key.secret_access_key)),
            None => Err(s3_error!(InvalidAccessKeyId, "the access key id does not exist")),
        }
    }
}

/// Lets a claim key reach only the bucket(s) it was issued for, and the operator key
/// everything.
#[derive(Debug, Clone)]
pub struct BucketAccess {
    pub(super) store: Arc<BucketStore>,
}

/// Operations only the operator credential may use.
const OPERATOR_ONLY: [&str; 2] = ["CreateBucket", "DeleteBucket"];

/// What an operation does with a bucket, which a key's access mode must allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Needs {
    /// Looks the bucket up, or lists the parts of an upload whose id the caller holds.
    Lookup,
    /// Reads or lists objects.
    Read,
    /// Writes objects.
    Write,
    /// Deletes objects, or anything not classified: only full access.
    All,
}

impl Needs {
    fn of(operation: &str) -> Self {
        match operation {
            "HeadBucket" | "GetBucketLocation" | "ListParts" => Self::Lookup,
            "GetObject"
            | "HeadObject"
            | "GetObjectAttributes"
            | "ListObjects"
            | "ListObjectsV2"
            | "ListObjectVersions"
            | "ListMultipartUploads"
            | "GetBucketAcl"
            | "GetObjectAcl"
            | "GetObjectTagging"
            | "GetBucketCors"
            | "GetBucketLifecycleConfiguration"
            | "GetObjectLockConfiguration"
            | "GetObjectRetention"
            | "GetObjectLegalHold"
            | "GetBucketVersioning"
            | "GetBucketTagging"
            | "GetPublicAccessBlock" => Self::Read,
            "PutObject"
            | "CopyObject"
            | "CreateMultipartUpload"
            | "UploadPart"
            | "UploadPartCopy"
            | "CompleteMultipartUpload"
            | "AbortMultipartUpload"
            | "PutBucketAcl"
            | "PutObjectAcl"
            | "PutObjectTagging"
            | "DeleteObjectTagging" => Self::Write,
            _ => Self::All,
        }
    }

    fn allowed(self, mode: KeyMode) -> bool {
        match self {
            Self::Lookup => true,
            Self::Read => mode.reads(),
            Self::Write => mode.writes(),
            Self::All => mode == KeyMode::ReadWrite,
        }
    }
}

/// The bucket-wide setting an operation changes, if any (see
/// [`crate::store::BucketSetting`]): a legal hold asked for on a write is one too.
fn setting_of(operation: &str, headers: &http::HeaderMap) -> Option<BucketSetting> {
    match operation {
        "PutBucketLifecycleConfiguration" | "DeleteBucketLifecycle" => {
            Some(BucketSetting::Lifecycle)
        }
        "PutBucketCors" | "DeleteBucketCors" => Some(BucketSetting::Cors),
        "PutBucketVersioning" => Some(BucketSetting::Versioning),
        "PutObjectLockConfiguration" | "PutObjectLegalHold" => Some(BucketSetting::ObjectLock),
        "PutBucketTagging"
        | "DeleteBucketTagging"
        | "PutBucketPolicy"
        | "DeleteBucketPolicy"
        | "PutPublicAccessBlock"
        | "DeletePublicAccessBlock" => Some(BucketSetting::Other),
        "PutObject" | "CopyObject" | "CreateMultipartUpload"
            if headers
                .get("x-amz-object-lock-legal-hold")
                .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"ON")) =>
        {
            Some(BucketSetting::ObjectLock)
        }
        _ => None,
    }
}

impl BucketAccess {
    /// A claim key changing a bucket-wide setting must be a full-access key of the claim that
    /// created the bucket, and the setting one its StorageClass allows.
    fn allow_setting(
        &self,
        credentials: Option<&Credentials>,
        bucket: &str,
        setting: BucketSetting,
    ) -> S3Result<()> {
        let Some(credentials) = credentials else {
            return Err(s3_error!(AccessDenied, "a signature is required"));
        };
        if self.store.is_admin(&credentials.access_key) {
            return Ok(());
        }
        let Some(key) = self.store.lookup_key(&credentials.access_key) else {
            return Err(s3_error!(AccessDenied, "this key may not use bucket {bucket:?}"));
        };
        match bucket_setting_refusal(self.store.bucket_record(bucket).as_ref(), &key, setting) {
            None => Ok(()),
            Some(refusal) => Err(s3_error!(AccessDenied, "{refusal}")),
        }
    }

    fn is_admin(&self, credentials: Option<&Credentials>) -> bool {
        credentials.is_some_and(|c| self.store.is_admin(&c.access_key))
    }

    /// The one rule every request of a claim key passes: its bucket, and an operation its
    /// access mode allows (`what` names it in the refusal).
    fn allow(
        &self,
        credentials: Option<&Credentials>,
        bucket: &str,
        (needs, what): (Needs, &str),
    ) -> S3Result<()> {
        let Some(credentials) = credentials else {
            return Err(s3_error!(AccessDenied, "a signature is required"));
        };
        if self.store.is_admin(&credentials.access_key) {
            return Ok(());
        }
        match self.store.lookup_key(&credentials.access_key) {
            Some(key) if key.allows(bucket) && needs.allowed(key.mode) => Ok(()),
            Some(key) if key.allows(bucket) => Err(s3_error!(
                AccessDenied,
                "this key has {} access to bucket {bucket:?}, which does not allow {what}",
                key.mode
            )),
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
            CopySource::Bucket { bucket, .. } => {
                self.allow(credentials, bucket, (Needs::Read, "reading the source of a copy"))
            }
            _ => Err(s3_error!(NotImplemented, "only bucket copy sources are supported")),
        }
    }
}

/// A session's key (see [`crate::store::Session`]) signs only with its session token beside it,
/// in the `x-amz-security-token` header or, in a presigned URL, the `X-Amz-Security-Token`
/// parameter: as S3 answers a temporary key without its token, or with another.
fn session_token_check(
    store: &BucketStore,
    access_key: &str,
    headers: &http::HeaderMap,
    uri: &http::Uri,
) -> S3Result<()> {
    let Some(session) = store.session(access_key) else { return Ok(()) };
    let from_header = headers.get("x-amz-security-token").and_then(|v| v.to_str().ok());
    let from_query = || {
        let query = uri.query().unwrap_or_default();
        serde_urlencoded::from_str::<Vec<(String, String)>>(query)
            .ok()?
            .into_iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("X-Amz-Security-Token"))
            .map(|(_, value)| value)
    };
    let token = from_header.map(str::to_owned).or_else(from_query);
    match token {
        Some(token) if session.token_matches(&token) => Ok(()),
        Some(_) => {
            Err(s3_error!(InvalidToken, "The provided token is malformed or otherwise invalid."))
        }
        None => Err(s3_error!(
            AccessDenied,
            "a temporary access key needs its session token (x-amz-security-token)"
        )),
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
        if let Some(credentials) = credentials {
            session_token_check(&self.store, &credentials.access_key, cx.headers(), cx.uri())?;
        }
        // Decided by operation before the bucket: a claim key may not create or delete even
        // the bucket it was issued for. Creating one that exists is answered as S3 does, by
        // whose it is; nothing is created either way.
        if OPERATOR_ONLY.contains(&cx.s3_op().name()) {
            let bucket = cx.s3_path().get_bucket_name();
            if cx.s3_op().name() == "CreateBucket"
                && let Some(bucket) = bucket
                && self.store.bucket_exists(bucket).unwrap_or(false)
            {
                return match self.allow(credentials, bucket, (Needs::Lookup, "CreateBucket")) {
                    Ok(()) => rules::refuse_encryption(cx.headers()),
                    Err(_) => Err(s3_error!(
                        BucketAlreadyExists,
                        "The requested bucket name is not available. The bucket namespace is \
                         shared by all users of the system. Please select a different name and \
                         try again."
                    )),
                };
            }
            return Err(s3_error!(
                AccessDenied,
                "only the operator credential may create or delete buckets"
            ));
        }
        match cx.s3_path().get_bucket_name() {
            Some(bucket) => {
                let operation = cx.s3_op().name();
                self.allow(credentials, bucket, (Needs::of(operation), operation))?;
                if let Some(setting) = setting_of(operation, cx.headers()) {
                    self.allow_setting(credentials, bucket, setting)?;
                }
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
