//! Object lock: what a locked object is, and the pure decisions about it: may it be removed or
//! overwritten now, may its retention be replaced by another, what retention a new object gets
//! from its bucket's default. Nothing here reads a clock or a file; callers pass "now" in
//! milliseconds since the Unix epoch, so that every decision is tested at any date.
//!
//! The rules are S3's:
//! - a legal hold blocks removal until it is cleared, whatever the retention says;
//! - a `COMPLIANCE` retention blocks removal until its date, for every key, the operator
//!   credential included, and may only be kept or lengthened;
//! - a `GOVERNANCE` retention blocks removal until its date, unless the request asks to bypass
//!   it (`x-amz-bypass-governance-retention: true`) and is permitted to: here that is the key of
//!   the claim that created the bucket, or the operator credential. It may be lengthened by
//!   anyone who may write, and shortened, removed or turned into another mode only with a
//!   permitted bypass;
//! - a retention whose date has passed no longer protects anything.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Milliseconds in a day.
const DAY_MS: u64 = 24 * 60 * 60 * 1000;

/// Longest bucket default retention accepted, in days (S3 accepts up to 100 years).
pub const MAX_DEFAULT_RETENTION_DAYS: u32 = 36_500;
/// Longest bucket default retention accepted, in years.
pub const MAX_DEFAULT_RETENTION_YEARS: u32 = 100;

/// How a retention protects an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LockMode {
    /// Removable before its date with a permitted bypass.
    #[serde(rename = "GOVERNANCE")]
    Governance,
    /// Removable by nobody before its date.
    #[serde(rename = "COMPLIANCE")]
    Compliance,
}

impl LockMode {
    /// The mode's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Governance => "GOVERNANCE",
            Self::Compliance => "COMPLIANCE",
        }
    }

    /// The mode of its wire name (`GOVERNANCE`, `COMPLIANCE`), if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "GOVERNANCE" => Some(Self::Governance),
            "COMPLIANCE" => Some(Self::Compliance),
            _ => None,
        }
    }
}

/// A retention: a mode and the date until which it protects an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    /// How it protects.
    pub mode: LockMode,
    /// Until when, in milliseconds since the Unix epoch.
    pub until_ms: u64,
}

impl Retention {
    /// Whether it still protects at `now_ms`.
    pub fn active(&self, now_ms: u64) -> bool {
        self.until_ms > now_ms
    }

    /// Its date as a time.
    pub fn until(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.until_ms)
    }
}

/// What protects one object: its retention and its legal hold. Kept with the object's other
/// metadata; the default (neither) is not written at all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectLock {
    /// Its retention, if it has one (an expired one is kept, and shown, as S3 does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<Retention>,
    /// Whether a legal hold is on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub legal_hold: bool,
    /// Whether a legal hold was ever set on it, on or off: one never set has no legal hold
    /// configuration to read back (`NoSuchObjectLockConfiguration`, as S3 answers).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub legal_hold_set: bool,
}

impl ObjectLock {
    /// Neither a retention nor a legal hold.
    pub fn is_none(&self) -> bool {
        self.retention.is_none() && !self.legal_hold && !self.legal_hold_set
    }
}

/// How long a bucket's default retention lasts from an object's creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RetentionPeriod {
    /// A number of days.
    #[serde(rename = "days")]
    Days(u32),
    /// A number of years of 365 days.
    #[serde(rename = "years")]
    Years(u32),
}

impl RetentionPeriod {
    /// The period in milliseconds.
    pub fn as_ms(self) -> u64 {
        match self {
            Self::Days(days) => u64::from(days) * DAY_MS,
            Self::Years(years) => u64::from(years) * 365 * DAY_MS,
        }
    }
}

/// A bucket's default retention: what every new object gets unless its write names its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DefaultRetention {
    /// The mode new objects get.
    pub mode: LockMode,
    /// For how long.
    pub period: RetentionPeriod,
}

impl DefaultRetention {
    /// Refuses a period of zero or past S3's limits, saying why.
    pub fn check(&self) -> Result<(), String> {
        match self.period {
            RetentionPeriod::Days(0) | RetentionPeriod::Years(0) => {
                Err("Default retention period must be a positive integer value".into())
            }
            RetentionPeriod::Days(days) if days > MAX_DEFAULT_RETENTION_DAYS => Err(format!(
                "Default retention period is too large: at most {MAX_DEFAULT_RETENTION_DAYS} days"
            )),
            RetentionPeriod::Years(years) if years > MAX_DEFAULT_RETENTION_YEARS => Err(format!(
                "Default retention period is too large: at most {MAX_DEFAULT_RETENTION_YEARS} \
                 years"
            )),
            _ => Ok(()),
        }
    }

