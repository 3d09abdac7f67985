//! A bucket's lifecycle rules: what they may say, as S3 decides it ([`LifecycleConfig::check`]),
//! and which objects and uploads they make due ([`LifecycleRule::expires`],
//! [`LifecycleRule::aborts`]). They are kept in one file, `.provisioner/meta/<bucket>/
//! lifecycle.json` (`lifecycle_file`), and acted on by the store's lifecycle pass
//! (`lifecycle_pass`).
//!
//! `NoncurrentVersionExpiration` and an `Expiration` of `ExpiredObjectDeleteMarker` act on
//! buckets with versions (`lifecycle_versions`), and are kept and answered as sent on one
//! without, so that a configuration written for S3 (by Terraform, say) still applies.
//! Transitions are refused with `NotImplemented`: there is one storage class.

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::Tags;

/// Most rules one bucket may have.
pub const MAX_LIFECYCLE_RULES: usize = 1000;
/// Longest rule `ID`, in characters.
pub const MAX_LIFECYCLE_ID_CHARS: usize = 255;
/// Most noncurrent versions a rule may keep (`NewerNoncurrentVersions`).
pub const MAX_NEWER_NONCURRENT_VERSIONS: i32 = 100;
const DAY_SECS: u64 = 86_400;

/// A bucket's lifecycle configuration, as PutBucketLifecycleConfiguration sets it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifecycleConfig {
    /// The rules; an object is expired when any enabled rule makes it due.
    pub rules: Vec<LifecycleRule>,
}

/// One lifecycle rule.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifecycleRule {
    /// Its `ID`, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `Status`: only `Enabled` and `Disabled` pass [`LifecycleConfig::check`].
    pub status: String,
    /// Which objects it applies to.
    pub filter: LifecycleFilter,
    /// When the objects it applies to expire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration: Option<Expiration>,
    /// `AbortIncompleteMultipartUpload`'s `DaysAfterInitiation`; `Some(None)` when the element
    /// came without it (refused by the check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_incomplete_upload_days: Option<Option<i32>>,
    /// `NoncurrentVersionExpiration`: noncurrent versions go for good this long after they
    /// became noncurrent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noncurrent_expiration: Option<NoncurrentExpiration>,
    /// Whether the rule asked for transitions (refused by the check).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub transitions: bool,
}

/// Which objects a rule applies to: every condition given must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifecycleFilter {
    /// The key prefix (`None`: any key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Tags the object must carry, each with this value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Tags,
    /// Only objects larger than this many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_greater_than: Option<i64>,
    /// Only objects smaller than this many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_less_than: Option<i64>,
    /// How the conditions were written, so that they are answered the same way.
    #[serde(default)]
    pub form: FilterForm,
}

/// How a rule's conditions were written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum FilterForm {
    /// In a `Filter` element: one condition directly, several in `And`.
    #[default]
    Filter,
    /// The rule's own `Prefix` element, the older form without `Filter`.
    RulePrefix,
    /// Both a `Filter` and the rule's `Prefix`, or several conditions directly in `Filter`
    /// (refused by the check).
    Ambiguous,
    /// Neither a `Filter` nor a `Prefix` (refused by the check).
    Missing,
}

/// A rule's `Expiration`: exactly one of its fields passes the check.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expiration {
    /// Days after an object's creation (its last modification), rounded up to the next
    /// midnight UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days: Option<i32>,
    /// A date (seconds since the epoch, at midnight UTC) from which every object it applies to
    /// is expired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date_unix: Option<i64>,
    /// `ExpiredObjectDeleteMarker`: removes a delete marker left with no version behind it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expired_object_delete_marker: Option<bool>,
}

/// A rule's `NoncurrentVersionExpiration`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoncurrentExpiration {
    /// `NoncurrentDays`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days: Option<i32>,
    /// `NewerNoncurrentVersions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newer_versions: Option<i32>,
}

/// Which of S3's errors a refused configuration is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LifecycleRefusal {
    /// `MalformedXML`: no rules or too many, a bad `Status`, a filter or expiration that is
    /// not exactly one thing.
    MalformedXml,
    /// `InvalidArgument`: an `ID` too long or repeated, days not positive, a date not at
    /// midnight, bad tag or size conditions.
    InvalidArgument,
    /// `InvalidRequest`: a rule without an action, an action that cannot go with its filter.
    InvalidRequest,
    /// `NotImplemented`: transitions (there is one storage class).
    NotImplemented,
}

