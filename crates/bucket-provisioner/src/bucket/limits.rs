//! Limits an operator's StorageClass sets on its claims, which a tenant editing its claim cannot
//! lift: default and largest quotas, and the widest access mode.
//!
//! | StorageClass parameter | claim's `additionalConfig` key | a claim that sets the key | a claim that does not |
//! |---|---|---|---|
//! | `defaultMaxObjects`, `limitMaxObjects` | `maxObjects` | at most the limit | the default, else the limit |
//! | `defaultMaxSize`, `limitMaxSize` | `maxSize` | at most the limit | the default, else the limit |
//! | `limitAccessMode` | `accessMode` | no wider than the limit | the limit |
//!
//! The backend sees the outcome: `additionalConfig` with the quotas in force (and without
//! `accessMode`, which it gets as [`crate::BucketOptions::access_mode`]), and never these
//! parameters. A claim of a class that sets none of them is passed on exactly as written.

use std::collections::BTreeMap;

use bucket_api::AccessMode;
use bucket_api::contract::class_limits::{
    DEFAULT_MAX_OBJECTS, DEFAULT_MAX_SIZE, LIMIT_ACCESS_MODE, LIMIT_MAX_OBJECTS, LIMIT_MAX_SIZE,
};
use bucket_api::contract::{
    CLAIM_ACCESS_MODE, CLAIM_MAX_OBJECTS, CLAIM_MAX_SIZE, CLAIM_SHARE_FROM,
};

use bucket_api::quantity::{parse_bytes, parse_count};

use crate::bucket::error::Error;
use crate::bucket::grant_rules::narrowest;
use crate::bucket::web_identity::take_service_accounts;

/// A quota value as written and as a number.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Value {
    text: String,
    number: u64,
}

/// One quota key's default and largest value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct QuotaLimit {
    /// The claim key, e.g. `maxSize`.
    key: &'static str,
    /// The parameter naming the largest value, for messages.
    limit_key: &'static str,
    default: Option<Value>,
    limit: Option<Value>,
    /// A size (a Kubernetes quantity) rather than a count.
    size: bool,
}

/// The value of a quota key, or why it is not one (to follow the value in a message).
fn parse(size: bool, text: &str) -> Result<u64, String> {
    if size {
        parse_bytes(text).map_err(|why| why.to_string())
    } else {
        parse_count(text).map_err(|why| why.to_string())
    }
}

impl QuotaLimit {
    fn take(
        parameters: &mut BTreeMap<String, String>,
        (key, default_key, limit_key): (&'static str, &'static str, &'static str),
        size: bool,
    ) -> Result<Self, String> {
        let mut read = |name: &str| match parameters.remove(name) {
            None => Ok(None),
            Some(text) => match parse(size, &text) {
                Ok(number) => Ok(Some(Value { text, number })),
                Err(why) => Err(format!("parameter {name} {text:?} {why}")),
            },
        };
        let default = read(default_key)?;
        let limit = read(limit_key)?;
        if let (Some(default), Some(limit)) = (&default, &limit)
            && default.number > limit.number
        {
            return Err(format!(
                "parameter {default_key} {:?} is more than {limit_key} {:?}",
                default.text, limit.text
            ));
        }
        Ok(Self { key, limit_key, default, limit, size })
    }

    /// Puts the value in force into `config`; a request above the limit is noted in `exceeded`
    /// and replaced by the limit.
    fn apply(
        &self,
        config: &mut BTreeMap<String, String>,
        exceeded: &mut Vec<String>,
    ) -> Result<(), Error> {
        let key = self.key;
        match config.get(key) {
            // Dropping the key falls back to the class's default, never to unlimited.
            None => {
                if let Some(value) = self.default.as_ref().or(self.limit.as_ref()) {
                    config.insert(key.to_owned(), value.text.clone());
                }
            }
            Some(asked) => {
                let Some(limit) = &self.limit else { return Ok(()) };
                let number = parse(self.size, asked).map_err(|why| {
                    Error::InvalidAdditionalConfig(format!("{key} {asked:?} {why}"))
                })?;
                if number > limit.number {
                    exceeded.push(format!(
                        "{key} {asked:?} is more than the StorageClass's {} {:?}",
                        self.limit_key, limit.text
                    ));
                    config.insert(key.to_owned(), limit.text.clone());
                }
            }
        }
        Ok(())
    }
}

/// What a StorageClass allows its claims.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassLimits {
    max_objects: QuotaLimit,
    max_size: QuotaLimit,
    access_mode: Option<AccessMode>,
    /// The mode of the claim whose bucket this claim shares: the most it may get.
    shared_mode: Option<AccessMode>,
}

