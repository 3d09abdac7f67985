//! A claim's CORS rules on S3 (read by the library, see
//! [`bucket_provisioner::bucket::features::cors`]) as `PutBucketCors` takes them, applied on
//! provision and on every update and removed with `DeleteBucketCors` when the key goes. The
//! rules configure the whole bucket, so only the claim that created the bucket sets them.

use aws_sdk_s3::types::{CorsConfiguration, CorsRule};
use bucket_provisioner::BackendError;
use bucket_provisioner::bucket::features::cors::{self, CorsRules};

pub use bucket_provisioner::bucket::features::cors::{ALLOW_CORS, CORS, not_allowed};

/// The rules a claim asks for in `text`, or an `InvalidParameters` error saying what is wrong.
pub fn parse(text: &str) -> Result<CorsConfiguration, BackendError> {
    configuration(&cors::parse(text)?)
}

/// The configuration S3 takes for `rules`.
pub fn configuration(rules: &CorsRules) -> Result<CorsConfiguration, BackendError> {
    let invalid =
        |e: aws_sdk_s3::error::BuildError| BackendError::invalid_parameter(format!("{CORS}: {e}"));
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
            .map_err(invalid)?;
        configuration = configuration.cors_rules(built);
    }
    configuration.build().map_err(invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_reach_s3_as_put_bucket_cors_writes_them() {
        let parsed = parse(
            r#"{"CORSRules": [{"ID": "uploads", "AllowedOrigins": ["https://app.example.com"],
                "AllowedMethods": ["PUT", "POST"], "AllowedHeaders": ["*"],
                "ExposeHeaders": ["ETag"], "MaxAgeSeconds": 3000}]}"#,
        )
        .unwrap();
        let rule = &parsed.cors_rules()[0];
        assert_eq!(rule.id(), Some("uploads"));
        assert_eq!(rule.allowed_methods(), ["PUT", "POST"]);
        assert_eq!(rule.allowed_headers(), ["*"]);
        assert_eq!(rule.expose_headers(), ["ETag"]);
        assert_eq!(rule.max_age_seconds(), Some(3000));
        let error = parse(r#"{"CORSRules": []}"#).unwrap_err().to_string();
        assert!(error.starts_with("additionalConfig cors: "), "{error}");
    }
}
