//! A PutBucketLifecycleConfiguration document as the store keeps it (checked by
//! [`LifecycleConfig::check`], which holds S3's rules), and back as
//! GetBucketLifecycleConfiguration answers it: written the way it was sent (a rule's `Prefix`
//! or a `Filter`, one condition directly or several in `And`).

use std::time::SystemTime;

use s3s::dto::{
    AbortIncompleteMultipartUpload, BucketLifecycleConfiguration, ExpirationStatus,
    LifecycleExpiration, LifecycleRule as WireRule, LifecycleRuleAndOperator, LifecycleRuleFilter,
    NoncurrentVersionExpiration, Tag, Timestamp,
};
use s3s::{S3Error, S3ErrorCode, S3Result};

use crate::store::{
    Expiration, FilterForm, InvalidLifecycle, LifecycleConfig, LifecycleFilter, LifecycleRefusal,
    LifecycleRule, NoncurrentExpiration,
};

/// The configuration of a PutBucketLifecycleConfiguration, checked (see
/// [`LifecycleConfig::check`]); S3's error otherwise.
pub fn config_of(input: Option<BucketLifecycleConfiguration>) -> S3Result<LifecycleConfig> {
    let Some(input) = input else {
        return Err(S3Error::with_message(
            S3ErrorCode::MalformedXML,
            "The XML you provided was not well-formed or did not validate against our published \
             schema: a LifecycleConfiguration is required",
        ));
    };
    let rules = input.rules.into_iter().map(rule_of).collect::<S3Result<Vec<_>>>()?;
    let config = LifecycleConfig { rules };
    match config.check() {
        Ok(()) => Ok(config),
        Err(refusal) => Err(s3_error_of(refusal)),
    }
}

/// The S3 error of a refused configuration.
pub fn s3_error_of(refusal: InvalidLifecycle) -> S3Error {
    let code = match refusal.code {
        LifecycleRefusal::MalformedXml => S3ErrorCode::MalformedXML,
        LifecycleRefusal::InvalidArgument => S3ErrorCode::InvalidArgument,
        LifecycleRefusal::InvalidRequest => S3ErrorCode::InvalidRequest,
        LifecycleRefusal::NotImplemented => S3ErrorCode::NotImplemented,
    };
    S3Error::with_message(code, refusal.message)
}

fn rule_of(rule: WireRule) -> S3Result<LifecycleRule> {
    let expiration = match rule.expiration {
        Some(e) => Some(Expiration {
            days: e.days,
            date_unix: e.date.map(midnight_of).transpose()?,
            expired_object_delete_marker: e.expired_object_delete_marker,
        }),
        None => None,
    };
    let transitions = rule.transitions.is_some_and(|t| !t.is_empty())
        || rule.noncurrent_version_transitions.is_some_and(|t| !t.is_empty());
    Ok(LifecycleRule {
        id: rule.id,
        status: rule.status.as_str().to_owned(),
        filter: filter_of(rule.filter, rule.prefix),
        expiration,
        abort_incomplete_upload_days: rule
            .abort_incomplete_multipart_upload
            .map(|a| a.days_after_initiation),
        noncurrent_expiration: rule.noncurrent_version_expiration.map(|n| NoncurrentExpiration {
            days: n.noncurrent_days,
            newer_versions: n.newer_noncurrent_versions,
        }),
        transitions,
    })
}

/// A `Date` as seconds since the epoch; only whole seconds (the check wants midnight).
fn midnight_of(date: Timestamp) -> S3Result<i64> {
    let at = time::OffsetDateTime::from(date);
    if at.nanosecond() != 0 {
        return Err(S3Error::with_message(
            S3ErrorCode::InvalidArgument,
            "'Date' must be at midnight GMT",
        ));
    }
    Ok(at.unix_timestamp())
}

