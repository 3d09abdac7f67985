//! A bucket's enabled lifecycle rules taken together, so that one look at an object, at a key's
//! versions or at an upload applies every rule at once: of the rules whose filter takes it,
//! the earliest due action wins, as in S3. The lifecycle pass walks a bucket once for all its
//! rules through this, never once per rule.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::ObjectInfo;
use super::lifecycle::{LifecycleConfig, LifecycleRule, days_after};
use super::versions::Version;

/// The enabled rules of one bucket.
#[derive(Clone, Debug)]
pub(super) struct BucketRules {
    enabled: LifecycleConfig,
    walk_prefix: String,
}

impl BucketRules {
    pub(super) fn new(config: &LifecycleConfig) -> Self {
        let rules: Vec<_> = config.rules.iter().filter(|r| r.enabled()).cloned().collect();
        let walk_prefix = common_prefix(&rules);
        Self { enabled: LifecycleConfig { rules }, walk_prefix }
    }

    /// The longest prefix every rule's filter starts with: keys outside it are never walked.
    pub(super) fn walk_prefix(&self) -> &str {
        &self.walk_prefix
    }

    fn rules(&self) -> impl Iterator<Item = &LifecycleRule> {
        self.enabled.rules.iter()
    }

    /// Whether a rule expires current objects (by `Days` or `Date`).
    pub(super) fn acts_on_objects(&self) -> bool {
        self.rules().any(|r| {
            r.expiration.as_ref().is_some_and(|e| e.days.is_some() || e.date_unix.is_some())
        })
    }

    /// Whether a rule acts on noncurrent versions or delete markers: `NoncurrentVersionExpiration`,
    /// `ExpiredObjectDeleteMarker`, or an expiration by age, which also takes lone markers.
    pub(super) fn acts_on_versions(&self) -> bool {
        self.rules().any(|r| r.noncurrent_expiration.is_some() || r.expiration.is_some())
    }

    /// Whether a rule aborts uploads.
    pub(super) fn acts_on_uploads(&self) -> bool {
        self.rules().any(|r| r.abort_incomplete_upload_days.flatten().is_some())
    }

    /// Whether `info` is due at `now` under the earliest rule that takes it.
    pub(super) fn object_due(&self, info: &ObjectInfo, now: SystemTime) -> bool {
        self.enabled
            .expiry(&info.key, info.size, &info.attrs.tags, info.last_modified)
            .is_some_and(|(at, _)| at <= now)
    }

    /// Whether an upload of `key` started at `initiated` is due for abort at `now`.
    pub(super) fn upload_due(&self, key: &str, initiated: SystemTime, now: SystemTime) -> bool {
        self.rules().filter_map(|r| r.aborts(key, initiated)).min().is_some_and(|at| at <= now)
    }

    /// Whether the noncurrent `version`, at `index` in its key's history (newest first) and
    /// noncurrent since `since`, is due at `now` under a rule that takes it.
    pub(super) fn noncurrent_due(
        &self,
        version: &Version,
        index: usize,
        since: SystemTime,
        now: SystemTime,
    ) -> bool {
        self.rules().any(|rule| {
            let Some(noncurrent) = &rule.noncurrent_expiration else { return false };
            // The `keep` newest noncurrent versions stay.
            let keep = noncurrent.newer_versions.map_or(0, |n| usize::try_from(n).unwrap_or(0));
            let due = noncurrent.days.is_none_or(|days| days_after(since, days) <= now);
            index > keep && due && takes(rule, version)
        })
    }

