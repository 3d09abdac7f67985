//! A claim's `versioning` and `objectLock` (`additionalConfig`), read and judged as for every
//! backend by the library's [`bucket_provisioner::bucket::features`]: what the StorageClass
//! allows and caps (`allowVersioning`, `allowObjectLock`, `allowComplianceRetention`,
//! `maxObjectLockRetentionDays`) and what it gives claims that leave a key out
//! (`defaultVersioning`, `defaultObjectLockRetention`). They are applied through the endpoint's
//! store:
//!
//! - object lock only when the claim's bucket is created (the store turns versioning on with
//!   it, for good); asked later, or dropped, it is refused with the reason, and its default
//!   retention changes only within what the class allows, a COMPLIANCE one never shortened or
//!   weakened;
//! - versioning set as asked; a claim dropping the key suspends it (a bucket once versioned is
//!   never unversioned again), or returns it to the class's default.
//!
//! On a bucket with object lock the class's `allowComplianceRetention` and
//! `maxObjectLockRetentionDays` are recorded as the bucket's retention ceiling, which the
//! endpoint holds every retention the claims' keys set to (object lock headers,
//! PutObjectRetention, PutObjectLockConfiguration).
//!
//! Like CORS and lifecycle rules they configure the whole bucket, so only the claim that created
//! the bucket sets them, and a class's defaults reach only the buckets its claims create.

use std::collections::BTreeMap;

use crate::store_link::StoreLink;
use bucket_provisioner::BackendError;
use bucket_provisioner::bucket::features::class::ClassFeatures;
use bucket_provisioner::bucket::features::defaults::ClassDefaults;
use bucket_provisioner::bucket::features::object_lock::{
    Mode, OBJECT_LOCK, ObjectLock, Period, Retention, change_refusal,
};
use bucket_provisioner::bucket::features::versioning::{VERSIONING, Versioning};
use s3_endpoint::store::{self, DefaultRetention, LockMode, RetentionCeiling, RetentionPeriod};

use crate::store_error::backend_error;

/// What a claim asks of its bucket's versions, with what its class gives by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features {
    /// `versioning`, as the claim wrote it.
    pub versioning: Option<Versioning>,
    /// `objectLock`, as the claim wrote it.
    pub object_lock: Option<ObjectLock>,
    /// The class's defaults, for a bucket the claim creates.
    pub defaults: ClassDefaults,
    /// The class's limits on retention, recorded on a bucket with object lock so that the
    /// endpoint holds the claim's keys to them.
    pub ceiling: RetentionCeiling,
}

impl Features {
    /// Reads the claim's keys and judges them by its class: a key the class does not allow,
    /// a retention over its cap, or a class whose defaults exceed what it allows is an
    /// `InvalidParameters` error naming them.
    pub fn parse(
        config: &BTreeMap<String, String>,
        parameters: &BTreeMap<String, String>,
    ) -> Result<Self, BackendError> {
        let class = ClassFeatures::from_parameters(parameters)?;
        let versioning = config.get(VERSIONING).map(|v| Versioning::parse(v)).transpose()?;
        let object_lock = config.get(OBJECT_LOCK).map(|v| ObjectLock::parse(v)).transpose()?;
        if versioning.is_some() {
            class.check_versioning()?;
        }
        if let Some(lock) = &object_lock {
            class.check_object_lock(lock)?;
            if versioning == Some(Versioning::Suspended) {
                return Err(BackendError::invalid_parameter(format!(
                    "additionalConfig {VERSIONING}: Suspended cannot go with {OBJECT_LOCK}: a \
                     bucket with object lock keeps versioning Enabled"
                )));
            }
        }
        let ceiling =
            RetentionCeiling { compliance: class.compliance, max_days: class.max_retention_days };
        Ok(Self { versioning, object_lock, defaults: class.defaults, ceiling })
    }

    /// Whether the claim itself sets either key.
    pub fn asked(&self) -> bool {
        self.versioning.is_some() || self.object_lock.is_some()
    }

    /// What the claim's own bucket gets: its values, else its class's defaults.
    fn effective(&self) -> (Option<Versioning>, Option<ObjectLock>) {
        let object_lock = self.defaults.object_lock(self.object_lock);
        (self.defaults.versioning(self.versioning, object_lock.is_some()), object_lock)
    }

