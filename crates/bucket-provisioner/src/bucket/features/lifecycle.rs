//! `additionalConfig` key `bucketLifecycle`: the JSON of S3's
//! `PutBucketLifecycleConfiguration`, as Rook's claims carry it, read into rules no backend's
//! types are part of:
//!
//! ```json
//! {"Rules": [{"ID": "expire-logs", "Status": "Enabled", "Filter": {"Prefix": "logs/"},
//!   "Expiration": {"Days": 30}, "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7}}]}
//! ```
//!
//! A rule has `ID`, `Status` (`Enabled` or `Disabled`), a `Filter` (`Prefix`,
//! `ObjectSizeGreaterThan`, `ObjectSizeLessThan`) or the older top-level `Prefix`, and at least
//! one action: `Expiration` (`Days`, `Date` or `ExpiredObjectDeleteMarker`, exactly one),
//! `NoncurrentVersionExpiration` (`NoncurrentDays`, `NewerNoncurrentVersions`),
//! `AbortIncompleteMultipartUpload` (`DaysAfterInitiation`) and `Transitions` (`Days` or `Date`,
//! and `StorageClass`). Any other field (tag filters included) is refused by name.

use jiff::Timestamp;
use provisioner_runtime::BackendError;
use serde::Deserialize;

/// The `additionalConfig` key.
pub use super::class::BUCKET_LIFECYCLE;

/// Most rules one configuration holds on S3.
const MAX_RULES: usize = 1000;
/// The storage classes S3 moves objects to.
pub const STORAGE_CLASSES: [&str; 6] =
    ["STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING", "GLACIER_IR", "GLACIER", "DEEP_ARCHIVE"];

/// A bucket's lifecycle rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lifecycle {
    /// The rules, in the claim's order.
    pub rules: Vec<Rule>,
}

/// One rule.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rule {
    /// The rule's name.
    pub id: Option<String>,
    /// `Status: Enabled`.
    pub enabled: bool,
    /// Which objects it applies to.
    pub filter: Filter,
    /// When current objects expire.
    pub expiration: Option<Expiration>,
    /// When versions that are no longer current expire.
    pub noncurrent_expiration: Option<NoncurrentExpiration>,
    /// Days after which unfinished multipart uploads are aborted.
    pub abort_multipart_days: Option<u32>,
    /// Moves to other storage classes.
    pub transitions: Vec<Transition>,
}

/// Which objects a rule applies to; all criteria hold together, none is the whole bucket.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Keys starting with this.
    pub prefix: Option<String>,
    /// Objects larger than this many bytes.
    pub size_greater_than: Option<u64>,
    /// Objects smaller than this many bytes.
    pub size_less_than: Option<u64>,
}

/// A point a rule acts at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// Days after an object's creation.
    Days(u32),
    /// A date: midnight UTC, in seconds since the Unix epoch.
    Date(i64),
}

/// When current objects expire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiration {
    /// After some days, or on a date.
    At(When),
    /// Delete markers left with no versions behind them are removed.
    ExpiredObjectDeleteMarker,
}

/// When noncurrent versions expire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoncurrentExpiration {
    /// Days after a version stopped being current.
    pub days: u32,
    /// How many newer noncurrent versions are kept regardless.
    pub newer_versions: Option<u32>,
}