/// Why a lifecycle configuration is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidLifecycle {
    /// The S3 error it is.
    pub code: LifecycleRefusal,
    /// What is wrong, naming the rule.
    pub message: String,
}

fn refuse<T>(code: LifecycleRefusal, message: String) -> Result<T, InvalidLifecycle> {
    Err(InvalidLifecycle { code, message })
}

const SCHEMA: &str =
    "The XML you provided was not well-formed or did not validate against our published schema";

impl LifecycleConfig {
    /// When the object of this key, size, tags and creation time expires, and by which rule's
    /// `ID`: of the enabled rules that take it, the earliest, as S3 decides between rules.
    pub fn expiry(
        &self,
        key: &str,
        size: u64,
        tags: &Tags,
        created: SystemTime,
    ) -> Option<(SystemTime, Option<&str>)> {
        self.rules
            .iter()
            .filter_map(|rule| Some((rule.expires(key, size, tags, created)?, rule.id.as_deref())))
            .min_by_key(|(at, _)| *at)
    }

    /// Checks the configuration as S3 checks PutBucketLifecycleConfiguration: 1 to
    /// [`MAX_LIFECYCLE_RULES`] rules with unique `ID`s of at most [`MAX_LIFECYCLE_ID_CHARS`]
    /// characters, each `Enabled` or `Disabled`, with a `Filter` (or the older `Prefix`) of at
    /// most one condition outside `And`, and at least one action: an `Expiration` of exactly one
    /// of `Days` (at least 1), `Date` (at midnight UTC) or `ExpiredObjectDeleteMarker`;
    /// `AbortIncompleteMultipartUpload` with `DaysAfterInitiation` at least 1 (not with tag or
    /// size conditions); `NoncurrentVersionExpiration` with `NoncurrentDays` at least 1.
    pub fn check(&self) -> Result<(), InvalidLifecycle> {
        use LifecycleRefusal::*;
        if self.rules.is_empty() {
            return refuse(
                MalformedXml,
                format!("{SCHEMA}: a LifecycleConfiguration needs a Rule"),
            );
        }
        if self.rules.len() > MAX_LIFECYCLE_RULES {
            return refuse(
                MalformedXml,
                format!(
                    "{SCHEMA}: a LifecycleConfiguration has at most {MAX_LIFECYCLE_RULES} rules \
                     (this one has {})",
                    self.rules.len()
                ),
            );
        }
        let mut ids = HashSet::new();
        for (n, rule) in self.rules.iter().enumerate() {
            if let Some(id) = &rule.id
                && !ids.insert(id.as_str())
            {
                return refuse(
                    InvalidArgument,
                    format!("Rule ID must be unique. Found same ID for more than one rule: {id:?}"),
                );
            }
            rule.check().map_err(|e| InvalidLifecycle {
                code: e.code,
                message: format!("{} ({})", e.message, rule.name(n)),
            })?;
        }
        Ok(())
    }
}

impl LifecycleRule {
    /// How a refusal names the rule: its `ID`, else its place.
    fn name(&self, n: usize) -> String {
        match &self.id {
            Some(id) => format!("rule {id:?}"),
            None => format!("rule {} of the configuration", n + 1),
        }
    }

    /// Whether the rule is `Enabled`.
    pub fn enabled(&self) -> bool {
        self.status == "Enabled"
    }

