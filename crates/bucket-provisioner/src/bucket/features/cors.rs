//! `additionalConfig` key `cors`: a bucket's CORS rules, the JSON `aws s3api put-bucket-cors`
//! takes (`{"CORSRules": [{"AllowedOrigins": [...], "AllowedMethods": [...], "AllowedHeaders",
//! "ExposeHeaders", "MaxAgeSeconds", "ID"}]}`), read into rules no backend's types are part of.
//!
//! The StorageClass allows it with `allowCors: "true"` (absent or `"false"` refuses the key).
//! The rules are checked here as S3 checks them (methods, at least one origin and method, at
//! most 100 rules), so a mistake is the claim's error, not a failed request.

use provisioner_runtime::BackendError;
use serde::Deserialize;

/// The `additionalConfig` key holding the rules.
pub const CORS: &str = "cors";
/// The StorageClass parameter allowing claims' CORS rules (`"true"`; `"false"` or absent
/// refuses them).
pub const ALLOW_CORS: &str = "allowCors";

/// The methods a CORS rule may allow, as S3 has them.
pub const METHODS: [&str; 5] = ["GET", "PUT", "POST", "DELETE", "HEAD"];
/// Most rules one bucket holds on S3.
const MAX_RULES: usize = 100;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    #[serde(rename = "CORSRules")]
    rules: Vec<Rule>,
}

/// One rule.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
pub struct Rule {
    /// The rule's name.
    #[serde(rename = "ID")]
    pub id: Option<String>,
    /// Origins allowed (one `*` wildcard each at most).
    pub allowed_origins: Vec<String>,
    /// Methods allowed, among [`METHODS`].
    pub allowed_methods: Vec<String>,
    /// Request headers allowed.
    #[serde(default)]
    pub allowed_headers: Vec<String>,
    /// Response headers browsers may read.
    #[serde(default)]
    pub expose_headers: Vec<String>,
    /// How long browsers may cache the answer to a preflight request.
    pub max_age_seconds: Option<i32>,
}

/// A bucket's CORS rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorsRules {
    /// The rules, in the claim's order.
    pub rules: Vec<Rule>,
}

fn invalid(why: impl std::fmt::Display) -> BackendError {
    BackendError::invalid_parameter(format!("additionalConfig {CORS}: {why}"))
}

/// The refusal of the key where the StorageClass does not allow it.
pub fn not_allowed() -> BackendError {
    BackendError::invalid_parameter(format!(
        "additionalConfig {CORS} is not allowed by the StorageClass: its operator allows \
         claims' CORS rules with the parameter {ALLOW_CORS}: \"true\""
    ))
}

