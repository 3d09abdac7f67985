//! CORS rules written as the JSON of S3's API, the document `aws s3api put-bucket-cors
//! --cors-configuration` takes, for whoever receives rules as text (a claim's
//! `additionalConfig`):
//!
//! ```json
//! {"CORSRules": [{"ID": "uploads", "AllowedOrigins": ["https://app.example.com"],
//!   "AllowedMethods": ["PUT", "POST"], "AllowedHeaders": ["*"], "ExposeHeaders": ["ETag"],
//!   "MaxAgeSeconds": 3000}]}
//! ```
//!
//! Unknown fields are refused (a misspelt `AllowedOrigin` must not silently allow nothing), and
//! what parses is checked by [`CorsConfig::check`].

use serde::{Deserialize, Serialize};

use super::cors::{CorsConfig, CorsRule};

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    #[serde(rename = "CORSRules")]
    rules: Vec<Rule>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rule {
    #[serde(rename = "ID", default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(rename = "AllowedOrigins")]
    allowed_origins: Vec<String>,
    #[serde(rename = "AllowedMethods")]
    allowed_methods: Vec<String>,
    #[serde(rename = "AllowedHeaders", default, skip_serializing_if = "Vec::is_empty")]
    allowed_headers: Vec<String>,
    #[serde(rename = "ExposeHeaders", default, skip_serializing_if = "Vec::is_empty")]
    expose_headers: Vec<String>,
    #[serde(rename = "MaxAgeSeconds", default, skip_serializing_if = "Option::is_none")]
    max_age_seconds: Option<i32>,
}

impl CorsConfig {
    /// Reads and checks rules written as the JSON of S3's API; the error says what is wrong.
    pub fn from_api_json(text: &str) -> Result<Self, String> {
        let document: Document = serde_json::from_str(text).map_err(|e| {
            format!(
                "not the JSON of put-bucket-cors ({{\"CORSRules\": [{{\"AllowedOrigins\": [...], \
                 \"AllowedMethods\": [...]}}]}}): {e}"
            )
        })?;
        let rules = document
            .rules
            .into_iter()
            .map(|rule| CorsRule {
                id: rule.id,
                allowed_origins: rule.allowed_origins,
                allowed_methods: rule.allowed_methods,
                allowed_headers: rule.allowed_headers,
                expose_headers: rule.expose_headers,
                max_age_seconds: rule.max_age_seconds,
            })
            .collect();
        let config = CorsConfig { rules };
        config.check().map_err(|e| e.to_string())?;
        Ok(config)
    }

    /// The rules as the JSON of S3's API, which [`CorsConfig::from_api_json`] reads back.
    pub fn to_api_json(&self) -> String {
        let rules = self
            .rules
            .iter()
            .map(|rule| Rule {
                id: rule.id.clone(),
                allowed_origins: rule.allowed_origins.clone(),
                allowed_methods: rule.allowed_methods.clone(),
                allowed_headers: rule.allowed_headers.clone(),
                expose_headers: rule.expose_headers.clone(),
                max_age_seconds: rule.max_age_seconds,
            })
            .collect();
        serde_json::to_string(&Document { rules }).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::store::CORS_METHODS;

    #[test]
    fn the_api_document_reads_and_mistakes_are_named() {
        let config = CorsConfig::from_api_json(
            r#"{"CORSRules": [{"ID": "u", "AllowedOrigins": ["https://app.example.com"],
                "AllowedMethods": ["PUT"], "AllowedHeaders": ["*"], "ExposeHeaders": ["ETag"],
                "MaxAgeSeconds": 3000}]}"#,
        )
        .unwrap();
        assert_eq!(config.rules[0].allowed_methods, ["PUT"]);
        assert_eq!(config.rules[0].max_age_seconds, Some(3000));
        let typo = CorsConfig::from_api_json(
            r#"{"CORSRules": [{"AllowedOrigin": ["*"], "AllowedMethods": ["GET"]}]}"#,
        )
        .unwrap_err();
        assert!(typo.contains("unknown field `AllowedOrigin`"), "{typo}");
        let method = CorsConfig::from_api_json(
            r#"{"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["PATCH"]}]}"#,
        )
        .unwrap_err();
        assert!(method.contains("Unsupported method is PATCH"), "{method}");
        assert!(CorsConfig::from_api_json("").is_err());
        assert!(CorsConfig::from_api_json(r#"{"CORSRules": []}"#).is_err());
    }

    fn valid_rule() -> impl Strategy<Value = CorsRule> {
        let methods = proptest::sample::subsequence(CORS_METHODS.to_vec(), 1..=5);
        let origin = "[a-z:/.]{0,20}\\*?[a-z.]{0,10}";
        (
            proptest::option::of("\\PC{0,30}"),
            proptest::collection::vec(origin, 1..4),
            methods,
            proptest::collection::vec("[a-zA-Z-]{1,20}\\*?", 0..4),
            proptest::collection::vec("[a-zA-Z-]{1,20}", 0..4),
            proptest::option::of(0..100_000i32),
        )
            .prop_map(|(id, origins, methods, headers, expose, age)| CorsRule {
                id,
                allowed_origins: origins,
                allowed_methods: methods.into_iter().map(str::to_owned).collect(),
                allowed_headers: headers,
                expose_headers: expose,
                max_age_seconds: age,
            })
    }

    proptest! {
        /// Whatever a tenant writes is answered, never a panic; what is accepted keeps the
        /// rules.
        #[test]
        fn any_text_is_answered(text in "\\PC{0,200}") {
            if let Ok(config) = CorsConfig::from_api_json(&text) {
                prop_assert!(config.check().is_ok());
            }
        }

        /// Valid rules written out are read back the same.
        #[test]
        fn valid_rules_round_trip(rules in proptest::collection::vec(valid_rule(), 1..5)) {
            let config = CorsConfig { rules };
            prop_assert_eq!(CorsConfig::from_api_json(&config.to_api_json()).unwrap(), config);
        }
    }
}
