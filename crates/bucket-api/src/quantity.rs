//! Sizes and counts as claims, StorageClasses and volume requests write them: the one reading
//! of `maxSize`, `bucketMaxSize`, the StorageClass size limits and a volume claim's storage
//! request, so that every backend and both controllers agree on what a value means.
//!
//! A size is a Kubernetes quantity (`resource.Quantity`):
//!
//! | part | accepted | example |
//! |---|---|---|
//! | sign | none, `+`, or `-` (only for zero) | `+2G` is `2G` |
//! | number | digits with at most one `.`, on either side | `2`, `1.5`, `.5`, `2.` |
//! | decimal suffix | `k` 10³, `M` 10⁶, `G` 10⁹, `T` 10¹², `P` 10¹⁵, `E` 10¹⁸ | `2G` = 2·10⁹ |
//! | binary suffix | `Ki` 2¹⁰, `Mi` 2²⁰, `Gi` 2³⁰, `Ti` 2⁴⁰, `Pi` 2⁵⁰, `Ei` 2⁶⁰ | `2Gi` = 2·2³⁰ |
//! | decimal exponent | `e` or `E`, then a signed whole number | `1e9`, `1E3`, `20e-1` = 2 |
//! | nothing | plain bytes | `1073741824` |
//!
//! The value is computed exactly and must come to a whole number of bytes from 0 to 2⁶⁴−1:
//! `1.5Ki` is 1536 bytes, `0.5` is refused, where Kubernetes would round it up; a fraction of a
//! byte in a quota or a volume size is a mistake to point out, not to guess at. `m` (milli) is
//! refused for the same reason, and because it is the likely typo of `M`. Spaces around the
//! value are ignored. No input panics, however long or odd: every refusal is a
//! [`QuantityError`] saying why.
//!
//! A count (`maxObjects`) is a whole number of objects written in decimal digits, with an
//! optional `+`: `1000`, not `1k`.

use std::fmt;

/// Why a text is not a size in bytes. Its text reads after the value it is about:
/// `maxSize "2GB" has an unknown unit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantityError {
    /// No number where one belongs: `""`, `G`, `1.2.3`.
    NotAQuantity,
    /// Below zero.
    Negative,
    /// In thousandths (`m`), which is no size in bytes.
    Milli,
    /// Comes to a fraction of a byte: `0.5`, `1e-1`.
    NotWholeBytes,
    /// A suffix that is none of the SI or binary ones: `2GB`, `2g`.
    UnknownUnit,
    /// An `e`/`E` exponent that is not a whole number a 32-bit integer holds.
    BadExponent,
    /// More than 2⁶⁴−1 bytes.
    TooLarge,
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotAQuantity => "is not a quantity",
            Self::Negative => "is negative",
            Self::Milli => "is in thousandths of a byte (m means milli)",
            Self::NotWholeBytes => "is not a whole number of bytes",
            Self::UnknownUnit => "has an unknown unit",
            Self::BadExponent => "has a bad exponent",
            Self::TooLarge => "is too large (at most 2^64-1 bytes)",
        })
    }
}

impl std::error::Error for QuantityError {}

/// Why a text is not a count of objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CountError;

impl fmt::Display for CountError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("is not a whole number of objects such as \"1000\"")
    }
}

impl std::error::Error for CountError {}

/// A number of objects: a whole number such as `"1000"` (see the [module](self) docs).
pub fn parse_count(text: &str) -> Result<u64, CountError> {
    text.trim().parse::<u64>().map_err(|_| CountError)
}

/// The bytes a quantity such as `2G`, `2Gi`, `1.5Ti`, `1e9` or `4096` stands for (see the
/// [module](self) docs for the grammar and the whole-bytes rule).
pub fn parse_bytes(text: &str) -> Result<u64, QuantityError> {
    let text = text.trim();
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let whole_end = digits_end(unsigned, 0);
    let (fraction_start, number_end) = match unsigned.as_bytes().get(whole_end) {
        Some(b'.') => (whole_end + 1, digits_end(unsigned, whole_end + 1)),
        _ => (whole_end, whole_end),
    };
    let whole = &unsigned[..whole_end];
    let fraction = &unsigned[fraction_start..number_end];
    if whole.is_empty() && fraction.is_empty() {
        return Err(QuantityError::NotAQuantity);
    }
    let scale = Scale::of(&unsigned[number_end..])?;
    let digits = Digits::new(whole, fraction);
    if digits.is_zero() {
        return Ok(0);
    }
    if negative {
        return Err(QuantityError::Negative);
    }
    digits.times(scale)
}

