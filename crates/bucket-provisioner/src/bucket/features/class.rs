//! The StorageClass parameters that allow, or cap, the bucket features claims ask for:
//!
//! | parameter | meaning | default |
//! |---|---|---|
//! | `allowVersioning` | claims may set `versioning` | `"false"` |
//! | `allowObjectLock` | claims may ask for `objectLock` | `"false"` |
//! | `allowComplianceRetention` | their default retention may be `COMPLIANCE` (no one, the operator included, can delete before it ends) | `"false"` |
//! | `maxObjectLockRetentionDays` | the longest default retention a claim may set, in days (a year counts 365) | no cap |
//! | `allowLifecycle` | claims may set `bucketLifecycle` (rules that only expire or move the claim's own objects) | `"true"` |
//!
//! The class may also give claims a default of what it allows ([`super::defaults`]); a default
//! it does not allow, or beyond its cap, is an error naming both parameters.
//!
//! A GOVERNANCE retention can be lifted by whoever holds `s3:BypassGovernanceRetention` (the
//! operator); a COMPLIANCE one cannot, by anyone, until it ends: hence its own switch and the
//! cap.

use std::collections::BTreeMap;

use provisioner_runtime::BackendError;

use super::defaults::{ClassDefaults, DEFAULT_RETENTION, DEFAULT_VERSIONING};
use super::object_lock::{Mode, OBJECT_LOCK, ObjectLock};
use super::versioning::VERSIONING;

/// Claims may set `versioning`.
pub const ALLOW_VERSIONING: &str = "allowVersioning";
/// Claims may ask for `objectLock`.
pub const ALLOW_OBJECT_LOCK: &str = "allowObjectLock";
/// Claims' default retention may be COMPLIANCE.
pub const ALLOW_COMPLIANCE_RETENTION: &str = "allowComplianceRetention";
/// The longest default retention, in days.
pub const MAX_RETENTION_DAYS: &str = "maxObjectLockRetentionDays";
/// Claims may set `bucketLifecycle`.
pub const ALLOW_LIFECYCLE: &str = "allowLifecycle";
/// The `additionalConfig` key `allowLifecycle` governs.
pub const BUCKET_LIFECYCLE: &str = "bucketLifecycle";

/// Every parameter of this module and of [`super::defaults`], for a backend offering all the
/// features.
pub const PARAMETERS: [&str; 7] = [
    ALLOW_VERSIONING,
    ALLOW_OBJECT_LOCK,
    ALLOW_COMPLIANCE_RETENTION,
    MAX_RETENTION_DAYS,
    ALLOW_LIFECYCLE,
    DEFAULT_VERSIONING,
    DEFAULT_RETENTION,
];

/// What one StorageClass lets its claims ask of their buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassFeatures {
    /// `allowVersioning`.
    pub versioning: bool,
    /// `allowObjectLock`.
    pub object_lock: bool,
    /// `allowComplianceRetention`.
    pub compliance: bool,
    /// `maxObjectLockRetentionDays`.
    pub max_retention_days: Option<u32>,
    /// `allowLifecycle`.
    pub lifecycle: bool,
    /// What claims get unless they ask otherwise, within the above.
    pub defaults: ClassDefaults,
}

impl Default for ClassFeatures {
    fn default() -> Self {
        Self {
            versioning: false,
            object_lock: false,
            compliance: false,
            max_retention_days: None,
            lifecycle: true,
            defaults: ClassDefaults::default(),
        }
    }
}

/// `"true"` or `"false"` (any case), or `default` when absent.
pub fn flag(
    parameters: &BTreeMap<String, String>,
    name: &str,
    default: bool,
) -> Result<bool, BackendError> {
    match parameters.get(name).map(|v| v.trim()) {
        None | Some("") => Ok(default),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        Some(v) => Err(BackendError::invalid_parameter(format!(
            "parameter {name} must be \"true\" or \"false\", not {v:?}"
        ))),
    }
}

fn not_allowed(key: &str, parameter: &str, what: &str) -> BackendError {
    BackendError::invalid_parameter(format!(
        "additionalConfig {key} is not allowed by the StorageClass: its operator allows {what} \
         with the parameter {parameter}: \"true\""
    ))
}