fn filter_of(filter: Option<LifecycleRuleFilter>, prefix: Option<String>) -> LifecycleFilter {
    let tag = |t: Tag| (t.key.unwrap_or_default(), t.value.unwrap_or_default());
    match (filter, prefix) {
        (Some(_), Some(_)) => LifecycleFilter { form: FilterForm::Ambiguous, ..Default::default() },
        (None, Some(prefix)) => LifecycleFilter {
            prefix: Some(prefix),
            form: FilterForm::RulePrefix,
            ..Default::default()
        },
        (None, None) => LifecycleFilter { form: FilterForm::Missing, ..Default::default() },
        (Some(f), None) => {
            let direct = [
                f.and.is_some(),
                f.prefix.is_some(),
                f.tag.is_some(),
                f.object_size_greater_than.is_some(),
                f.object_size_less_than.is_some(),
            ];
            if direct.iter().filter(|d| **d).count() > 1 {
                return LifecycleFilter { form: FilterForm::Ambiguous, ..Default::default() };
            }
            match f.and {
                Some(and) => LifecycleFilter {
                    prefix: and.prefix,
                    tags: and.tags.unwrap_or_default().into_iter().map(tag).collect(),
                    size_greater_than: and.object_size_greater_than,
                    size_less_than: and.object_size_less_than,
                    form: FilterForm::Filter,
                },
                None => LifecycleFilter {
                    prefix: f.prefix,
                    tags: f.tag.map(tag).into_iter().collect(),
                    size_greater_than: f.object_size_greater_than,
                    size_less_than: f.object_size_less_than,
                    form: FilterForm::Filter,
                },
            }
        }
    }
}

/// The rules as GetBucketLifecycleConfiguration answers them.
pub fn rules_of(config: &LifecycleConfig) -> Vec<WireRule> {
    config.rules.iter().map(wire_rule).collect()
}

fn wire_rule(rule: &LifecycleRule) -> WireRule {
    let (filter, prefix) = wire_filter(&rule.filter);
    let date = |secs: i64| {
        let at = time::OffsetDateTime::from_unix_timestamp(secs).ok()?;
        Some(Timestamp::from(SystemTime::from(at)))
    };
    WireRule {
        abort_incomplete_multipart_upload: rule
            .abort_incomplete_upload_days
            .map(|days| AbortIncompleteMultipartUpload { days_after_initiation: days }),
        expiration: rule.expiration.as_ref().map(|e| LifecycleExpiration {
            date: e.date_unix.and_then(date),
            days: e.days,
            expired_object_delete_marker: e.expired_object_delete_marker,
        }),
        filter,
        id: rule.id.clone(),
        noncurrent_version_expiration: rule.noncurrent_expiration.as_ref().map(|n| {
            NoncurrentVersionExpiration {
                newer_noncurrent_versions: n.newer_versions,
                noncurrent_days: n.days,
            }
        }),
        noncurrent_version_transitions: None,
        prefix,
        status: ExpirationStatus::from(rule.status.clone()),
        transitions: None,
    }
}

