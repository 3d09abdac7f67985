//! A claim's `additionalConfig` on S3: `bucketPolicy`, `bucketLifecycle`, `cors` (see
//! [`crate::cors`]), `versioning` and `objectLock` for a bucket the claim created. The quota keys
//! other provisioners accept are refused: S3 has no quotas. Any other key is refused by name
//! rather than ignored. What the StorageClass allows of each is checked by the backend.
//!
//! # `bucketPolicy`
//!
//! A bucket policy (JSON) applied with `PutBucketPolicy`, replaced when the claim changes it and
//! deleted when the key goes. It can never reach further than the claim's own user unless the
//! StorageClass says so:
//!
//! - every statement names its `Principal` as AWS principals (ARNs), each of them the claim's
//!   own IAM user or one the StorageClass lists in `bucketPolicyPrincipals` (`*` there allows
//!   any principal, public access included); `NotPrincipal` is refused;
//! - every `Resource` is the claim's bucket or inside it; `NotResource` is refused;
//! - an `Allow` grants only actions the claim's user already has on its bucket (listing it and
//!   using its objects): never the bucket's configuration, so the policy cannot be changed from
//!   inside; `NotAction` is refused. `Deny` may name any action.
//!
//! The claim's user is `arn:<partition>:iam::<account>:user/bucket-provisioner/obc-<claim uid>`.
//!
//! # `bucketLifecycle`, `versioning`, `objectLock`
//!
//! Read by the library (see [`bucket_provisioner::bucket::features`]): the lifecycle rules as
//! S3's `PutBucketLifecycleConfiguration` takes them (Rook's format), `Enabled` or `Suspended`,
//! and object lock with an optional default retention.

use std::collections::BTreeMap;

use aws_sdk_s3::types::{BucketLifecycleConfiguration, CorsConfiguration};
use bucket_provisioner::BackendError;
use bucket_provisioner::bucket::features::lifecycle::Lifecycle;
use bucket_provisioner::bucket::features::object_lock::{OBJECT_LOCK, ObjectLock};
use bucket_provisioner::bucket::features::versioning::{VERSIONING, Versioning};
use serde_json::Value;

use crate::iam::{GRANTED_BUCKET_ACTIONS, GRANTED_OBJECT_ACTIONS, USER_PATH};

/// A bucket policy for the claim's bucket.
pub const BUCKET_POLICY: &str = "bucketPolicy";
/// A lifecycle configuration for the claim's bucket.
pub const BUCKET_LIFECYCLE: &str = "bucketLifecycle";
/// CORS rules for the claim's bucket, where the StorageClass allows them.
pub const CORS: &str = crate::cors::CORS;
/// Every `additionalConfig` key the S3 provisioner accepts.
pub const ACCEPTED: [&str; 5] = [BUCKET_POLICY, BUCKET_LIFECYCLE, CORS, VERSIONING, OBJECT_LOCK];
/// Quota keys of other provisioners' claims, which S3 cannot enforce.
const QUOTA_KEYS: [&str; 4] = ["maxObjects", "maxSize", "bucketMaxObjects", "bucketMaxSize"];

/// What a claim's `additionalConfig` asks of its bucket.
#[derive(Clone, Debug, Default)]
pub struct ClaimConfig {
    /// The bucket policy, checked except for whose user the claim's is.
    pub policy: Option<BucketPolicy>,
    /// The lifecycle configuration.
    pub lifecycle: Option<BucketLifecycleConfiguration>,
    /// The CORS rules, checked except for whether the StorageClass allows them.
    pub cors: Option<CorsConfiguration>,
    /// The versioning state asked for.
    pub versioning: Option<Versioning>,
    /// Object lock, with its default retention.
    pub object_lock: Option<ObjectLock>,
}

impl ClaimConfig {
    /// Reads `config` for `bucket` in `partition`; anything but the [`ACCEPTED`] keys with valid
    /// values is an `InvalidParameters` error saying why.
    pub fn parse(
        config: &BTreeMap<String, String>,
        bucket: &str,
        partition: &str,
    ) -> Result<Self, BackendError> {
        let quotas: Vec<&str> =
            config.keys().map(String::as_str).filter(|k| QUOTA_KEYS.contains(k)).collect();
        if !quotas.is_empty() {
            return Err(BackendError::invalid_parameter(format!(
                "additionalConfig {} cannot be honoured: AWS S3 has no bucket or user quotas, so \
                 the S3 provisioner could not enforce them; remove them, or use a provisioner \
                 whose store enforces quotas",
                quotas.join(", ")
            )));
        }
        if let Some(unknown) = config.keys().find(|k| !ACCEPTED.contains(&k.as_str())) {
            return Err(BackendError::invalid_parameter(format!(
                "unknown additionalConfig key {unknown:?}: the S3 provisioner accepts {}",
                ACCEPTED.join(", ")
            )));
        }
        Ok(Self {
            policy: config
                .get(BUCKET_POLICY)
                .map(|text| BucketPolicy::parse(text, bucket, partition))
                .transpose()?,
            lifecycle: config
                .get(BUCKET_LIFECYCLE)
                .map(|text| crate::lifecycle::configuration(&Lifecycle::parse(text)?))
                .transpose()?,
            cors: config.get(CORS).map(|text| crate::cors::parse(text)).transpose()?,
            versioning: config.get(VERSIONING).map(|text| Versioning::parse(text)).transpose()?,
            object_lock: config.get(OBJECT_LOCK).map(|text| ObjectLock::parse(text)).transpose()?,
        })
    }

