//! A claim's `additionalConfig`: the quota keys Rook and NooBaa claims carry, mapped onto
//! Garage's bucket quotas.
//!
//! | key | value | on Garage |
//! |---|---|---|
//! | `maxObjects` | a whole number, `"1000"` | the bucket's `maxObjects` quota |
//! | `maxSize` | a Kubernetes quantity: `"2G"`, `"2Gi"`, `"500M"`, `"1073741824"` (see [`bucket_api::quantity`]) | the bucket's `maxSize` quota |
//!
//! Garage keeps quotas per bucket, not per key. A claim that created its bucket is the only
//! holder of a key to it unless a StorageClass shares the bucket (`bucketName`), so there the
//! bucket quota is the claim's quota; objects written through a sharing claim's key count
//! against it too. A claim *granted* a bucket it did not create cannot be limited on its own,
//! and may not limit the others: quota keys there are refused. So are the bucket-wide keys of
//! the hostPath provisioner (`bucketMaxObjects`, `bucketMaxSize`), which would mean the same
//! bucket quota a second time.

use std::collections::BTreeMap;

use bucket_api::quantity;
use bucket_provisioner::BackendError;

use crate::api::Quotas;

/// Most objects in the claim's bucket.
pub const MAX_OBJECTS: &str = "maxObjects";
/// Most bytes in the claim's bucket.
pub const MAX_SIZE: &str = "maxSize";
/// Every `additionalConfig` key this provisioner accepts.
pub const ACCEPTED: [&str; 2] = [MAX_OBJECTS, MAX_SIZE];

/// Keys other provisioners' claims carry that mean nothing here, and why.
const FOREIGN: [(&str, &str); 7] = [
    ("bucketMaxObjects", "Garage has one quota per bucket, which maxObjects sets"),
    ("bucketMaxSize", "Garage has one quota per bucket, which maxSize sets"),
    ("bucketPolicy", "Garage has no bucket policies; each claim's key is scoped to its bucket"),
    ("bucketOwner", "Garage has no user accounts to own buckets"),
    ("replicationPolicy", "Garage replicates every bucket by its cluster layout"),
    ("versioning", "Garage has no object versioning"),
    ("objectLock", "Garage has no object lock"),
];

/// The quotas asked for in `config`; a key neither a quota nor one [`crate::features`] reads,
/// or a malformed value, is an `InvalidParameters` error naming it.
pub fn parse(config: &BTreeMap<String, String>) -> Result<Quotas, BackendError> {
    let mut refused = Vec::new();
    let known = |key: &str| ACCEPTED.contains(&key) || crate::features::KEYS.contains(&key);
    for key in config.keys().filter(|k| !known(k)) {
        match FOREIGN.iter().find(|(foreign, _)| foreign == key) {
            Some((_, why)) => refused.push(format!("{key} (not supported: {why})")),
            None => refused.push(key.clone()),
        }
    }
    if !refused.is_empty() {
        return Err(BackendError::invalid_parameter(format!(
            "unknown additionalConfig key(s) {}: the Garage provisioner accepts {}, {}",
            refused.join(", "),
            ACCEPTED.join(", "),
            crate::features::KEYS.join(", ")
        )));
    }
    let max_objects = config.get(MAX_OBJECTS).map(|v| parse_count(v)).transpose()?;
    let max_size = config.get(MAX_SIZE).map(|v| parse_size(v)).transpose()?;
    Ok(Quotas { max_size, max_objects })
}

/// Whether `config` asks for any quota.
pub fn any(config: &BTreeMap<String, String>) -> bool {
    ACCEPTED.iter().any(|key| config.contains_key(*key))
}

/// The refusal of quota keys on a bucket the claim did not create.
pub fn shared_bucket(bucket: &str) -> BackendError {
    BackendError::invalid_parameter(format!(
        "additionalConfig {MAX_OBJECTS} and {MAX_SIZE} become quotas of the whole bucket \
         {bucket:?} on Garage, which keeps no quota per key; this claim did not create that \
         bucket and may share it with other claims (StorageClass bucketName), so it cannot be \
         limited on its own and may not limit the others"
    ))
}

