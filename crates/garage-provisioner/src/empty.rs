//! Emptying a bucket through Garage's S3 API with the provisioner's own key, in passes: Garage
//! refuses to delete a bucket that holds objects, and a big bucket takes longer than one
//! reconcile should. Each pass deletes what it lists from the start of the bucket, so a pass
//! after a crash simply goes on where the last one stopped.

use std::time::{Duration, Instant};

use aws_sdk_s3::config::{
    BehaviorVersion, Region, RequestChecksumCalculation, ResponseChecksumValidation,
    SharedHttpClient,
};
use aws_sdk_s3::error::DisplayErrorContext;
use aws_sdk_s3::types::{Delete, ObjectIdentifier};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use bucket_provisioner::{BackendError, Credentials};

use crate::params::Settings;

/// How much one pass may do before it reports progress and lets the claim say so.
#[derive(Clone, Copy, Debug)]
pub struct PassLimits {
    /// The most objects one pass deletes.
    pub objects: u64,
    /// The longest one pass runs (a listing page in progress is finished).
    pub time: Duration,
}

impl Default for PassLimits {
    fn default() -> Self {
        Self { objects: 50_000, time: Duration::from_secs(20) }
    }
}

/// What one pass did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pass {
    /// Objects deleted.
    pub deleted: u64,
    /// Whether the listing came back empty.
    pub empty: bool,
}

/// An HTTP client for the S3 API (plain HTTP or TLS).
pub fn http_client() -> SharedHttpClient {
    aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

/// An S3 client of `settings`' endpoint with `keys`.
pub fn s3_client(
    settings: &Settings,
    keys: &Credentials,
    http: &SharedHttpClient,
) -> aws_sdk_s3::Client {
    let credentials = aws_sdk_s3::config::Credentials::new(
        keys.access_key_id.clone(),
        keys.secret_access_key.clone(),
        None,
        None,
        "garage-provisioner",
    );
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(settings.region.clone()))
        .endpoint_url(settings.endpoint.url())
        .force_path_style(true)
        .credentials_provider(credentials)
        .http_client(http.clone())
        .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
        .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// Deletes objects of `bucket` until it is empty or `limits` are reached.
pub async fn empty_pass(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    limits: PassLimits,
) -> Result<Pass, BackendError> {
    let started = Instant::now();
    let mut deleted = 0u64;
    loop {
        let page = s3
            .list_objects_v2()
            .bucket(bucket)
            .max_keys(1000)
            .send()
            .await
            .map_err(|e| s3_error(&format!("ListObjectsV2 {bucket}"), e))?;
        let keys: Vec<ObjectIdentifier> = page
            .contents()
            .iter()
            .filter_map(|o| o.key())
            .filter_map(|key| ObjectIdentifier::builder().key(key).build().ok())
            .collect();
        if keys.is_empty() {
            return Ok(Pass { deleted, empty: true });
        }
        let count = keys.len() as u64;
        let delete = Delete::builder()
            .set_objects(Some(keys))
            .quiet(true)
            .build()
            .map_err(|e| BackendError::transient(format!("DeleteObjects {bucket}: {e}")))?;
        let answer = s3
            .delete_objects()
            .bucket(bucket)
            .delete(delete)
            .send()
            .await
            .map_err(|e| s3_error(&format!("DeleteObjects {bucket}"), e))?;
        if let Some(failed) = answer.errors().first() {
            return Err(BackendError::transient(format!(
                "DeleteObjects {bucket}: {} of {count} objects not deleted, e.g. {:?}: {} {}",
                answer.errors().len(),
                failed.key().unwrap_or_default(),
                failed.code().unwrap_or_default(),
                failed.message().unwrap_or_default()
            )));
        }
        deleted += count;
        if deleted >= limits.objects || started.elapsed() >= limits.time {
            return Ok(Pass { deleted, empty: false });
        }
    }
}

/// S3 failures while emptying are transient: the finalizer waits, and the claim says why. The
/// provisioner's key holds every permission on buckets it created, and gets them again before
/// each pass, so a refusal is not the claim's to fix.
fn s3_error<E: std::error::Error + 'static>(
    action: &str,
    error: aws_sdk_s3::error::SdkError<E>,
) -> BackendError {
    BackendError::transient(format!("{action}: {}", DisplayErrorContext(&error)))
}