    /// Whether the claim asks for anything of its bucket.
    pub fn is_empty(&self) -> bool {
        self.policy.is_none()
            && self.lifecycle.is_none()
            && self.cors.is_none()
            && self.versioning.is_none()
            && self.object_lock.is_none()
    }
}

fn invalid_policy(why: impl std::fmt::Display) -> BackendError {
    BackendError::invalid_parameter(format!("additionalConfig {BUCKET_POLICY}: {why}"))
}

/// A bucket policy whose resources and actions were checked, and the principals it names.
#[derive(Clone, Debug, PartialEq)]
pub struct BucketPolicy {
    /// The policy as given.
    pub document: String,
    /// Every principal its statements name (`*` for anyone).
    pub principals: Vec<String>,
}

impl BucketPolicy {
    /// Parses `text` and checks everything but its principals.
    pub fn parse(text: &str, bucket: &str, partition: &str) -> Result<Self, BackendError> {
        let document: Value = serde_json::from_str(text)
            .map_err(|e| invalid_policy(format_args!("is not JSON: {e}")))?;
        let Value::Object(fields) = &document else {
            return Err(invalid_policy("must be a JSON object with a Statement"));
        };
        if let Some(key) =
            fields.keys().find(|k| !["Version", "Id", "Statement"].contains(&k.as_str()))
        {
            return Err(invalid_policy(format_args!("unknown field {key:?}")));
        }
        let statements = match fields.get("Statement") {
            Some(Value::Array(statements)) if !statements.is_empty() => statements.iter().collect(),
            Some(statement @ Value::Object(_)) => vec![statement],
            _ => return Err(invalid_policy("needs a Statement (an object or a non-empty list)")),
        };
        let bucket_arn = format!("arn:{partition}:s3:::{bucket}");
        let mut principals = Vec::new();
        for (index, statement) in statements.into_iter().enumerate() {
            let at = |why: String| invalid_policy(format_args!("statement {}: {why}", index + 1));
            check_statement(statement, &bucket_arn, &mut principals).map_err(at)?;
        }
        principals.sort();
        principals.dedup();
        Ok(Self { document: document.to_string(), principals })
    }

    /// Fails unless every principal is `own` (the claim's user), satisfies `is_own` (before the
    /// user exists), or is one of `allowed` (`*` allowing any).
    pub fn check_principals(
        &self,
        is_own: impl Fn(&str) -> bool,
        allowed: &[String],
    ) -> Result<(), BackendError> {
        if allowed.iter().any(|a| a == "*") {
            return Ok(());
        }
        let foreign: Vec<&str> = self
            .principals
            .iter()
            .map(String::as_str)
            .filter(|p| !is_own(p) && !allowed.iter().any(|a| a == p))
            .collect();
        if foreign.is_empty() {
            return Ok(());
        }
        Err(invalid_policy(format_args!(
            "it names {}, which is neither the claim's own IAM user \
             (arn:...:iam::<account>:user{USER_PATH}obc-<claim uid>) nor a principal the \
             StorageClass allows in its bucketPolicyPrincipals parameter",
            foreign.join(", ")
        )))
    }
}

/// Whether `principal` has the shape of the IAM user `user` of this provisioner in `partition`,
/// in any account: what a policy checked before the user exists may name.
pub fn names_user(principal: &str, partition: &str, user: &str) -> bool {
    let Some(rest) = principal.strip_prefix(&format!("arn:{partition}:iam::")) else {
        return false;
    };
    let Some((account, path)) = rest.split_once(':') else { return false };
    account.len() == 12
        && account.bytes().all(|b| b.is_ascii_digit())
        && path == format!("user{USER_PATH}{user}")
}

/// One string or a list of strings, as policies write them.
fn strings(value: &Value) -> Option<Vec<&str>> {
    match value {
        Value::String(one) => Some(vec![one]),
        Value::Array(many) if !many.is_empty() => many.iter().map(Value::as_str).collect(),
        _ => None,
    }
}

