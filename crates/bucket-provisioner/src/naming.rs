//! Bucket and object names: S3 bucket-name rules, generated names, and derived Kubernetes names.

use rand::Rng;

/// Longest S3 bucket name.
pub const MAX_BUCKET_NAME: usize = 63;
/// Characters appended (with a `-`) to `generateBucketName`.
const SUFFIX_LEN: usize = 5;
/// Longest `generateBucketName` that still leaves room for `-` and the suffix.
pub const MAX_GENERATE_PREFIX: usize = MAX_BUCKET_NAME - SUFFIX_LEN - 1;
/// Longest Kubernetes object name (DNS subdomain).
const MAX_OBJECT_NAME: usize = 253;

/// Checks a bucket name against the S3 bucket-naming rules, saying which rule it breaks.
pub fn validate_bucket_name(name: &str) -> Result<(), String> {
    let len = name.len();
    if !(3..=MAX_BUCKET_NAME).contains(&len) {
        return Err(format!("bucket name {name:?} must be 3 to 63 characters long, not {len}"));
    }
    if let Some(c) = name.chars().find(|c| !matches!(c, 'a'..='z' | '0'..='9' | '.' | '-')) {
        return Err(format!(
            "bucket name {name:?} may only hold lowercase letters, digits, '.' and '-', not {c:?}"
        ));
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !alnum(name.chars().next()) || !alnum(name.chars().last()) {
        return Err(format!("bucket name {name:?} must start and end with a letter or digit"));
    }
    if name.contains("..") {
        return Err(format!("bucket name {name:?} must not contain two adjacent periods"));
    }
    if name.parse::<std::net::Ipv4Addr>().is_ok() {
        return Err(format!("bucket name {name:?} must not be formatted as an IP address"));
    }
    for prefix in ["xn--", "sthree-", "amzn-s3-demo-"] {
        if name.starts_with(prefix) {
            return Err(format!(
                "bucket name {name:?} must not start with the reserved {prefix:?}"
            ));
        }
    }
    for suffix in ["-s3alias", "--ol-s3", "--x-s3", "--table-s3", ".mrap"] {
        if name.ends_with(suffix) {
            return Err(format!("bucket name {name:?} must not end with the reserved {suffix:?}"));
        }
    }
    Ok(())
}

/// Checks a `generateBucketName` prefix: it must leave room for the suffix, and the generated
/// name must be valid.
pub fn validate_generate_prefix(prefix: &str) -> Result<(), String> {
    if prefix.is_empty() {
        return Err("generateBucketName is empty".into());
    }
    if prefix.len() > MAX_GENERATE_PREFIX {
        return Err(format!(
            "generateBucketName {prefix:?} is {} characters; at most {MAX_GENERATE_PREFIX} leave \
             room for the random suffix within the 63-character bucket-name limit",
            prefix.len()
        ));
    }
    validate_bucket_name(&format!("{prefix}-{}", "a".repeat(SUFFIX_LEN)))
        .map_err(|e| format!("generateBucketName {prefix:?} cannot make a valid name: {e}"))
}

/// `prefix` + `-` + a random lowercase suffix; the prefix must have passed
/// [`validate_generate_prefix`].
pub fn generate_bucket_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let suffix: String =
        (0..SUFFIX_LEN).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect();
    format!("{prefix}-{suffix}")
}

/// Name of the ObjectBucket for a claim: `obc-<namespace>-<name>`, as across the ecosystem.
pub fn object_bucket_name(namespace: &str, claim: &str) -> Result<String, String> {
    let name = format!("obc-{namespace}-{claim}");
    if name.len() > MAX_OBJECT_NAME {
        return Err(format!(
            "the ObjectBucket name {name:?} would be {} characters, over Kubernetes' limit of \
             {MAX_OBJECT_NAME}; use a shorter claim name",
            name.len()
        ));
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid_names() {
        for name in ["abc", "my-bucket", "my.bucket.01", &"a".repeat(63), "0-start"] {
            assert_eq!(validate_bucket_name(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn names_the_broken_rule() {
        let cases = [
            ("ab", "3 to 63"),
            (&*"a".repeat(64), "3 to 63"),
            ("My-Bucket", "lowercase"),
            ("my_bucket", "lowercase"),
            ("-bucket", "start and end"),
            ("bucket-", "start and end"),
            ("my..bucket", "adjacent periods"),
            ("192.168.5.4", "IP address"),
            ("xn--bucket", "reserved"),
            ("bucket-s3alias", "reserved"),
        ];
        for (name, rule) in cases {
            let error = validate_bucket_name(name).expect_err(name);
            assert!(error.contains(rule), "{name}: {error}");
        }
    }

    #[test]
    fn generated_names_are_valid_and_differ() {
        let prefix = "p".repeat(MAX_GENERATE_PREFIX);
        assert_eq!(validate_generate_prefix(&prefix), Ok(()));
        let (a, b) = (generate_bucket_name(&prefix), generate_bucket_name(&prefix));
        assert_eq!(a.len(), MAX_BUCKET_NAME);
        assert_eq!(validate_bucket_name(&a), Ok(()));
        assert_ne!(a, b);
        assert!(validate_generate_prefix(&format!("{prefix}p")).is_err());
        assert!(validate_generate_prefix("Bad_Prefix").is_err());
        assert!(validate_generate_prefix("-lead").is_err());
    }

    #[test]
    fn object_bucket_names_follow_the_convention_and_limit() {
        assert_eq!(object_bucket_name("team", "photos").unwrap(), "obc-team-photos");
        assert!(object_bucket_name("ns", &"n".repeat(250)).is_err());
    }
}
