//! Class parameters, read as the objectbucket.io StorageClass parameters of the same names are.
//!
//! | class | parameter | meaning |
//! |---|---|---|
//! | BucketClass | `maxSize`, `maxObjects` | limits on everything the bucket holds |
//! | BucketClass, BucketAccessClass | `defaultMaxSize`, `limitMaxSize`, `defaultMaxObjects`, `limitMaxObjects` | as on a StorageClass: the default when `maxSize`/`maxObjects` is not set, and the most it may be |
//! | BucketAccessClass | `maxSize`, `maxObjects` | limits on what the access's key stores in each bucket |
//! | BucketAccessClass | `accessMode` | the key's mode under v1alpha1 (which asks none); `ReadWrite` when unset |
//! | BucketAccessClass | `limitAccessMode` | the widest mode a key gets, under either version |
//!
//! Every other parameter goes to the backend, which refuses those it does not know. What COSI
//! cannot mean is refused by name: `bucketName` (a static Bucket names an existing bucket),
//! `rotationPeriod`/`rotationOverlap` (keys are not rotated through COSI), `accessMode` in a
//! v1alpha2 access class (v1alpha2 asks a mode per bucket), `limitAccessMode` in a BucketClass.

use std::collections::BTreeMap;

use bucket_api::AccessMode;
use bucket_api::contract::class_limits::LIMIT_ACCESS_MODE;
use bucket_api::contract::class_rotation;
use bucket_api::contract::{
    CLAIM_ACCESS_MODE, CLAIM_MAX_OBJECTS, CLAIM_MAX_SIZE, STORAGE_CLASS_BUCKET_NAME,
};
use bucket_api::quantity::{parse_bytes, parse_count};
use bucket_provisioner::bucket::limits::ClassLimits;
use bucket_provisioner::bucket::standalone::Quotas;

use crate::status::CallError;

/// A BucketClass's parameters, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketParams {
    /// Limits on the whole bucket.
    pub quotas: Quotas,
    /// What the backend reads.
    pub backend: BTreeMap<String, String>,
}

/// A BucketAccessClass's parameters, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessParams {
    /// Limits on what the key stores.
    pub quotas: Quotas,
    /// The mode `accessMode` asks (v1alpha1's mode), `ReadWrite` when unset.
    pub mode: AccessMode,
    /// The widest mode any key of this class gets.
    pub limit: Option<AccessMode>,
    /// What the backend reads.
    pub backend: BTreeMap<String, String>,
}

impl AccessParams {
    /// The mode a key gets for a bucket asked `asked`: refused when wider than the class allows.
    pub fn mode_for(&self, asked: AccessMode) -> Result<AccessMode, CallError> {
        match self.limit {
            Some(widest) if !widest.covers(asked) => Err(CallError::InvalidArgument(format!(
                "access mode {asked} is more than the class's {LIMIT_ACCESS_MODE} {widest}"
            ))),
            _ => Ok(asked),
        }
    }
}

fn invalid(why: impl Into<String>) -> CallError {
    CallError::InvalidArgument(why.into())
}

/// Refuses parameters that mean nothing through COSI, naming them and why.
fn refuse_foreign(
    parameters: &BTreeMap<String, String>,
    extra: &[(&str, &str)],
) -> Result<(), CallError> {
    let mut foreign: Vec<(&str, &str)> = vec![
        (
            STORAGE_CLASS_BUCKET_NAME,
            "an existing bucket is reached through a static Bucket (existingBucketID)",
        ),
        (class_rotation::ROTATION_PERIOD, "keys are not rotated through COSI"),
        (class_rotation::ROTATION_OVERLAP, "keys are not rotated through COSI"),
    ];
    foreign.extend_from_slice(extra);
    for (key, why) in foreign {
        if parameters.contains_key(key) {
            return Err(invalid(format!("parameter {key} is not accepted here: {why}")));
        }
    }
    Ok(())
}

/// Takes the quota keys and their class limits out of `parameters`: the quotas in force.
fn take_quotas(parameters: &mut BTreeMap<String, String>) -> Result<Quotas, CallError> {
    let limits = ClassLimits::take(parameters).map_err(invalid)?;
    let asked: BTreeMap<String, String> = [CLAIM_MAX_SIZE, CLAIM_MAX_OBJECTS]
        .into_iter()
        .filter_map(|key| parameters.remove(key).map(|value| (key.to_owned(), value)))
        .collect();
    let limited = limits.apply(Some(&asked)).map_err(|e| invalid(e.to_string()))?;
    if let Some(exceeded) = limited.exceeded {
        return Err(invalid(format!(
            "the class's parameters ask for more than its own limits: {exceeded}"
        )));
    }
    let read = |key: &str, size: bool| -> Result<Option<u64>, CallError> {
        let Some(text) = limited.config.get(key) else { return Ok(None) };
        let number = if size {
            parse_bytes(text).map_err(|why| why.to_string())
        } else {
            parse_count(text).map_err(|why| why.to_string())
        };
        number.map(Some).map_err(|why| invalid(format!("parameter {key} {text:?} {why}")))
    };
    Ok(Quotas {
        max_bytes: read(CLAIM_MAX_SIZE, true)?,
        max_objects: read(CLAIM_MAX_OBJECTS, false)?,
    })
}