fn check_statement(
    statement: &Value,
    bucket_arn: &str,
    principals: &mut Vec<String>,
) -> Result<(), String> {
    let Value::Object(fields) = statement else { return Err("is not an object".into()) };
    for key in fields.keys() {
        match key.as_str() {
            "Sid" | "Effect" | "Principal" | "Action" | "Resource" | "Condition" => {}
            "NotPrincipal" | "NotAction" | "NotResource" => {
                return Err(format!("{key} is not accepted: it reaches everything not listed"));
            }
            other => return Err(format!("unknown field {other:?}")),
        }
    }
    let allow = match fields.get("Effect").and_then(Value::as_str) {
        Some("Allow") => true,
        Some("Deny") => false,
        _ => return Err("Effect must be \"Allow\" or \"Deny\"".into()),
    };
    match fields.get("Principal") {
        Some(Value::String(star)) if star == "*" => principals.push("*".into()),
        Some(Value::Object(kinds)) => {
            for (kind, value) in kinds {
                let names = strings(value).ok_or("Principal values must be strings")?;
                if kind != "AWS" {
                    return Err(format!("Principal {kind:?} is not accepted, only \"AWS\" ARNs"));
                }
                principals.extend(names.into_iter().map(str::to_owned));
            }
        }
        _ => return Err("needs a Principal: \"*\" or {\"AWS\": ARN or ARNs}".into()),
    }
    let resources = fields.get("Resource").and_then(strings).ok_or("needs a Resource")?;
    let inside = format!("{bucket_arn}/");
    if let Some(outside) = resources.iter().find(|r| **r != bucket_arn && !r.starts_with(&inside)) {
        return Err(format!("Resource {outside:?} is not the claim's bucket {bucket_arn}"));
    }
    let actions = fields.get("Action").and_then(strings).ok_or("needs an Action")?;
    if allow && let Some(action) = actions.iter().find(|a| !granted(a)) {
        return Err(format!(
            "Allow of {action:?} is not accepted: an Allow may grant only what the claim's user \
             has ({}; {})",
            GRANTED_BUCKET_ACTIONS.join(", "),
            GRANTED_OBJECT_ACTIONS.join(", ")
        ));
    }
    if fields.get("Condition").is_some_and(|c| !c.is_object()) {
        return Err("Condition must be an object".into());
    }
    Ok(())
}

