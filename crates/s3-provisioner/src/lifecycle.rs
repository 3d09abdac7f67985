//! A claim's lifecycle rules (read by the library, see
//! [`bucket_provisioner::bucket::features::lifecycle`]) as S3's
//! `PutBucketLifecycleConfiguration` takes them; S3 applies every kind of rule.

use aws_sdk_s3::primitives::DateTime;
use aws_sdk_s3::types::{
    AbortIncompleteMultipartUpload, BucketLifecycleConfiguration, ExpirationStatus,
    LifecycleExpiration, LifecycleRule, LifecycleRuleAndOperator, LifecycleRuleFilter,
    NoncurrentVersionExpiration, Transition, TransitionStorageClass,
};
use bucket_provisioner::BackendError;
use bucket_provisioner::bucket::features::lifecycle::{
    BUCKET_LIFECYCLE, Expiration, Filter, Lifecycle, Rule, When,
};

/// S3 counts days as an `i32`; the library's are `u32`.
fn count(days: u32) -> i32 {
    i32::try_from(days).unwrap_or(i32::MAX)
}

fn date(seconds: i64) -> DateTime {
    DateTime::from_secs(seconds)
}

fn invalid(why: impl std::fmt::Display) -> BackendError {
    BackendError::invalid_parameter(format!("additionalConfig {BUCKET_LIFECYCLE}: {why}"))
}

/// The configuration S3 takes for `lifecycle`.
pub fn configuration(lifecycle: &Lifecycle) -> Result<BucketLifecycleConfiguration, BackendError> {
    let mut configuration = BucketLifecycleConfiguration::builder();
    for rule in &lifecycle.rules {
        configuration = configuration.rules(rule_of(rule)?);
    }
    configuration.build().map_err(invalid)
}

/// S3 takes one criterion alone, and several only inside an `And`; none is the whole bucket,
/// which it writes as an empty prefix.
fn filter_of(filter: &Filter) -> LifecycleRuleFilter {
    let as_i64 = |bytes: u64| i64::try_from(bytes).unwrap_or(i64::MAX);
    let (above, below) = (filter.size_greater_than.map(as_i64), filter.size_less_than.map(as_i64));
    let criteria = usize::from(filter.prefix.is_some())
        + usize::from(above.is_some())
        + usize::from(below.is_some());
    let builder = LifecycleRuleFilter::builder();
    match criteria {
        0 => builder.prefix("").build(),
        1 => builder
            .set_prefix(filter.prefix.clone())
            .set_object_size_greater_than(above)
            .set_object_size_less_than(below)
            .build(),
        _ => builder
            .and(
                LifecycleRuleAndOperator::builder()
                    .set_prefix(filter.prefix.clone())
                    .set_object_size_greater_than(above)
                    .set_object_size_less_than(below)
                    .build(),
            )
            .build(),
    }
}

fn rule_of(rule: &Rule) -> Result<LifecycleRule, BackendError> {
    let status = if rule.enabled { ExpirationStatus::Enabled } else { ExpirationStatus::Disabled };
    let mut built = LifecycleRule::builder()
        .status(status)
        .set_id(rule.id.clone())
        .filter(filter_of(&rule.filter));
    if let Some(expiration) = rule.expiration {
        let builder = LifecycleExpiration::builder();
        built = built.expiration(match expiration {
            Expiration::At(When::Days(days)) => builder.days(count(days)).build(),
            Expiration::At(When::Date(at)) => builder.date(date(at)).build(),
            Expiration::ExpiredObjectDeleteMarker => {
                builder.expired_object_delete_marker(true).build()
            }
        });
    }
    if let Some(noncurrent) = rule.noncurrent_expiration {
        built = built.noncurrent_version_expiration(
            NoncurrentVersionExpiration::builder()
                .noncurrent_days(count(noncurrent.days))
                .set_newer_noncurrent_versions(noncurrent.newer_versions.map(count))
                .build(),
        );
    }
    if let Some(days) = rule.abort_multipart_days {
        built = built.abort_incomplete_multipart_upload(
            AbortIncompleteMultipartUpload::builder().days_after_initiation(count(days)).build(),
        );
    }
    for transition in &rule.transitions {
        let (days, at) = match transition.when {
            When::Days(days) => (Some(count(days)), None),
            When::Date(at) => (None, Some(date(at))),
        };
        built = built.transitions(
            Transition::builder()
                .set_days(days)
                .set_date(at)
                .storage_class(TransitionStorageClass::from(transition.storage_class.as_str()))
                .build(),
        );
    }
    built.build().map_err(invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_rule_reaches_s3() {
        let text = r#"{"Rules":[
            {"ID":"expire-logs","Status":"Enabled","Filter":{"Prefix":"logs/"},
             "Expiration":{"Days":30},"AbortIncompleteMultipartUpload":{"DaysAfterInitiation":7}},
            {"Status":"Disabled","Transitions":[{"Days":90,"StorageClass":"GLACIER"}],
             "NoncurrentVersionExpiration":{"NoncurrentDays":10}},
            {"Status":"Enabled","Filter":{"ObjectSizeGreaterThan":5},
             "Expiration":{"Date":"2030-01-01T00:00:00Z"}},
            {"Status":"Enabled","Filter":{"Prefix":"a/","ObjectSizeLessThan":5},
             "Expiration":{"Days":1}}]}"#;
        let parsed = configuration(&Lifecycle::parse(text).unwrap()).unwrap();
        let rules = parsed.rules();
        assert_eq!(rules.len(), 4);
        assert_eq!(rules[0].id(), Some("expire-logs"));
        assert_eq!(rules[0].filter().and_then(|f| f.prefix()), Some("logs/"));
        assert_eq!(rules[0].expiration().and_then(|e| e.days()), Some(30));
        assert_eq!(rules[1].filter().and_then(|f| f.prefix()), Some(""), "the whole bucket");
        assert_eq!(rules[1].status(), &ExpirationStatus::Disabled);
        assert_eq!(
            rules[1].transitions()[0].storage_class(),
            Some(&TransitionStorageClass::Glacier)
        );
        assert_eq!(rules[2].filter().and_then(|f| f.prefix()), None);
        let at = rules[2].expiration().and_then(|e| e.date()).unwrap();
        assert_eq!(at.secs(), 1_893_456_000);
        let both = rules[3].filter().and_then(|f| f.and()).unwrap();
        assert_eq!((both.prefix(), both.object_size_less_than()), (Some("a/"), Some(5)));
    }
}
