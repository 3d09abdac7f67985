//! Object lock at the endpoint, through the AWS SDK and as raw signed requests: buckets created
//! with it, always versioned, and their default retention (`config`); per-version retention and
//! legal holds, the governance bypass of the bucket owner's key only, compliance holding against
//! every key and the operator's own paths, while overwrites and delete markers stay allowed
//! (`retention`); lifecycle and bucket deletion leaving protected versions in place
//! (`removal`); the class's ceiling on the retentions claim keys set (`ceiling`); acknowledged retentions surviving a SIGKILL (`crash`). A module per
//! concern, in one test binary.

#[path = "../common/mod.rs"]
mod common;

mod ceiling;
mod config;
mod crash;
mod removal;
mod retention;

use std::time::{Duration, SystemTime};

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::{ByteStream, DateTime};
use aws_sdk_s3::types::{ObjectLockMode, ObjectLockRetention, ObjectLockRetentionMode};
use common::{RawResponse, Server, raw_request, sign_v4};
use s3_endpoint::{AccessKey, Creator};

const DAY: Duration = Duration::from_secs(86_400);
const ADMIN_ID: &str = "LOCKADMIN";
const ADMIN_SECRET: &str = "lock-admin-secret-0123456789";

/// A claim's bucket created with object lock, as the provisioner makes it, with the creating
/// claim's key (the owner's) and a second claim's key on the same bucket.
async fn lock_bucket(server: &Server, bucket: &str) -> (AccessKey, AccessKey) {
    let creator = Creator { user_id: "obc-owner", delete_with_claim: true };
    let (_, owner) = server.store.provision_bucket(bucket, creator).await.unwrap();
    server.store.enable_object_lock(bucket).await.unwrap();
    let other = server.store.issue_key("obc-other", bucket).await.unwrap();
    (owner, other)
}

/// A date `days` from now, to the second (as the SDK sends it).
fn in_days(days: u32) -> DateTime {
    let at = SystemTime::now() + DAY * days;
    DateTime::from_secs(at.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() as i64)
}

fn retention(mode: ObjectLockRetentionMode, until: DateTime) -> ObjectLockRetention {
    ObjectLockRetention::builder().mode(mode).retain_until_date(until).build()
}

/// Stores `data` at `key`, with a retention if given; answers the version made (none in a
/// bucket without versioning).
async fn put(
    s3: &Client,
    bucket: &str,
    key: &str,
    lock: Option<(ObjectLockMode, DateTime)>,
) -> Result<Option<String>, String> {
    let mut put = s3.put_object().bucket(bucket).key(key).body(ByteStream::from_static(b"data"));
    if let Some((mode, until)) = lock {
        put = put.object_lock_mode(mode).object_lock_retain_until_date(until);
    }
    put.send().await.map(|o| o.version_id).map_err(|e| common::code(&e))
}

/// A signed request with a body, sent as written: a second client besides the SDK.
async fn signed(
    server: &Server,
    key: &AccessKey,
    method: &str,
    path: &str,
    extra: &[(&str, &str)],
    body: &str,
) -> RawResponse {
    use base64::Engine as _;
    let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(body.as_bytes()));
    let md5 = <md5::Md5 as md5::Digest>::digest(body.as_bytes());
    let md5 = base64::engine::general_purpose::STANDARD.encode(md5);
    let mut headers = vec![("content-md5", md5.as_str()), ("x-amz-content-sha256", sha.as_str())];
    headers.extend_from_slice(extra);
    let signatures = sign_v4(server.addr, key, method, path, &headers, &sha);
    let mut all: Vec<(&str, &str)> = headers.clone();
    all.extend(signatures.iter().map(|(n, v)| (n.as_str(), v.as_str())));
    raw_request(server.addr, method, path, &all, body.as_bytes()).await
}