    /// The retention an object created at `now_ms` gets.
    pub fn retention_from(&self, now_ms: u64) -> Retention {
        Retention { mode: self.mode, until_ms: now_ms.saturating_add(self.period.as_ms()) }
    }
}

/// A bucket's object lock configuration. A bucket has one only if it was created with object
/// lock enabled, and keeps it for life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketLock {
    /// The rule new objects follow, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_retention: Option<DefaultRetention>,
    /// The limits on retentions claim keys set, recorded by the provisioner from the bucket's
    /// class; `None`: only S3's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<RetentionCeiling>,
}

/// What retention a claim's keys may set in one bucket: the limits of its StorageClass, recorded
/// by the provisioner (see `retention_ceiling`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionCeiling {
    /// Whether COMPLIANCE retention is allowed (GOVERNANCE always is).
    #[serde(default)]
    pub compliance: bool,
    /// The longest retention, in days from when it is set; `None`: no limit but S3's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_days: Option<u32>,
}

impl RetentionCeiling {
    /// Why `mode` is refused, if it is.
    fn mode_refusal(&self, mode: LockMode) -> Option<String> {
        (mode == LockMode::Compliance && !self.compliance).then(|| {
            "COMPLIANCE retention is not allowed in this bucket by its StorageClass \
             (allowComplianceRetention); use GOVERNANCE"
                .to_owned()
        })
    }

    /// Why `retention`, set at `now_ms`, is refused, if it is.
    pub fn refusal(&self, retention: &Retention, now_ms: u64) -> Option<String> {
        self.mode_refusal(retention.mode).or_else(|| {
            let most = self.max_days?;
            let limit = now_ms.saturating_add(u64::from(most) * DAY_MS);
            (retention.until_ms > limit).then(|| {
                format!(
                    "a retention ending more than {most} days from now is longer than this \
                     bucket's StorageClass allows (maxObjectLockRetentionDays)"
                )
            })
        })
    }

    /// Why `default`, a bucket's default retention, is refused, if it is.
    pub fn default_refusal(&self, default: &DefaultRetention) -> Option<String> {
        self.mode_refusal(default.mode).or_else(|| {
            let most = self.max_days?;
            (default.period.as_ms() > u64::from(most) * DAY_MS).then(|| {
                format!(
                    "a default retention longer than {most} days is longer than this bucket's \
                     StorageClass allows (maxObjectLockRetentionDays)"
                )
            })
        })
    }
}

/// Whether a request asked to bypass governance retention, and whether its key may.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Bypass {
    /// Not asked for: every active retention holds.
    #[default]
    No,
    /// Asked for by a key that may: governance retention gives way.
    Permitted,
    /// Asked for by a key that may not: it changes nothing, and the refusal says so.
    Refused,
}

impl Bypass {
    /// The bypass a request gets: asked for (`requested`) and permitted (`allowed`: the key
    /// is the creating claim's or the operator's).
    pub fn of(requested: bool, allowed: bool) -> Self {
        match (requested, allowed) {
            (false, _) => Self::No,
            (true, true) => Self::Permitted,
            (true, false) => Self::Refused,
        }
    }
}

/// Why object lock refuses a removal, an overwrite or a retention change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockReason {
    /// A legal hold is on.
    LegalHold,
    /// A retention protects the object until its date.
    Retained(Retention),
    /// A governance retention protects it, and the request's bypass is not permitted to its
    /// key.
    BypassNotPermitted(Retention),
    /// A new retention would weaken an active one.
    Weakened(Retention),
}

/// A refusal by object lock, naming the object (or bucket) refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockRefusal {
    /// The object key (for a bucket deletion, the first locked object found).
    pub key: String,
    /// Why.
    pub reason: LockReason,
}

impl LockRefusal {
    /// Until when the refusal lasts; `None` for a legal hold, which lasts until it is cleared.
    pub fn until(&self) -> Option<SystemTime> {
        match &self.reason {
            LockReason::LegalHold => None,
            LockReason::Retained(r)
            | LockReason::BypassNotPermitted(r)
            | LockReason::Weakened(r) => Some(r.until()),
        }
    }
}