/// Whether the claim's own IAM policy already grants `action` (exactly one of its entries, or
/// an action an entry ending in `*` covers).
fn granted(action: &str) -> bool {
    let action = action.to_ascii_lowercase();
    GRANTED_BUCKET_ACTIONS.iter().chain(&GRANTED_OBJECT_ACTIONS).any(|entry| {
        let entry = entry.to_ascii_lowercase();
        match entry.strip_suffix('*') {
            Some(prefix) => {
                action == entry || (action.starts_with(prefix) && !action.contains('*'))
            }
            None => action == entry,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn message(result: Result<impl std::fmt::Debug, BackendError>) -> String {
        let error = result.unwrap_err();
        assert!(error.is_permanent());
        error.to_string()
    }

    const OWN: &str = "arn:aws:iam::123456789012:user/bucket-provisioner/obc-1";

    fn policy(statement: Value) -> String {
        serde_json::json!({ "Version": "2012-10-17", "Statement": [statement] }).to_string()
    }

    #[test]
    fn quotas_are_refused_because_s3_has_none() {
        let text = message(ClaimConfig::parse(
            &config(&[("maxObjects", "1000"), ("maxSize", "2G")]),
            "photos",
            "aws",
        ));
        assert!(text.contains("maxObjects, maxSize cannot be honoured"), "{text}");
        assert!(text.contains("AWS S3 has no bucket or user quotas"), "{text}");
        let text = message(ClaimConfig::parse(&config(&[("colour", "blue")]), "photos", "aws"));
        assert!(
            text.contains("accepts bucketPolicy, bucketLifecycle, cors, versioning, objectLock"),
            "{text}"
        );
    }

    #[test]
    fn policies_stay_within_the_bucket_and_the_claims_actions() {
        let read = serde_json::json!({
            "Effect": "Allow",
            "Principal": { "AWS": ["arn:aws:iam::210987654321:role/reader"] },
            "Action": ["s3:GetObject", "s3:ListBucket"],
            "Resource": ["arn:aws:s3:::photos", "arn:aws:s3:::photos/*"],
        });
        let parsed = BucketPolicy::parse(&policy(read.clone()), "photos", "aws").unwrap();
        assert_eq!(parsed.principals, ["arn:aws:iam::210987654321:role/reader"]);
        // Another bucket, the bucket's configuration, exclusions, other principal kinds.
        for (change, says) in [
            (("Resource", serde_json::json!("arn:aws:s3:::other/*")), "is not the claim's bucket"),
            (
                ("Action", serde_json::json!("s3:PutBucketPolicy")),
                "Allow of \"s3:PutBucketPolicy\"",
            ),
            (("Action", serde_json::json!("s3:*")), "Allow of \"s3:*\""),
            (("Principal", serde_json::json!({ "Service": "x.amazonaws.com" })), "only \"AWS\""),
            (("NotResource", serde_json::json!("arn:aws:s3:::photos")), "NotResource"),
        ] {
            let mut statement = read.clone();
            statement[change.0] = change.1;
            let text = message(BucketPolicy::parse(&policy(statement), "photos", "aws"));
            assert!(text.contains(says), "{says}: {text}");
            assert!(text.starts_with("additionalConfig bucketPolicy: statement 1:"), "{text}");
        }
        // A Deny may name any action; it takes nothing away from anyone but its principals.
        let mut deny = read;
        deny["Effect"] = "Deny".into();
        deny["Action"] = "s3:*".into();
        deny["Principal"] = serde_json::json!({ "AWS": OWN });
        BucketPolicy::parse(&policy(deny), "photos", "aws").unwrap();
        assert!(message(BucketPolicy::parse("[1]", "photos", "aws")).contains("JSON object"));
    }

    #[test]
    fn principals_are_the_claims_own_unless_the_class_allows_more() {
        let statement = |principal: Value| {
            policy(serde_json::json!({
                "Effect": "Allow", "Principal": principal,
                "Action": "s3:GetObject", "Resource": "arn:aws:s3:::photos/*",
            }))
        };
        let own =
            BucketPolicy::parse(&statement(serde_json::json!({ "AWS": OWN })), "photos", "aws")
                .unwrap();
        own.check_principals(|p| p == OWN, &[]).unwrap();
        assert!(names_user(OWN, "aws", "obc-1"));
        assert!(!names_user(OWN, "aws", "obc-2"));
        assert!(!names_user("arn:aws:iam::123456789012:user/obc-1", "aws", "obc-1"));

        let public = BucketPolicy::parse(&statement("*".into()), "photos", "aws").unwrap();
        let text = message(public.check_principals(|p| p == OWN, &[]));
        assert!(text.contains("it names *, which is neither"), "{text}");
        public.check_principals(|_| false, &["*".into()]).unwrap();
        let role = "arn:aws:iam::210987654321:role/cdn";
        let other =
            BucketPolicy::parse(&statement(serde_json::json!({ "AWS": role })), "photos", "aws")
                .unwrap();
        assert!(other.check_principals(|p| p == OWN, &[]).is_err());
        other.check_principals(|p| p == OWN, &[role.into()]).unwrap();
    }

    mod properties {
        use proptest::prelude::*;
        use serde_json::{Map, Value};

        use super::*;

        /// Field names policies and lifecycle rules use, and a stranger.
        const FIELDS: [&str; 24] = [
            "Version",
            "Statement",
            "Effect",
            "Principal",
            "AWS",
            "Action",
            "Resource",
            "Condition",
            "NotAction",
            "Rules",
            "ID",
            "Status",
            "Filter",
            "Prefix",
            "Expiration",
            "Days",
            "Date",
            "ObjectSizeGreaterThan",
            "NoncurrentVersionExpiration",
            "NoncurrentDays",
            "AbortIncompleteMultipartUpload",
            "DaysAfterInitiation",
            "Transitions",
            "StorageClass",
        ];

        /// JSON made of those fields and values near the ones they take.
        fn json() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                any::<f64>().prop_map(Value::from),
                prop_oneof![
                    Just("Allow".to_string()),
                    Just("Enabled".to_string()),
                    Just("*".to_string()),
                    Just("s3:GetObject".to_string()),
                    Just("arn:aws:s3:::b/*".to_string()),
                    concat!(
                        "[0-9]{1,5}-[0-9]{1,2}-[0-9]{1,2}",
                        "T[0-9]{1,2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{0,12})?Z?"
                    ),
                    any::<String>(),
                ]
                .prop_map(Value::from),
            ];
            leaf.prop_recursive(4, 48, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                    prop::collection::vec((prop::sample::select(FIELDS.to_vec()), inner), 0..6)
                        .prop_map(|fields| {
                            let map: Map<String, Value> =
                                fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
                            Value::Object(map)
                        }),
                ]
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(3000))]

            /// Whatever a tenant writes in either key is judged, never a panic.
            #[test]
            fn any_policy_or_lifecycle_is_judged(
                text in prop_oneof![json().prop_map(|v| v.to_string()), any::<String>()],
                key in prop::sample::select(ACCEPTED.to_vec()),
            ) {
                let parsed = ClaimConfig::parse(&config(&[(key, &text)]), "b", "aws");
                if let Err(error) = parsed {
                    prop_assert!(error.is_permanent());
                }
            }
        }
    }
}