    fn check(&self) -> Result<(), InvalidLifecycle> {
        use LifecycleRefusal::*;
        if self.id.as_ref().is_some_and(|id| id.chars().count() > MAX_LIFECYCLE_ID_CHARS) {
            return refuse(
                InvalidArgument,
                format!("ID length should not exceed allowed limit of {MAX_LIFECYCLE_ID_CHARS}"),
            );
        }
        if !matches!(self.status.as_str(), "Enabled" | "Disabled") {
            return refuse(
                MalformedXml,
                format!("{SCHEMA}: Status must be Enabled or Disabled, not {:?}", self.status),
            );
        }
        match self.filter.form {
            FilterForm::Ambiguous => {
                return refuse(
                    MalformedXml,
                    format!(
                        "{SCHEMA}: a rule has either a Filter or a Prefix, and a Filter holds one \
                         Prefix, Tag, ObjectSizeGreaterThan or ObjectSizeLessThan, or an And of \
                         several"
                    ),
                );
            }
            FilterForm::Missing => {
                return refuse(MalformedXml, format!("{SCHEMA}: a rule needs a Filter"));
            }
            FilterForm::Filter | FilterForm::RulePrefix => {}
        }
        self.filter.check()?;
        if self.transitions {
            return refuse(
                NotImplemented,
                "Transition and NoncurrentVersionTransition are not implemented: this endpoint \
                 has a single storage class"
                    .into(),
            );
        }
        let has_tags_or_size = !self.filter.tags.is_empty()
            || self.filter.size_greater_than.is_some()
            || self.filter.size_less_than.is_some();
        if self.expiration.is_none()
            && self.abort_incomplete_upload_days.is_none()
            && self.noncurrent_expiration.is_none()
        {
            return refuse(
                InvalidRequest,
                "At least one action needs to be specified in a rule".into(),
            );
        }
        if let Some(expiration) = &self.expiration {
            let given = [
                expiration.days.is_some(),
                expiration.date_unix.is_some(),
                expiration.expired_object_delete_marker.is_some(),
            ];
            if given.iter().filter(|g| **g).count() != 1 {
                return refuse(
                    MalformedXml,
                    format!(
                        "{SCHEMA}: an Expiration holds exactly one of Days, Date and \
                         ExpiredObjectDeleteMarker"
                    ),
                );
            }
            if expiration.days.is_some_and(|d| d < 1) {
                return refuse(
                    InvalidArgument,
                    "'Days' for Expiration action must be a positive integer".into(),
                );
            }
            if expiration.date_unix.is_some_and(|d| d.rem_euclid(DAY_SECS as i64) != 0) {
                return refuse(InvalidArgument, "'Date' must be at midnight GMT".into());
            }
            if expiration.expired_object_delete_marker.is_some() && has_tags_or_size {
                return refuse(
                    InvalidRequest,
                    "ExpiredObjectDeleteMarker cannot be specified with Tags or object sizes"
                        .into(),
                );
            }
        }
        if let Some(days) = self.abort_incomplete_upload_days {
            let Some(days) = days else {
                return refuse(
                    MalformedXml,
                    format!("{SCHEMA}: AbortIncompleteMultipartUpload needs DaysAfterInitiation"),
                );
            };
            if days < 1 {
                return refuse(
                    InvalidArgument,
                    "'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be a \
                     positive integer"
                        .into(),
                );
            }
            if has_tags_or_size {
                return refuse(
                    InvalidRequest,
                    "AbortIncompleteMultipartUpload cannot be specified with Tags or object \
                     sizes: an upload in progress has neither"
                        .into(),
                );
            }
        }
        if let Some(noncurrent) = &self.noncurrent_expiration {
            if noncurrent.days.is_none_or(|d| d < 1) {
                return refuse(
                    InvalidArgument,
                    "'NoncurrentDays' for NoncurrentVersionExpiration action must be a positive \
                     integer"
                        .into(),
                );
            }
            if noncurrent
                .newer_versions
                .is_some_and(|n| !(1..=MAX_NEWER_NONCURRENT_VERSIONS).contains(&n))
            {
                return refuse(
                    InvalidArgument,
                    format!(
                        "'NewerNoncurrentVersions' must be between 1 and \
                         {MAX_NEWER_NONCURRENT_VERSIONS}"
                    ),
                );
            }
        }
        Ok(())
    }

    /// When the rule makes an object of this key, size, tags and creation time due, if it
    /// applies to it at all (enabled, matching, with an `Expiration` of `Days` or `Date`).
    pub fn expires(
        &self,
        key: &str,
        size: u64,
        tags: &Tags,
        created: SystemTime,
    ) -> Option<SystemTime> {
        let expiration = self.expiration.as_ref()?;
        if !self.enabled() || !self.filter.matches(key, size, tags) {
            return None;
        }
        if let Some(days) = expiration.days {
            return Some(days_after(created, days));
        }
        let date = u64::try_from(expiration.date_unix?).unwrap_or(0);
        Some(UNIX_EPOCH + Duration::from_secs(date))
    }

    /// When the rule makes an upload of this key started at `initiated` due for abort, if it
    /// applies to it.
    pub fn aborts(&self, key: &str, initiated: SystemTime) -> Option<SystemTime> {
        let days = self.abort_incomplete_upload_days.flatten()?;
        let matches = self.filter.prefix.as_deref().is_none_or(|p| key.starts_with(p));
        (self.enabled() && matches).then(|| days_after(initiated, days))
    }
}