impl ClassFeatures {
    /// Reads the parameters of this module from a StorageClass's; others are left to the
    /// backend.
    pub fn from_parameters(parameters: &BTreeMap<String, String>) -> Result<Self, BackendError> {
        let max_retention_days = match parameters.get(MAX_RETENTION_DAYS).map(|v| v.trim()) {
            None | Some("") => None,
            Some(v) => Some(v.parse::<u32>().ok().filter(|d| *d > 0).ok_or_else(|| {
                BackendError::invalid_parameter(format!(
                    "parameter {MAX_RETENTION_DAYS} must be a whole number of days above 0, \
                     not {v:?}"
                ))
            })?),
        };
        let class = Self {
            versioning: flag(parameters, ALLOW_VERSIONING, false)?,
            object_lock: flag(parameters, ALLOW_OBJECT_LOCK, false)?,
            compliance: flag(parameters, ALLOW_COMPLIANCE_RETENTION, false)?,
            max_retention_days,
            lifecycle: flag(parameters, ALLOW_LIFECYCLE, true)?,
            defaults: ClassDefaults::from_parameters(parameters)?,
        };
        class.check_defaults()?;
        Ok(class)
    }

    /// Fails unless the class allows its own defaults: a class cannot give what it refuses.
    fn check_defaults(&self) -> Result<(), BackendError> {
        let refused = |default: &str, why: String| {
            BackendError::invalid_parameter(format!(
                "parameter {default} is not allowed by the StorageClass itself: {why}"
            ))
        };
        if self.defaults.versioning.is_some() && !self.versioning {
            return Err(refused(
                DEFAULT_VERSIONING,
                format!("it needs {ALLOW_VERSIONING}: \"true\""),
            ));
        }
        let Some(retention) = self.defaults.retention else { return Ok(()) };
        if !self.object_lock {
            return Err(refused(
                DEFAULT_RETENTION,
                format!("it needs {ALLOW_OBJECT_LOCK}: \"true\""),
            ));
        }
        if retention.mode == Mode::Compliance && !self.compliance {
            return Err(refused(
                DEFAULT_RETENTION,
                format!("a COMPLIANCE retention needs {ALLOW_COMPLIANCE_RETENTION}: \"true\""),
            ));
        }
        match self.max_retention_days {
            Some(most) if retention.period.days() > most => Err(refused(
                DEFAULT_RETENTION,
                format!(
                    "its {} days are longer than the {most} days of {MAX_RETENTION_DAYS}",
                    retention.period.days()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Fails unless claims may set `versioning`.
    pub fn check_versioning(&self) -> Result<(), BackendError> {
        match self.versioning {
            true => Ok(()),
            false => Err(not_allowed(VERSIONING, ALLOW_VERSIONING, "object versioning")),
        }
    }

    /// Fails unless claims may set `bucketLifecycle`.
    pub fn check_lifecycle(&self) -> Result<(), BackendError> {
        match self.lifecycle {
            true => Ok(()),
            false => Err(not_allowed(BUCKET_LIFECYCLE, ALLOW_LIFECYCLE, "lifecycle rules")),
        }
    }

    /// Fails unless claims may ask for `lock`: object lock allowed, a COMPLIANCE retention
    /// allowed, and the retention within the cap.
    pub fn check_object_lock(&self, lock: &ObjectLock) -> Result<(), BackendError> {
        if !self.object_lock {
            return Err(not_allowed(OBJECT_LOCK, ALLOW_OBJECT_LOCK, "object lock"));
        }
        let Some(retention) = lock.retention else { return Ok(()) };
        if retention.mode == Mode::Compliance && !self.compliance {
            return Err(BackendError::invalid_parameter(format!(
                "additionalConfig {OBJECT_LOCK}: a COMPLIANCE default retention is not allowed \
                 by the StorageClass (no one can delete what it holds until it ends); use \
                 GOVERNANCE, or ask the operator for a class with \
                 {ALLOW_COMPLIANCE_RETENTION}: \"true\""
            )));
        }
        match self.max_retention_days {
            Some(most) if retention.period.days() > most => {
                Err(BackendError::invalid_parameter(format!(
                    "additionalConfig {OBJECT_LOCK}: a default retention of {} days is longer \
                     than the {most} days the StorageClass allows ({MAX_RETENTION_DAYS})",
                    retention.period.days()
                )))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::object_lock::{Period, Retention};
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn lock(mode: Mode, period: Period) -> ObjectLock {
        ObjectLock { retention: Some(Retention { mode, period }) }
    }

    #[test]
    fn nothing_but_lifecycle_unless_the_class_says_so() {
        let plain = ClassFeatures::from_parameters(&BTreeMap::new()).unwrap();
        assert_eq!(plain, ClassFeatures::default());
        plain.check_lifecycle().unwrap();
        let error = plain.check_versioning().unwrap_err().to_string();
        assert!(error.contains("versioning is not allowed") && error.contains(ALLOW_VERSIONING));
        let error = plain.check_object_lock(&ObjectLock::default()).unwrap_err().to_string();
        assert!(error.contains("allowObjectLock: \"true\""), "{error}");
        let closed = ClassFeatures::from_parameters(&params(&[(ALLOW_LIFECYCLE, "false")]));
        let error = closed.unwrap().check_lifecycle().unwrap_err().to_string();
        assert!(error.contains("bucketLifecycle is not allowed"), "{error}");
    }

    #[test]
    fn compliance_needs_its_own_switch_and_the_cap_holds_in_years_too() {
        let class = ClassFeatures::from_parameters(&params(&[
            (ALLOW_OBJECT_LOCK, "true"),
            (MAX_RETENTION_DAYS, "400"),
        ]))
        .unwrap();
        class.check_object_lock(&lock(Mode::Governance, Period::Years(1))).unwrap();
        let error = class.check_object_lock(&lock(Mode::Compliance, Period::Days(1)));
        assert!(error.unwrap_err().to_string().contains(ALLOW_COMPLIANCE_RETENTION));
        let error = class.check_object_lock(&lock(Mode::Governance, Period::Years(2)));
        let error = error.unwrap_err().to_string();
        assert!(error.contains("730 days is longer than the 400 days"), "{error}");
        let compliant = ClassFeatures { compliance: true, ..class };
        compliant.check_object_lock(&lock(Mode::Compliance, Period::Days(400))).unwrap();
        assert!(compliant.check_object_lock(&lock(Mode::Compliance, Period::Years(10))).is_err());
    }

    #[test]
    fn a_default_the_class_does_not_allow_names_both_parameters() {
        let allowing = [
            (ALLOW_VERSIONING, "true"),
            (ALLOW_OBJECT_LOCK, "true"),
            (MAX_RETENTION_DAYS, "90"),
            (DEFAULT_VERSIONING, "Enabled"),
            (DEFAULT_RETENTION, "GOVERNANCE:90d"),
        ];
        let class = ClassFeatures::from_parameters(&params(&allowing)).unwrap();
        assert_eq!(class.defaults.versioning, Some(super::super::versioning::Versioning::Enabled));
        assert_eq!(class.defaults.retention.unwrap().period.days(), 90);
        for (pairs, names) in [
            (&[(DEFAULT_VERSIONING, "Enabled")][..], [DEFAULT_VERSIONING, ALLOW_VERSIONING]),
            (&[(DEFAULT_RETENTION, "GOVERNANCE:1d")][..], [DEFAULT_RETENTION, ALLOW_OBJECT_LOCK]),
            (
                &[(ALLOW_OBJECT_LOCK, "true"), (DEFAULT_RETENTION, "COMPLIANCE:1d")][..],
                [DEFAULT_RETENTION, ALLOW_COMPLIANCE_RETENTION],
            ),
            (
                &[
                    (ALLOW_OBJECT_LOCK, "true"),
                    (MAX_RETENTION_DAYS, "364"),
                    (DEFAULT_RETENTION, "GOVERNANCE:1y"),
                ][..],
                [DEFAULT_RETENTION, MAX_RETENTION_DAYS],
            ),
        ] {
            let error = ClassFeatures::from_parameters(&params(pairs)).unwrap_err();
            assert!(error.is_permanent());
            let error = error.to_string();
            assert!(names.iter().all(|name| error.contains(name)), "{names:?}: {error}");
        }
    }

    #[test]
    fn bad_values_are_named() {
        for (pairs, says) in [
            ([(ALLOW_VERSIONING, "yes")], ALLOW_VERSIONING),
            ([(MAX_RETENTION_DAYS, "0")], MAX_RETENTION_DAYS),
            ([(MAX_RETENTION_DAYS, "ten years")], "\"ten years\""),
        ] {
            let error = ClassFeatures::from_parameters(&params(&pairs)).unwrap_err().to_string();
            assert!(error.contains(says), "{says}: {error}");
        }
    }
}