    /// Whether a delete marker of `key` made at `made`, with no version left behind it, goes at
    /// `now`: a rule with `ExpiredObjectDeleteMarker` takes it at once, and an expiration by
    /// age once the marker is as old as it would make an object (S3 cleans those up too).
    pub(super) fn lone_marker_due(&self, key: &str, made: SystemTime, now: SystemTime) -> bool {
        self.rules().any(|rule| {
            let Some(expiration) = &rule.expiration else { return false };
            // A marker has no tags or size: only a filter by prefix alone can take it.
            let filter = &rule.filter;
            let by_key_alone = filter.tags.is_empty()
                && filter.size_greater_than.is_none()
                && filter.size_less_than.is_none();
            if !by_key_alone || !filter.prefix.as_deref().is_none_or(|p| key.starts_with(p)) {
                return false;
            }
            let date = expiration
                .date_unix
                .map(|d| UNIX_EPOCH + Duration::from_secs(u64::try_from(d).unwrap_or(0)));
            expiration.expired_object_delete_marker == Some(true)
                || expiration.days.is_some_and(|days| days_after(made, days) <= now)
                || date.is_some_and(|at| at <= now)
        })
    }
}

/// Whether `rule`'s filter takes `version`: a marker by its key alone (it has no size or tags).
fn takes(rule: &LifecycleRule, version: &Version) -> bool {
    let meta = &version.meta;
    if version.is_marker() {
        rule.filter.prefix.as_deref().is_none_or(|p| meta.key.starts_with(p))
    } else {
        rule.filter.matches(&meta.key, meta.size, &meta.attrs.tags)
    }
}

/// The longest prefix shared by every rule's key prefix (none: the empty one).
fn common_prefix(rules: &[LifecycleRule]) -> String {
    let mut prefixes = rules.iter().map(|r| r.filter.prefix.as_deref().unwrap_or(""));
    let Some(first) = prefixes.next() else { return String::new() };
    let mut common = first;
    for prefix in prefixes {
        let shared = common.char_indices().zip(prefix.chars()).take_while(|((_, a), b)| a == b);
        let end = shared.last().map_or(0, |((at, c), _)| at + c.len_utf8());
        common = &common[..end];
    }
    common.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Expiration, LifecycleFilter};

    fn rule(prefix: Option<&str>, days: i32) -> LifecycleRule {
        LifecycleRule {
            status: "Enabled".into(),
            filter: LifecycleFilter { prefix: prefix.map(str::to_owned), ..Default::default() },
            expiration: Some(Expiration { days: Some(days), ..Expiration::default() }),
            ..LifecycleRule::default()
        }
    }

    #[test]
    fn the_walk_covers_the_prefix_every_rule_shares() {
        let prefix = |rules: Vec<LifecycleRule>| common_prefix(&rules);
        assert_eq!(prefix(vec![rule(Some("logs/a"), 1), rule(Some("logs/b"), 1)]), "logs/");
        assert_eq!(prefix(vec![rule(Some("logs/"), 1), rule(None, 1)]), "");
        assert_eq!(prefix(vec![rule(Some("é1"), 1), rule(Some("é2"), 1)]), "é");
        assert_eq!(prefix(vec![]), "");
        let disabled = LifecycleRule { status: "Disabled".into(), ..rule(None, 1) };
        let rules =
            BucketRules::new(&LifecycleConfig { rules: vec![rule(Some("a/"), 1), disabled] });
        assert_eq!(rules.walk_prefix(), "a/", "disabled rules do not widen the walk");
    }

    #[test]
    fn the_earliest_rule_that_takes_an_object_wins() {
        let config = LifecycleConfig {
            rules: vec![
                LifecycleRule { id: Some("late".into()), ..rule(None, 30) },
                LifecycleRule { id: Some("early".into()), ..rule(Some("tmp/"), 2) },
                LifecycleRule { id: Some("other".into()), ..rule(Some("x/"), 1) },
            ],
        };
        let at = |days: u64| UNIX_EPOCH + Duration::from_secs(days * 86_400);
        let tags = Vec::new();
        assert_eq!(config.expiry("tmp/a", 1, &tags, at(0)), Some((at(2), Some("early"))));
        assert_eq!(config.expiry("keep/a", 1, &tags, at(0)), Some((at(30), Some("late"))));
    }
}