/// Reads a BucketClass's parameters.
pub fn bucket_params(parameters: &BTreeMap<String, String>) -> Result<BucketParams, CallError> {
    refuse_foreign(
        parameters,
        &[
            (LIMIT_ACCESS_MODE, "access modes are limited by a BucketAccessClass"),
            (CLAIM_ACCESS_MODE, "access modes are set by a BucketAccessClass"),
        ],
    )?;
    let mut backend = parameters.clone();
    let quotas = take_quotas(&mut backend)?;
    Ok(BucketParams { quotas, backend })
}

/// Reads a BucketAccessClass's parameters; `per_bucket_modes` is true under v1alpha2, whose
/// requests carry a mode for each bucket.
pub fn access_params(
    parameters: &BTreeMap<String, String>,
    per_bucket_modes: bool,
) -> Result<AccessParams, CallError> {
    let extra: &[(&str, &str)] = if per_bucket_modes {
        &[(
            CLAIM_ACCESS_MODE,
            "v1alpha2 asks a mode for each bucket; limit it with limitAccessMode",
        )]
    } else {
        &[]
    };
    refuse_foreign(parameters, extra)?;
    let mut backend = parameters.clone();
    let mode_of = |key: &str, text: String| {
        AccessMode::parse(&text).ok_or_else(|| {
            invalid(format!("parameter {key} {text:?} is not an access mode; use ReadWrite, ReadOnly or WriteOnly"))
        })
    };
    let limit =
        backend.remove(LIMIT_ACCESS_MODE).map(|t| mode_of(LIMIT_ACCESS_MODE, t)).transpose()?;
    let mode =
        backend.remove(CLAIM_ACCESS_MODE).map(|t| mode_of(CLAIM_ACCESS_MODE, t)).transpose()?;
    let quotas = take_quotas(&mut backend)?;
    let params = AccessParams { quotas, mode: AccessMode::default(), limit, backend };
    // Unset, the mode is the widest the class allows, as a claim's is under a StorageClass.
    let mode = match (mode, limit) {
        (Some(mode), _) => params.mode_for(mode)?,
        (None, Some(limit)) => limit,
        (None, None) => AccessMode::default(),
    };
    Ok(AccessParams { mode, ..params })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn quotas_and_limits_read_as_on_a_storage_class() {
        let read =
            bucket_params(&map(&[("maxSize", "1Gi"), ("maxObjects", "10"), ("colour", "red")]))
                .unwrap();
        assert_eq!(read.quotas, Quotas { max_bytes: Some(1 << 30), max_objects: Some(10) });
        assert_eq!(read.backend, map(&[("colour", "red")]));
        let defaulted =
            bucket_params(&map(&[("defaultMaxSize", "1k"), ("limitMaxSize", "2k")])).unwrap();
        assert_eq!(defaulted.quotas.max_bytes, Some(1000));
        let err = bucket_params(&map(&[("maxSize", "3k"), ("limitMaxSize", "2k")])).unwrap_err();
        assert!(err.to_string().contains("limitMaxSize"), "{err}");
        let err = bucket_params(&map(&[("maxSize", "lots")])).unwrap_err();
        assert!(err.to_string().contains("maxSize"), "{err}");
    }

    #[test]
    fn what_cosi_cannot_mean_is_refused_by_name() {
        for key in ["bucketName", "rotationPeriod", "limitAccessMode", "accessMode"] {
            let err = bucket_params(&map(&[(key, "x")])).unwrap_err();
            assert!(err.to_string().contains(key), "{err}");
        }
        let err = access_params(&map(&[("accessMode", "ReadOnly")]), true).unwrap_err();
        assert!(err.to_string().contains("accessMode"), "{err}");
    }

    #[test]
    fn access_modes_follow_the_class() {
        let p = access_params(&map(&[("accessMode", "ReadOnly")]), false).unwrap();
        assert_eq!(p.mode, AccessMode::ReadOnly);
        let p = access_params(&map(&[("limitAccessMode", "ReadOnly")]), true).unwrap();
        assert_eq!(p.mode, AccessMode::ReadOnly);
        assert!(
            p.mode_for(AccessMode::ReadWrite).unwrap_err().to_string().contains("limitAccessMode")
        );
        assert_eq!(p.mode_for(AccessMode::ReadOnly), Ok(AccessMode::ReadOnly));
        let err = access_params(
            &map(&[("accessMode", "ReadWrite"), ("limitAccessMode", "WriteOnly")]),
            false,
        );
        assert!(err.is_err());
        let err = access_params(&map(&[("accessMode", "Sometimes")]), false).unwrap_err();
        assert!(err.to_string().contains("Sometimes"), "{err}");
    }

    proptest! {
        /// Any text in any parameter is read or refused with an error naming a parameter, and
        /// never panics.
        #[test]
        fn any_parameter_text_is_read_or_refused_by_name(
            key in prop::sample::select(vec![
                "maxSize", "maxObjects", "defaultMaxSize", "limitMaxSize", "defaultMaxObjects",
                "limitMaxObjects", "accessMode", "limitAccessMode", "other",
            ]),
            value in ".{0,24}",
            v2 in any::<bool>(),
        ) {
            let params = map(&[(key, &value)]);
            for result in [bucket_params(&params).map(drop), access_params(&params, v2).map(drop)] {
                if let Err(e) = result {
                    let text = e.to_string();
                    prop_assert!(text.contains(key) || text.contains("parameter"), "{}", text);
                    prop_assert_eq!(e.code(), tonic::Code::InvalidArgument);
                }
            }
        }
    }
}
