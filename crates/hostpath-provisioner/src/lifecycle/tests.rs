use bucket_provisioner::bucket::features::lifecycle::{Filter, NoncurrentExpiration, Transition};
use proptest::prelude::*;

use super::*;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn asked(json: &str) -> BTreeMap<String, String> {
    map(&[(BUCKET_LIFECYCLE, json)])
}

fn refusal(result: Result<Option<LifecycleConfig>, BackendError>) -> String {
    match result.unwrap_err() {
        BackendError::Permanent { reason, message } => {
            assert_eq!(reason, "InvalidParameters", "{message}");
            message
        }
        other => panic!("not permanent: {other}"),
    }
}

const ROOK: &str = r#"{"Rules": [{"ID": "expire-logs", "Status": "Enabled",
    "Prefix": "logs/",
    "Expiration": {"Days": 30}, "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7}},
    {"Status": "Disabled", "Filter": {"Prefix": "tmp/", "ObjectSizeGreaterThan": 10},
    "Expiration": {"Date": "2030-01-01T00:00:00Z"}}]}"#;

#[test]
fn rooks_rules_become_the_endpoints() {
    let config = claim_rules(&asked(ROOK), &map(&[])).unwrap().unwrap();
    let first = &config.rules[0];
    assert_eq!(first.id.as_deref(), Some("expire-logs"));
    assert!(first.enabled());
    assert_eq!(first.filter.prefix.as_deref(), Some("logs/"));
    assert_eq!(first.expiration.as_ref().unwrap().days, Some(30));
    assert_eq!(first.abort_incomplete_upload_days, Some(Some(7)));
    let second = &config.rules[1];
    assert_eq!((second.id.as_ref(), second.status.as_str()), (None, "Disabled"));
    assert_eq!(second.filter.prefix.as_deref(), Some("tmp/"));
    assert_eq!(second.filter.size_greater_than, Some(10));
    assert_eq!(second.expiration.as_ref().unwrap().date_unix, Some(1_893_456_000));
    assert_eq!(claim_rules(&map(&[]), &map(&[])).unwrap(), None);
}

#[test]
fn the_class_allows_rules_unless_it_says_false() {
    for allowing in [map(&[]), map(&[(ALLOW_LIFECYCLE, "true")]), map(&[(ALLOW_LIFECYCLE, "")])] {
        assert!(claim_rules(&asked(ROOK), &allowing).unwrap().is_some());
    }
    let closed = map(&[(ALLOW_LIFECYCLE, "false")]);
    let message = refusal(claim_rules(&asked(ROOK), &closed));
    assert!(message.contains("additionalConfig bucketLifecycle is not allowed"), "{message}");
    assert!(message.contains("allowLifecycle: \"true\""), "{message}");
    assert_eq!(claim_rules(&map(&[]), &closed).unwrap(), None);
    let message = refusal(claim_rules(&map(&[]), &map(&[(ALLOW_LIFECYCLE, "yes")])));
    assert!(message.contains("allowLifecycle must be \"true\" or \"false\""), "{message}");
}

#[test]
fn transitions_are_refused_by_name() {
    let json = r#"{"Rules": [{"Status": "Enabled", "Filter": {},
        "Expiration": {"Days": 30}},
        {"Status": "Enabled", "Filter": {},
        "Transitions": [{"Days": 10, "StorageClass": "GLACIER"}]}]}"#;
    let message = refusal(claim_rules(&asked(json), &map(&[])));
    assert!(message.starts_with("additionalConfig bucketLifecycle: rule 2: Transitions"));
    assert!(message.contains("single storage class"), "{message}");
}

#[test]
fn noncurrent_rules_are_kept_as_the_endpoint_keeps_them() {
    let json = r#"{"Rules": [{"ID": "old", "Status": "Enabled", "Filter": {},
        "NoncurrentVersionExpiration": {"NoncurrentDays": 5, "NewerNoncurrentVersions": 2}},
        {"ID": "markers", "Status": "Enabled", "Filter": {"Prefix": "a/"},
        "Expiration": {"ExpiredObjectDeleteMarker": true}}]}"#;
    let config = claim_rules(&asked(json), &map(&[])).unwrap().unwrap();
    let noncurrent = config.rules[0].noncurrent_expiration.as_ref().unwrap();
    assert_eq!((noncurrent.days, noncurrent.newer_versions), (Some(5), Some(2)));
    let marker = config.rules[1].expiration.as_ref().unwrap();
    assert_eq!(marker.expired_object_delete_marker, Some(true));
}

#[test]
fn what_the_endpoint_refuses_is_refused_naming_the_key() {
    for (json, says) in [
        (r#"{"Rules": []}"#, "Rules holds 0 rules"),
        (r#"{"Rules": [{"Status": "On", "Expiration": {"Days": 1}}]}"#, "Status \"On\""),
        (r#"{"Rule": []}"#, "not the JSON of put-bucket-lifecycle-configuration"),
        (
            r#"{"Rules": [{"ID": "a", "Status": "Enabled", "Expiration": {"Days": 1}},
                {"ID": "a", "Status": "Enabled", "Expiration": {"Days": 2}}]}"#,
            "Rule ID must be unique",
        ),
        (
            r#"{"Rules": [{"Status": "Enabled", "Filter": {"ObjectSizeLessThan": 5},
                "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}]}"#,
            "AbortIncompleteMultipartUpload cannot be specified with Tags or object sizes",
        ),
        (
            r#"{"Rules": [{"Status": "Enabled", "NoncurrentVersionExpiration":
                {"NoncurrentDays": 1, "NewerNoncurrentVersions": 101}}]}"#,
            "'NewerNoncurrentVersions' must be between 1 and 100",
        ),
        (r#"{"Rules": [{"Status": "Enabled", "Expiration": {"Days": 3000000000}}]}"#, "larger"),
    ] {
        let message = refusal(claim_rules(&asked(json), &map(&[])));
        assert!(message.starts_with("additionalConfig bucketLifecycle"), "{message}");
        assert!(message.contains(says), "{says}: {message}");
    }
}

