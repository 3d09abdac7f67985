//! `additionalConfig` key `objectLock`: object lock turned on when the bucket is created, with an
//! optional default retention for new objects. The value is `Enabled`, or the JSON of S3's
//! `put-object-lock-configuration`:
//!
//! ```json
//! {"ObjectLockEnabled": "Enabled",
//!  "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 30}}}
//! ```
//!
//! (`Mode` `GOVERNANCE` or `COMPLIANCE`, and `Days` or `Years`, not both.) S3 cannot turn object
//! lock on for a bucket that exists, nor off for one that has it, so [`change_refusal`] says why
//! a bound claim asking either is refused; a COMPLIANCE default retention can only be kept or
//! lengthened through the claim, never shortened, weakened or removed.

use provisioner_runtime::BackendError;
use serde::Deserialize;

/// The `additionalConfig` key.
pub const OBJECT_LOCK: &str = "objectLock";

/// Days a year of retention counts for, when compared with a class's cap.
pub const DAYS_PER_YEAR: u32 = 365;
/// The longest retention S3 takes (100 years), so that a count cannot overflow.
pub const LONGEST_DAYS: u32 = 100 * DAYS_PER_YEAR;

/// How a retention holds objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Users with `s3:BypassGovernanceRetention` may still delete or shorten.
    Governance,
    /// No one, the account's root included, deletes a version before its retention ends.
    Compliance,
}

impl Mode {
    /// The mode as S3 writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Governance => "GOVERNANCE",
            Self::Compliance => "COMPLIANCE",
        }
    }

    /// Reads a mode as S3 writes it.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "GOVERNANCE" => Some(Self::Governance),
            "COMPLIANCE" => Some(Self::Compliance),
            _ => None,
        }
    }
}

/// A retention period, in the unit the claim wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Period {
    /// Whole days.
    Days(u32),
    /// Whole years.
    Years(u32),
}

impl Period {
    /// The period in days, a year counting [`DAYS_PER_YEAR`].
    pub fn days(self) -> u32 {
        match self {
            Self::Days(days) => days,
            Self::Years(years) => years.saturating_mul(DAYS_PER_YEAR),
        }
    }
}

/// The retention new objects get unless their writer says otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// How it holds.
    pub mode: Mode,
    /// For how long.
    pub period: Period,
}

