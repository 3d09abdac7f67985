//! `--cosi-parameter key=value`: the store a backend's COSI side serves, written as the
//! parameters of one of its StorageClasses would be (endpoint, region, owner Secret, ...).
//! `DriverDeleteBucket` and `DriverRevokeBucketAccess` carry no class parameters, so the store
//! is the process's, set once at start.

use std::collections::BTreeMap;

/// The most parameters one process takes: a class has a handful, so more is a mistake.
pub const MAX_STORE_PARAMETERS: usize = 64;

/// Reads `key=value` entries into a map. The first `=` splits (values may hold `=` and `,`,
/// as a Garage `adminEndpoint` list does); keys are trimmed and must be non-empty, printable and
/// unique. Every refusal names the entry.
pub fn parse_store_parameters(entries: &[String]) -> Result<BTreeMap<String, String>, String> {
    if entries.len() > MAX_STORE_PARAMETERS {
        return Err(format!(
            "{} parameters given; at most {MAX_STORE_PARAMETERS} are taken",
            entries.len()
        ));
    }
    let mut parameters = BTreeMap::new();
    for entry in entries {
        let Some((key, value)) = entry.split_once('=') else {
            return Err(format!("{entry:?} is not key=value"));
        };
        let key = key.trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
            return Err(format!(
                "{entry:?}: the key must be letters, digits, '-', '_' or '.', and not empty"
            ));
        }
        if parameters.insert(key.to_owned(), value.to_owned()).is_some() {
            return Err(format!("parameter {key:?} is given twice"));
        }
    }
    Ok(parameters)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn entries_split_at_the_first_equals_and_bad_ones_are_named() {
        let given = ["adminEndpoint=http://a:3903,http://b:3903", "token=a=b"].map(String::from);
        let parsed = parse_store_parameters(&given).unwrap();
        assert_eq!(parsed["adminEndpoint"], "http://a:3903,http://b:3903");
        assert_eq!(parsed["token"], "a=b");
        for bad in ["noequals", "=value", "a b=c", "x=1\nx=2"] {
            let entries: Vec<String> = bad.split('\n').map(String::from).collect();
            let error = parse_store_parameters(&entries).unwrap_err();
            assert!(error.contains('"'), "{bad:?}: {error}");
        }
    }

    proptest! {
        #[test]
        fn any_entries_are_read_or_refused_and_what_is_read_round_trips(
            entries in proptest::collection::vec(".{0,40}", 0..80)
        ) {
            match parse_store_parameters(&entries) {
                Ok(parsed) => {
                    prop_assert!(entries.len() <= MAX_STORE_PARAMETERS);
                    prop_assert_eq!(parsed.len(), entries.len());
                    let written: Vec<String> =
                        parsed.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    prop_assert_eq!(parse_store_parameters(&written).unwrap(), parsed);
                }
                Err(message) => prop_assert!(!message.is_empty()),
            }
        }
    }
}
