//! Durations against a second reading of Go's `time.ParseDuration` grammar, written here from
//! the grammar alone and computing in decimal digits, so that the two share no code.

use std::time::Duration;

use bucket_provisioner::bucket::duration::{
    DurationError, LONGEST, format_duration, parse_duration,
};
use bucket_provisioner::bucket::rotation::RotationPolicy;
use proptest::prelude::*;

/// What Go's grammar makes of a text, with this library's refusal of negatives.
#[derive(Debug, PartialEq, Eq)]
enum Reading {
    Nanos(u64),
    Negative,
    TooLong,
    NotADuration,
}

/// A decimal number as its digits, most significant first, without leading zeros.
type Digits = Vec<u8>;

fn trimmed(mut digits: Digits) -> Digits {
    let zeros = digits.iter().take_while(|d| **d == 0).count();
    digits.drain(..zeros);
    digits
}

fn add(a: &[u8], b: &[u8]) -> Digits {
    let (mut out, mut carry) = (Vec::new(), 0);
    for i in 0..a.len().max(b.len()) {
        let at = |x: &[u8]| if i < x.len() { x[x.len() - 1 - i] } else { 0 };
        let sum = at(a) + at(b) + carry;
        out.push(sum % 10);
        carry = sum / 10;
    }
    out.push(carry);
    out.reverse();
    trimmed(out)
}

fn times(a: &[u8], factor: u64) -> Digits {
    let (mut out, mut carry) = (Vec::new(), 0u64);
    for d in a.iter().rev() {
        let product = u64::from(*d) * factor + carry;
        out.push((product % 10) as u8);
        carry = product / 10;
    }
    while carry > 0 {
        out.push((carry % 10) as u8);
        carry /= 10;
    }
    out.reverse();
    trimmed(out)
}

fn greater(a: &[u8], b: &[u8]) -> bool {
    (a.len(), a) > (b.len(), b)
}

fn digits_of(n: u128) -> Digits {
    trimmed(n.to_string().bytes().map(|b| b - b'0').collect())
}

/// `[-+]? ( [0-9]* ( . [0-9]* )? unit )+` with a digit on one side of the point, or `0`.
fn reference(text: &str) -> Reading {
    let chars: Vec<char> = text.chars().collect();
    let (negative, mut i) = match chars.first() {
        Some('-') => (true, 1),
        Some('+') => (false, 1),
        _ => (false, 0),
    };
    if chars[i..] == ['0'] {
        return Reading::Nanos(0);
    }
    if i == chars.len() {
        return Reading::NotADuration;
    }
    let mut total = Digits::new();
    while i < chars.len() {
        let (mut whole, mut fraction) = (Digits::new(), Digits::new());
        while i < chars.len() && chars[i].is_ascii_digit() {
            whole.push(chars[i] as u8 - b'0');
            i += 1;
        }
        let point = i < chars.len() && chars[i] == '.';
        if point {
            i += 1;
            while i < chars.len() && chars[i].is_ascii_digit() {
                fraction.push(chars[i] as u8 - b'0');
                i += 1;
            }
        }
        if whole.is_empty() && fraction.is_empty() {
            return Reading::NotADuration;
        }
        let mut unit = String::new();
        while i < chars.len() && !chars[i].is_ascii_digit() && chars[i] != '.' {
            unit.push(chars[i]);
            i += 1;
        }
        let nanos: u64 = match unit.as_str() {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Reading::NotADuration,
        };
        // (whole.fraction) · unit, rounded down: all the digits times the unit, less as many
        // digits as the fraction has.
        let mut all = whole.clone();
        all.extend(&fraction);
        let mut product = times(&all, nanos);
        product.truncate(product.len().saturating_sub(fraction.len()));
        total = add(&total, &product);
    }
    if greater(&total, &digits_of(1 << 63)) {
        Reading::TooLong
    } else if negative && !total.is_empty() {
        Reading::Negative
    } else if greater(&total, &digits_of(i64::MAX as u128)) {
        Reading::TooLong
    } else {
        let text: String = total.iter().map(|d| char::from(b'0' + d)).collect();
        Reading::Nanos(text.parse().unwrap_or(0))
    }
}

/// The library's reading in the same terms; errors other than the sign only as "refused".
fn library(text: &str) -> Reading {
    match parse_duration(text) {
        Ok(d) => Reading::Nanos(u64::try_from(d.as_nanos()).unwrap()),
        Err(DurationError::Negative) => Reading::Negative,
        Err(DurationError::TooLong) => Reading::TooLong,
        Err(DurationError::Invalid) => Reading::NotADuration,
    }
}

fn agree(text: &str) -> Result<(), TestCaseError> {
    let expected = reference(text);
    let read = library(text);
    match expected {
        // A text both malformed and too long may be refused for either.
        Reading::NotADuration if read == Reading::TooLong => {}
        expected => prop_assert_eq!(read, expected, "{:?}", text),
    }
    Ok(())
}

/// Texts close to the grammar: digits, points, signs, unit letters and a few strangers.
const NEAR: &str = "[-+]?([0-9]{0,22}(\\.[0-9]{0,22})?(ns|us|µs|μs|ms|s|m|h|x|S|)){1,4}";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn any_text_reads_as_go_reads_it(text in any::<String>()) {
        agree(&text)?;
    }

    #[test]
    fn texts_near_the_grammar_read_as_go_reads_them(text in NEAR) {
        agree(&text)?;
    }

    #[test]
    fn characters_of_durations_in_any_order_read_as_go_reads_them(
        text in "[-+0-9.nusµμmh ]{0,24}",
    ) {
        agree(&text)?;
    }

    #[test]
    fn every_duration_printed_reads_back_the_same(nanos in 0..=i64::MAX as u64) {
        let duration = Duration::from_nanos(nanos);
        let text = format_duration(duration);
        prop_assert_eq!(parse_duration(&text), Ok(duration), "{}", text);
    }

    #[test]
    fn both_rotation_parameters_read_a_value_alike(text in NEAR) {
        let read = |name: &str| {
            let mut parameters = [(name.to_string(), text.clone())].into();
            RotationPolicy::take(&mut parameters)
        };
        let period = read("rotationPeriod").map(|p| p.period.unwrap());
        let overlap = read("rotationOverlap").map(|p| p.overlap);
        prop_assert_eq!(period.is_ok(), overlap.is_ok());
        if let (Ok(period), Ok(overlap)) = (period, overlap) {
            prop_assert_eq!(period, overlap);
            prop_assert_eq!(Ok(period), parse_duration(&text));
        }
    }
}

#[test]
fn the_reference_reads_the_examples_of_gos_documentation() {
    assert_eq!(reference("300ms"), Reading::Nanos(300_000_000));
    assert_eq!(reference("-1.5h"), Reading::Negative);
    assert_eq!(reference("2h45m"), Reading::Nanos(9_900_000_000_000));
    assert_eq!(reference("1.0000000009s"), Reading::Nanos(1_000_000_000));
    assert_eq!(reference("2562047h47m16.854775807s"), Reading::Nanos(LONGEST.as_nanos() as u64));
    assert_eq!(reference("2562047h47m16.854775808s"), Reading::TooLong);
    assert_eq!(reference("1"), Reading::NotADuration);
}
