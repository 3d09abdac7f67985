//! Durations written the way Kubernetes writes them: Go's `time.ParseDuration`, the format of
//! `metav1.Duration` fields. A duration is an optional sign and one or more decimal numbers,
//! each with a unit: `720h`, `1.5h`, `2h45m30.5s`, `300ms`, `.5s`; the units are `ns`, `us`
//! (or `µs`, `μs`), `ms`, `s`, `m` and `h`; `0` alone needs no unit. No spaces. Fractions are
//! kept to the nanosecond, rounded down exactly (Go rounds them through floating point, which
//! may differ by a nanosecond), and the total must fit Go's 2⁶³−1 nanoseconds ([`LONGEST`],
//! about 292 years).

use std::fmt;
use std::time::Duration;

/// The longest duration the format holds: 2⁶³−1 nanoseconds, `2562047h47m16.854775807s`.
pub const LONGEST: Duration = Duration::new(9_223_372_036, 854_775_807);

/// Why a text is not a duration this library takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DurationError {
    /// Not a duration at all.
    Invalid,
    /// A valid duration below zero.
    Negative,
    /// More than [`LONGEST`].
    TooLong,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Invalid => f.write_str(
                "is not a duration such as 720h, 1h30m, 1.5h or 300ms (units ns, us, ms, s, m, h)",
            ),
            Self::Negative => f.write_str("is negative"),
            Self::TooLong => {
                write!(f, "is longer than the longest duration, {}", format_duration(LONGEST))
            }
        }
    }
}

impl std::error::Error for DurationError {}

const NANOS_PER_SEC: u64 = 1_000_000_000;
/// 2⁶³: the most any part of a duration may add up to (Go's bound, checked as it reads).
const NANOS_BOUND: u128 = 1 << 63;

/// Nanoseconds in `unit`, if it is one.
fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => NANOS_PER_SEC,
        "m" => 60 * NANOS_PER_SEC,
        "h" => 3600 * NANOS_PER_SEC,
        _ => return None,
    })
}

/// Reads `text` as a non-negative duration (see the module documentation).
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(DurationError::Invalid);
    }
    let mut total: u128 = 0;
    let mut rest = rest.as_bytes();
    while !rest.is_empty() {
        let (nanos, after) = component(rest)?;
        total += nanos;
        if total > NANOS_BOUND {
            return Err(DurationError::TooLong);
        }
        rest = after;
    }
    if negative && total > 0 {
        return Err(DurationError::Negative);
    }
    let nanos = u64::try_from(total).map_err(|_| DurationError::TooLong)?;
    if nanos > i64::MAX as u64 {
        return Err(DurationError::TooLong);
    }
    Ok(Duration::from_nanos(nanos))
}

/// One `number unit` at the start of `text`: its nanoseconds (at most just above 2⁶³) and what
/// follows it.
fn component(text: &[u8]) -> Result<(u128, &[u8]), DurationError> {
    let whole_len = text.iter().take_while(|b| b.is_ascii_digit()).count();
    let (whole, rest) = text.split_at(whole_len);
    let (fraction, rest) = match rest.split_first() {
        Some((b'.', after)) => {
            let len = after.iter().take_while(|b| b.is_ascii_digit()).count();
            after.split_at(len)
        }
        _ => (&[][..], rest),
    };
    if whole.is_empty() && fraction.is_empty() {
        return Err(DurationError::Invalid);
    }
    let unit_len = rest.iter().take_while(|b| **b != b'.' && !b.is_ascii_digit()).count();
    let (unit, rest) = rest.split_at(unit_len);
    // Cut only before ASCII bytes, so always on a character boundary.
    let unit = std::str::from_utf8(unit).map_err(|_| DurationError::Invalid)?;
    let unit = unit_nanos(unit).ok_or(DurationError::Invalid)?;
    let mut value: u128 = 0;
    for digit in whole {
        value = value * 10 + u128::from(digit - b'0');
        if value > NANOS_BOUND {
            return Err(DurationError::TooLong);
        }
    }
    Ok((value * u128::from(unit) + u128::from(fraction_nanos(fraction, unit)), rest))
}

/// `unit` times `0.<digits>`, rounded down, exactly: from the last digit to the first,
/// `carry = (unit·digit + carry) / 10` (what the digits after one add never reaches a whole
/// nanosecond of it).
fn fraction_nanos(digits: &[u8], unit: u64) -> u64 {
    digits.iter().rev().fold(0, |carry, digit| (unit * u64::from(digit - b'0') + carry) / 10)
}