/// What is in force for a claim under its class's limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limited {
    /// The `additionalConfig` the backend gets: the claim's, without `accessMode`, with the
    /// class's quotas in force.
    pub config: BTreeMap<String, String>,
    /// The access mode in force.
    pub access_mode: AccessMode,
    /// Set when the claim asks for more than the class allows; `config` and `access_mode` then
    /// hold the class's limits in place of what was asked.
    pub exceeded: Option<String>,
    /// The ServiceAccounts the claim names (`serviceAccountName`, taken out of `config`),
    /// sorted; see [`crate::bucket::web_identity`].
    pub service_accounts: Vec<String>,
}

impl ClassLimits {
    /// Reads (and removes) the limit parameters from a StorageClass's parameters, so that the
    /// backend never sees them. The error says which parameter is wrong.
    pub fn take(parameters: &mut BTreeMap<String, String>) -> Result<Self, String> {
        let max_objects = QuotaLimit::take(
            parameters,
            (CLAIM_MAX_OBJECTS, DEFAULT_MAX_OBJECTS, LIMIT_MAX_OBJECTS),
            false,
        )?;
        let max_size =
            QuotaLimit::take(parameters, (CLAIM_MAX_SIZE, DEFAULT_MAX_SIZE, LIMIT_MAX_SIZE), true)?;
        let access_mode = match parameters.remove(LIMIT_ACCESS_MODE) {
            None => None,
            Some(text) => Some(AccessMode::parse(&text).ok_or_else(|| {
                format!(
                    "parameter {LIMIT_ACCESS_MODE} {text:?} is not an access mode; use \
                     ReadWrite, ReadOnly or WriteOnly"
                )
            })?),
        };
        Ok(Self { max_objects, max_size, access_mode, shared_mode: None })
    }

    /// These limits for a claim sharing the bucket of a claim whose key has `mode`: no wider
    /// than it, and `mode` when the claim asks none (narrowed further by the class's limit).
    pub fn shared_from(self, mode: AccessMode) -> Self {
        Self { shared_mode: Some(mode), ..self }
    }

    /// `mode` narrowed to what these limits let any claim have, whatever it asks for: never
    /// wider than `mode`. `None` when the limits and `mode` have nothing in common (a
    /// `ReadOnly` key under a `WriteOnly` limit).
    pub fn narrow(&self, mode: AccessMode) -> Option<AccessMode> {
        [self.access_mode, self.shared_mode].into_iter().flatten().try_fold(mode, narrowest)
    }

