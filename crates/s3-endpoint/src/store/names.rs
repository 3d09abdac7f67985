//! Validation of bucket names and object keys, the first line against path escapes.

use super::StoreError;

/// Longest object key S3 accepts, in bytes.
pub const MAX_KEY_LEN: usize = 1024;

/// Longest file name most Linux file systems accept, in bytes.
const MAX_SEGMENT_LEN: usize = 255;

/// Longest bucket name S3 accepts.
pub const MAX_BUCKET_NAME_LEN: usize = 63;

/// Names S3 reserves for its own kinds of bucket.
const RESERVED_PREFIXES: [&str; 3] = ["xn--", "sthree-", "amzn-s3-demo-"];
const RESERVED_SUFFIXES: [&str; 5] = ["-s3alias", "--ol-s3", "--x-s3", "--table-s3", ".mrap"];

/// Checks `name` against the S3 general-purpose bucket naming rules, saying which rule it
/// breaks. The bucket provisioner checks claims' names by the same rules, so that a name it
/// accepts is one the endpoint accepts.
///
/// Bucket names become directory names, so these rules also keep them to one safe path segment.
pub fn validate_bucket_name(name: &str) -> Result<(), StoreError> {
    bucket_name_problem(name).map_or(Ok(()), |problem| Err(StoreError::InvalidBucketName(problem)))
}

fn bucket_name_problem(name: &str) -> Option<String> {
    let len = name.len();
    if !(3..=MAX_BUCKET_NAME_LEN).contains(&len) {
        return Some(format!("bucket name {name:?} must be 3 to 63 characters long, not {len}"));
    }
    if let Some(c) = name.chars().find(|c| !matches!(c, 'a'..='z' | '0'..='9' | '.' | '-')) {
        return Some(format!(
            "bucket name {name:?} may only hold lowercase letters, digits, '.' and '-', not {c:?}"
        ));
    }
    // Only ASCII is left: the first and last bytes are the first and last characters.
    let bytes = name.as_bytes();
    if !bytes[0].is_ascii_alphanumeric() || !bytes[len - 1].is_ascii_alphanumeric() {
        return Some(format!("bucket name {name:?} must start and end with a letter or digit"));
    }
    if name.contains("..") {
        return Some(format!("bucket name {name:?} must not contain two adjacent periods"));
    }
    if looks_like_ipv4(name) {
        return Some(format!("bucket name {name:?} must not be formatted as an IP address"));
    }
    if let Some(prefix) = RESERVED_PREFIXES.iter().find(|p| name.starts_with(*p)) {
        return Some(format!("bucket name {name:?} must not start with the reserved {prefix:?}"));
    }
    if let Some(suffix) = RESERVED_SUFFIXES.iter().find(|s| name.ends_with(*s)) {
        return Some(format!("bucket name {name:?} must not end with the reserved {suffix:?}"));
    }
    None
}

/// Four dot-separated runs of digits, a real address or not (`999.168.1.1`): S3 refuses both.
fn looks_like_ipv4(name: &str) -> bool {
    let mut groups = 0;
    for group in name.split('.') {
        if group.is_empty() || !group.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        groups += 1;
    }
    groups == 4
}

/// Checks that `key` is one S3 accepts: 1 to 1024 bytes, no NUL. Whether it can also be a
/// plain file path is [`parse_key`]'s question.
pub fn validate_key(key: &str) -> Result<(), StoreError> {
    if key.is_empty() {
        return Err(StoreError::InvalidKey("\"\": must not be empty".into()));
    }
    if key.len() > MAX_KEY_LEN {
        return Err(StoreError::KeyTooLong);
    }
    if key.contains('\0') {
        return Err(StoreError::InvalidKey(format!("{key:?}: must not contain NUL")));
    }
    Ok(())
}

/// An object key split into the path segments it is stored under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPath<'a> {
    /// Non-empty segments, none of them `.` or `..`.
    pub segments: Vec<&'a str>,
    /// The key ends with `/`: a "folder" marker, stored as a directory.
    pub dir_marker: bool,
}

/// Splits `key` into path segments, refusing anything that could name a path outside its bucket
/// or that a file system cannot store (`..`, `.`, empty segments, leading `/`, NUL).
pub fn parse_key(key: &str) -> Result<KeyPath<'_>, StoreError> {
    let invalid = |why: &str| Err(StoreError::InvalidKey(format!("{key:?}: {why}")));
    if key.is_empty() {
        return invalid("must not be empty");
    }
    if key.len() > MAX_KEY_LEN {
        return Err(StoreError::KeyTooLong);
    }
    if key.contains('\0') {
        return invalid("must not contain NUL");
    }
    if key.starts_with('/') {
        return invalid("must not start with '/'");
    }
    let (body, dir_marker) = match key.strip_suffix('/') {
        Some(body) => (body, true),
        None => (key, false),
    };
    let mut segments = Vec::new();
    for segment in body.split('/') {
        if segment.is_empty() {
            return invalid("empty path segments ('//') are not supported");
        }
        if segment == "." || segment == ".." {
            return invalid("'.' and '..' segments are not allowed");
        }
        if segment.len() > MAX_SEGMENT_LEN {
            return invalid("a path segment is longer than 255 bytes");
        }
        segments.push(segment);
    }
    Ok(KeyPath { segments, dir_marker })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names() {
        for ok in ["abc", "my-bucket.data", "a1b", "0-0", &"a".repeat(63)] {
            assert!(validate_bucket_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "ab",
            &"a".repeat(64),
            "Abc",
            "a_b",
            "-ab",
            "ab-",
            "a..b",
            "192.168.1.1",
            "999.168.1.1",
            "xn--abc",
            "abc-s3alias",
            "a/b",
            "..",
            "ab\0",
        ] {
            assert!(validate_bucket_name(bad).is_err(), "{bad:?}");
        }
        let err = validate_bucket_name("amzn-s3-demo-x").unwrap_err().to_string();
        assert!(err.contains("reserved \"amzn-s3-demo-\""), "{err}");
    }

    proptest::proptest! {
        /// Any text gets an answer, never a panic, and a name it accepts is one safe path
        /// segment.
        #[test]
        fn any_bucket_name_is_answered(name in "\\PC{0,70}|[a-z0-9.-]{0,70}") {
            if validate_bucket_name(&name).is_ok() {
                proptest::prop_assert!(parse_key(&name).is_ok_and(|k| k.segments == [&*name]));
            }
        }
    }

    #[test]
    fn keys() {
        assert_eq!(parse_key("a/b/c").unwrap().segments, ["a", "b", "c"]);
        assert!(parse_key("dir/").unwrap().dir_marker);
        assert_eq!(parse_key(".hidden/..x").unwrap().segments, [".hidden", "..x"]);
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a/./b", "a//b", "a\0b", "..", "/"] {
            assert!(parse_key(bad).is_err(), "{bad:?}");
        }
        assert!(matches!(parse_key(&"a".repeat(1025)), Err(StoreError::KeyTooLong)));
    }
}
