//! A claim's `additionalConfig`: the quota keys Rook and NooBaa claims carry, read the way those
//! provisioners read them.
//!
//! | key | limits | value |
//! |---|---|---|
//! | `maxObjects` | objects the claim's key stores in its bucket | a whole number, `"1000"` |
//! | `maxSize` | bytes the claim's key stores in its bucket | a Kubernetes quantity: `"2G"`, `"2Gi"`, `"500M"`, `"1073741824"` |
//! | `bucketMaxObjects` | objects in the bucket, whoever stores them | as `maxObjects` |
//! | `bucketMaxSize` | bytes in the bucket, whoever stores them | as `maxSize` |
//!
//! The keys `cors` (the bucket's CORS rules, read by [`crate::cors`]), `bucketLifecycle` (its
//! lifecycle rules, read by [`crate::lifecycle`]), `versioning` and `objectLock` (read by
//! [`crate::features`]) are accepted too.
//!
//! The bucket-wide keys belong to the claim that created the bucket: a claim granted an existing
//! bucket (StorageClass `bucketName`) shares it, and may not limit the others.

use std::collections::BTreeMap;

use bucket_api::quantity;
use bucket_provisioner::BackendError;
use s3_endpoint::Quota;

/// Most objects the claim's key may store.
pub const MAX_OBJECTS: &str = "maxObjects";
/// Most bytes the claim's key may store.
pub const MAX_SIZE: &str = "maxSize";
/// Most objects in the bucket.
pub const BUCKET_MAX_OBJECTS: &str = "bucketMaxObjects";
/// Most bytes in the bucket.
pub const BUCKET_MAX_SIZE: &str = "bucketMaxSize";

/// Every `additionalConfig` key the hostPath provisioner accepts.
pub const ACCEPTED: [&str; 8] = [
    MAX_OBJECTS,
    MAX_SIZE,
    BUCKET_MAX_OBJECTS,
    BUCKET_MAX_SIZE,
    crate::cors::CORS,
    crate::lifecycle::BUCKET_LIFECYCLE,
    bucket_provisioner::bucket::features::versioning::VERSIONING,
    bucket_provisioner::bucket::features::object_lock::OBJECT_LOCK,
];

/// Keys other provisioners' claims carry that mean nothing here, and why.
const FOREIGN: [(&str, &str); 5] = [
    ("bucketPolicy", "its S3 endpoint has no bucket policies"),
    ("bucketOwner", "it has no user accounts to own buckets"),
    ("bucketclass", "it has no bucket classes (data placement is the node's directory)"),
    ("path", "it has no namespace buckets"),
    ("replicationPolicy", "it does not replicate buckets"),
];

/// The quotas a claim asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClaimQuotas {
    /// On what the claim's own key stores (`maxObjects`, `maxSize`).
    pub claim: Quota,
    /// On the whole bucket (`bucketMaxObjects`, `bucketMaxSize`).
    pub bucket: Quota,
}

impl ClaimQuotas {
    /// Reads `additionalConfig`; anything else than the [`ACCEPTED`] keys with valid values is
    /// an `InvalidParameters` error naming the key and what is accepted.
    pub fn parse(config: &BTreeMap<String, String>) -> Result<Self, BackendError> {
        let mut refused = Vec::new();
        for key in config.keys().filter(|k| !ACCEPTED.contains(&k.as_str())) {
            match FOREIGN.iter().find(|(foreign, _)| foreign == key) {
                Some((_, why)) => refused.push(format!("{key} (not supported: {why})")),
                None => refused.push(key.clone()),
            }
        }
        if !refused.is_empty() {
            return Err(BackendError::invalid_parameter(format!(
                "unknown additionalConfig key(s) {}: the hostPath provisioner accepts {}",
                refused.join(", "),
                ACCEPTED.join(", ")
            )));
        }
        let count = |key| config.get(key).map(|v| parse_count(key, v)).transpose();
        let size = |key| config.get(key).map(|v| parse_size(key, v)).transpose();
        Ok(Self {
            claim: Quota { max_objects: count(MAX_OBJECTS)?, max_bytes: size(MAX_SIZE)? },
            bucket: Quota {
                max_objects: count(BUCKET_MAX_OBJECTS)?,
                max_bytes: size(BUCKET_MAX_SIZE)?,
            },
        })
    }
}

/// A number of objects: a whole number, as Rook and NooBaa read it.
fn parse_count(key: &str, value: &str) -> Result<u64, BackendError> {
    quantity::parse_count(value).map_err(|why| {
        BackendError::invalid_parameter(format!("additionalConfig {key} {value:?} {why}"))
    })
}

