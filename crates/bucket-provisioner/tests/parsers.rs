//! Property tests of the library's readers of tenant and operator text besides durations and
//! quantities: bucket names and `generateBucketName`, ObjectBucket names, access modes and the
//! service URLs of StorageClass parameters. Any text is judged without a panic, and a value
//! read in two places reads the same.

use std::collections::BTreeMap;

use bucket_provisioner::AccessMode;
use bucket_provisioner::bucket::limits::ClassLimits;
use bucket_provisioner::bucket::naming::{
    MAX_BUCKET_NAME, generate_bucket_name, object_bucket_names, validate_bucket_name,
    validate_generate_prefix,
};
use bucket_provisioner::bucket::remote::ServiceUrl;
use proptest::prelude::*;

/// Texts made of what bucket names are made of, and a few strangers.
const NAME_LIKE: &str = "[a-z0-9.A-Z_-]{0,70}";

fn alnum(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

/// The rules every accepted bucket name keeps, checked apart from the validator.
fn keeps_the_rules(name: &str) -> Result<(), TestCaseError> {
    prop_assert!((3..=MAX_BUCKET_NAME).contains(&name.len()), "{:?}", name);
    prop_assert!(name.chars().all(|c| alnum(Some(c)) || c == '.' || c == '-'), "{:?}", name);
    prop_assert!(alnum(name.chars().next()) && alnum(name.chars().last()), "{:?}", name);
    prop_assert!(!name.contains(".."), "{:?}", name);
    Ok(())
}

fn one(key: &str, value: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(key.to_string(), value.to_string())])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn any_bucket_name_is_judged_and_only_valid_ones_pass(
        name in prop_oneof![any::<String>(), NAME_LIKE],
    ) {
        if validate_bucket_name(&name).is_ok() {
            keeps_the_rules(&name)?;
        }
    }

    #[test]
    fn every_accepted_prefix_generates_valid_names(
        prefix in prop_oneof![any::<String>(), NAME_LIKE],
    ) {
        if validate_generate_prefix(&prefix).is_ok() {
            let name = generate_bucket_name(&prefix);
            prop_assert_eq!(validate_bucket_name(&name), Ok(()));
            let start = format!("{prefix}-");
            prop_assert!(name.starts_with(&start), "{:?}", name);
        }
    }

    #[test]
    fn object_bucket_names_fit_whatever_the_claim(
        namespace in prop_oneof![any::<String>(), "[a-z0-9.-]{0,260}"],
        claim in prop_oneof![any::<String>(), "[a-z0-9.-]{0,260}"],
        uid in any::<String>(),
    ) {
        let names = object_bucket_names(&namespace, &claim, &uid);
        prop_assert!(names.unique.chars().count() <= 253);
        prop_assert_eq!(object_bucket_names(&namespace, &claim, &uid), names.clone());
        if let Some(conventional) = names.conventional {
            prop_assert_eq!(conventional, format!("obc-{namespace}-{claim}"));
        }
    }

    /// `limitAccessMode` on a class and `accessMode` on a claim take the same texts, as the same
    /// modes.
    #[test]
    fn access_modes_read_alike_on_classes_and_claims(
        text in prop_oneof![any::<String>(), "(Read|Write|read|Only|only| ){0,3}"],
    ) {
        let class = ClassLimits::take(&mut one("limitAccessMode", &text))
            .map(|limits| limits.apply(None).unwrap().access_mode);
        let claim = ClassLimits::default()
            .apply(Some(&one("accessMode", &text)))
            .map(|limited| limited.access_mode);
        prop_assert_eq!(class.as_ref().ok(), claim.as_ref().ok());
        if let Ok(mode) = class {
            prop_assert_eq!(mode.as_str(), text.as_str());
            prop_assert_eq!(AccessMode::parse(&text), Some(mode));
        }
    }

    /// A URL accepted reads back, from the form kept in an ObjectBucket, as the same service.
    #[test]
    fn service_urls_read_back_the_same(
        text in prop_oneof![
            any::<String>(),
            "(https?|ftp)://(user@)?([a-zA-Z0-9.-]{0,12}|\\[::1\\])(:[0-9]{0,6})?(/[a-z]{0,3})?",
        ],
    ) {
        if let Ok(url) = ServiceUrl::parse("endpoint", &text, "http://s3:9000") {
            prop_assert!(url.scheme == "http" || url.scheme == "https");
            prop_assert!(!url.host.is_empty() && !url.host.contains('@'));
            let again = ServiceUrl::parse("endpoint", &url.url(), "http://s3:9000");
            prop_assert_eq!(again.ok(), Some(url));
        }
    }
}
