//! The StorageClass parameters that give a claim a bucket feature it does not ask for itself:
//!
//! | parameter | meaning | needs |
//! |---|---|---|
//! | `defaultVersioning` | `Enabled` or `Suspended`: the `versioning` of a claim that sets none | `allowVersioning: "true"` |
//! | `defaultObjectLockRetention` | `MODE:COUNT` with `MODE` `GOVERNANCE` or `COMPLIANCE` and `COUNT` days (`30d`) or years (`1y`), e.g. `GOVERNANCE:30d`: the default retention of a claim's `objectLock` that names none | `allowObjectLock: "true"`; `COMPLIANCE` also `allowComplianceRetention: "true"`; at most `maxObjectLockRetentionDays` |
//!
//! A default is what the claim would have written: it reaches every backend as the claim's own
//! value, so a backend without the feature refuses it by name just as it refuses the key. A
//! default versioning of `Suspended` is not given to a claim asking for object lock, since a
//! locked bucket stays versioned. Whether a class's defaults fit what it allows is checked by
//! [`super::class::ClassFeatures::from_parameters`].

use std::collections::BTreeMap;

use provisioner_runtime::BackendError;

use super::object_lock::{LONGEST_DAYS, Mode, ObjectLock, Period, Retention};
use super::versioning::Versioning;

/// The versioning of a claim that sets none.
pub const DEFAULT_VERSIONING: &str = "defaultVersioning";
/// The default retention of a claim's object lock that names none.
pub const DEFAULT_RETENTION: &str = "defaultObjectLockRetention";

/// Every parameter of this module.
pub const PARAMETERS: [&str; 2] = [DEFAULT_VERSIONING, DEFAULT_RETENTION];

/// What one StorageClass gives its claims unless they ask otherwise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassDefaults {
    /// `defaultVersioning`.
    pub versioning: Option<Versioning>,
    /// `defaultObjectLockRetention`.
    pub retention: Option<Retention>,
}

fn invalid(name: &str, why: impl std::fmt::Display) -> BackendError {
    BackendError::invalid_parameter(format!("parameter {name} {why}"))
}

/// Reads a `defaultObjectLockRetention` value: `GOVERNANCE:30d`, `COMPLIANCE:1y`.
pub fn parse_retention(text: &str) -> Result<Retention, BackendError> {
    let text = text.trim();
    let form = || {
        invalid(
            DEFAULT_RETENTION,
            format_args!(
                "{text:?} is not MODE:COUNT, with MODE GOVERNANCE or COMPLIANCE and COUNT a \
                 number of days or years such as 30d or 1y (GOVERNANCE:30d)"
            ),
        )
    };
    let (mode, count) = text.split_once(':').ok_or_else(form)?;
    let mode = Mode::parse(mode).ok_or_else(form)?;
    let unit = count.chars().last().ok_or_else(form)?;
    let number = &count[..count.len() - unit.len_utf8()];
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(form());
    }
    let number: u32 = number.parse().unwrap_or(u32::MAX);
    let period = match unit {
        'd' => Period::Days(number),
        'y' => Period::Years(number),
        _ => return Err(form()),
    };
    if period.days() == 0 || period.days() > LONGEST_DAYS {
        return Err(invalid(
            DEFAULT_RETENTION,
            format_args!("{text:?}: a default retention runs 1 day to 100 years"),
        ));
    }
    Ok(Retention { mode, period })
}

/// For a backend without versioning or object lock: fails, naming the parameter and `why`
/// (what the store lacks), when the class gives claims a default of either, so that the
/// default is refused as the claim's own key would be, never dropped.
pub fn refuse(parameters: &BTreeMap<String, String>, why: &str) -> Result<(), BackendError> {
    match PARAMETERS.into_iter().find(|name| parameters.contains_key(*name)) {
        Some(name) => Err(invalid(
            name,
            format_args!("is not supported: {why}, so no claim of the class could get it"),
        )),
        None => Ok(()),
    }
}

impl ClassDefaults {
    /// Reads the parameters of this module from a StorageClass's; others are left alone.
    pub fn from_parameters(parameters: &BTreeMap<String, String>) -> Result<Self, BackendError> {
        let get = |name: &str| parameters.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
        let versioning = get(DEFAULT_VERSIONING)
            .map(|text| match text {
                "Enabled" => Ok(Versioning::Enabled),
                "Suspended" => Ok(Versioning::Suspended),
                other => Err(invalid(
                    DEFAULT_VERSIONING,
                    format_args!("{other:?} is neither \"Enabled\" nor \"Suspended\""),
                )),
            })
            .transpose()?;
        let retention = get(DEFAULT_RETENTION).map(parse_retention).transpose()?;
        Ok(Self { versioning, retention })
    }

    /// Whether the class gives claims anything they do not ask for.
    pub fn is_empty(&self) -> bool {
        self.versioning.is_none() && self.retention.is_none()
    }

