//! Properties of the one reader of sizes ([`bucket_api::quantity`]) and of the library's two
//! callers of it: a volume claim's storage request and a StorageClass's size limits. No text
//! panics it, every caller reads the same bytes from the same text, and what is written back
//! with any suffix reads as the bytes it was written from.

use std::collections::BTreeMap;

use bucket_api::quantity::{QuantityError, parse_bytes, parse_count};
use bucket_provisioner::bucket::limits::ClassLimits;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use proptest::prelude::*;
use volume_provisioner::quantity_bytes;

/// Text shaped like a quantity, with the near misses that once overflowed: long fractions,
/// huge exponents, many digits, signs, and suffixes that are almost right.
const NEAR_MISS: &str = "[ +-]{0,2}[0-9]{0,45}\\.?[0-9]{0,140}\
    (|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|m|[eE][+-]?[0-9]{1,12}|GB|g|i|K|\\.5|e| )";

const SUFFIXES: [(&str, u64); 13] = [
    ("", 1),
    ("k", 1_000),
    ("M", 1_000_000),
    ("G", 1_000_000_000),
    ("T", 1_000_000_000_000),
    ("P", 1_000_000_000_000_000),
    ("E", 1_000_000_000_000_000_000),
    ("Ki", 1 << 10),
    ("Mi", 1 << 20),
    ("Gi", 1 << 30),
    ("Ti", 1 << 40),
    ("Pi", 1 << 50),
    ("Ei", 1 << 60),
];

/// What a StorageClass limiting sizes to `limit` makes of a claim's `maxSize` `text`: its
/// bytes as the limit reads them (`Ok(true)` when within the limit).
fn within_class_limit(text: &str, limit: u64) -> Result<bool, String> {
    let mut parameters = BTreeMap::from([("limitMaxSize".to_owned(), limit.to_string())]);
    let limits = ClassLimits::take(&mut parameters)?;
    let claim = BTreeMap::from([("maxSize".to_owned(), text.to_owned())]);
    let limited = limits.apply(Some(&claim)).map_err(|e| e.to_string())?;
    Ok(limited.exceeded.is_none())
}

fn every_caller_agrees(text: &str) -> Result<(), TestCaseError> {
    let bytes = parse_bytes(text);
    prop_assert_eq!(quantity_bytes(&Quantity(text.to_owned())), bytes, "volume request {:?}", text);
    // A StorageClass limit and a claim's quota under it read the value as the same bytes.
    let mut parameters = BTreeMap::from([("limitMaxSize".to_owned(), text.to_owned())]);
    prop_assert_eq!(ClassLimits::take(&mut parameters).is_ok(), bytes.is_ok(), "limit {:?}", text);
    match bytes {
        Ok(n) => {
            prop_assert_eq!(within_class_limit(text, n), Ok(true));
            if n > 0 {
                prop_assert_eq!(within_class_limit(text, n - 1), Ok(false));
            }
        }
        Err(why) => {
            let refused = within_class_limit(text, u64::MAX).unwrap_err();
            prop_assert!(refused.contains(&why.to_string()), "{}", refused);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn no_text_panics_and_every_caller_reads_it_alike(text in any::<String>()) {
        every_caller_agrees(&text)?;
        let _ = parse_count(&text);
    }

    #[test]
    fn near_misses_never_panic_and_every_caller_reads_them_alike(text in NEAR_MISS) {
        every_caller_agrees(&text)?;
    }

    #[test]
    fn long_fractions_and_huge_exponents_are_errors_not_panics(
        whole in "[0-9]{0,3}",
        zeros in 0usize..300,
        last in 1u8..10,
        exponent in any::<i64>(),
    ) {
        let fraction = format!("{whole}.{}{last}", "0".repeat(zeros));
        // A non-zero last digit after 1+ places is never whole bytes without a suffix.
        prop_assert_eq!(parse_bytes(&fraction), Err(QuantityError::NotWholeBytes));
        let scaled = format!("{whole}.{}{last}e{exponent}", "0".repeat(zeros));
        match parse_bytes(&scaled) {
            Ok(_) | Err(QuantityError::NotWholeBytes | QuantityError::TooLarge) => {}
            Err(QuantityError::BadExponent) => prop_assert!(i32::try_from(exponent).is_err()),
            Err(other) => prop_assert!(false, "{scaled}: {other:?}"),
        }
        every_caller_agrees(&scaled)?;
    }

    #[test]
    fn bytes_written_with_any_suffix_read_back(bytes in any::<u64>(), sign in "\\+?", pad in "0{0,3}") {
        for (suffix, unit) in SUFFIXES {
            let (whole, rest) = (bytes / unit, bytes % unit);
            // The remainder as a fraction of the unit: exact in decimal for 10^k and 2^k units.
            let text = if rest == 0 {
                format!("{sign}{pad}{whole}{suffix}")
            } else {
                let fraction = exact_fraction(rest, unit);
                format!("{sign}{pad}{whole}.{fraction}{suffix}")
            };
            prop_assert_eq!(parse_bytes(&text), Ok(bytes), "{}", text);
        }
        prop_assert_eq!(parse_bytes(&format!("{bytes}e0")), Ok(bytes));
        prop_assert_eq!(parse_bytes(&format!("{bytes}000e-3")), Ok(bytes));
        prop_assert_eq!(parse_count(&bytes.to_string()), Ok(bytes));
    }

    #[test]
    fn past_the_largest_size_is_too_large(extra in 1u128..1_000_000) {
        let text = (u128::from(u64::MAX) + extra).to_string();
        prop_assert_eq!(parse_bytes(&text), Err(QuantityError::TooLarge));
    }
}

/// The decimal digits of `rest / unit` (< 1), which end: `unit` is a power of 10 or of 2.
fn exact_fraction(rest: u64, unit: u64) -> String {
    let (mut numerator, unit) = (u128::from(rest), u128::from(unit));
    let mut digits = String::new();
    while numerator != 0 {
        numerator *= 10;
        digits.push(char::from(b'0' + u8::try_from(numerator / unit).unwrap()));
        numerator %= unit;
    }
    digits
}
