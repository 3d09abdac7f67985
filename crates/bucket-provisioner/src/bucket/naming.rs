//! Bucket and object names: S3 bucket-name rules, generated names, and derived Kubernetes names.

use rand::Rng;

/// Longest S3 bucket name.
pub const MAX_BUCKET_NAME: usize = 63;
/// Fewest random characters appended (with a `-`) to `generateBucketName`, for the longest
/// prefixes; a name that turns out to be taken is generated again, so this bounds retries only.
const MIN_SUFFIX_LEN: usize = 5;
/// Random characters appended to prefixes that leave room: 36^12 names make a repeat
/// vanishingly rare even across millions of claims.
const SUFFIX_LEN: usize = 12;
/// Longest `generateBucketName` that still leaves room for `-` and the shortest suffix.
pub const MAX_GENERATE_PREFIX: usize = MAX_BUCKET_NAME - MIN_SUFFIX_LEN - 1;
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
    if is_ip_address_shaped(name) {
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

/// Four dot-separated groups of digits, valid address or not (`999.168.1.1`): S3 refuses them all.
fn is_ip_address_shaped(name: &str) -> bool {
    let groups: Vec<&str> = name.split('.').collect();
    groups.len() == 4
        && groups.iter().all(|g| !g.is_empty() && g.bytes().all(|b| b.is_ascii_digit()))
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
    validate_bucket_name(&format!("{prefix}-{}", "a".repeat(MIN_SUFFIX_LEN)))
        .map_err(|e| format!("generateBucketName {prefix:?} cannot make a valid name: {e}"))
}

/// `prefix` + `-` + a random lowercase suffix; the prefix must have passed
/// [`validate_generate_prefix`].
pub fn generate_bucket_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let len = SUFFIX_LEN.min(MAX_BUCKET_NAME - prefix.len() - 1).max(MIN_SUFFIX_LEN);
    let suffix: String =
        (0..len).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect();
    format!("{prefix}-{suffix}")
}

/// The names a claim's ObjectBucket may have, tried in this order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectBucketNames {
    /// `obc-<namespace>-<name>`, as across the ecosystem; `None` when over the length limit.
    pub conventional: Option<String>,
    /// The conventional name (cut to fit) plus a hash of the claim UID. Used when the
    /// conventional name is taken: `obc-a-b-c` is both claim `b-c` in namespace `a` and claim `c`
    /// in namespace `a-b`, and neither may block the other.
    pub unique: String,
}

/// The ObjectBucket names of the claim `claim` in `namespace` with UID `uid`.
pub fn object_bucket_names(namespace: &str, claim: &str, uid: &str) -> ObjectBucketNames {
    let conventional = format!("obc-{namespace}-{claim}");
    let hash = fnv1a(uid.as_bytes());
    let suffix = format!("-{:08x}", hash as u32);
    let mut stem: String = conventional.chars().take(MAX_OBJECT_NAME - suffix.len()).collect();
    // A cut can leave a label ending in '.' or '-', which the name rules refuse.
    while stem.ends_with(['.', '-']) {
        stem.pop();
    }
    ObjectBucketNames {
        unique: format!("{stem}{suffix}"),
        conventional: (conventional.len() <= MAX_OBJECT_NAME).then_some(conventional),
    }
}

/// FNV-1a: a stable hash (unlike std's), so a name derived from it never changes.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
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
            ("999.168.1.1", "IP address"),
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
        let short = generate_bucket_name("bench");
        assert_eq!(short.len(), "bench-".len() + SUFFIX_LEN, "{short}");
        assert_eq!(validate_bucket_name(&short), Ok(()));
        assert_eq!(validate_bucket_name(&a), Ok(()));
        assert_ne!(a, b);
        assert!(validate_generate_prefix(&format!("{prefix}p")).is_err());
        assert!(validate_generate_prefix("Bad_Prefix").is_err());
        assert!(validate_generate_prefix("-lead").is_err());
    }

    #[test]
    fn ip_shaped_names_are_refused_and_others_with_digits_are_not() {
        for name in ["1.2.3.4", "999.168.1.1", "0.0.0.0", "300.300.300.300"] {
            assert!(validate_bucket_name(name).is_err(), "{name}");
        }
        for name in ["1.2.3", "1.2.3.4.5", "1.2.3.a", "v1.2.3.4", "123"] {
            assert_eq!(validate_bucket_name(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn object_bucket_names_follow_the_convention_and_never_collide() {
        let names = object_bucket_names("team", "photos", "uid-1");
        assert_eq!(names.conventional.as_deref(), Some("obc-team-photos"));
        // Two claims sharing the conventional name get different unique names.
        let a = object_bucket_names("r3-ab", "c-d", "uid-a");
        let b = object_bucket_names("r3-ab-c", "d", "uid-b");
        assert_eq!(a.conventional, b.conventional);
        assert_ne!(a.unique, b.unique);
        assert!(a.unique.starts_with("obc-r3-ab-c-d-"), "{}", a.unique);
        // Too long for the convention: only the unique name, within the limit and well formed.
        let long = object_bucket_names("ns", &format!("{}.-x", "n".repeat(246)), "uid");
        assert_eq!(long.conventional, None);
        assert!(long.unique.len() <= MAX_OBJECT_NAME);
        assert!(!long.unique.contains(".-"), "{}", long.unique);
        assert_eq!(
            long.unique,
            object_bucket_names("ns", &format!("{}.-x", "n".repeat(246)), "uid").unique
        );
    }
}
