//! The quota values of `additionalConfig` and StorageClass limits, read the way Rook and NooBaa
//! read them, so that the library and backends agree on what a value means.

/// A number of objects: a whole number such as `"1000"`.
pub fn parse_count(value: &str) -> Result<u64, &'static str> {
    value.trim().parse::<u64>().map_err(|_| "is not a whole number of objects such as \"1000\"")
}

/// A size in bytes written as a Kubernetes quantity: `2G` (2·10⁹), `2Gi` (2·2³⁰), `500M`,
/// `1.5Ti`, `1e9`, or plain bytes. Fractions must come to whole bytes; `m` (milli) is refused
/// as the likely typo it is. The error says why, to follow the value in a message.
pub fn parse_size(value: &str) -> Result<u64, &'static str> {
    let text = value.trim();
    let text = text.strip_prefix('+').unwrap_or(text);
    if text.starts_with('-') {
        return Err("is negative");
    }
    let digits_end = text.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(text.len());
    let (number, suffix) = text.split_at(digits_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err("is not a quantity");
    }
    // value = mantissa · 10^-fraction_digits · multiplier
    let mantissa: u128 = format!("{whole}{fraction}").parse().map_err(|_| "is too large")?;
    let scale = 10u128.pow(u32::try_from(fraction.len()).map_err(|_| "is too long")?);
    let multiplier: u128 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        "m" => return Err("is in thousandths of a byte (m means milli)"),
        exponent if exponent.starts_with(['e', 'E']) => {
            let power: u32 = exponent[1..].parse().map_err(|_| "has a bad exponent")?;
            10u128.checked_pow(power).ok_or("is too large")?
        }
        _ => return Err("has an unknown unit"),
    };
    let scaled = mantissa.checked_mul(multiplier).ok_or("is too large")?;
    if scaled % scale != 0 {
        return Err("is not a whole number of bytes");
    }
    u64::try_from(scaled / scale).map_err(|_| "is too large")
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
            ("1e3", 1000),
            ("4096", 4096),
            ("+1k", 1000),
            (" 7 ", 7),
            ("0", 0),
            ("15Ei", 15 << 60),
        ] {
            assert_eq!(parse_size(text).ok(), Some(bytes), "{text}");
        }
        for (text, why) in [
            ("-1G", "negative"),
            ("500m", "milli"),
            ("0.5", "whole number of bytes"),
            ("2GB", "unknown unit"),
            ("G", "not a quantity"),
            ("1.2.3", "not a quantity"),
            ("16Ei", "too large"),
        ] {
            let error = parse_size(text).unwrap_err();
            assert!(error.contains(why), "{text}: {error}");
        }
    }

    #[test]
    fn counts_are_whole_numbers() {
        assert_eq!(parse_count(" 1000 "), Ok(1000));
        assert!(parse_count("10k").is_err() && parse_count("-1").is_err());
    }
}