/// The library's rule an endpoint rule was made from.
fn neutral(rule: &LifecycleRule) -> Rule {
    let expiration = rule.expiration.as_ref().map(|e| match (e.days, e.date_unix) {
        (Some(days), _) => Expiration::At(When::Days(days as u32)),
        (_, Some(date)) => Expiration::At(When::Date(date)),
        _ => Expiration::ExpiredObjectDeleteMarker,
    });
    Rule {
        id: rule.id.clone(),
        enabled: rule.enabled(),
        filter: Filter {
            prefix: rule.filter.prefix.clone(),
            size_greater_than: rule.filter.size_greater_than.map(|s| s as u64),
            size_less_than: rule.filter.size_less_than.map(|s| s as u64),
        },
        expiration,
        noncurrent_expiration: rule.noncurrent_expiration.as_ref().map(|n| {
            bucket_provisioner::bucket::features::lifecycle::NoncurrentExpiration {
                days: n.days.unwrap() as u32,
                newer_versions: n.newer_versions.map(|v| v as u32),
            }
        }),
        abort_multipart_days: rule.abort_incomplete_upload_days.flatten().map(|d| d as u32),
        transitions: Vec::new(),
    }
}

fn small_or_huge() -> impl Strategy<Value = u32> {
    prop_oneof![1u32..400, any::<u32>()]
}

fn rules() -> impl Strategy<Value = Rule> {
    let when = prop_oneof![
        small_or_huge().prop_map(When::Days),
        (0i64..40_000).prop_map(|d| When::Date(d * 86_400)),
    ];
    let expiration = proptest::option::of(prop_oneof![
        when.clone().prop_map(Expiration::At),
        Just(Expiration::ExpiredObjectDeleteMarker),
    ]);
    let size = proptest::option::of(prop_oneof![0u64..100, any::<u64>()]);
    let noncurrent = proptest::option::of(
        (small_or_huge(), proptest::option::of(0u32..120))
            .prop_map(|(days, newer_versions)| NoncurrentExpiration { days, newer_versions }),
    );
    let transitions = proptest::collection::vec(
        when.prop_map(|when| Transition { when, storage_class: "GLACIER".into() }),
        0..2,
    );
    (
        proptest::option::of("[a-c]{0,2}"),
        any::<bool>(),
        (proptest::option::of("[a-z/]{0,4}"), size.clone(), size),
        expiration,
        noncurrent,
        proptest::option::of(small_or_huge()),
        transitions,
    )
        .prop_map(
            |(id, enabled, (prefix, above, below), expiration, noncurrent, abort, moves)| Rule {
                id,
                enabled,
                filter: Filter { prefix, size_greater_than: above, size_less_than: below },
                expiration,
                noncurrent_expiration: noncurrent,
                abort_multipart_days: abort,
                transitions: moves,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Every rule is either kept whole (reading the endpoint's rule back gives the claim's) or
    /// refused naming the key, and transitions never pass.
    #[test]
    fn conversion_keeps_every_rule_or_refuses_it_by_name(
        rules in proptest::collection::vec(rules(), 1..4),
    ) {
        let lifecycle = Lifecycle { rules };
        let moves = lifecycle.rules.iter().any(|r| !r.transitions.is_empty());
        match endpoint_config(&lifecycle) {
            Ok(config) => {
                prop_assert!(!moves);
                prop_assert!(config.check().is_ok());
                let back: Vec<Rule> = config.rules.iter().map(neutral).collect();
                prop_assert_eq!(back, lifecycle.rules);
            }
            Err(error) => {
                prop_assert!(error.is_permanent());
                let message = error.to_string();
                prop_assert!(message.starts_with("additionalConfig bucketLifecycle: "), "{}", message);
                if let Some(n) = lifecycle.rules.iter().position(|r| !r.transitions.is_empty()) {
                    let first = lifecycle.rules.iter().position(|r| endpoint_rule(r).is_err());
                    if first == Some(n) {
                        let named = format!("rule {}: Transitions not supported", n + 1);
                        prop_assert!(message.contains(&named), "{}", message);
                    }
                }
            }
        }
    }

    /// Whatever a tenant writes is read without a panic, and refused naming the key.
    #[test]
    fn any_text_is_read_or_refused_naming_the_key(
        text in prop_oneof![
            any::<String>(),
            "\\{\"Rules\": \\[\\{\"Status\": \"(Enabled|Off)\", \"Filter\": \\{(\"Prefix\": \"[a-z]{0,3}\")?\\}, \
             \"(Expiration|Transitions|AbortIncompleteMultipartUpload)\": \\{\"Days\": -?[0-9]{1,11}\\}\\}\\]\\}",
        ],
    ) {
        if let Err(error) = claim_rules(&asked(&text), &map(&[])) {
            prop_assert!(error.is_permanent());
            prop_assert!(error.to_string().starts_with("additionalConfig bucketLifecycle"));
        }
    }
}