impl fmt::Display for LockRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let date = |r: &Retention| {
            let t =
                jiff::Timestamp::from_millisecond(i64::try_from(r.until_ms).unwrap_or(i64::MAX));
            t.map_or_else(|_| format!("{} ms after the epoch", r.until_ms), |t| t.to_string())
        };
        let key = &self.key;
        match &self.reason {
            LockReason::LegalHold => {
                write!(f, "object {key:?} is under a legal hold; clear the hold first")
            }
            LockReason::Retained(r) => write!(
                f,
                "object {key:?} is protected by object lock ({} retention until {})",
                r.mode.as_str(),
                date(r)
            ),
            LockReason::BypassNotPermitted(r) => write!(
                f,
                "object {key:?} is protected by GOVERNANCE retention until {}; only the key \
                 of the claim that created the bucket (its owner) or the operator credential \
                 may bypass it",
                date(r)
            ),
            LockReason::Weakened(r) => write!(
                f,
                "object {key:?} has {} retention until {}, which may not be shortened, removed \
                 or changed{}",
                r.mode.as_str(),
                date(r),
                match r.mode {
                    LockMode::Compliance => "",
                    LockMode::Governance => " without a permitted governance bypass",
                }
            ),
        }
    }
}

/// Why `lock` forbids removing (or overwriting in place) its object at `now_ms`, if it does.
pub fn removal_refusal(lock: &ObjectLock, now_ms: u64, bypass: Bypass) -> Option<LockReason> {
    if lock.legal_hold {
        return Some(LockReason::LegalHold);
    }
    let retention = lock.retention.filter(|r| r.active(now_ms))?;
    match (retention.mode, bypass) {
        (LockMode::Governance, Bypass::Permitted) => None,
        (LockMode::Governance, Bypass::Refused) => Some(LockReason::BypassNotPermitted(retention)),
        _ => Some(LockReason::Retained(retention)),
    }
}

/// Why `old` may not be replaced by `new` (`None`: removed) at `now_ms`, if it may not. A new
/// retention's own date is checked by [`check_new_retention`].
pub fn retention_change_refusal(
    old: Option<&Retention>,
    new: Option<&Retention>,
    now_ms: u64,
    bypass: Bypass,
) -> Option<LockReason> {
    let old = *old.filter(|r| r.active(now_ms))?;
    let kept_or_lengthened = new.is_some_and(|n| n.mode == old.mode && n.until_ms >= old.until_ms);
    if kept_or_lengthened {
        return None;
    }
    match (old.mode, bypass) {
        (LockMode::Governance, Bypass::Permitted) => None,
        (LockMode::Governance, Bypass::Refused) => Some(LockReason::BypassNotPermitted(old)),
        _ => Some(LockReason::Weakened(old)),
    }
}

/// Refuses a retention a client sets whose date is not in the future, as S3 does.
pub fn check_new_retention(new: &Retention, now_ms: u64) -> Result<(), String> {
    if new.until_ms <= now_ms {
        return Err("The retain until date must be in the future!".into());
    }
    Ok(())
}

/// The lock a new object gets in a bucket with `bucket` as its configuration: what its write
/// asked for, with the bucket's default retention where it named none.
pub fn lock_of_new_object(asked: ObjectLock, bucket: &BucketLock, now_ms: u64) -> ObjectLock {
    let retention =
        asked.retention.or_else(|| bucket.default_retention.map(|d| d.retention_from(now_ms)));
    ObjectLock { retention, ..asked }
}

