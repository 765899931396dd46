//! Go's `time.ParseDuration`, ported exactly (integer part, float-scaled fraction, the
//! same overflow limits and error texts), because `every` and `@every <d>` are Go durations.
//!
//! Owns: parsing only. Must not touch: what a duration means for a schedule (`schedule`).

/// Nanoseconds per unit, as in Go's `unitMap`.
fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

const LIMIT: u64 = 1 << 63;

/// Consumes leading digits; `Err` on overflow of `1<<63` (Go's `leadingInt`).
fn leading_int(s: &str) -> Result<(u64, &str), ()> {
    let end = s.bytes().take_while(u8::is_ascii_digit).count();
    let mut x: u64 = 0;
    for c in s[..end].bytes() {
        if x > (LIMIT - 1) / 10 {
            return Err(());
        }
        x = x * 10 + u64::from(c - b'0');
        if x > LIMIT {
            return Err(());
        }
    }
    Ok((x, &s[end..]))
}

/// Consumes leading digits of a fraction, ignoring digits past the precision limit
/// (Go's `leadingFraction`). Returns the value, its scale and the rest.
fn leading_fraction(s: &str) -> (u64, f64, &str) {
    let end = s.bytes().take_while(u8::is_ascii_digit).count();
    let (mut x, mut scale, mut overflow) = (0u64, 1f64, false);
    for c in s[..end].bytes() {
        if overflow {
            continue;
        }
        if x > (LIMIT - 1) / 10 {
            overflow = true;
            continue;
        }
        let y = x * 10 + u64::from(c - b'0');
        if y > LIMIT {
            overflow = true;
            continue;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale, &s[end..])
}

/// Parses a Go duration string (`300ms`, `-1.5h`, `1h30m`) into signed nanoseconds.
/// Errors carry Go's message (`time: invalid duration "x"`, `time: missing unit ...`).
pub fn parse_go_duration(input: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {input:?}");
    let mut s = input;
    let mut negative = false;
    if let Some(c @ (b'-' | b'+')) = s.bytes().next() {
        negative = c == b'-';
        s = &s[1..];
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        let first = s.as_bytes()[0];
        if !(first == b'.' || first.is_ascii_digit()) {
            return Err(invalid());
        }
        let before = s.len();
        let (mut v, rest) = leading_int(s).map_err(|()| invalid())?;
        s = rest;
        let pre = before != s.len();
        let (mut f, mut scale, mut post) = (0u64, 1f64, false);
        if let Some(rest) = s.strip_prefix('.') {
            let before = rest.len();
            (f, scale, s) = leading_fraction(rest);
            post = before != s.len();
        }
        if !pre && !post {
            return Err(invalid());
        }
        let unit_len = s
            .bytes()
            .take_while(|c| !(*c == b'.' || c.is_ascii_digit()))
            .count();
        if unit_len == 0 {
            return Err(format!("time: missing unit in duration {input:?}"));
        }
        let unit_str = &s[..unit_len];
        s = &s[unit_len..];
        let unit = unit_nanos(unit_str)
            .ok_or_else(|| format!("time: unknown unit {unit_str:?} in duration {input:?}"))?;
        if v > LIMIT / unit {
            return Err(invalid());
        }
        v *= unit;
        if f > 0 {
            // Go: v += uint64(float64(f) * (float64(unit) / scale))
            v += (f as f64 * (unit as f64 / scale)) as u64;
            if v > LIMIT {
                return Err(invalid());
            }
        }
        total += v;
        if total > LIMIT {
            return Err(invalid());
        }
    }
    if negative {
        // total <= 1<<63, so the negation fits (i64::MIN at most).
        return Ok((total as i128).wrapping_neg() as i64);
    }
    i64::try_from(total).map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use super::parse_go_duration;

    const S: i64 = 1_000_000_000;

    #[test]
    fn go_durations_parse_like_go() {
        assert_eq!(parse_go_duration("0"), Ok(0));
        assert_eq!(parse_go_duration("1h"), Ok(3600 * S));
        assert_eq!(parse_go_duration("1h30m"), Ok(5400 * S));
        assert_eq!(parse_go_duration("1.5h"), Ok(5400 * S));
        assert_eq!(parse_go_duration("90s"), Ok(90 * S));
        assert_eq!(parse_go_duration("300ms"), Ok(300_000_000));
        assert_eq!(parse_go_duration(".5s"), Ok(S / 2));
        assert_eq!(parse_go_duration("1.s"), Ok(S));
        assert_eq!(parse_go_duration("2\u{b5}s"), Ok(2_000));
        assert_eq!(parse_go_duration("-5s"), Ok(-5 * S));
        assert_eq!(parse_go_duration("+5s"), Ok(5 * S));
        assert_eq!(parse_go_duration("-0"), Ok(0));
        assert_eq!(parse_go_duration("-9223372036854775808ns"), Ok(i64::MIN));
    }

    #[test]
    fn garbage_is_rejected_with_gos_messages() {
        assert_eq!(
            parse_go_duration(""),
            Err(r#"time: invalid duration """#.into())
        );
        assert_eq!(
            parse_go_duration("10"),
            Err(r#"time: missing unit in duration "10""#.into())
        );
        assert_eq!(
            parse_go_duration("5d"),
            Err(r#"time: unknown unit "d" in duration "5d""#.into())
        );
        assert!(parse_go_duration(".s").is_err());
        assert!(parse_go_duration("1h 30m").is_err());
        assert!(parse_go_duration("9223372036854775808ns").is_err());
        assert!(parse_go_duration("3000000h").is_err());
    }
}
