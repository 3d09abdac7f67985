//! Which bucket-wide settings the keys of the claim that created a bucket may change through S3
//! themselves (PutBucketLifecycleConfiguration, PutBucketCors, PutBucketVersioning,
//! PutObjectLockConfiguration, legal holds): those its StorageClass lets the claim ask for
//! (`allowLifecycle`, `allowCors`, `allowVersioning`, `allowObjectLock`). The endpoint holds
//! the keys to this record; keys of claims sharing the bucket change none of them.

use std::collections::BTreeMap;

use bucket_provisioner::BackendError;
use bucket_provisioner::bucket::features::class::ClassFeatures;
use s3_endpoint::store::Settable;

use crate::cors;

/// What the class with `parameters` lets its claims' keys change.
pub fn settable(parameters: &BTreeMap<String, String>) -> Result<Settable, BackendError> {
    let class = ClassFeatures::from_parameters(parameters)?;
    Ok(Settable {
        lifecycle: class.lifecycle,
        cors: cors::allowed_by(parameters)?,
        versioning: class.versioning,
        object_lock: class.object_lock,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(pairs: &[(&str, &str)]) -> Settable {
        settable(&pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()).unwrap()
    }

    #[test]
    fn the_class_defaults_allow_lifecycle_rules_only() {
        let lifecycle_only = Settable { lifecycle: true, ..Settable::default() };
        assert_eq!(of(&[]), lifecycle_only);
        assert_eq!(of(&[("allowLifecycle", "false")]), Settable::default());
    }

    #[test]
    fn each_allow_parameter_opens_its_setting() {
        let all =
            of(&[("allowCors", "true"), ("allowVersioning", "true"), ("allowObjectLock", "true")]);
        assert_eq!(
            all,
            Settable { lifecycle: true, cors: true, versioning: true, object_lock: true }
        );
    }
}