/// The rules a claim asks for in `text`, or an `InvalidParameters` error saying what is wrong.
pub fn parse(text: &str) -> Result<CorsRules, BackendError> {
    let document: Document = serde_json::from_str(text).map_err(|e| {
        invalid(format_args!(
            "not the JSON of put-bucket-cors ({{\"CORSRules\": [{{\"AllowedOrigins\": [...], \
             \"AllowedMethods\": [...]}}]}}): {e}"
        ))
    })?;
    if document.rules.is_empty() || document.rules.len() > MAX_RULES {
        return Err(invalid(format_args!(
            "CORSRules holds {} rules; S3 takes 1 to {MAX_RULES}",
            document.rules.len()
        )));
    }
    for (index, rule) in document.rules.iter().enumerate() {
        let at = |why: String| invalid(format_args!("rule {}: {why}", index + 1));
        if rule.allowed_origins.is_empty() || rule.allowed_methods.is_empty() {
            return Err(
                at("needs at least one AllowedOrigins and one AllowedMethods entry".into()),
            );
        }
        if let Some(method) = rule.allowed_methods.iter().find(|m| !METHODS.contains(&m.as_str())) {
            return Err(at(format!(
                "AllowedMethods {method:?} is not one of {}",
                METHODS.join(", ")
            )));
        }
        if let Some(origin) = rule.allowed_origins.iter().find(|o| o.matches('*').count() > 1) {
            return Err(at(format!("AllowedOrigins {origin:?} has more than one wildcard")));
        }
        if rule.max_age_seconds.is_some_and(|s| s < 0) {
            return Err(at("MaxAgeSeconds is negative".into()));
        }
    }
    Ok(CorsRules { rules: document.rules })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(result: Result<CorsRules, BackendError>) -> String {
        let error = result.unwrap_err();
        assert!(error.is_permanent());
        error.to_string()
    }

    #[test]
    fn rules_read_as_put_bucket_cors_writes_them() {
        let parsed = parse(
            r#"{"CORSRules": [{"ID": "uploads", "AllowedOrigins": ["https://app.example.com"],
                "AllowedMethods": ["PUT", "POST"], "AllowedHeaders": ["*"],
                "ExposeHeaders": ["ETag"], "MaxAgeSeconds": 3000}]}"#,
        )
        .unwrap();
        let rule = &parsed.rules[0];
        assert_eq!(rule.id.as_deref(), Some("uploads"));
        assert_eq!(rule.allowed_methods, ["PUT", "POST"]);
        assert_eq!(rule.allowed_headers, ["*"]);
        assert_eq!(rule.expose_headers, ["ETag"]);
        assert_eq!(rule.max_age_seconds, Some(3000));
    }

    #[test]
    fn mistakes_and_unallowed_rules_are_refused_by_name() {
        let text = not_allowed().to_string();
        assert!(text.contains("allowCors: \"true\""), "{text}");
        for (text, says) in [
            (r#"{"CORSRules": []}"#, "holds 0 rules"),
            (r#"{"CORSRules": [{"AllowedOrigin": ["*"]}]}"#, "unknown field `AllowedOrigin`"),
            (
                r#"{"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["PATCH"]}]}"#,
                "rule 1: AllowedMethods \"PATCH\"",
            ),
            (
                r#"{"CORSRules": [{"AllowedOrigins": [], "AllowedMethods": ["GET"]}]}"#,
                "at least one AllowedOrigins",
            ),
            (
                r#"{"CORSRules": [{"AllowedOrigins": ["*.*"], "AllowedMethods": ["GET"]}]}"#,
                "more than one wildcard",
            ),
            ("[]", "not the JSON of put-bucket-cors"),
        ] {
            let error = message(parse(text));
            assert!(error.starts_with("additionalConfig cors: "), "{error}");
            assert!(error.contains(says), "{says}: {error}");
        }
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        /// JSON near what put-bucket-cors takes.
        fn document() -> impl Strategy<Value = String> {
            let strings = prop::collection::vec(
                prop_oneof![
                    Just("GET".to_string()),
                    Just("*".to_string()),
                    Just("https://*.example.com".to_string()),
                    any::<String>(),
                ],
                0..3,
            );
            let field = prop_oneof![
                Just("AllowedOrigins"),
                Just("AllowedMethods"),
                Just("AllowedHeaders"),
                Just("ExposeHeaders"),
                Just("MaxAgeSeconds"),
                Just("ID"),
                Just("Other"),
            ];
            let value = prop_oneof![
                strings.prop_map(|s| serde_json::json!(s)),
                any::<i64>().prop_map(|n| serde_json::json!(n)),
                any::<String>().prop_map(|s| serde_json::json!(s)),
            ];
            let rule = prop::collection::btree_map(field, value, 0..7)
                .prop_map(|fields| serde_json::json!(fields));
            prop_oneof![
                prop::collection::vec(rule, 0..4)
                    .prop_map(|rules| serde_json::json!({ "CORSRules": rules }).to_string()),
                any::<String>(),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            /// Whatever a tenant writes is judged, never a panic; what is accepted holds
            /// only the methods S3 takes.
            #[test]
            fn any_rules_are_judged(text in document()) {
                match parse(&text) {
                    Ok(config) => {
                        for rule in config.rules {
                            prop_assert!(!rule.allowed_origins.is_empty());
                            prop_assert!(
                                rule.allowed_methods.iter().all(|m| METHODS.contains(&m.as_str()))
                            );
                        }
                    }
                    Err(error) => prop_assert!(error.is_permanent()),
                }
            }
        }
    }
}