    /// Applies them to `bucket`, which the claim created: on a new bucket (`previous` `None`),
    /// or on a bound claim's whose ObjectBucket recorded `previous` as its `additionalConfig`.
    /// A change the bucket cannot take is refused before anything changes.
    pub async fn apply(
        &self,
        store: &StoreLink,
        bucket: &str,
        previous: Option<&BTreeMap<String, String>>,
    ) -> Result<(), BackendError> {
        let (versioning, object_lock) = self.effective();
        let had = |key| previous.is_some_and(|p| p.contains_key(key));
        if object_lock.is_some() || had(OBJECT_LOCK) {
            let found = store.bucket_object_lock(bucket).await.map_err(backend_error)?;
            let mut on_bucket = found.map(|lock| lock.default_retention.map(library_retention));
            if previous.is_none() && on_bucket.is_none() && object_lock.is_some() {
                // The bucket is new and empty: the one moment object lock can be turned on.
                store.enable_object_lock(bucket).await.map_err(backend_error)?;
                on_bucket = Some(None);
            }
            if let Some(refusal) = change_refusal(bucket, on_bucket, object_lock.as_ref()) {
                return Err(refusal);
            }
            if on_bucket.is_some() {
                // Before any key of the claim can use the bucket, and again for one locked
                // before ceilings were recorded.
                let ceiling = Some(self.ceiling);
                store.set_retention_ceiling(bucket, ceiling).await.map_err(backend_error)?;
            }
            if let Some(lock) = object_lock
                && on_bucket != Some(lock.retention)
            {
                let default = lock.retention.map(store_retention);
                store.set_object_lock_default(bucket, default).await.map_err(backend_error)?;
            }
        }
        let wanted = match versioning {
            // Never unversioned again; a locked bucket stays versioned.
            None if had(VERSIONING) && object_lock.is_none() => Some(Versioning::Suspended),
            wanted => wanted,
        };
        let Some(wanted) = wanted.map(store_versioning) else { return Ok(()) };
        if store.bucket_versioning(bucket).await.map_err(backend_error)? != Some(wanted) {
            store.set_bucket_versioning(bucket, wanted).await.map_err(backend_error)?;
        }
        Ok(())
    }
}

fn store_versioning(state: Versioning) -> store::Versioning {
    match state {
        Versioning::Enabled => store::Versioning::Enabled,
        Versioning::Suspended => store::Versioning::Suspended,
    }
}

fn store_retention(retention: Retention) -> DefaultRetention {
    DefaultRetention {
        mode: match retention.mode {
            Mode::Governance => LockMode::Governance,
            Mode::Compliance => LockMode::Compliance,
        },
        period: match retention.period {
            Period::Days(days) => RetentionPeriod::Days(days),
            Period::Years(years) => RetentionPeriod::Years(years),
        },
    }
}

fn library_retention(retention: DefaultRetention) -> Retention {
    Retention {
        mode: match retention.mode {
            LockMode::Governance => Mode::Governance,
            LockMode::Compliance => Mode::Compliance,
        },
        period: match retention.period {
            RetentionPeriod::Days(days) => Period::Days(days),
            RetentionPeriod::Years(years) => Period::Years(years),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn keys_are_judged_by_the_class_and_defaults_fill_what_is_left_out() {
        let open = map(&[
            ("allowVersioning", "true"),
            ("allowObjectLock", "true"),
            ("maxObjectLockRetentionDays", "30"),
            ("defaultVersioning", "Enabled"),
            ("defaultObjectLockRetention", "GOVERNANCE:7d"),
        ]);
        let plain = Features::parse(&map(&[]), &open).unwrap();
        assert!(!plain.asked());
        assert_eq!(plain.effective(), (Some(Versioning::Enabled), None));
        let locked = Features::parse(&map(&[("objectLock", "Enabled")]), &open).unwrap();
        let seven = Retention { mode: Mode::Governance, period: Period::Days(7) };
        let lock = ObjectLock { retention: Some(seven) };
        assert_eq!(locked.effective(), (Some(Versioning::Enabled), Some(lock)));
        for (config, class, says) in [
            (&[("versioning", "Enabled")][..], map(&[]), "allowVersioning: \"true\""),
            (&[("objectLock", "Enabled")][..], map(&[]), "allowObjectLock: \"true\""),
            (&[("versioning", "On")][..], open.clone(), "neither \"Enabled\" nor"),
            (
                &[("objectLock", "Enabled"), ("versioning", "Suspended")][..],
                open.clone(),
                "Suspended cannot go with objectLock",
            ),
            (&[][..], map(&[("defaultVersioning", "Enabled")]), "allowVersioning"),
        ] {
            let error = Features::parse(&map(config), &class).unwrap_err();
            assert!(error.is_permanent());
            assert!(error.to_string().contains(says), "{config:?}: {error}");
        }
    }

    #[test]
    fn retentions_read_back_as_they_were_written() {
        for mode in [Mode::Governance, Mode::Compliance] {
            for period in [Period::Days(3), Period::Years(2)] {
                let retention = Retention { mode, period };
                assert_eq!(library_retention(store_retention(retention)), retention);
            }
        }
    }
}