fn wire_filter(filter: &LifecycleFilter) -> (Option<LifecycleRuleFilter>, Option<String>) {
    if filter.form == FilterForm::RulePrefix {
        return (None, Some(filter.prefix.clone().unwrap_or_default()));
    }
    let tags: Vec<Tag> = filter
        .tags
        .iter()
        .map(|(k, v)| Tag { key: Some(k.clone()), value: Some(v.clone()) })
        .collect();
    let conditions = usize::from(filter.prefix.is_some())
        + tags.len()
        + usize::from(filter.size_greater_than.is_some())
        + usize::from(filter.size_less_than.is_some());
    let wire = if conditions > 1 {
        LifecycleRuleFilter {
            and: Some(LifecycleRuleAndOperator {
                object_size_greater_than: filter.size_greater_than,
                object_size_less_than: filter.size_less_than,
                prefix: filter.prefix.clone(),
                tags: (!tags.is_empty()).then_some(tags),
            }),
            ..LifecycleRuleFilter::default()
        }
    } else {
        LifecycleRuleFilter {
            and: None,
            object_size_greater_than: filter.size_greater_than,
            object_size_less_than: filter.size_less_than,
            prefix: filter.prefix.clone(),
            tag: tags.into_iter().next(),
        }
    };
    (Some(wire), None)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const DAY: i64 = 86_400;

    /// A rule S3 would accept, in any of the forms a client may write it.
    fn valid_rule(n: usize) -> impl Strategy<Value = LifecycleRule> {
        let tags = proptest::collection::btree_map("[a-z]{1,8}", "\\PC{0,8}", 0..3);
        let sizes = (proptest::option::of(0..1000i64), proptest::option::of(1000..5000i64));
        let filter = prop_oneof![
            "\\PC{0,12}".prop_map(|p| LifecycleFilter {
                prefix: Some(p),
                form: FilterForm::RulePrefix,
                ..Default::default()
            }),
            (proptest::option::of("\\PC{0,12}"), tags, sizes).prop_map(|(prefix, tags, s)| {
                LifecycleFilter {
                    prefix,
                    tags: tags.into_iter().collect(),
                    size_greater_than: s.0,
                    size_less_than: s.1,
                    form: FilterForm::Filter,
                }
            }),
        ];
        let expiration = proptest::option::of(prop_oneof![
            (1..10_000i32).prop_map(|d| Expiration { days: Some(d), ..Expiration::default() }),
            (0..40_000i64)
                .prop_map(|d| Expiration { date_unix: Some(d * DAY), ..Expiration::default() }),
        ]);
        let noncurrent = proptest::option::of((1..1000i32, proptest::option::of(1..=100i32)))
            .prop_map(|n| {
                n.map(|(days, newer)| NoncurrentExpiration {
                    days: Some(days),
                    newer_versions: newer,
                })
            });
        (
            any::<bool>(),
            any::<bool>(),
            filter,
            expiration,
            proptest::option::of(1..1000i32),
            noncurrent,
        )
            .prop_map(move |(named, enabled, filter, expiration, abort, noncurrent)| {
                let plain = filter.tags.is_empty()
                    && filter.size_greater_than.is_none()
                    && filter.size_less_than.is_none();
                let abort = abort.filter(|_| plain).map(Some);
                // At least one action.
                let expiration = match (&expiration, abort, &noncurrent) {
                    (None, None, None) => {
                        Some(Expiration { days: Some(1), ..Expiration::default() })
                    }
                    _ => expiration,
                };
                LifecycleRule {
                    id: named.then(|| format!("rule-{n}")),
                    status: if enabled { "Enabled" } else { "Disabled" }.to_owned(),
                    filter,
                    expiration,
                    abort_incomplete_upload_days: abort,
                    noncurrent_expiration: noncurrent,
                    transitions: false,
                }
            })
    }

    fn valid_config() -> impl Strategy<Value = LifecycleConfig> {
        (1..6usize)
            .prop_flat_map(|n| (0..n).map(valid_rule).collect::<Vec<_>>())
            .prop_map(|rules| LifecycleConfig { rules })
    }

    proptest! {
        /// What GetBucketLifecycleConfiguration answers is read back by
        /// PutBucketLifecycleConfiguration as the same rules, whatever form they were in.
        #[test]
        fn answered_rules_read_back_the_same(config in valid_config()) {
            prop_assert_eq!(config.check(), Ok(()));
            let wire = BucketLifecycleConfiguration { rules: rules_of(&config) };
            prop_assert_eq!(config_of(Some(wire)).unwrap(), config);
        }

        /// Whatever numbers and texts a tenant sends are answered (accepted or refused with an
        /// S3 error), never a panic; what is accepted passes the check.
        #[test]
        fn any_rule_is_answered(
            days in any::<Option<i32>>(),
            date in proptest::option::of(-10_000_000_000i64..10_000_000_000),
            abort in any::<Option<Option<i32>>>(),
            sizes in any::<(Option<i64>, Option<i64>)>(),
            status in "\\PC{0,10}",
            tags in proptest::collection::vec(("\\PC{0,5}", "\\PC{0,5}"), 0..3),
        ) {
            let rule = LifecycleRule {
                id: None,
                status,
                filter: LifecycleFilter {
                    prefix: None,
                    tags,
                    size_greater_than: sizes.0,
                    size_less_than: sizes.1,
                    form: FilterForm::Filter,
                },
                expiration: Some(Expiration { days, date_unix: date, expired_object_delete_marker: None }),
                abort_incomplete_upload_days: abort,
                noncurrent_expiration: None,
                transitions: false,
            };
            let wire = BucketLifecycleConfiguration {
                rules: rules_of(&LifecycleConfig { rules: vec![rule] }),
            };
            if let Ok(config) = config_of(Some(wire)) {
                prop_assert!(config.check().is_ok());
            }
        }
    }
}