impl LifecycleFilter {
    fn check(&self) -> Result<(), InvalidLifecycle> {
        use LifecycleRefusal::*;
        let mut keys = HashSet::new();
        for (key, value) in &self.tags {
            if key.is_empty() || key.chars().count() > 128 || value.chars().count() > 256 {
                return refuse(
                    InvalidArgument,
                    format!(
                        "a filter's Tag has a Key of 1 to 128 characters and a Value of at most \
                         256 (not {key:?})"
                    ),
                );
            }
            if !keys.insert(key) {
                return refuse(
                    InvalidRequest,
                    format!("Duplicate Tag Keys are not allowed: {key:?}"),
                );
            }
        }
        if self.size_greater_than.is_some_and(|s| s < 0)
            || self.size_less_than.is_some_and(|s| s < 1)
        {
            return refuse(
                InvalidArgument,
                "ObjectSizeGreaterThan must not be negative and ObjectSizeLessThan must be \
                 positive"
                    .into(),
            );
        }
        if let (Some(greater), Some(less)) = (self.size_greater_than, self.size_less_than)
            && greater >= less
        {
            return refuse(
                InvalidArgument,
                format!(
                    "ObjectSizeGreaterThan ({greater}) must be less than ObjectSizeLessThan \
                     ({less})"
                ),
            );
        }
        Ok(())
    }

    /// Whether an object of this key, size and tags meets every condition.
    pub fn matches(&self, key: &str, size: u64, tags: &Tags) -> bool {
        let size = i64::try_from(size).unwrap_or(i64::MAX);
        self.prefix.as_deref().is_none_or(|p| key.starts_with(p))
            && self.tags.iter().all(|wanted| tags.contains(wanted))
            && self.size_greater_than.is_none_or(|s| size > s)
            && self.size_less_than.is_none_or(|s| size < s)
    }
}

