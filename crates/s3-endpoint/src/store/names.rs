//! Validation of bucket names and object keys, the first line against path escapes.

use super::StoreError;

/// Longest object key S3 accepts, in bytes.
pub const MAX_KEY_LEN: usize = 1024;

/// Longest file name most Linux file systems accept, in bytes.
const MAX_SEGMENT_LEN: usize = 255;

/// Checks `name` against the S3 general-purpose bucket naming rules (the library's, so that a
/// claim and the endpoint never disagree).
///
/// Bucket names become directory names, so these rules also keep them to one safe path segment.
pub fn validate_bucket_name(name: &str) -> Result<(), StoreError> {
    bucket_provisioner::bucket::naming::validate_bucket_name(name)
        .map_err(StoreError::InvalidBucketName)
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
