//! A claim's CORS rules (`cors`) and lifecycle rules (`bucketLifecycle`) on Garage, where its
//! StorageClass allows them (`allowCors: "true"`; `allowLifecycle`, allowed unless `"false"`),
//! applied through Garage's S3 API (`PutBucketCors`, `PutBucketLifecycleConfiguration`, and
//! their deletes when the key goes) with the provisioner's own key, which owns the buckets it
//! creates.
//!
//! Garage's lifecycle rules expire current objects (after days, or on a date) and abort
//! unfinished multipart uploads, filtered by prefix and object size; it would silently drop
//! anything else it were sent, so a rule asking for noncurrent versions, transitions or delete
//! markers is refused by name instead. Versioning and object lock, which Garage lacks, are
//! refused where the quota keys are read.

use std::collections::BTreeMap;

use aws_sdk_s3::Client;
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::DateTime;
use aws_sdk_s3::types::{
    AbortIncompleteMultipartUpload, BucketLifecycleConfiguration, CorsConfiguration, CorsRule,
    ExpirationStatus, LifecycleExpiration, LifecycleRule, LifecycleRuleAndOperator,
    LifecycleRuleFilter,
};
use bucket_provisioner::BackendError;
use bucket_provisioner::bucket::features::class::{ALLOW_LIFECYCLE, ClassFeatures, flag};
use bucket_provisioner::bucket::features::cors::{self, ALLOW_CORS, CORS, CorsRules};
use bucket_provisioner::bucket::features::lifecycle::{
    BUCKET_LIFECYCLE, Expiration, Filter, Lifecycle, Rule, When,
};

/// The StorageClass parameters of this module.
pub const PARAMETERS: [&str; 2] = [ALLOW_CORS, ALLOW_LIFECYCLE];
/// The `additionalConfig` keys of this module.
pub const KEYS: [&str; 2] = [CORS, BUCKET_LIFECYCLE];

/// What a claim asks of its bucket beyond quotas, as Garage's S3 API takes it.
#[derive(Clone, Debug, Default)]
pub struct BucketFeatures {
    /// The CORS rules.
    pub cors: Option<CorsConfiguration>,
    /// The lifecycle rules.
    pub lifecycle: Option<BucketLifecycleConfiguration>,
}

/// Whether `config` holds any key of this module.
pub fn any(config: &BTreeMap<String, String>) -> bool {
    KEYS.iter().any(|key| config.contains_key(*key))
}

/// The refusal of these keys on a bucket the claim did not create.
pub fn shared_bucket(bucket: &str) -> BackendError {
    BackendError::invalid_parameter(format!(
        "additionalConfig {CORS} and {BUCKET_LIFECYCLE} configure the whole bucket {bucket:?}, \
         which this claim did not create and may share with other claims (StorageClass \
         bucketName); only the claim that created a bucket sets them"
    ))
}

impl BucketFeatures {
    /// Reads `config` against the class's `parameters`: a key the class does not allow, or a
    /// value Garage cannot honour, is an `InvalidParameters` error naming it.
    pub fn parse(
        config: &BTreeMap<String, String>,
        parameters: &BTreeMap<String, String>,
    ) -> Result<Self, BackendError> {
        let allow_cors = flag(parameters, ALLOW_CORS, false)?;
        let class = ClassFeatures {
            lifecycle: flag(parameters, ALLOW_LIFECYCLE, true)?,
            ..Default::default()
        };
        let cors = match config.get(CORS) {
            Some(_) if !allow_cors => return Err(cors::not_allowed()),
            Some(text) => Some(cors_configuration(&cors::parse(text)?)?),
            None => None,
        };
        let lifecycle = match config.get(BUCKET_LIFECYCLE) {
            Some(text) => {
                class.check_lifecycle()?;
                Some(lifecycle_configuration(&Lifecycle::parse(text)?)?)
            }
            None => None,
        };
        Ok(Self { cors, lifecycle })
    }

    /// Whether the claim asks for anything here.
    pub fn is_empty(&self) -> bool {
        self.cors.is_none() && self.lifecycle.is_none()
    }

    /// Applies what is asked to `bucket` with `s3` (the provisioner's key), and removes what
    /// `previous` (the `additionalConfig` the ObjectBucket recorded) had and is no longer asked.
    pub async fn apply(
        &self,
        s3: &Client,
        bucket: &str,
        previous: &BTreeMap<String, String>,
    ) -> Result<(), BackendError> {
        match &self.cors {
            Some(cors) => {
                let request = s3.put_bucket_cors().bucket(bucket).cors_configuration(cors.clone());
                request.send().await.map_err(|e| failed(&format!("PutBucketCors {bucket}"), e))?;
            }
            None if previous.contains_key(CORS) => {
                let request = s3.delete_bucket_cors().bucket(bucket);
                request
                    .send()
                    .await
                    .map_err(|e| failed(&format!("DeleteBucketCors {bucket}"), e))?;
            }
            None => {}
        }
        match &self.lifecycle {
            Some(lifecycle) => {
                let request = s3.put_bucket_lifecycle_configuration().bucket(bucket);
                let request = request.lifecycle_configuration(lifecycle.clone());
                request
                    .send()
                    .await
                    .map_err(|e| failed(&format!("PutBucketLifecycleConfiguration {bucket}"), e))?;
            }
            None if previous.contains_key(BUCKET_LIFECYCLE) => {
                let request = s3.delete_bucket_lifecycle().bucket(bucket);
                request
                    .send()
                    .await
                    .map_err(|e| failed(&format!("DeleteBucketLifecycle {bucket}"), e))?;
            }
            None => {}
        }
        Ok(())
    }
}

