//! A claim's `additionalConfig`: the quota keys Rook and NooBaa claims carry, mapped onto
//! Garage's bucket quotas.
//!
//! | key | value | on Garage |
//! |---|---|---|
//! | `maxObjects` | a whole number, `"1000"` | the bucket's `maxObjects` quota |
//! | `maxSize` | a Kubernetes quantity: `"2G"`, `"2Gi"`, `"500M"`, `"1073741824"` | the bucket's `maxSize` quota |
//!
//! Garage keeps quotas per bucket, not per key. A claim that created its bucket is the only
//! holder of a key to it unless a StorageClass shares the bucket (`bucketName`), so there the
//! bucket quota is the claim's quota; objects written through a sharing claim's key count
//! against it too. A claim *granted* a bucket it did not create cannot be limited on its own,
//! and may not limit the others: quota keys there are refused. So are the bucket-wide keys of
//! the hostPath provisioner (`bucketMaxObjects`, `bucketMaxSize`), which would mean the same
//! bucket quota a second time.

use std::collections::BTreeMap;

use bucket_provisioner::BackendError;

use crate::api::Quotas;

/// Most objects in the claim's bucket.
pub const MAX_OBJECTS: &str = "maxObjects";
/// Most bytes in the claim's bucket.
pub const MAX_SIZE: &str = "maxSize";
/// Every `additionalConfig` key this provisioner accepts.
pub const ACCEPTED: [&str; 2] = [MAX_OBJECTS, MAX_SIZE];

/// Keys other provisioners' claims carry that mean nothing here, and why.
const FOREIGN: [(&str, &str); 6] = [
    ("bucketMaxObjects", "Garage has one quota per bucket, which maxObjects sets"),
    ("bucketMaxSize", "Garage has one quota per bucket, which maxSize sets"),
    ("bucketPolicy", "Garage has no bucket policies; each claim's key is scoped to its bucket"),
    ("bucketLifecycle", "not offered by this provisioner"),
    ("bucketOwner", "Garage has no user accounts to own buckets"),
    ("replicationPolicy", "Garage replicates every bucket by its cluster layout"),
];

/// The quotas asked for in `config`; any other key, or a malformed value, is an
/// `InvalidParameters` error naming it.
pub fn parse(config: &BTreeMap<String, String>) -> Result<Quotas, BackendError> {
    let mut refused = Vec::new();
    for key in config.keys().filter(|k| !ACCEPTED.contains(&k.as_str())) {
        match FOREIGN.iter().find(|(foreign, _)| foreign == key) {
            Some((_, why)) => refused.push(format!("{key} (not supported: {why})")),
            None => refused.push(key.clone()),
        }
    }
    if !refused.is_empty() {
        return Err(BackendError::invalid_parameter(format!(
            "unknown additionalConfig key(s) {}: the Garage provisioner accepts {}",
            refused.join(", "),
            ACCEPTED.join(", ")
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
    value.trim().parse::<u64>().map_err(|_| {
        BackendError::invalid_parameter(format!(
            "additionalConfig {MAX_OBJECTS} {value:?} is not a whole number of objects such as \
             \"1000\""
        ))
    })
}

/// A size in bytes written as a Kubernetes quantity: `2G` (2·10⁹), `2Gi` (2·2³⁰), `1.5Ti`,
/// `1e9`, or plain bytes; it must come to whole bytes.
pub fn parse_size(value: &str) -> Result<u64, BackendError> {
    let invalid = |why: &str| {
        BackendError::invalid_parameter(format!(
            "additionalConfig {MAX_SIZE} {value:?} {why}; write a size such as \"2G\" (10^9 \
             bytes), \"2Gi\" (2^30 bytes) or \"500M\""
        ))
    };
    let text = value.trim();
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return Err(invalid("is not a quantity"));
    }
    let mantissa: u128 =
        format!("{whole}{fraction}").parse().map_err(|_| invalid("is too large"))?;
    let scale = 10u128
        .checked_pow(u32::try_from(fraction.len()).map_err(|_| invalid("is too long"))?)
        .ok_or_else(|| invalid("is too long"))?;
    let decimal = |power: u32| 10u128.pow(power);
    let multiplier: u128 = match suffix {
        "" => 1,
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        "m" => return Err(invalid("is in thousandths of a byte (m means milli)")),
        exponent if exponent.starts_with(['e', 'E']) => {
            let power: u32 = exponent[1..].parse().map_err(|_| invalid("has a bad exponent"))?;
            10u128.checked_pow(power).ok_or_else(|| invalid("is too large"))?
        }
        _ => return Err(invalid("has an unknown unit")),
    };
    let bytes = mantissa.checked_mul(multiplier).ok_or_else(|| invalid("is too large"))?;
    if bytes % scale != 0 {
        return Err(invalid("is not a whole number of bytes"));
    }
    u64::try_from(bytes / scale).map_err(|_| invalid("is too large"))
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
}
