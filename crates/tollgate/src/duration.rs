//! Durations as policy files write them: `"250ms"`, `"1s"`, `"60s"`, `"1m"`,
//! `"1h"`, `"1d"`.

use std::time::Duration;

/// Parses a duration written as a whole number followed by a unit: `us`,
/// `ms`, `s`, `m`, `h` or `d`.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(tollgate::parse_duration("250ms"), Ok(Duration::from_millis(250)));
/// assert_eq!(tollgate::parse_duration("1m"), Ok(Duration::from_secs(60)));
/// assert!(tollgate::parse_duration("1.5s").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(|| {
        format!("`{text}` has no unit (write e.g. \"250ms\", \"1s\", \"1m\", \"1h\", \"1d\")")
    })?;
    let (number, unit) = text.split_at(split);
    if number.is_empty() {
        return Err(format!(
            "`{text}` does not start with a whole number (write e.g. \"250ms\", \"60s\")"
        ));
    }
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{text}`: the number is too large"))?;
    let micros_per_unit: u64 = match unit {
        "us" | "µs" => 1,
        "ms" => 1_000,
        "s" => 1_000_000,
        "m" => 60_000_000,
        "h" => 3_600_000_000,
        "d" => 86_400_000_000,
        _ => {
            return Err(format!(
                "`{text}` has an unknown unit `{unit}` (use us, ms, s, m, h or d)"
            ));
        }
    };
    n.checked_mul(micros_per_unit)
        .map(Duration::from_micros)
        .ok_or_else(|| format!("`{text}` is too long"))
}

/// Formats a duration the way [`parse_duration`] reads it, with the largest
/// unit that divides it exactly.
pub fn format_duration(d: Duration) -> String {
    let us = d.as_micros();
    for (unit, size) in [
        ("d", 86_400_000_000u128),
        ("h", 3_600_000_000),
        ("m", 60_000_000),
        ("s", 1_000_000),
        ("ms", 1_000),
    ] {
        if us >= size && us.is_multiple_of(size) {
            return format!("{}{unit}", us / size);
        }
    }
    format!("{us}us")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit_and_round_trips() {
        for (text, micros) in [
            ("7us", 7),
            ("250ms", 250_000),
            ("1s", 1_000_000),
            ("60s", 60_000_000),
            ("1m", 60_000_000),
            ("1h", 3_600_000_000),
            ("1d", 86_400_000_000),
        ] {
            let d = parse_duration(text).unwrap();
            assert_eq!(d, Duration::from_micros(micros), "{text}");
            assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
        }
        assert_eq!(format_duration(Duration::from_secs(90)), "90s");
    }

    #[test]
    fn rejects_with_a_reason() {
        for bad in [
            "",
            "s",
            "10",
            "1.5s",
            "-1s",
            "10 parsecs",
            "99999999999999999999d",
        ] {
            let err = parse_duration(bad).unwrap_err();
            assert!(!err.is_empty(), "{bad}");
        }
        assert!(parse_duration("5w").unwrap_err().contains("unknown unit"));
    }
}