/// What a claim's `objectLock` asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObjectLock {
    /// The default retention, if any.
    pub retention: Option<Retention>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct Document {
    object_lock_enabled: Option<String>,
    rule: Option<RuleJson>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct RuleJson {
    default_retention: RetentionJson,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct RetentionJson {
    mode: String,
    days: Option<u32>,
    years: Option<u32>,
}

fn invalid(why: impl std::fmt::Display) -> BackendError {
    BackendError::invalid_parameter(format!("additionalConfig {OBJECT_LOCK}: {why}"))
}

impl ObjectLock {
    /// Reads the claim's value, `Enabled` or put-object-lock-configuration's JSON.
    pub fn parse(text: &str) -> Result<Self, BackendError> {
        if text.trim() == "Enabled" {
            return Ok(Self::default());
        }
        let document: Document = serde_json::from_str(text).map_err(|e| {
            invalid(format_args!(
                "neither \"Enabled\" nor the JSON of put-object-lock-configuration \
                 ({{\"ObjectLockEnabled\": \"Enabled\", \"Rule\": {{\"DefaultRetention\": \
                 {{\"Mode\": \"GOVERNANCE\", \"Days\": 30}}}}}}): {e}"
            ))
        })?;
        match document.object_lock_enabled.as_deref() {
            Some("Enabled") => {}
            Some(other) => {
                return Err(invalid(format_args!(
                    "ObjectLockEnabled {other:?} must be \"Enabled\"; object lock cannot be \
                     turned off, so leave the key out for a bucket without it"
                )));
            }
            None => return Err(invalid("ObjectLockEnabled: \"Enabled\" is missing")),
        }
        let Some(rule) = document.rule else { return Ok(Self::default()) };
        let retention = rule.default_retention;
        let mode = Mode::parse(&retention.mode).ok_or_else(|| {
            invalid(format_args!(
                "Mode {:?} is neither \"GOVERNANCE\" nor \"COMPLIANCE\"",
                retention.mode
            ))
        })?;
        let period = match (retention.days, retention.years) {
            (Some(days), None) => Period::Days(days),
            (None, Some(years)) => Period::Years(years),
            _ => return Err(invalid("DefaultRetention takes Days or Years, exactly one")),
        };
        if period.days() == 0 || period.days() > LONGEST_DAYS {
            return Err(invalid(format_args!(
                "a default retention runs 1 day to 100 years, not {} days",
                period.days()
            )));
        }
        Ok(Self { retention: Some(Retention { mode, period }) })
    }
}

/// Why a bound claim's `asked` object lock cannot be applied to a bucket whose object lock is
/// `on_bucket` (`None`: the bucket has none; `Some(None)`: it has one, with no default
/// retention), or `None` when it can.
pub fn change_refusal(
    bucket: &str,
    on_bucket: Option<Option<Retention>>,
    asked: Option<&ObjectLock>,
) -> Option<BackendError> {
    let why = match (on_bucket, asked) {
        (None, None) => return None,
        (None, Some(_)) => format!(
            "bucket {bucket:?} was created without object lock, and S3 turns it on only when a \
             bucket is created; remove the key, or make a new claim asking for it"
        ),
        (Some(_), None) => format!(
            "bucket {bucket:?} has object lock, which cannot be turned off; keep the key (its \
             default retention may change within what the StorageClass allows)"
        ),
        (Some(current), Some(asked)) => match (current, asked.retention) {
            (Some(now), new) if now.mode == Mode::Compliance && !keeps(now, new) => format!(
                "bucket {bucket:?} holds new objects under a COMPLIANCE default retention of {} \
                 days, which the claim may keep or lengthen but not shorten, weaken or remove",
                now.period.days()
            ),
            _ => return None,
        },
    };
    Some(invalid(why))
}

/// Whether `new` holds at least as long and as firmly as the COMPLIANCE retention `now`.
fn keeps(now: Retention, new: Option<Retention>) -> bool {
    new.is_some_and(|new| new.mode == Mode::Compliance && new.period.days() >= now.period.days())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn lock(mode: &str, unit: &str, count: u32) -> String {
        format!(
            r#"{{"ObjectLockEnabled": "Enabled",
                "Rule": {{"DefaultRetention": {{"Mode": "{mode}", "{unit}": {count}}}}}}}"#
        )
    }

    #[test]
    fn enabled_alone_or_with_a_default_retention() {
        assert_eq!(ObjectLock::parse("Enabled").unwrap(), ObjectLock::default());
        let parsed = ObjectLock::parse(&lock("COMPLIANCE", "Years", 2)).unwrap();
        let retention = parsed.retention.unwrap();
        assert_eq!(retention.mode, Mode::Compliance);
        assert_eq!(retention.period.days(), 730);
        assert_eq!(
            ObjectLock::parse(r#"{"ObjectLockEnabled": "Enabled"}"#).unwrap().retention,
            None
        );
    }

    #[test]
    fn mistakes_are_refused_by_name() {
        for (text, says) in [
            (lock("STRICT", "Days", 1), "Mode \"STRICT\""),
            (lock("GOVERNANCE", "Days", 0), "1 day to 100 years"),
            (lock("GOVERNANCE", "Years", 101), "1 day to 100 years"),
            (lock("GOVERNANCE", "Weeks", 1), "unknown field `Weeks`"),
            (r#"{"ObjectLockEnabled": "Disabled"}"#.into(), "cannot be turned off"),
            (r#"{"Rule": null}"#.into(), "is missing"),
            ("true".into(), "neither \"Enabled\" nor the JSON"),
            (
                r#"{"ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention":
                    {"Mode": "GOVERNANCE", "Days": 1, "Years": 1}}}"#
                    .into(),
                "exactly one",
            ),
        ] {
            let error = ObjectLock::parse(&text).unwrap_err();
            assert!(error.is_permanent());
            let error = error.to_string();
            assert!(error.starts_with("additionalConfig objectLock: "), "{error}");
            assert!(error.contains(says), "{says}: {error}");
        }
    }

    #[test]
    fn a_compliance_retention_is_only_kept_or_lengthened() {
        let compliance =
            |days| Some(Retention { mode: Mode::Compliance, period: Period::Days(days) });
        let asked = |retention| ObjectLock { retention };
        let governance = Some(Retention { mode: Mode::Governance, period: Period::Years(5) });
        assert!(change_refusal("b", None, None).is_none());
        let added = change_refusal("b", None, Some(&asked(None))).unwrap().to_string();
        assert!(added.contains("created without object lock"), "{added}");
        let removed = change_refusal("b", Some(None), None).unwrap().to_string();
        assert!(removed.contains("cannot be turned off"), "{removed}");
        let now = Some(compliance(30));
        for weaker in [None, compliance(29), governance] {
            let refused = change_refusal("b", now, Some(&asked(weaker))).unwrap().to_string();
            assert!(refused.contains("COMPLIANCE default retention of 30 days"), "{refused}");
        }
        for stronger in [compliance(30), compliance(31)] {
            assert!(change_refusal("b", now, Some(&asked(stronger))).is_none());
        }
        // GOVERNANCE, or none, may change either way.
        assert!(change_refusal("b", Some(governance), Some(&asked(None))).is_none());
        assert!(change_refusal("b", Some(None), Some(&asked(compliance(1)))).is_none());
    }

    proptest! {
        /// Any text is judged; what is accepted holds a retention within S3's range.
        #[test]
        fn any_text_is_judged(text in prop_oneof![
            any::<String>(),
            ("(GOVERNANCE|COMPLIANCE|x)", "(Days|Years|Other)", any::<u32>())
                .prop_map(|(m, u, n)| lock(&m, &u, n)),
        ]) {
            match ObjectLock::parse(&text) {
                Ok(parsed) => if let Some(retention) = parsed.retention {
                    prop_assert!((1..=LONGEST_DAYS).contains(&retention.period.days()));
                },
                Err(error) => prop_assert!(error.is_permanent()),
            }
        }
    }
}