    /// The versioning a claim gets: what it `asked`, else the class's default (but never
    /// `Suspended` for a claim asking for object lock, `locked`).
    pub fn versioning(&self, asked: Option<Versioning>, locked: bool) -> Option<Versioning> {
        match (asked, self.versioning) {
            (Some(asked), _) => Some(asked),
            (None, Some(Versioning::Suspended)) if locked => None,
            (None, default) => default,
        }
    }

    /// The object lock a claim gets: what it `asked`, its retention defaulting to the
    /// class's; no object lock unless asked.
    pub fn object_lock(&self, asked: Option<ObjectLock>) -> Option<ObjectLock> {
        asked.map(|lock| ObjectLock { retention: lock.retention.or(self.retention) })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn retention_in_days_or_years() {
        let retention = parse_retention("GOVERNANCE:30d").unwrap();
        assert_eq!(retention, Retention { mode: Mode::Governance, period: Period::Days(30) });
        let retention = parse_retention(" COMPLIANCE:1y ").unwrap();
        assert_eq!(retention, Retention { mode: Mode::Compliance, period: Period::Years(1) });
        for (bad, says) in [
            ("GOVERNANCE", "not MODE:COUNT"),
            ("governance:30d", "not MODE:COUNT"),
            ("GOVERNANCE:30", "not MODE:COUNT"),
            ("GOVERNANCE:30w", "not MODE:COUNT"),
            ("GOVERNANCE:+3d", "not MODE:COUNT"),
            ("GOVERNANCE:d", "not MODE:COUNT"),
            ("GOVERNANCE:", "not MODE:COUNT"),
            ("GOVERNANCE:0d", "1 day to 100 years"),
            ("COMPLIANCE:101y", "1 day to 100 years"),
            ("COMPLIANCE:99999999999999d", "1 day to 100 years"),
        ] {
            let error = parse_retention(bad).unwrap_err();
            assert!(error.is_permanent());
            let error = error.to_string();
            assert!(error.contains(DEFAULT_RETENTION) && error.contains(says), "{bad}: {error}");
        }
    }

    #[test]
    fn defaults_fill_only_what_the_claim_leaves_out() {
        let defaults = ClassDefaults::from_parameters(&params(&[
            (DEFAULT_VERSIONING, "Enabled"),
            (DEFAULT_RETENTION, "GOVERNANCE:7d"),
        ]))
        .unwrap();
        assert_eq!(defaults.versioning(None, false), Some(Versioning::Enabled));
        assert_eq!(
            defaults.versioning(Some(Versioning::Suspended), false),
            Some(Versioning::Suspended)
        );
        let seven = Retention { mode: Mode::Governance, period: Period::Days(7) };
        let lock = defaults.object_lock(Some(ObjectLock::default())).unwrap();
        assert_eq!(lock.retention, Some(seven));
        let own = ObjectLock {
            retention: Some(Retention { mode: Mode::Compliance, period: Period::Days(1) }),
        };
        assert_eq!(defaults.object_lock(Some(own)), Some(own));
        assert_eq!(defaults.object_lock(None), None, "a default never turns object lock on");
        let suspended = ClassDefaults { versioning: Some(Versioning::Suspended), retention: None };
        assert_eq!(suspended.versioning(None, true), None, "a locked bucket stays versioned");
        assert_eq!(suspended.versioning(None, false), Some(Versioning::Suspended));
        assert!(ClassDefaults::from_parameters(&BTreeMap::new()).unwrap().is_empty());
        let error = ClassDefaults::from_parameters(&params(&[(DEFAULT_VERSIONING, "on")]));
        let error = error.unwrap_err().to_string();
        assert!(error.contains("parameter defaultVersioning \"on\" is neither"), "{error}");
    }

    #[test]
    fn a_backend_without_the_features_refuses_their_defaults_by_name() {
        refuse(&params(&[("allowCors", "true")]), "no versions").unwrap();
        for name in PARAMETERS {
            let error = refuse(&params(&[(name, "")]), "the store has no versions").unwrap_err();
            assert!(error.is_permanent());
            let error = error.to_string();
            assert!(
                error.contains(&format!("parameter {name} is not supported: the store has no")),
                "{error}"
            );
        }
    }

    proptest! {
        /// Any text is judged: what is accepted writes back as it was read and holds 1 day to
        /// 100 years; the rest is a permanent error naming the parameter.
        #[test]
        fn any_retention_text_is_judged(text in prop_oneof![
            any::<String>(),
            "(GOVERNANCE|COMPLIANCE|x)?:?[0-9]{0,12}[dyw]?",
        ]) {
            match parse_retention(&text) {
                Ok(retention) => {
                    prop_assert!((1..=LONGEST_DAYS).contains(&retention.period.days()));
                    let (count, unit) = match retention.period {
                        Period::Days(n) => (n, 'd'),
                        Period::Years(n) => (n, 'y'),
                    };
                    let written = format!("{}:{count}{unit}", retention.mode.as_str());
                    prop_assert_eq!(parse_retention(&written).ok(), Some(retention));
                }
                Err(error) => {
                    prop_assert!(error.is_permanent());
                    prop_assert!(error.to_string().contains(DEFAULT_RETENTION));
                }
            }
        }
    }
}