    /// What is in force for a claim with this `additionalConfig`. A malformed `accessMode`, or
    /// a quota the class limits that cannot be read, is an error; asking for more than the
    /// class allows is not (see [`Limited::exceeded`]), so that a bound claim keeps working
    /// under the class's limits while it says what is wrong.
    pub fn apply(&self, claim_config: Option<&BTreeMap<String, String>>) -> Result<Limited, Error> {
        let mut config = claim_config.cloned().unwrap_or_default();
        config.remove(CLAIM_SHARE_FROM);
        let service_accounts = take_service_accounts(&mut config)?;
        let mut exceeded = Vec::new();
        let access_mode = match config.remove(CLAIM_ACCESS_MODE) {
            None => match (self.access_mode, self.shared_mode) {
                (Some(class), Some(shared)) if class.covers(shared) => shared,
                (Some(class), _) => class,
                (None, shared) => shared.unwrap_or_default(),
            },
            Some(text) => {
                let asked = AccessMode::parse(&text).ok_or_else(|| {
                    Error::InvalidAdditionalConfig(format!(
                        "{CLAIM_ACCESS_MODE} {text:?} is not an access mode; use ReadWrite, \
                         ReadOnly or WriteOnly"
                    ))
                })?;
                match self.access_mode {
                    Some(widest) if !widest.covers(asked) => {
                        exceeded.push(format!(
                            "{CLAIM_ACCESS_MODE} {asked} is more than the StorageClass's \
                             {LIMIT_ACCESS_MODE} {widest}"
                        ));
                        widest
                    }
                    _ => asked,
                }
            }
        };
        let access_mode = match self.shared_mode {
            Some(shared) if !shared.covers(access_mode) => {
                exceeded.push(format!(
                    "{CLAIM_ACCESS_MODE} {access_mode} is more than the {shared} of the claim \
                     whose bucket it shares"
                ));
                shared
            }
            _ => access_mode,
        };
        self.max_objects.apply(&mut config, &mut exceeded)?;
        self.max_size.apply(&mut config, &mut exceeded)?;
        let exceeded = (!exceeded.is_empty()).then(|| exceeded.join("; "));
        Ok(Limited { config, access_mode, exceeded, service_accounts })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubernetes::failure::Failure;

    fn map(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn limits(parameters: &[(&str, &str)]) -> ClassLimits {
        let mut parameters = map(parameters);
        let limits = ClassLimits::take(&mut parameters).unwrap();
        assert!(parameters.keys().all(|k| !k.contains("Max") && !k.contains("Mode")));
        limits
    }

    fn apply(parameters: &[(&str, &str)], claim: &[(&str, &str)]) -> Limited {
        limits(parameters).apply(Some(&map(claim))).unwrap()
    }

    #[test]
    fn narrowing_to_the_limits_never_widens() {
        let rw = AccessMode::ReadWrite;
        let (ro, wo) = (AccessMode::ReadOnly, AccessMode::WriteOnly);
        assert_eq!(limits(&[]).narrow(rw), Some(rw));
        assert_eq!(limits(&[("limitAccessMode", "ReadOnly")]).narrow(rw), Some(ro));
        assert_eq!(limits(&[("limitAccessMode", "ReadWrite")]).narrow(ro), Some(ro));
        assert_eq!(limits(&[]).shared_from(ro).narrow(rw), Some(ro));
        assert_eq!(limits(&[("limitAccessMode", "ReadOnly")]).shared_from(rw).narrow(wo), None);
    }

    #[test]
    fn a_class_without_limits_passes_the_claim_on_as_written() {
        let claim = map(&[("maxSize", "junk"), ("tier", "cold")]);
        let limited = ClassLimits::default().apply(Some(&claim)).unwrap();
        assert_eq!(limited.config, claim);
        assert_eq!((limited.access_mode, limited.exceeded), (AccessMode::ReadWrite, None));
        assert_eq!(ClassLimits::default().apply(None).unwrap().config, BTreeMap::new());
    }

    #[test]
    fn a_sharing_claim_gets_at_most_the_owners_mode_and_never_passes_share_from_on() {
        let shared = |class: &[(&str, &str)], owner, claim: &[(&str, &str)]| {
            limits(class).shared_from(owner).apply(Some(&map(claim))).unwrap()
        };
        let asked_nothing = shared(&[], AccessMode::ReadOnly, &[("shareFrom", "app")]);
        assert_eq!(asked_nothing.access_mode, AccessMode::ReadOnly);
        assert_eq!(asked_nothing.exceeded, None);
        assert!(asked_nothing.config.is_empty(), "shareFrom is the library's");
        let narrowed = shared(&[("limitAccessMode", "WriteOnly")], AccessMode::ReadWrite, &[]);
        assert_eq!((narrowed.access_mode, narrowed.exceeded), (AccessMode::WriteOnly, None));
        let wider = shared(&[], AccessMode::ReadOnly, &[("accessMode", "ReadWrite")]);
        assert_eq!(wider.access_mode, AccessMode::ReadOnly);
        assert!(wider.exceeded.unwrap().contains("ReadOnly of the claim whose bucket it shares"));
        // Class and owner agree on nothing: refused, never the wider of the two.
        let neither = shared(&[("limitAccessMode", "ReadOnly")], AccessMode::WriteOnly, &[]);
        assert!(neither.exceeded.is_some());
    }

    #[test]
    fn the_backend_never_sees_the_limit_parameters_or_access_mode() {
        let mut parameters = map(&[("limitMaxSize", "1G"), ("region", "x")]);
        ClassLimits::take(&mut parameters).unwrap();
        assert_eq!(parameters, map(&[("region", "x")]));
        let limited = apply(&[], &[("accessMode", "ReadOnly"), ("maxObjects", "5")]);
        assert_eq!(limited.config, map(&[("maxObjects", "5")]));
        assert_eq!(limited.access_mode, AccessMode::ReadOnly);
    }

    #[test]
    fn a_dropped_quota_falls_back_to_the_default_then_the_limit() {
        let class = [("defaultMaxObjects", "100"), ("limitMaxObjects", "1000")];
        assert_eq!(apply(&class, &[]).config, map(&[("maxObjects", "100")]));
        let class = [("limitMaxSize", "2Gi")];
        assert_eq!(apply(&class, &[]).config, map(&[("maxSize", "2Gi")]));
        let class = [("defaultMaxSize", "1G")];
        assert_eq!(apply(&class, &[]).config, map(&[("maxSize", "1G")]));
    }

    #[test]
    fn a_claim_may_ask_for_less_than_the_limit() {
        let class = [("limitMaxSize", "2Gi"), ("limitMaxObjects", "1000")];
        let limited = apply(&class, &[("maxSize", "2G"), ("maxObjects", "1000")]);
        assert_eq!(limited.config, map(&[("maxObjects", "1000"), ("maxSize", "2G")]));
        assert_eq!(limited.exceeded, None);
    }

    #[test]
    fn a_claim_asking_for_more_is_refused_naming_the_limit_and_held_to_it() {
        let class = [("limitMaxSize", "1Gi"), ("defaultMaxSize", "1M")];
        let limited = apply(&class, &[("maxSize", "2Gi")]);
        assert_eq!(limited.config, map(&[("maxSize", "1Gi")]));
        let message = limited.exceeded.unwrap();
        assert!(
            message
                .contains("maxSize \"2Gi\" is more than the StorageClass's limitMaxSize \"1Gi\""),
            "{message}"
        );
        // A claim without a limit of its own is not unlimited either.
        let limited = apply(&[("limitMaxObjects", "10")], &[("maxObjects", "11")]);
        assert_eq!(limited.config, map(&[("maxObjects", "10")]));
        assert!(limited.exceeded.unwrap().contains("limitMaxObjects \"10\""));
    }

    #[test]
    fn access_modes_narrow_but_never_widen() {
        use AccessMode::*;
        let read_only = [("limitAccessMode", "ReadOnly")];
        assert_eq!(apply(&read_only, &[]).access_mode, ReadOnly);
        assert_eq!(apply(&read_only, &[("accessMode", "ReadOnly")]).exceeded, None);
        for wider in ["ReadWrite", "WriteOnly"] {
            let limited = apply(&read_only, &[("accessMode", wider)]);
            assert_eq!(limited.access_mode, ReadOnly);
            assert!(limited.exceeded.unwrap().contains("limitAccessMode ReadOnly"));
        }
        let any = [("limitAccessMode", "ReadWrite")];
        assert_eq!(apply(&any, &[("accessMode", "WriteOnly")]).access_mode, WriteOnly);
        assert_eq!(apply(&[], &[]).access_mode, ReadWrite);
    }

    #[test]
    fn a_fraction_too_long_for_any_integer_is_an_error_not_a_panic() {
        let tiny = format!("0.{}1", "0".repeat(127));
        let limited = limits(&[("limitMaxSize", "1G")]);
        let error = limited.apply(Some(&map(&[("maxSize", &tiny)]))).unwrap_err();
        assert!(error.to_string().contains("not a whole number of bytes"), "{error}");
        for digits in [39, 40, 128] {
            let text = format!("1.{}", "3".repeat(digits));
            let mut parameters = map(&[("limitMaxSize", &text)]);
            let error = ClassLimits::take(&mut parameters).unwrap_err();
            assert!(error.contains("not a whole number of bytes"), "{error}");
        }
    }

    #[test]
    fn malformed_values_are_specific_errors() {
        let error = limits(&[]).apply(Some(&map(&[("accessMode", "readonly")]))).unwrap_err();
        assert_eq!(error.reason(), "InvalidParameters");
        assert!(error.to_string().contains("accessMode \"readonly\""), "{error}");
        let limited = limits(&[("limitMaxSize", "1G")]);
        let error = limited.apply(Some(&map(&[("maxSize", "lots")]))).unwrap_err();
        assert!(error.to_string().contains("maxSize \"lots\""), "{error}");
        for (parameters, wrong) in [
            (map(&[("limitMaxSize", "big")]), "limitMaxSize \"big\""),
            (map(&[("limitMaxObjects", "1e3")]), "limitMaxObjects"),
            (map(&[("defaultMaxObjects", "5"), ("limitMaxObjects", "4")]), "more than"),
            (map(&[("limitAccessMode", "All")]), "limitAccessMode \"All\""),
        ] {
            let error = ClassLimits::take(&mut parameters.clone()).unwrap_err();
            assert!(error.contains(wrong), "{error}");
        }
    }
}