/// `duration` in the same format, the way Go prints one: `1h30m0s`, `1.5s`, `300ms`, `0s`.
/// [`parse_duration`] reads it back to the same value.
pub fn format_duration(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    let second = u128::from(NANOS_PER_SEC);
    if nanos < second {
        let (scale, unit) = match nanos {
            n if n < 1_000 => (1, "ns"),
            n if n < 1_000_000 => (1_000, "\u{b5}s"),
            _ => (1_000_000, "ms"),
        };
        return format!("{}{unit}", decimal(nanos, scale));
    }
    let seconds = nanos / second;
    let (hours, minutes) = (seconds / 3600, seconds / 60 % 60);
    let rest = decimal(nanos % (60 * second), second);
    match (hours, minutes) {
        (0, 0) => format!("{rest}s"),
        (0, _) => format!("{minutes}m{rest}s"),
        _ => format!("{hours}h{minutes}m{rest}s"),
    }
}

/// `value / scale` in decimal, without trailing zeros in the fraction.
fn decimal(value: u128, scale: u128) -> String {
    let (whole, fraction) = (value / scale, value % scale);
    if fraction == 0 {
        return whole.to_string();
    }
    let width = scale.ilog10() as usize;
    let digits = format!("{fraction:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Result<Duration, DurationError> {
        Ok(Duration::from_millis(n))
    }

    #[test]
    fn every_form_kubernetes_writes_is_read() {
        assert_eq!(parse_duration("720h"), Ok(Duration::from_secs(720 * 3600)));
        assert_eq!(parse_duration("1h30m"), ms(5_400_000));
        assert_eq!(parse_duration("90s"), ms(90_000));
        assert_eq!(parse_duration("1.5h"), ms(5_400_000));
        assert_eq!(parse_duration("300ms"), ms(300));
        assert_eq!(parse_duration("2h45m30.5s"), ms((2 * 3600 + 45 * 60 + 30) * 1000 + 500));
        assert_eq!(parse_duration(".5s"), ms(500));
        assert_eq!(parse_duration("1.s"), ms(1000));
        assert_eq!(parse_duration("+5m"), ms(300_000));
        assert_eq!(parse_duration("1us"), Ok(Duration::from_micros(1)));
        assert_eq!(parse_duration("1µs"), Ok(Duration::from_micros(1)));
        assert_eq!(parse_duration("1μs"), Ok(Duration::from_micros(1)));
        assert_eq!(parse_duration("7ns"), Ok(Duration::from_nanos(7)));
        assert_eq!(parse_duration("1s1s"), ms(2000));
        assert_eq!(parse_duration("0.000000001s"), Ok(Duration::from_nanos(1)));
        assert_eq!(parse_duration("0.0000000019s"), Ok(Duration::from_nanos(1)));
        for zero in ["0", "-0", "+0", "0s", "-0h", "0.0m", ".0ns", "0μs"] {
            assert_eq!(parse_duration(zero), Ok(Duration::ZERO), "{zero:?}");
        }
    }

    #[test]
    fn what_kubernetes_refuses_is_refused_and_negatives_too() {
        for wrong in
            ["", "10", "00", "1d", "h", ".h", "1..5h", "1h ", " 1h", "1 h", "1H", "--1h", "+", "-"]
        {
            assert_eq!(parse_duration(wrong), Err(DurationError::Invalid), "{wrong:?}");
        }
        assert_eq!(parse_duration("-1h"), Err(DurationError::Negative));
        assert_eq!(parse_duration("-1ns"), Err(DurationError::Negative));
    }

    #[test]
    fn the_longest_is_two_to_the_63rd_nanoseconds_less_one() {
        assert_eq!(parse_duration("2562047h47m16.854775807s"), Ok(LONGEST));
        assert_eq!(parse_duration("9223372036854775807ns"), Ok(LONGEST));
        for long in [
            "2562047h47m16.854775808s",
            "9223372036854775808ns",
            "2562048h",
            "99999999h",
            "99999999999999999999999999999h",
        ] {
            assert_eq!(parse_duration(long), Err(DurationError::TooLong), "{long:?}");
        }
        assert!(DurationError::TooLong.to_string().contains("2562047h47m16.854775807s"));
    }

    #[test]
    fn durations_print_the_way_go_prints_them() {
        assert_eq!(format_duration(Duration::ZERO), "0s");
        assert_eq!(format_duration(Duration::from_nanos(5)), "5ns");
        assert_eq!(format_duration(Duration::from_nanos(1500)), "1.5µs");
        assert_eq!(format_duration(Duration::from_millis(300)), "300ms");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(format_duration(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(format_duration(LONGEST), "2562047h47m16.854775807s");
    }
}
