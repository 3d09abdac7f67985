//! Object versioning at the endpoint, through the AWS SDK and as raw signed HTTP: the bucket's
//! state (`config`), versions, delete markers and reads, deletes, copies and tags by version id
//! in enabled and suspended buckets (`versions`), ListObjectVersions and its pagination
//! (`listing`), the lifecycle pass over versions (`lifecycle`), and usage, quotas and bucket
//! deletion counting every version (`usage`). A module per concern, in one test binary.

#[path = "../common/mod.rs"]
mod common;

mod config;
mod lifecycle;
mod listing;
mod usage;
mod versions;

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{BucketVersioningStatus, VersioningConfiguration};

/// Sets the versioning of `bucket` to `status`.
async fn set_versioning(s3: &Client, bucket: &str, status: BucketVersioningStatus) {
    let config = VersioningConfiguration::builder().status(status).build();
    s3.put_bucket_versioning()
        .bucket(bucket)
        .versioning_configuration(config)
        .send()
        .await
        .unwrap();
}

/// Stores `body` at `key`; answers the version id the endpoint gave it.
async fn put(s3: &Client, bucket: &str, key: &str, body: &[u8]) -> Option<String> {
    let put = s3.put_object().bucket(bucket).key(key).body(ByteStream::from(body.to_vec()));
    put.send().await.unwrap().version_id().map(str::to_owned)
}

/// The bytes of `key` (of `version` when given).
async fn get(
    s3: &Client,
    bucket: &str,
    key: &str,
    version: Option<&str>,
) -> Result<Vec<u8>, String> {
    let get = s3.get_object().bucket(bucket).key(key).set_version_id(version.map(str::to_owned));
    match get.send().await {
        Ok(out) => Ok(out.body.collect().await.unwrap().into_bytes().to_vec()),
        Err(e) => Err(common::code(&e)),
    }
}

/// Every (key, version id, is latest, is marker) of `bucket`, in listing order, all pages.
async fn all_versions(s3: &Client, bucket: &str) -> Vec<(String, String, bool, bool)> {
    let listed = s3.list_object_versions().bucket(bucket).send().await.unwrap();
    assert_eq!(listed.is_truncated(), Some(false));
    entries(&listed)
}

/// The entries of one ListObjectVersions page, versions and markers merged in S3's order.
fn entries(
    page: &aws_sdk_s3::operation::list_object_versions::ListObjectVersionsOutput,
) -> Vec<(String, String, bool, bool)> {
    let mut all: Vec<(String, String, bool, bool)> = page
        .versions()
        .iter()
        .map(|v| {
            let (key, id) = (v.key().unwrap().to_owned(), v.version_id().unwrap().to_owned());
            (key, id, v.is_latest().unwrap(), false)
        })
        .chain(page.delete_markers().iter().map(|m| {
            let (key, id) = (m.key().unwrap().to_owned(), m.version_id().unwrap().to_owned());
            (key, id, m.is_latest().unwrap(), true)
        }))
        .collect();
    sort_entries(&mut all);
    all
}

/// Keys ascending, the latest first within a key, then by id, newest first (ids here grow
/// with time; "null", written before any, last): S3's order wherever the null version is
/// the oldest or the latest.
fn sort_entries(all: &mut [(String, String, bool, bool)]) {
    let order = |id: &str| if id == "null" { String::new() } else { id.to_owned() };
    all.sort_by(|a, b| {
        a.0.cmp(&b.0).then(b.2.cmp(&a.2)).then_with(|| order(&b.1).cmp(&order(&a.1)))
    });
}