fn parse_count(value: &str) -> Result<u64, BackendError> {
    quantity::parse_count(value).map_err(|why| {
        BackendError::invalid_parameter(format!("additionalConfig {MAX_OBJECTS} {value:?} {why}"))
    })
}

/// A size in bytes written as a Kubernetes quantity: `2G` (2·10⁹), `2Gi` (2·2³⁰), `1.5Ti`,
/// `1e9`, or plain bytes, read as every other backend reads it ([`quantity::parse_bytes`]).
pub fn parse_size(value: &str) -> Result<u64, BackendError> {
    quantity::parse_bytes(value).map_err(|why| {
        BackendError::invalid_parameter(format!(
            "additionalConfig {MAX_SIZE} {value:?} {why}; write a size such as \"2G\" (10^9 \
             bytes), \"2Gi\" (2^30 bytes) or \"500M\""
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
    fn rook_and_noobaa_keys_become_bucket_quotas() {
        let quotas = parse(&config(&[(MAX_OBJECTS, "1000"), (MAX_SIZE, "2Gi")])).unwrap();
        assert_eq!(quotas, Quotas { max_size: Some(2 << 30), max_objects: Some(1000) });
        assert_eq!(parse(&config(&[])).unwrap(), Quotas::default());
        for (text, bytes) in [("2G", 2_000_000_000), ("1.5Ki", 1536), ("1e3", 1000), ("7", 7)] {
            assert_eq!(parse_size(text).ok(), Some(bytes), "{text}");
        }
        for text in ["", "-1", "1.5", "2GB", "10m", "1e40", "a"] {
            assert!(parse_size(text).is_err(), "{text}");
        }
    }

    #[test]
    fn sizes_read_as_the_other_backends_read_them() {
        // The hostPath backend, the StorageClass limits and volume requests read these alike.
        for (text, bytes) in [("+1G", 1_000_000_000), (".5Ki", 512), ("20e-1", 2), ("-0", 0)] {
            assert_eq!(parse_size(text).ok(), Some(bytes), "{text}");
        }
        for zeros in [37, 38, 39, 127, 200] {
            let text = format!("0.{}1", "0".repeat(zeros));
            let error = parse_size(&text).unwrap_err().to_string();
            assert!(error.contains("not a whole number of bytes"), "{text}: {error}");
        }
    }

    #[test]
    fn what_garage_cannot_honour_is_refused_with_the_reason() {
        let error = parse(&config(&[("bucketMaxSize", "1G"), ("bucketPolicy", "{}")])).unwrap_err();
        let text = error.to_string();
        assert!(error.is_permanent());
        assert!(text.contains("bucketMaxSize (not supported: Garage has one quota per bucket"));
        assert!(text.contains("bucketPolicy (not supported"), "{text}");
        let error = parse(&config(&[(MAX_OBJECTS, "10k")])).unwrap_err();
        assert!(error.to_string().contains("not a whole number"), "{error}");
        assert!(shared_bucket("b").to_string().contains("did not create"));
    }

    #[test]
    fn bucket_features_garage_does_not_apply_are_refused_by_name() {
        for key in ["versioning", "objectLock"] {
            let error = parse(&config(&[(key, "{}"), (MAX_SIZE, "1G")])).unwrap_err();
            let text = error.to_string();
            assert!(error.is_permanent());
            assert!(text.contains(&format!("key(s) {key} (not supported: ")), "{text}");
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
                let read = parse(&config(&[(MAX_SIZE, &text)]));
                proptest::prop_assert_eq!(read.as_ref().ok().and_then(|q| q.max_size), bytes.ok());
                if let (Err(read), Err(why)) = (read, bytes) {
                    proptest::prop_assert!(read.to_string().contains(&why.to_string()));
                }
                let counted = parse(&config(&[(MAX_OBJECTS, &text)])).ok();
                let count = quantity::parse_count(&text).ok();
                proptest::prop_assert_eq!(counted.and_then(|q| q.max_objects), count);
            }
        }
    }
}