/// Where the run of ASCII digits starting at `from` ends.
fn digits_end(text: &str, from: usize) -> usize {
    let rest = &text.as_bytes()[from..];
    from + rest.iter().position(|b| !b.is_ascii_digit()).unwrap_or(rest.len())
}

/// What a suffix multiplies by: 10^`decimal` · 2^`binary`.
#[derive(Clone, Copy, Debug)]
struct Scale {
    decimal: i64,
    binary: u32,
}

impl Scale {
    fn of(suffix: &str) -> Result<Self, QuantityError> {
        let (decimal, binary) = match suffix {
            "" => (0, 0),
            "k" => (3, 0),
            "M" => (6, 0),
            "G" => (9, 0),
            "T" => (12, 0),
            "P" => (15, 0),
            "E" => (18, 0),
            "Ki" => (0, 10),
            "Mi" => (0, 20),
            "Gi" => (0, 30),
            "Ti" => (0, 40),
            "Pi" => (0, 50),
            "Ei" => (0, 60),
            "m" => return Err(QuantityError::Milli),
            _ => match suffix.strip_prefix(['e', 'E']) {
                Some(exponent) if !exponent.is_empty() => {
                    let power = exponent.parse::<i32>().map_err(|_| QuantityError::BadExponent)?;
                    (i64::from(power), 0)
                }
                // A second point, a sign or a digit after the number: no number at all.
                _ if suffix.starts_with(|c: char| c.is_ascii_digit() || "+-.".contains(c)) => {
                    return Err(QuantityError::NotAQuantity);
                }
                _ => return Err(QuantityError::UnknownUnit),
            },
        };
        Ok(Self { decimal, binary })
    }
}

/// A number as its significant digits (values 0 to 9, no leading or trailing zeros) and the
/// power of ten they are scaled by.
struct Digits {
    significant: Vec<u8>,
    exponent: i64,
}

/// Every number of bytes fits in 20 decimal digits.
const U64_DIGITS: usize = 20;
/// 5^60, the largest divisor a binary fraction can need, has 42 digits.
const LARGEST_DIVISOR_DIGITS: usize = 42;

impl Digits {
    fn new(whole: &str, fraction: &str) -> Self {
        let all = whole.bytes().chain(fraction.bytes()).map(|b| b - b'0');
        let mut significant: Vec<u8> = all.skip_while(|d| *d == 0).collect();
        let trailing = significant.iter().rev().take_while(|d| **d == 0).count();
        significant.truncate(significant.len() - trailing);
        let exponent = count(trailing) - count(fraction.len());
        Self { significant, exponent }
    }

    fn is_zero(&self) -> bool {
        self.significant.is_empty()
    }

    /// The number times `scale`, in whole bytes.
    fn times(mut self, scale: Scale) -> Result<u64, QuantityError> {
        let power = self.exponent.saturating_add(scale.decimal);
        let length = count(self.significant.len());
        if power >= 0 {
            // At least 10^(length - 1 + power): past 20 digits it cannot be a u64.
            if length.saturating_add(power) > count(U64_DIGITS) {
                return Err(QuantityError::TooLarge);
            }
            let ten_to =
                10u128.checked_pow(u32::try_from(power).map_err(|_| QuantityError::TooLarge)?);
            let value = ten_to
                .and_then(|t| self.whole()?.checked_mul(t))
                .and_then(|v| v.checked_mul(1 << scale.binary));
            return value.and_then(|v| u64::try_from(v).ok()).ok_or(QuantityError::TooLarge);
        }
        // Over 10^n = 2^n · 5^n, with no trailing zero left: whole only when 2^n divides
        // 2^binary (so n <= binary <= 60) and 5^n divides the digits.
        let divisions = power.unsigned_abs();
        if divisions > u64::from(scale.binary) {
            return Err(QuantityError::NotWholeBytes);
        }
        // Divided by at most 5^60, more digits than these still leave over 20: too large,
        // whole or not, and not worth dividing.
        if self.significant.len() > U64_DIGITS + LARGEST_DIVISOR_DIGITS {
            return Err(QuantityError::TooLarge);
        }
        for _ in 0..divisions {
            self.divide_by_five()?;
        }
        // `divisions` <= `binary`, which is at most 60.
        let shift = scale.binary - u32::try_from(divisions).map_err(|_| QuantityError::TooLarge)?;
        let value = self.whole().and_then(|v| v.checked_mul(1 << shift));
        value.and_then(|v| u64::try_from(v).ok()).ok_or(QuantityError::TooLarge)
    }

