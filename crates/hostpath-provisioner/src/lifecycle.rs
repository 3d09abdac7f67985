//! A claim's lifecycle rules: `additionalConfig` key `bucketLifecycle`, the JSON of S3's
//! `PutBucketLifecycleConfiguration` as Rook's claims carry it (read by the library's
//! [`Lifecycle::parse`]), turned into the endpoint's [`LifecycleConfig`] and set on the claim's
//! bucket, where the StorageClass allows it (`allowLifecycle`, allowed unless `"false"`, as for
//! every backend).
//!
//! What the endpoint does with each kind of rule decides what a claim may ask:
//!
//! - `Expiration` by `Days` or `Date`, and `AbortIncompleteMultipartUpload`: applied by the
//!   endpoint's lifecycle pass;
//! - `NoncurrentVersionExpiration` and `Expiration` `ExpiredObjectDeleteMarker`: applied by the
//!   same pass to a bucket with versioning ([`crate::features`]), kept on one without;
//! - `Transitions`: refused by name (the endpoint has one storage class).
//!
//! Who owns the rules: when the claim carries the key, its rules replace the bucket's, whoever
//! set them (a `ReadWrite` key may change them over S3 until the claim's next change). When it
//! does not, the bucket's rules are removed only if the claim had set them before, as its
//! ObjectBucket records (cluster-scoped, written by the provisioner alone); a claim that never
//! set the key leaves rules set over S3 alone.

use std::collections::BTreeMap;

use bucket_provisioner::BackendError;
use bucket_provisioner::bucket::features::class::{ALLOW_LIFECYCLE, ClassFeatures, flag};
use bucket_provisioner::bucket::features::lifecycle::{Expiration, Lifecycle, Rule, When};
use s3_endpoint::store::{
    self, FilterForm, LifecycleConfig, LifecycleFilter, LifecycleRule, NoncurrentExpiration,
};

/// The `additionalConfig` key holding the rules.
pub use bucket_provisioner::bucket::features::lifecycle::BUCKET_LIFECYCLE;

fn invalid(why: impl std::fmt::Display) -> BackendError {
    BackendError::invalid_parameter(format!("additionalConfig {BUCKET_LIFECYCLE}: {why}"))
}

/// The rules a claim asks for (`None` without the key), refused when the class does not allow
/// them, when S3 would refuse them, or when they ask for what the endpoint cannot do.
pub fn claim_rules(
    config: &BTreeMap<String, String>,
    parameters: &BTreeMap<String, String>,
) -> Result<Option<LifecycleConfig>, BackendError> {
    let lifecycle = flag(parameters, ALLOW_LIFECYCLE, true)?;
    let Some(text) = config.get(BUCKET_LIFECYCLE) else { return Ok(None) };
    ClassFeatures { lifecycle, ..ClassFeatures::default() }.check_lifecycle()?;
    endpoint_config(&Lifecycle::parse(text)?).map(Some)
}

/// The endpoint's configuration for the library's rules, checked as the endpoint checks
/// PutBucketLifecycleConfiguration; transitions are refused by name.
pub fn endpoint_config(lifecycle: &Lifecycle) -> Result<LifecycleConfig, BackendError> {
    let rules = lifecycle
        .rules
        .iter()
        .enumerate()
        .map(|(index, rule)| {
            endpoint_rule(rule).map_err(|why| invalid(format_args!("rule {}: {why}", index + 1)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let config = LifecycleConfig { rules };
    config.check().map_err(invalid)?;
    Ok(config)
}

/// A number the endpoint keeps as an `i32` or `i64`, or why it cannot be.
fn fits<T: TryFrom<u64>>(what: &str, n: impl Into<u64>) -> Result<T, String> {
    let n = n.into();
    T::try_from(n).map_err(|_| format!("{what} {n} is larger than the endpoint keeps"))
}

fn endpoint_rule(rule: &Rule) -> Result<LifecycleRule, String> {
    if !rule.transitions.is_empty() {
        return Err("Transitions not supported: the hostPath endpoint has a single storage \
                    class, so there is nothing to move objects to"
            .into());
    }
    let size = |what, n: Option<u64>| n.map(|n| fits::<i64>(what, n)).transpose();
    let filter = LifecycleFilter {
        prefix: rule.filter.prefix.clone(),
        tags: Vec::new(),
        size_greater_than: size("Filter ObjectSizeGreaterThan", rule.filter.size_greater_than)?,
        size_less_than: size("Filter ObjectSizeLessThan", rule.filter.size_less_than)?,
        form: FilterForm::Filter,
    };
    let expiration = match rule.expiration {
        None => None,
        Some(Expiration::At(When::Days(days))) => Some(store::Expiration {
            days: Some(fits("Expiration Days", days)?),
            ..store::Expiration::default()
        }),
        Some(Expiration::At(When::Date(secs))) => {
            Some(store::Expiration { date_unix: Some(secs), ..store::Expiration::default() })
        }
        Some(Expiration::ExpiredObjectDeleteMarker) => Some(store::Expiration {
            expired_object_delete_marker: Some(true),
            ..store::Expiration::default()
        }),
    };
    let noncurrent_expiration = match rule.noncurrent_expiration {
        None => None,
        Some(n) => Some(NoncurrentExpiration {
            days: Some(fits("NoncurrentVersionExpiration NoncurrentDays", n.days)?),
            newer_versions: n
                .newer_versions
                .map(|v| fits("NoncurrentVersionExpiration NewerNoncurrentVersions", v))
                .transpose()?,
        }),
    };
    let abort = rule.abort_multipart_days;
    let abort = abort.map(|d| fits("AbortIncompleteMultipartUpload DaysAfterInitiation", d));
    Ok(LifecycleRule {
        id: rule.id.clone(),
        status: if rule.enabled { "Enabled" } else { "Disabled" }.to_owned(),
        filter,
        expiration,
        abort_incomplete_upload_days: abort.transpose()?.map(Some),
        noncurrent_expiration,
        transitions: false,
    })
}

#[cfg(test)]
mod tests;
