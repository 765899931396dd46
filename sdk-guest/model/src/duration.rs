//! Landscaper's `Duration` encoding: a string, `"none"`, or Go's `time.ParseDuration` syntax
//! (`300ms`, `1.5h`, `1h30m`, `-2s`; units `ns`, `us`, `µs`, `ms`, `s`, `m`, `h`).

use std::time::Duration;

/// A parsed Landscaper duration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoDuration {
    /// The literal `"none"`.
    None,
    /// A non-negative duration. Negative Go durations are clamped to zero.
    Finite(Duration),
}

/// Parses a Landscaper duration string. Errors say what is wrong, in Go's words where possible.
pub fn parse_go_duration(input: &str) -> Result<GoDuration, String> {
    let s = input.trim();
    if s == "none" {
        return Ok(GoDuration::None);
    }
    let invalid = || format!("time: invalid duration \"{input}\"");
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(GoDuration::Finite(Duration::ZERO));
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total_nanos: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(invalid());
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| invalid())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let nanos_per_unit = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err(format!("time: missing unit in duration \"{input}\"")),
            other => {
                return Err(format!(
                    "time: unknown unit \"{other}\" in duration \"{input}\""
                ));
            }
        };
        total_nanos += value * nanos_per_unit;
    }
    if negative {
        return Ok(GoDuration::Finite(Duration::ZERO));
    }
    Ok(GoDuration::Finite(Duration::from_nanos(
        total_nanos.round() as u64,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        let secs = |s: u64| GoDuration::Finite(Duration::from_secs(s));
        assert_eq!(parse_go_duration("10m").unwrap(), secs(600));
        assert_eq!(parse_go_duration("10m0s").unwrap(), secs(600));
        assert_eq!(parse_go_duration("1h30m").unwrap(), secs(5400));
        assert_eq!(parse_go_duration("1.5h").unwrap(), secs(5400));
        assert_eq!(
            parse_go_duration("300ms").unwrap(),
            GoDuration::Finite(Duration::from_millis(300))
        );
        assert_eq!(parse_go_duration("0").unwrap(), secs(0));
        assert_eq!(parse_go_duration("none").unwrap(), GoDuration::None);
    }

    #[test]
    fn rejects_garbage_with_a_clear_message() {
        assert!(parse_go_duration("").is_err());
        assert!(parse_go_duration("ten minutes").is_err());
        let err = parse_go_duration("10").unwrap_err();
        assert!(err.contains("missing unit"), "{err}");
        let err = parse_go_duration("5d").unwrap_err();
        assert!(err.contains("unknown unit \"d\""), "{err}");
    }
}