/// Garage refusing what was checked to be valid is not the claim's to fix: retried, with why.
fn failed<E: ProvideErrorMetadata + std::error::Error + 'static>(
    action: &str,
    error: SdkError<E>,
) -> BackendError {
    BackendError::transient(format!("Garage S3 {action}: {}", DisplayErrorContext(&error)))
}

fn invalid(key: &str, why: impl std::fmt::Display) -> BackendError {
    BackendError::invalid_parameter(format!("additionalConfig {key}: {why}"))
}

fn cors_configuration(rules: &CorsRules) -> Result<CorsConfiguration, BackendError> {
    let mut configuration = CorsConfiguration::builder();
    for rule in &rules.rules {
        let listed = |list: &Vec<String>| (!list.is_empty()).then(|| list.clone());
        let built = CorsRule::builder()
            .set_id(rule.id.clone())
            .set_allowed_origins(Some(rule.allowed_origins.clone()))
            .set_allowed_methods(Some(rule.allowed_methods.clone()))
            .set_allowed_headers(listed(&rule.allowed_headers))
            .set_expose_headers(listed(&rule.expose_headers))
            .set_max_age_seconds(rule.max_age_seconds)
            .build()
            .map_err(|e| invalid(CORS, e))?;
        configuration = configuration.cors_rules(built);
    }
    configuration.build().map_err(|e| invalid(CORS, e))
}

fn lifecycle_configuration(
    lifecycle: &Lifecycle,
) -> Result<BucketLifecycleConfiguration, BackendError> {
    let mut configuration = BucketLifecycleConfiguration::builder();
    for (index, rule) in lifecycle.rules.iter().enumerate() {
        let beyond = rule.beyond_expiration();
        if !beyond.is_empty() {
            return Err(invalid(
                BUCKET_LIFECYCLE,
                format_args!(
                    "rule {}: {} not supported: Garage's lifecycle rules only expire current \
                     objects (Expiration Days or Date) and abort unfinished uploads \
                     (AbortIncompleteMultipartUpload)",
                    index + 1,
                    beyond.join(", ")
                ),
            ));
        }
        configuration = configuration.rules(rule_of(rule)?);
    }
    configuration.build().map_err(|e| invalid(BUCKET_LIFECYCLE, e))
}

/// One criterion alone, several inside an `And` (Garage refuses them side by side); Garage
/// reads no rule-level `Prefix`, so the filter always carries it.
fn filter_of(filter: &Filter) -> LifecycleRuleFilter {
    let as_i64 = |bytes: u64| i64::try_from(bytes).unwrap_or(i64::MAX);
    let (above, below) = (filter.size_greater_than.map(as_i64), filter.size_less_than.map(as_i64));
    let criteria = usize::from(filter.prefix.is_some())
        + usize::from(above.is_some())
        + usize::from(below.is_some());
    let builder = LifecycleRuleFilter::builder();
    if criteria < 2 {
        return builder
            .set_prefix(filter.prefix.clone())
            .set_object_size_greater_than(above)
            .set_object_size_less_than(below)
            .build();
    }
    let and = LifecycleRuleAndOperator::builder()
        .set_prefix(filter.prefix.clone())
        .set_object_size_greater_than(above)
        .set_object_size_less_than(below)
        .build();
    builder.and(and).build()
}