/// `days` after `from`, rounded up to the next midnight UTC, as S3 counts lifecycle days.
pub(super) fn days_after(from: SystemTime, days: i32) -> SystemTime {
    let from = from.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let due = from.saturating_add(u64::from(days.unsigned_abs()) * DAY_SECS);
    UNIX_EPOCH + Duration::from_secs(due.div_ceil(DAY_SECS).saturating_mul(DAY_SECS))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(days: i32) -> LifecycleRule {
        LifecycleRule {
            status: "Enabled".into(),
            expiration: Some(Expiration { days: Some(days), ..Expiration::default() }),
            ..LifecycleRule::default()
        }
    }

    fn config(rules: Vec<LifecycleRule>) -> LifecycleConfig {
        LifecycleConfig { rules }
    }

    fn code(config: &LifecycleConfig) -> Option<LifecycleRefusal> {
        config.check().err().map(|e| e.code)
    }

    #[test]
    fn days_are_rounded_up_to_midnight_utc() {
        let at = |secs| UNIX_EPOCH + Duration::from_secs(secs);
        // Created 10:00 on day 0: one day later is 10:00 on day 1, due at midnight of day 2.
        assert_eq!(days_after(at(10 * 3600), 1), at(2 * DAY_SECS));
        assert_eq!(days_after(at(DAY_SECS), 1), at(2 * DAY_SECS), "midnight stays");
        let r = rule(30);
        assert_eq!(r.expires("k", 1, &Tags::new(), at(0)), Some(at(30 * DAY_SECS)));
        let disabled = LifecycleRule { status: "Disabled".into(), ..r };
        assert_eq!(disabled.expires("k", 1, &Tags::new(), at(0)), None);
    }

    #[test]
    fn what_s3_refuses_is_refused_by_name() {
        use LifecycleRefusal::*;
        assert_eq!(code(&config(vec![])), Some(MalformedXml));
        assert_eq!(code(&config(vec![rule(1); MAX_LIFECYCLE_RULES])), None);
        assert_eq!(code(&config(vec![rule(1); MAX_LIFECYCLE_RULES + 1])), Some(MalformedXml));
        assert_eq!(code(&config(vec![rule(0)])), Some(InvalidArgument));
        let id = |id: &str| LifecycleRule { id: Some(id.into()), ..rule(1) };
        assert_eq!(code(&config(vec![id("a"), id("b")])), None);
        assert_eq!(code(&config(vec![id("a"), id("a")])), Some(InvalidArgument));
        assert_eq!(code(&config(vec![id(&"i".repeat(255))])), None);
        assert_eq!(code(&config(vec![id(&"i".repeat(256))])), Some(InvalidArgument));
        let status = LifecycleRule { status: "enabled".into(), ..rule(1) };
        assert_eq!(code(&config(vec![status])), Some(MalformedXml));
        let no_action = LifecycleRule { expiration: None, ..rule(1) };
        let refused = config(vec![no_action]).check().unwrap_err();
        assert_eq!(refused.code, InvalidRequest);
        assert!(refused.message.contains("rule 1 of the configuration"), "{refused}");
        let date = |secs| LifecycleRule {
            expiration: Some(Expiration { date_unix: Some(secs), ..Expiration::default() }),
            ..rule(1)
        };
        assert_eq!(code(&config(vec![date(20 * DAY_SECS as i64)])), None);
        assert_eq!(code(&config(vec![date(20 * DAY_SECS as i64 + 1)])), Some(InvalidArgument));
        let both = LifecycleRule {
            expiration: Some(Expiration {
                days: Some(1),
                date_unix: Some(0),
                ..Expiration::default()
            }),
            ..rule(1)
        };
        assert_eq!(code(&config(vec![both])), Some(MalformedXml));
        let tagged = LifecycleFilter { tags: vec![("a".into(), "1".into())], ..Default::default() };
        let abort = |days, filter| LifecycleRule {
            expiration: None,
            abort_incomplete_upload_days: Some(days),
            filter,
            ..rule(1)
        };
        assert_eq!(code(&config(vec![abort(Some(7), LifecycleFilter::default())])), None);
        assert_eq!(
            code(&config(vec![abort(Some(0), LifecycleFilter::default())])),
            Some(InvalidArgument)
        );
        assert_eq!(
            code(&config(vec![abort(None, LifecycleFilter::default())])),
            Some(MalformedXml)
        );
        assert_eq!(code(&config(vec![abort(Some(7), tagged.clone())])), Some(InvalidRequest));
        let twice = LifecycleFilter {
            tags: vec![("a".into(), "1".into()), ("a".into(), "2".into())],
            ..Default::default()
        };
        assert_eq!(
            code(&config(vec![LifecycleRule { filter: twice, ..rule(1) }])),
            Some(InvalidRequest)
        );
        let sizes = LifecycleFilter {
            size_greater_than: Some(10),
            size_less_than: Some(10),
            ..Default::default()
        };
        assert_eq!(
            code(&config(vec![LifecycleRule { filter: sizes, ..rule(1) }])),
            Some(InvalidArgument)
        );
        let transition = LifecycleRule { transitions: true, ..rule(1) };
        assert_eq!(code(&config(vec![transition])), Some(NotImplemented));
        let noncurrent = |days| LifecycleRule {
            expiration: None,
            noncurrent_expiration: Some(NoncurrentExpiration { days, newer_versions: None }),
            ..rule(1)
        };
        assert_eq!(code(&config(vec![noncurrent(Some(30))])), None);
        assert_eq!(code(&config(vec![noncurrent(None)])), Some(InvalidArgument));
        for form in [FilterForm::Ambiguous, FilterForm::Missing] {
            let filter = LifecycleFilter { form, ..Default::default() };
            assert_eq!(
                code(&config(vec![LifecycleRule { filter, ..rule(1) }])),
                Some(MalformedXml)
            );
        }
    }

    #[test]
    fn filters_match_prefix_tags_and_sizes() {
        let filter = LifecycleFilter {
            prefix: Some("logs/".into()),
            tags: vec![("class".into(), "tmp".into())],
            size_greater_than: Some(1),
            size_less_than: Some(100),
            form: FilterForm::Filter,
        };
        let tags = vec![("other".into(), "x".into()), ("class".into(), "tmp".into())];
        assert!(filter.matches("logs/a", 10, &tags));
        assert!(!filter.matches("log/a", 10, &tags));
        assert!(!filter.matches("logs/a", 10, &vec![("class".into(), "keep".into())]));
        assert!(!filter.matches("logs/a", 1, &tags));
        assert!(!filter.matches("logs/a", 100, &tags));
        assert!(LifecycleFilter::default().matches("anything", 0, &Tags::new()));
    }
}
