use proptest::prelude::*;
use serde_json::{Map, Value};

use super::*;

fn message(text: &str) -> String {
    let error = Lifecycle::parse(text).unwrap_err();
    assert!(error.is_permanent());
    error.to_string()
}

#[test]
fn rooks_rules_read_as_s3_writes_them() {
    // Rook's documented example, with the older top-level Prefix.
    let rook = r#"{"Rules": [
        {"ID": "AbortIncompleteMultipartUploads", "Status": "Enabled", "Prefix": "",
         "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
        {"ID": "ExpireAfter30Days", "Status": "Enabled", "Prefix": "",
         "Expiration": {"Days": 30}}]}"#;
    let parsed = Lifecycle::parse(rook).unwrap();
    assert_eq!(parsed.rules[0].abort_multipart_days, Some(1));
    assert_eq!(parsed.rules[1].expiration, Some(Expiration::At(When::Days(30))));
    assert_eq!(parsed.rules[1].filter.prefix.as_deref(), Some(""));
    assert!(parsed.rules.iter().all(|r| r.enabled && r.beyond_expiration().is_empty()));

    let full = r#"{"Rules": [{"Status": "Disabled",
        "Filter": {"Prefix": "logs/", "ObjectSizeGreaterThan": 10},
        "Expiration": {"Date": "2030-01-01T00:00:00Z"},
        "NoncurrentVersionExpiration": {"NoncurrentDays": 10, "NewerNoncurrentVersions": 2},
        "Transitions": [{"Days": 90, "StorageClass": "GLACIER"}]}]}"#;
    let rule = &Lifecycle::parse(full).unwrap().rules[0];
    assert!(!rule.enabled);
    assert_eq!(rule.filter.size_greater_than, Some(10));
    assert!(matches!(rule.expiration, Some(Expiration::At(When::Date(_)))));
    assert_eq!(rule.beyond_expiration(), ["NoncurrentVersionExpiration", "Transitions"]);
}

#[test]
fn mistakes_are_refused_by_rule_and_field() {
    for (text, says) in [
        (
            r#"{"Rules":[{"Status":"Enabled","Filter":{"Tag":{}},"Expiration":{"Days":1}}]}"#,
            "unknown field `Tag`",
        ),
        (r#"{"Rules":[{"Status":"On","Expiration":{"Days":1}}]}"#, "rule 1: Status \"On\""),
        (r#"{"Rules":[{"Status":"Enabled"}]}"#, "needs an Expiration"),
        (r#"{"Rules":[]}"#, "holds 0 rules"),
        (r#"{"Rules":[{"Status":"Enabled","Expiration":{"Date":"soon"}}]}"#, "not a date"),
        (
            r#"{"Rules":[{"Status":"Enabled","Expiration":{"Date":"2030-01-01T10:00:00Z"}}]}"#,
            "midnight UTC",
        ),
        (r#"{"Rules":[{"Status":"Enabled","Expiration":{"Days":0}}]}"#, "at least 1 day"),
        (
            r#"{"Rules":[{"Status":"Enabled","Expiration":{"Days":1,"Date":"2030-01-01T00:00:00Z"}}]}"#,
            "exactly one",
        ),
        (
            r#"{"Rules":[{"Status":"Enabled","Transitions":[{"Days":1,"StorageClass":"COLD"}]}]}"#,
            "StorageClass \"COLD\"",
        ),
        (
            r#"{"Rules":[{"Status":"Enabled","Prefix":"a","Filter":{},"Expiration":{"Days":1}}]}"#,
            "not both",
        ),
        ("[]", "not the JSON of put-bucket-lifecycle-configuration"),
    ] {
        let error = message(text);
        assert!(error.starts_with("additionalConfig bucketLifecycle: "), "{error}");
        assert!(error.contains(says), "{says}: {error}");
    }
}

/// Field names lifecycle rules use, and a stranger.
const FIELDS: [&str; 16] = [
    "Rules",
    "ID",
    "Status",
    "Filter",
    "Prefix",
    "Expiration",
    "Days",
    "Date",
    "ObjectSizeGreaterThan",
    "NoncurrentVersionExpiration",
    "NoncurrentDays",
    "AbortIncompleteMultipartUpload",
    "DaysAfterInitiation",
    "Transitions",
    "StorageClass",
    "Tag",
];

/// JSON made of those fields and values near the ones they take.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (0u32..40).prop_map(Value::from),
        prop_oneof![
            Just("Enabled".to_string()),
            Just("GLACIER".to_string()),
            "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:00:00Z",
            any::<String>(),
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::vec((prop::sample::select(FIELDS.to_vec()), inner), 0..6).prop_map(
                |fields| {
                    let map: Map<String, Value> =
                        fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
                    Value::Object(map)
                }
            ),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Whatever a tenant writes is judged, never a panic; what is accepted has rules that each
    /// act, with no zero-day counts.
    #[test]
    fn any_lifecycle_is_judged(
        text in prop_oneof![json().prop_map(|v| v.to_string()), any::<String>()],
    ) {
        match Lifecycle::parse(&text) {
            Ok(parsed) => {
                prop_assert!(!parsed.rules.is_empty());
                for rule in parsed.rules {
                    prop_assert!(rule.expiration.is_some() || rule.noncurrent_expiration.is_some()
                        || rule.abort_multipart_days.is_some() || !rule.transitions.is_empty());
                    prop_assert!(rule.abort_multipart_days != Some(0));
                    prop_assert!(rule.expiration != Some(Expiration::At(When::Days(0))));
                }
            }
            Err(error) => prop_assert!(error.is_permanent()),
        }
    }
}
