//! Bucket lifecycle at the endpoint: rules set, read, removed and refused through the AWS SDK
//! and as raw signed XML (`config`); the lifecycle pass expiring objects by prefix, tags, size
//! and age and aborting stale uploads, usage and quotas dropping with them, run at a chosen
//! time and by the server's own worker across a restart (`expiry`). A module per concern, in
//! one test binary.

#[path = "../common/mod.rs"]
mod common;

mod config;
mod expiry;

use std::time::Duration;

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    BucketLifecycleConfiguration, ExpirationStatus, LifecycleExpiration, LifecycleRule,
    LifecycleRuleFilter,
};
use common::{RawResponse, Server, raw_request, sign_v4};
use s3_endpoint::AccessKey;

const DAY: Duration = Duration::from_secs(86_400);

/// An enabled rule expiring objects under `prefix` `days` after their creation.
fn expire(id: &str, filter: LifecycleRuleFilter, days: i32) -> LifecycleRule {
    LifecycleRule::builder()
        .id(id)
        .status(ExpirationStatus::Enabled)
        .filter(filter)
        .expiration(LifecycleExpiration::builder().days(days).build())
        .build()
        .unwrap()
}

fn prefix(prefix: &str) -> LifecycleRuleFilter {
    LifecycleRuleFilter::builder().prefix(prefix).build()
}

fn configuration(rules: Vec<LifecycleRule>) -> BucketLifecycleConfiguration {
    BucketLifecycleConfiguration::builder().set_rules(Some(rules)).build().unwrap()
}

/// Stores `body` at `key`, with `tagging` (`k=v&...`) if given.
async fn put(s3: &Client, bucket: &str, key: &str, body: &[u8], tagging: Option<&str>) {
    let put = s3.put_object().bucket(bucket).key(key).body(ByteStream::from(body.to_vec()));
    put.set_tagging(tagging.map(str::to_owned)).send().await.unwrap();
}

/// Every key of `bucket`, in order.
async fn keys(s3: &Client, bucket: &str) -> Vec<String> {
    let listed = s3.list_objects_v2().bucket(bucket).send().await.unwrap();
    listed.contents().iter().filter_map(|o| o.key().map(str::to_owned)).collect()
}

/// A signed request with a body, sent as written: for documents an SDK would not send.
async fn signed(
    server: &Server,
    key: &AccessKey,
    method: &str,
    path: &str,
    body: &str,
) -> RawResponse {
    use base64::Engine as _;
    let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(body.as_bytes()));
    let md5 = <md5::Md5 as md5::Digest>::digest(body.as_bytes());
    let md5 = base64::engine::general_purpose::STANDARD.encode(md5);
    let headers = [("content-md5", md5.as_str()), ("x-amz-content-sha256", sha.as_str())];
    let signatures = sign_v4(server.addr, key, method, path, &headers, &sha);
    let mut all: Vec<(&str, &str)> = headers.to_vec();
    all.extend(signatures.iter().map(|(n, v)| (n.as_str(), v.as_str())));
    raw_request(server.addr, method, path, &all, body.as_bytes()).await
}
