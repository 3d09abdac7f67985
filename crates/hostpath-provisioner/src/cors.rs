//! A claim's CORS rules: `additionalConfig` key `cors`, the JSON of S3's put-bucket-cors
//! (`{"CORSRules": [{"AllowedOrigins": [...], "AllowedMethods": [...], ...}]}`), applied to the
//! claim's bucket on provision and on every update, where the StorageClass allows it with the
//! parameter `allowCors: "true"`.
//!
//! The rules configure the whole bucket, so only the claim that created the bucket sets them
//! (a claim granted an existing bucket may not); a claim that drops the key has its rules
//! removed. Where the class allows them, the creator's full-access key may also set rules with
//! PutBucketCors, which stand until the claim's next change; keys of claims sharing the bucket
//! may not (see [`crate::settable`]).

use std::collections::BTreeMap;

use bucket_provisioner::BackendError;
use bucket_provisioner::bucket::features::class;
use s3_endpoint::store::CorsConfig;

/// The `additionalConfig` key holding the rules.
pub const CORS: &str = "cors";
/// The StorageClass parameter allowing claims' CORS rules (`"true"`; `"false"` or absent
/// refuses them).
pub const ALLOW_CORS: &str = "allowCors";

/// Every StorageClass parameter the hostPath provisioner accepts (`allowLifecycle` is read by
/// [`crate::lifecycle`], the versioning and object lock ones by [`crate::features`]).
pub const PARAMETERS: [&str; 8] = [
    ALLOW_CORS,
    class::ALLOW_LIFECYCLE,
    class::ALLOW_VERSIONING,
    class::ALLOW_OBJECT_LOCK,
    class::ALLOW_COMPLIANCE_RETENTION,
    class::MAX_RETENTION_DAYS,
    bucket_provisioner::bucket::features::defaults::DEFAULT_VERSIONING,
    bucket_provisioner::bucket::features::defaults::DEFAULT_RETENTION,
];

/// Whether the class allows claims' CORS rules; any other parameter, or another value, is an
/// `InvalidParameters` error saying what is accepted.
pub fn allowed_by(parameters: &BTreeMap<String, String>) -> Result<bool, BackendError> {
    let unknown: Vec<&str> =
        parameters.keys().map(String::as_str).filter(|k| !PARAMETERS.contains(k)).collect();
    if !unknown.is_empty() {
        return Err(BackendError::invalid_parameter(format!(
            "unknown StorageClass parameter(s) {}: the hostPath provisioner accepts {}",
            unknown.join(", "),
            PARAMETERS.join(", ")
        )));
    }
    match parameters.get(ALLOW_CORS).map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(BackendError::invalid_parameter(format!(
            "StorageClass parameter {ALLOW_CORS} {other:?} is neither \"true\" nor \"false\""
        ))),
    }
}

/// The rules a claim asks for (`None` without the key), checked as S3 checks PutBucketCors,
/// and refused when the class does not allow them.
pub fn claim_rules(
    config: &BTreeMap<String, String>,
    parameters: &BTreeMap<String, String>,
) -> Result<Option<CorsConfig>, BackendError> {
    let allowed = allowed_by(parameters)?;
    let Some(text) = config.get(CORS) else { return Ok(None) };
    if !allowed {
        return Err(BackendError::invalid_parameter(format!(
            "additionalConfig {CORS} is not allowed by the StorageClass: its operator allows \
             claims' CORS rules with the parameter {ALLOW_CORS}: \"true\""
        )));
    }
    CorsConfig::from_api_json(text)
        .map(Some)
        .map_err(|why| BackendError::invalid_parameter(format!("additionalConfig {CORS}: {why}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    const RULES: &str = r#"{"CORSRules": [{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]}]}"#;

    #[test]
    fn rules_need_the_class_to_allow_them() {
        let allow = map(&[(ALLOW_CORS, "true")]);
        let asked = map(&[(CORS, RULES)]);
        assert!(claim_rules(&asked, &allow).unwrap().is_some());
        assert_eq!(claim_rules(&map(&[]), &allow).unwrap(), None);
        assert_eq!(claim_rules(&map(&[]), &map(&[])).unwrap(), None);
        for class in [map(&[]), map(&[(ALLOW_CORS, "false")])] {
            let err = claim_rules(&asked, &class).unwrap_err().to_string();
            assert!(err.contains("allowCors: \"true\""), "{err}");
        }
        let err = claim_rules(&asked, &map(&[(ALLOW_CORS, "yes")])).unwrap_err().to_string();
        assert!(err.contains("neither \"true\" nor \"false\""), "{err}");
        let err = claim_rules(&map(&[]), &map(&[("region", "x")])).unwrap_err().to_string();
        assert!(err.contains("unknown StorageClass parameter(s) region"), "{err}");
        let versioned = map(&[("allowVersioning", "true"), ("defaultVersioning", "Enabled")]);
        assert_eq!(claim_rules(&map(&[]), &versioned).unwrap(), None);
        let bad = map(&[(CORS, r#"{"CORSRules": [{"AllowedOrigins": ["*"]}]}"#)]);
        let err = claim_rules(&bad, &allow).unwrap_err().to_string();
        assert!(err.contains("additionalConfig cors: not the JSON of put-bucket-cors"), "{err}");
    }
}