/// A move to another storage class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    /// When.
    pub when: When,
    /// One of [`STORAGE_CLASSES`].
    pub storage_class: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct Document {
    rules: Vec<RuleJson>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct RuleJson {
    #[serde(rename = "ID")]
    id: Option<String>,
    status: String,
    filter: Option<FilterJson>,
    prefix: Option<String>,
    expiration: Option<ExpirationJson>,
    noncurrent_version_expiration: Option<NoncurrentJson>,
    abort_incomplete_multipart_upload: Option<AbortJson>,
    #[serde(default)]
    transitions: Vec<TransitionJson>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct FilterJson {
    prefix: Option<String>,
    object_size_greater_than: Option<u64>,
    object_size_less_than: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct ExpirationJson {
    days: Option<u32>,
    date: Option<String>,
    expired_object_delete_marker: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct NoncurrentJson {
    noncurrent_days: u32,
    newer_noncurrent_versions: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct AbortJson {
    days_after_initiation: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct TransitionJson {
    days: Option<u32>,
    date: Option<String>,
    storage_class: String,
}

fn invalid(why: impl std::fmt::Display) -> BackendError {
    BackendError::invalid_parameter(format!("additionalConfig {BUCKET_LIFECYCLE}: {why}"))
}

fn days(what: &str, days: u32) -> Result<u32, String> {
    match days {
        0 => Err(format!("{what} must be at least 1 day")),
        days => Ok(days),
    }
}

fn when(what: &str, days_field: Option<u32>, date_field: Option<&str>) -> Result<When, String> {
    match (days_field, date_field) {
        (Some(count), None) => Ok(When::Days(days(&format!("{what} Days"), count)?)),
        (None, Some(text)) => {
            let at: Timestamp = text.parse().map_err(|_| {
                format!("{what} Date {text:?} is not a date such as 2030-01-01T00:00:00Z")
            })?;
            if at.as_second().rem_euclid(86_400) != 0 || at.subsec_nanosecond() != 0 {
                return Err(format!("{what} Date {text:?} must be midnight UTC"));
            }
            Ok(When::Date(at.as_second()))
        }
        _ => Err(format!("{what} takes Days or Date, exactly one")),
    }
}

impl Lifecycle {
    /// Reads the claim's JSON; anything S3 would refuse, or no backend could read, is an
    /// `InvalidParameters` error naming the rule and field.
    pub fn parse(text: &str) -> Result<Self, BackendError> {
        let document: Document = serde_json::from_str(text).map_err(|e| {
            invalid(format_args!(
                "not the JSON of put-bucket-lifecycle-configuration ({{\"Rules\": [{{\"Status\": \
                 \"Enabled\", \"Filter\": {{\"Prefix\": \"logs/\"}}, \"Expiration\": {{\"Days\": \
                 30}}}}]}}): {e}"
            ))
        })?;
        if document.rules.is_empty() || document.rules.len() > MAX_RULES {
            return Err(invalid(format_args!(
                "Rules holds {} rules; S3 takes 1 to {MAX_RULES}",
                document.rules.len()
            )));
        }
        let mut rules = Vec::with_capacity(document.rules.len());
        for (index, rule) in document.rules.into_iter().enumerate() {
            rules.push(
                read_rule(rule)
                    .map_err(|why| invalid(format_args!("rule {}: {why}", index + 1)))?,
            );
        }
        Ok(Self { rules })
    }
}

fn read_rule(rule: RuleJson) -> Result<Rule, String> {
    let enabled = match rule.status.as_str() {
        "Enabled" => true,
        "Disabled" => false,
        other => return Err(format!("Status {other:?} must be \"Enabled\" or \"Disabled\"")),
    };
    if rule.id.as_ref().is_some_and(|id| id.len() > 255) {
        return Err("ID is longer than 255 characters".into());
    }
    // The older top-level Prefix means what a filter on it does.
    let filter = match (rule.filter, rule.prefix) {
        (Some(_), Some(_)) => return Err("takes a Filter or a Prefix, not both".into()),
        (None, Some(prefix)) => FilterJson { prefix: Some(prefix), ..FilterJson::default() },
        (filter, None) => filter.unwrap_or_default(),
    };
    if let (Some(above), Some(below)) =
        (filter.object_size_greater_than, filter.object_size_less_than)
        && above >= below
    {
        return Err("ObjectSizeGreaterThan must be below ObjectSizeLessThan".into());
    }
    let expiration = match rule.expiration {
        None => None,
        Some(ExpirationJson {
            days: None,
            date: None,
            expired_object_delete_marker: Some(true),
        }) => Some(Expiration::ExpiredObjectDeleteMarker),
        Some(ExpirationJson { expired_object_delete_marker: Some(_), .. }) => {
            return Err("Expiration ExpiredObjectDeleteMarker must be true, and alone".into());
        }
        Some(ExpirationJson { days: d, date, .. }) => {
            Some(Expiration::At(when("Expiration", d, date.as_deref())?))
        }
    };
    let noncurrent_expiration = rule
        .noncurrent_version_expiration
        .map(|n| {
            Ok::<_, String>(NoncurrentExpiration {
                days: days("NoncurrentVersionExpiration NoncurrentDays", n.noncurrent_days)?,
                newer_versions: n.newer_noncurrent_versions,
            })
        })
        .transpose()?;
    let abort_multipart_days = rule
        .abort_incomplete_multipart_upload
        .map(|a| {
            days("AbortIncompleteMultipartUpload DaysAfterInitiation", a.days_after_initiation)
        })
        .transpose()?;
    let mut transitions = Vec::with_capacity(rule.transitions.len());
    for transition in rule.transitions {
        if !STORAGE_CLASSES.contains(&transition.storage_class.as_str()) {
            return Err(format!(
                "Transitions StorageClass {:?} is not one of {}",
                transition.storage_class,
                STORAGE_CLASSES.join(", ")
            ));
        }
        transitions.push(Transition {
            when: when("Transitions", transition.days, transition.date.as_deref())?,
            storage_class: transition.storage_class,
        });
    }
    let built = Rule {
        id: rule.id,
        enabled,
        filter: Filter {
            prefix: filter.prefix,
            size_greater_than: filter.object_size_greater_than,
            size_less_than: filter.object_size_less_than,
        },
        expiration,
        noncurrent_expiration,
        abort_multipart_days,
        transitions,
    };
    if built.expiration.is_none()
        && built.noncurrent_expiration.is_none()
        && built.abort_multipart_days.is_none()
        && built.transitions.is_empty()
    {
        return Err("needs an Expiration, NoncurrentVersionExpiration, \
                    AbortIncompleteMultipartUpload or Transitions"
            .into());
    }
    Ok(built)
}

impl Rule {
    /// The names of the actions this rule takes beyond expiring current objects by age or date
    /// and aborting unfinished uploads, for a backend that offers only those.
    pub fn beyond_expiration(&self) -> Vec<&'static str> {
        let mut beyond = Vec::new();
        if self.expiration == Some(Expiration::ExpiredObjectDeleteMarker) {
            beyond.push("Expiration ExpiredObjectDeleteMarker");
        }
        if self.noncurrent_expiration.is_some() {
            beyond.push("NoncurrentVersionExpiration");
        }
        if !self.transitions.is_empty() {
            beyond.push("Transitions");
        }
        beyond
    }
}

#[cfg(test)]
mod tests;