fn rule_of(rule: &Rule) -> Result<LifecycleRule, BackendError> {
    let status = if rule.enabled { ExpirationStatus::Enabled } else { ExpirationStatus::Disabled };
    let count = |days: u32| i32::try_from(days).unwrap_or(i32::MAX);
    let mut built = LifecycleRule::builder()
        .status(status)
        .set_id(rule.id.clone())
        .filter(filter_of(&rule.filter));
    if let Some(Expiration::At(when)) = rule.expiration {
        let expiration = LifecycleExpiration::builder();
        built = built.expiration(match when {
            When::Days(days) => expiration.days(count(days)).build(),
            When::Date(at) => expiration.date(DateTime::from_secs(at)).build(),
        });
    }
    if let Some(days) = rule.abort_multipart_days {
        built = built.abort_incomplete_multipart_upload(
            AbortIncompleteMultipartUpload::builder().days_after_initiation(count(days)).build(),
        );
    }
    built.build().map_err(|e| invalid(BUCKET_LIFECYCLE, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    const RULES: &str = r#"{"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]}]}"#;

    #[test]
    fn expiration_and_aborted_uploads_reach_garage_in_a_filter() {
        let text = r#"{"Rules": [{"ID": "old", "Status": "Enabled", "Prefix": "logs/",
            "Expiration": {"Days": 30}, "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 2}},
            {"Status": "Enabled", "Filter": {"Prefix": "a/", "ObjectSizeGreaterThan": 10},
             "Expiration": {"Date": "2030-01-01T00:00:00Z"}}]}"#;
        let parsed = BucketFeatures::parse(&map(&[(BUCKET_LIFECYCLE, text)]), &map(&[])).unwrap();
        let rules = parsed.lifecycle.unwrap().rules().to_vec();
        assert_eq!(rules[0].filter().and_then(|f| f.prefix()), Some("logs/"));
        assert_eq!(rules[0].expiration().and_then(|e| e.days()), Some(30));
        let both = rules[1].filter().and_then(|f| f.and()).unwrap();
        assert_eq!((both.prefix(), both.object_size_greater_than()), (Some("a/"), Some(10)));
    }

    #[test]
    fn what_garage_would_drop_or_the_class_refuses_is_named() {
        for (config, class, says) in [
            (
                (
                    BUCKET_LIFECYCLE,
                    r#"{"Rules": [{"Status": "Enabled",
                    "Transitions": [{"Days": 1, "StorageClass": "GLACIER"}]}]}"#,
                ),
                &[][..],
                "rule 1: Transitions not supported",
            ),
            (
                (
                    BUCKET_LIFECYCLE,
                    r#"{"Rules": [{"Status": "Enabled", "Expiration": {"Days": 1},
                    "NoncurrentVersionExpiration": {"NoncurrentDays": 1}}]}"#,
                ),
                &[][..],
                "NoncurrentVersionExpiration not supported",
            ),
            (
                (
                    BUCKET_LIFECYCLE,
                    r#"{"Rules": [{"Status": "Enabled", "Expiration": {"Days": 1}}]}"#,
                ),
                &[(ALLOW_LIFECYCLE, "false")][..],
                "allowLifecycle: \"true\"",
            ),
            ((CORS, RULES), &[][..], "allowCors: \"true\""),
        ] {
            let error = BucketFeatures::parse(&map(&[config]), &map(class)).unwrap_err();
            assert!(error.is_permanent());
            assert!(error.to_string().contains(says), "{says}: {error}");
        }
        let cors = BucketFeatures::parse(&map(&[(CORS, RULES)]), &map(&[(ALLOW_CORS, "true")]));
        assert_eq!(cors.unwrap().cors.unwrap().cors_rules()[0].allowed_methods(), ["GET"]);
        let bad_class = BucketFeatures::parse(&map(&[]), &map(&[(ALLOW_CORS, "yes")]));
        assert!(bad_class.unwrap_err().to_string().contains(ALLOW_CORS));
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        /// One lifecycle rule made of the actions S3 has, some Garage lacks.
        fn rule() -> impl Strategy<Value = serde_json::Value> {
            let action = prop::sample::select(vec![
                ("Expiration", json_of(r#"{"Days": 3}"#)),
                ("Expiration", json_of(r#"{"ExpiredObjectDeleteMarker": true}"#)),
                ("AbortIncompleteMultipartUpload", json_of(r#"{"DaysAfterInitiation": 1}"#)),
                ("NoncurrentVersionExpiration", json_of(r#"{"NoncurrentDays": 1}"#)),
                ("Transitions", json_of(r#"[{"Days": 1, "StorageClass": "GLACIER"}]"#)),
                ("Filter", json_of(r#"{"Prefix": "a/", "ObjectSizeLessThan": 9}"#)),
            ]);
            prop::collection::vec(action, 0..4).prop_map(|actions| {
                let mut rule = serde_json::json!({ "Status": "Enabled" });
                for (name, value) in actions {
                    rule[name] = value;
                }
                rule
            })
        }

        fn json_of(text: &str) -> serde_json::Value {
            serde_json::from_str(text).unwrap()
        }

        proptest! {
            /// Whatever a tenant writes is judged; what reaches Garage holds only what Garage
            /// applies, so nothing asked is silently dropped.
            #[test]
            fn only_what_garage_applies_is_sent(
                rules in prop::collection::vec(rule(), 0..3),
                text in proptest::prelude::any::<String>(),
            ) {
                let written = serde_json::json!({ "Rules": rules }).to_string();
                for text in [written, text] {
                    match BucketFeatures::parse(&map(&[(BUCKET_LIFECYCLE, &text)]), &map(&[])) {
                        Ok(parsed) => {
                            for rule in parsed.lifecycle.unwrap().rules() {
                                prop_assert!(rule.transitions().is_empty());
                                prop_assert!(rule.noncurrent_version_expiration().is_none());
                                prop_assert!(rule
                                    .expiration()
                                    .is_none_or(|e| e.expired_object_delete_marker().is_none()));
                            }
                        }
                        Err(error) => prop_assert!(error.is_permanent()),
                    }
                }
            }
        }
    }
}