/// Milliseconds since the Unix epoch of `time` (0 before it).
pub fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const NOW: u64 = 1_800_000_000_000;

    fn ret(mode: LockMode, until_ms: u64) -> Retention {
        Retention { mode, until_ms }
    }

    fn locked(retention: Option<Retention>, legal_hold: bool) -> ObjectLock {
        ObjectLock { retention, legal_hold, legal_hold_set: legal_hold }
    }

    #[test]
    fn compliance_holds_against_every_bypass_until_its_date_and_not_after() {
        let lock = locked(Some(ret(LockMode::Compliance, NOW + DAY_MS)), false);
        for bypass in [Bypass::No, Bypass::Permitted, Bypass::Refused] {
            assert!(matches!(removal_refusal(&lock, NOW, bypass), Some(LockReason::Retained(_))));
            assert_eq!(removal_refusal(&lock, NOW + DAY_MS, bypass), None, "{bypass:?}");
        }
    }

    #[test]
    fn governance_gives_way_only_to_a_permitted_bypass() {
        let r = ret(LockMode::Governance, NOW + DAY_MS);
        let lock = locked(Some(r), false);
        assert_eq!(removal_refusal(&lock, NOW, Bypass::No), Some(LockReason::Retained(r)));
        assert_eq!(
            removal_refusal(&lock, NOW, Bypass::Refused),
            Some(LockReason::BypassNotPermitted(r))
        );
        assert_eq!(removal_refusal(&lock, NOW, Bypass::Permitted), None);
        assert_eq!(removal_refusal(&lock, NOW + DAY_MS + 1, Bypass::No), None);
    }

    #[test]
    fn a_legal_hold_blocks_whatever_the_retention_until_cleared() {
        let expired = Some(ret(LockMode::Governance, NOW - 1));
        for retention in [None, expired] {
            let lock = locked(retention, true);
            assert_eq!(removal_refusal(&lock, NOW, Bypass::Permitted), Some(LockReason::LegalHold));
            assert_eq!(removal_refusal(&locked(retention, false), NOW, Bypass::No), None);
        }
    }

    #[test]
    fn retention_changes_follow_the_mode() {
        let c = ret(LockMode::Compliance, NOW + DAY_MS);
        let g = ret(LockMode::Governance, NOW + DAY_MS);
        let longer = |r: Retention| Retention { until_ms: r.until_ms + DAY_MS, ..r };
        let shorter = |r: Retention| Retention { until_ms: r.until_ms - 1, ..r };
        // Compliance: kept or lengthened only, whatever the bypass.
        for bypass in [Bypass::No, Bypass::Permitted] {
            assert_eq!(retention_change_refusal(Some(&c), Some(&c), NOW, bypass), None);
            assert_eq!(retention_change_refusal(Some(&c), Some(&longer(c)), NOW, bypass), None);
            for new in [Some(shorter(c)), None, Some(g), Some(longer(g))] {
                assert_eq!(
                    retention_change_refusal(Some(&c), new.as_ref(), NOW, bypass),
                    Some(LockReason::Weakened(c)),
                    "{new:?}"
                );
            }
        }
        // Governance: lengthened freely; shortened, removed or changed with a permitted bypass.
        assert_eq!(retention_change_refusal(Some(&g), Some(&longer(g)), NOW, Bypass::No), None);
        for new in [Some(shorter(g)), None, Some(c)] {
            let refused = retention_change_refusal(Some(&g), new.as_ref(), NOW, Bypass::No);
            assert_eq!(refused, Some(LockReason::Weakened(g)));
            let refused = retention_change_refusal(Some(&g), new.as_ref(), NOW, Bypass::Refused);
            assert_eq!(refused, Some(LockReason::BypassNotPermitted(g)));
            assert_eq!(
                retention_change_refusal(Some(&g), new.as_ref(), NOW, Bypass::Permitted),
                None
            );
        }
        // An expired retention, or none, is replaced freely.
        assert_eq!(retention_change_refusal(Some(&c), None, c.until_ms, Bypass::No), None);
        assert_eq!(retention_change_refusal(None, Some(&c), NOW, Bypass::No), None);
    }

    #[test]
    fn new_objects_get_the_bucket_default_unless_they_name_their_own() {
        let bucket = BucketLock {
            default_retention: Some(DefaultRetention {
                mode: LockMode::Governance,
                period: RetentionPeriod::Days(1),
            }),
            ceiling: None,
        };
        let got = lock_of_new_object(ObjectLock::default(), &bucket, NOW);
        assert_eq!(got.retention, Some(ret(LockMode::Governance, NOW + DAY_MS)));
        let own = locked(Some(ret(LockMode::Compliance, NOW + 5)), true);
        assert_eq!(lock_of_new_object(own, &bucket, NOW), own);
        let none = lock_of_new_object(ObjectLock::default(), &BucketLock::default(), NOW);
        assert!(none.is_none());
        let years =
            DefaultRetention { mode: LockMode::Compliance, period: RetentionPeriod::Years(2) };
        assert_eq!(years.retention_from(NOW).until_ms, NOW + 730 * DAY_MS);
    }

    #[test]
    fn default_periods_and_new_dates_are_checked() {
        let of = |period| DefaultRetention { mode: LockMode::Governance, period };
        assert!(of(RetentionPeriod::Days(0)).check().is_err());
        assert!(of(RetentionPeriod::Years(0)).check().is_err());
        assert!(of(RetentionPeriod::Days(MAX_DEFAULT_RETENTION_DAYS + 1)).check().is_err());
        assert!(of(RetentionPeriod::Years(MAX_DEFAULT_RETENTION_YEARS + 1)).check().is_err());
        assert!(of(RetentionPeriod::Days(1)).check().is_ok());
        assert!(check_new_retention(&ret(LockMode::Compliance, NOW), NOW).is_err());
        assert!(check_new_retention(&ret(LockMode::Compliance, NOW + 1), NOW).is_ok());
    }

    #[test]
    fn refusals_name_the_object_and_the_date() {
        let refusal = LockRefusal {
            key: "k".into(),
            reason: LockReason::Retained(ret(LockMode::Compliance, 86_400_000)),
        };
        let text = refusal.to_string();
        assert!(text.contains("\"k\"") && text.contains("COMPLIANCE"), "{text}");
        assert!(text.contains("1970-01-02T00:00:00Z"), "{text}");
        assert_eq!(refusal.until(), Some(UNIX_EPOCH + Duration::from_secs(86_400)));
        let hold = LockRefusal { key: "k".into(), reason: LockReason::LegalHold };
        assert_eq!(hold.until(), None);
    }

    #[test]
    fn the_lock_is_stored_compactly_and_read_back() {
        let lock = locked(Some(ret(LockMode::Governance, 7)), true);
        let json = serde_json::to_string(&lock).unwrap();
        let stored = r#"{"retention":{"mode":"GOVERNANCE","until_ms":7},"legal_hold":true,"legal_hold_set":true}"#;
        assert_eq!(json, stored);
        assert_eq!(serde_json::from_str::<ObjectLock>(&json).unwrap(), lock);
        // A hold cleared is remembered as set, so that it reads back as OFF.
        let cleared = ObjectLock { legal_hold_set: true, ..ObjectLock::default() };
        assert!(!cleared.is_none());
        assert_eq!(serde_json::to_string(&cleared).unwrap(), r#"{"legal_hold_set":true}"#);
        assert_eq!(serde_json::to_string(&ObjectLock::default()).unwrap(), "{}");
        assert_eq!(serde_json::from_str::<ObjectLock>("{}").unwrap(), ObjectLock::default());
    }

    fn mode() -> impl Strategy<Value = LockMode> {
        prop_oneof![Just(LockMode::Governance), Just(LockMode::Compliance)]
    }

    fn bypass() -> impl Strategy<Value = Bypass> {
        prop_oneof![Just(Bypass::No), Just(Bypass::Permitted), Just(Bypass::Refused)]
    }

    fn retention() -> impl Strategy<Value = Retention> {
        (mode(), NOW - 10 * DAY_MS..NOW + 10 * DAY_MS)
            .prop_map(|(mode, until_ms)| Retention { mode, until_ms })
    }

    proptest! {
        /// Nothing but an expired retention and no hold, or a governance retention with a
        /// permitted bypass, lets an object go.
        #[test]
        fn removal_is_allowed_exactly_when_nothing_active_protects(
            r in proptest::option::of(retention()), hold in any::<bool>(), bypass in bypass(),
            now in NOW - 20 * DAY_MS..NOW + 20 * DAY_MS,
        ) {
            let allowed = removal_refusal(&locked(r, hold), now, bypass).is_none();
            let unprotected = r.is_none_or(|r| !r.active(now)
                || (r.mode == LockMode::Governance && bypass == Bypass::Permitted));
            prop_assert_eq!(allowed, !hold && unprotected);
        }

        /// An active compliance retention never ends earlier, nor changes mode, whatever the
        /// bypass; an accepted change never protects for less time than before without a
        /// permitted bypass.
        #[test]
        fn no_change_weakens_an_active_retention_without_a_permitted_bypass(
            old in retention(), new in proptest::option::of(retention()), bypass in bypass(),
        ) {
            let accepted = retention_change_refusal(Some(&old), new.as_ref(), NOW, bypass).is_none();
            if accepted && old.active(NOW) {
                let weaker = new.is_none_or(|n| n.mode != old.mode || n.until_ms < old.until_ms);
                if weaker {
                    prop_assert_eq!(old.mode, LockMode::Governance);
                    prop_assert_eq!(bypass, Bypass::Permitted);
                }
            }
        }

        /// What was stored reads back the same.
        #[test]
        fn any_lock_round_trips(r in proptest::option::of(retention()), hold in any::<bool>()) {
            let lock = locked(r, hold);
            let json = serde_json::to_vec(&lock).unwrap();
            prop_assert_eq!(serde_json::from_slice::<ObjectLock>(&json).unwrap(), lock);
        }
    }
}