    /// The digits as a number, if they are few enough to be read as one.
    fn whole(&self) -> Option<u128> {
        let digits = self.significant.iter().skip_while(|d| **d == 0);
        if digits.clone().count() > U64_DIGITS {
            return None;
        }
        Some(digits.fold(0u128, |value, d| value * 10 + u128::from(*d)))
    }

    /// Divides the digits by 5 in place, refusing a remainder.
    fn divide_by_five(&mut self) -> Result<(), QuantityError> {
        let mut remainder = 0;
        for digit in &mut self.significant {
            let current = remainder * 10 + *digit;
            *digit = current / 5;
            remainder = current % 5;
        }
        if remainder == 0 { Ok(()) } else { Err(QuantityError::NotWholeBytes) }
    }
}

/// A length as a signed count; no text is anywhere near `i64::MAX` long.
fn count(length: usize) -> i64 {
    i64::try_from(length).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_kubernetes_quantities() {
        for (text, bytes) in [
            ("2G", 2_000_000_000),
            ("2Gi", 2 << 30),
            ("500M", 500_000_000),
            ("1Ki", 1024),
            ("1.5Gi", 3 << 29),
            ("1.5Ki", 1536),
            (".5Ki", 512),
            ("2.", 2),
            ("1e3", 1000),
            ("1E3", 1000),
            ("20e-1", 2),
            ("1e+3", 1000),
            ("4096", 4096),
            ("+1k", 1000),
            ("+1G", 1_000_000_000),
            (" 7 ", 7),
            ("0", 0),
            ("-0", 0),
            ("0.000e999", 0),
            ("007", 7),
            ("1.000", 1),
            ("15Ei", 15 << 60),
            ("18446744073709551615", u64::MAX),
            ("18446744073709551615.000", u64::MAX),
            ("0.000000000000000000867361737988403547205962240695953369140625Ei", 1),
        ] {
            assert_eq!(parse_bytes(text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn every_refusal_says_why() {
        use QuantityError::*;
        for (text, why) in [
            ("-1G", Negative),
            ("-.5", Negative),
            ("500m", Milli),
            ("0.5", NotWholeBytes),
            ("1e-1", NotWholeBytes),
            ("0.3Ki", NotWholeBytes),
            ("2GB", UnknownUnit),
            ("2g", UnknownUnit),
            ("1e", UnknownUnit),
            ("G", NotAQuantity),
            ("", NotAQuantity),
            (".", NotAQuantity),
            ("+", NotAQuantity),
            ("--1", NotAQuantity),
            ("1.2.3", NotAQuantity),
            ("1 G", UnknownUnit),
            ("1e3Ki", BadExponent),
            ("1e99999999999", BadExponent),
            ("16Ei", TooLarge),
            ("18446744073709551616", TooLarge),
            ("1e20", TooLarge),
            ("1e2147483647", TooLarge),
        ] {
            assert_eq!(parse_bytes(text), Err(why), "{text}");
        }
    }

    #[test]
    fn long_fractions_are_refused_without_overflow() {
        // 10^128 wraps a u128 to 0, and 10^39 is past it: both once ended the process.
        let tiny = format!("0.{}1", "0".repeat(127));
        assert_eq!(parse_bytes(&tiny), Err(QuantityError::NotWholeBytes));
        for zeros in 38..200 {
            let text = format!("1.{}", "0".repeat(zeros));
            assert_eq!(parse_bytes(&text), Ok(1), "{text}");
            let text = format!("1.{}1", "0".repeat(zeros));
            assert_eq!(parse_bytes(&text), Err(QuantityError::NotWholeBytes), "{text}");
            let text = format!("0.{}1Ei", "0".repeat(zeros));
            assert_eq!(parse_bytes(&text), Err(QuantityError::NotWholeBytes), "{text}");
        }
        let many = "9".repeat(100_000);
        assert_eq!(parse_bytes(&many), Err(QuantityError::TooLarge));
        assert_eq!(parse_bytes(&format!("{many}.5Ki")), Err(QuantityError::TooLarge));
        assert_eq!(parse_bytes(&format!("0.{many}Ei")), Err(QuantityError::NotWholeBytes));
    }

    #[test]
    fn counts_are_whole_numbers() {
        assert_eq!(parse_count(" 1000 "), Ok(1000));
        assert_eq!(parse_count("+1000"), Ok(1000));
        for text in ["10k", "-1", "1.0", "", "18446744073709551616"] {
            assert_eq!(parse_count(text), Err(CountError), "{text}");
        }
    }
}