/// A size in bytes written as a Kubernetes quantity (see [`quantity::parse_bytes`]).
pub fn parse_size(key: &str, value: &str) -> Result<u64, BackendError> {
    quantity::parse_bytes(value).map_err(|why| {
        BackendError::invalid_parameter(format!(
            "additionalConfig {key} {value:?} {why}; write a size such as \"2G\" (10^9 bytes), \
             \"2Gi\" (2^30 bytes) or \"500M\""
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn sizes_read_as_kubernetes_quantities() {
        for (text, bytes) in [
            ("2G", 2_000_000_000),
            ("2Gi", 2 << 30),
            ("500M", 500_000_000),
            ("1Ki", 1024),
            ("1.5Gi", 3 << 29),
            ("1e3", 1000),
            ("4096", 4096),
            ("+1k", 1000),
            (" 7 ", 7),
            ("0", 0),
            ("15Ei", 15 << 60),
        ] {
            assert_eq!(parse_size(MAX_SIZE, text).ok(), Some(bytes), "{text}");
        }
        for (text, why) in [
            ("-1G", "negative"),
            ("500m", "milli"),
            ("0.5", "whole number of bytes"),
            ("2GB", "unknown unit"),
            ("G", "not a quantity"),
            ("1.2.3", "not a quantity"),
            ("16Ei", "too large"),
        ] {
            let error = parse_size(MAX_SIZE, text).unwrap_err().to_string();
            assert!(error.contains(why), "{text}: {error}");
            assert!(error.contains("maxSize") && error.contains("2Gi"), "{error}");
        }
    }

    #[test]
    fn a_fraction_too_long_for_any_integer_is_refused_not_a_panic() {
        // 128 digits once made the scale 10^128, which wraps a u128 to 0 (39 and more overflow).
        let mut fractions = vec![format!("0.{}1", "0".repeat(127))];
        fractions.extend((38..=130).map(|n| format!("1.{}", "1".repeat(n))));
        for text in fractions {
            let error = parse_size(MAX_SIZE, &text).unwrap_err().to_string();
            assert!(error.contains("not a whole number of bytes"), "{text}: {error}");
        }
        let config = config(&[(MAX_SIZE, &format!("0.{}1", "0".repeat(127)))]);
        assert!(ClaimQuotas::parse(&config).unwrap_err().to_string().contains("maxSize"));
    }

    #[test]
    fn rook_and_noobaa_claims_parse() {
        let rook = ClaimQuotas::parse(&config(&[
            (MAX_OBJECTS, "1000"),
            (MAX_SIZE, "2G"),
            (BUCKET_MAX_OBJECTS, "3000"),
            (BUCKET_MAX_SIZE, "4G"),
        ]))
        .unwrap();
        assert_eq!(rook.claim, Quota { max_objects: Some(1000), max_bytes: Some(2_000_000_000) });
        assert_eq!(rook.bucket, Quota { max_objects: Some(3000), max_bytes: Some(4_000_000_000) });
        let noobaa = ClaimQuotas::parse(&config(&[(MAX_OBJECTS, "20000"), (MAX_SIZE, "1Gi")]));
        assert_eq!(noobaa.unwrap().claim.max_bytes, Some(1 << 30));
        assert_eq!(ClaimQuotas::parse(&BTreeMap::new()).unwrap(), ClaimQuotas::default());
    }

    #[test]
    fn other_keys_are_refused_with_what_is_accepted() {
        let error =
            ClaimQuotas::parse(&config(&[("colour", "blue"), ("bucketPolicy", "{}")])).unwrap_err();
        let message = error.to_string();
        assert!(error.is_permanent());
        assert!(message.contains("bucketPolicy (not supported: its S3 endpoint has no bucket"));
        assert!(message.contains("colour"), "{message}");
        assert!(
            message.ends_with(
                "accepts maxObjects, maxSize, bucketMaxObjects, bucketMaxSize, cors, \
                 bucketLifecycle, versioning, objectLock"
            ),
            "{message}"
        );
        let error = ClaimQuotas::parse(&config(&[(MAX_OBJECTS, "10k")])).unwrap_err();
        assert!(error.to_string().contains("maxObjects \"10k\" is not a whole number"), "{error}");
    }

    #[test]
    fn versioning_and_object_lock_are_left_to_their_own_reader() {
        for key in ["versioning", "objectLock"] {
            let quotas = ClaimQuotas::parse(&config(&[(key, "Enabled")])).unwrap();
            assert_eq!(quotas, ClaimQuotas::default(), "{key}");
        }
    }

    /// Quantity-shaped text with the near misses that once overflowed.
    const NEAR_MISS: &str = "[ +-]{0,2}[0-9]{0,45}\\.?[0-9]{0,140}\
        (|k|M|G|Ki|Gi|Ei|m|[eE][+-]?[0-9]{1,12}|GB|i| )";

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        #[test]
        fn quotas_read_as_every_other_caller_reads_them(
            any in proptest::prelude::any::<String>(),
            near in NEAR_MISS,
        ) {
            for text in [any, near] {
                let bytes = quantity::parse_bytes(&text);
                let read = ClaimQuotas::parse(&config(&[(MAX_SIZE, &text), (BUCKET_MAX_SIZE, &text)]));
                let sizes = read.as_ref().ok().map(|q| (q.claim.max_bytes, q.bucket.max_bytes));
                proptest::prop_assert_eq!(sizes, bytes.ok().map(|b| (Some(b), Some(b))));
                if let (Err(read), Err(why)) = (read, bytes) {
                    proptest::prop_assert!(read.to_string().contains(&why.to_string()));
                }
                let counted = ClaimQuotas::parse(&config(&[(MAX_OBJECTS, &text)])).ok();
                let count = quantity::parse_count(&text).ok();
                proptest::prop_assert_eq!(counted.and_then(|q| q.claim.max_objects), count);
            }
        }
    }
}
