//! Go `strconv` compatibility: float formatting (`'g'` as `%v`, `'f'`, `'e'`, and
//! `encoding/json`'s), `strconv.Quote` and `strconv.ParseInt(s, 0, 64)`. Owns: number and
//! string conversions that know nothing of template values. Must not touch: [`crate::value`]
//! (which stands on this file), `fmt`'s verbs ([`crate::gofmt`]).

use std::fmt::Write as _;

/// Decimal digits and exponent of the shortest round-trip representation of `f` (finite, non-zero).
/// Returns `(negative, digits, dp)` where value = 0.digits × 10^dp.
fn shortest_digits(f: f64) -> (bool, String, i32) {
    let s = format!("{:e}", f);
    let neg = s.starts_with('-');
    let s = s.trim_start_matches('-');
    let (mant, exp) = s.split_once('e').unwrap_or((s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    (neg, digits.to_string(), exp + 1)
}

fn special(f: f64) -> Option<String> {
    if f.is_nan() {
        Some("NaN".into())
    } else if f.is_infinite() {
        Some(if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        })
    } else {
        None
    }
}

fn fmt_e(neg: bool, digits: &str, dp: i32, prec: Option<usize>) -> String {
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    let mut d = digits.to_string();
    if let Some(p) = prec {
        while d.len() < p + 1 {
            d.push('0');
        }
    }
    out.push_str(&d[..1]);
    if d.len() > 1 {
        out.push('.');
        out.push_str(&d[1..]);
    }
    let exp = if digits == "0" { 0 } else { dp - 1 };
    out.push('e');
    out.push(if exp < 0 { '-' } else { '+' });
    let _ = write!(out, "{:02}", exp.abs());
    out
}

fn fmt_f_shortest(neg: bool, digits: &str, dp: i32) -> String {
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    if dp <= 0 {
        out.push_str("0.");
        for _ in 0..(-dp) {
            out.push('0');
        }
        out.push_str(digits);
    } else {
        let dp = dp as usize;
        if digits.len() <= dp {
            out.push_str(digits);
            for _ in digits.len()..dp {
                out.push('0');
            }
        } else {
            out.push_str(&digits[..dp]);
            out.push('.');
            out.push_str(&digits[dp..]);
        }
    }
    out
}

/// `strconv.FormatFloat(f, 'g', -1, 64)`, which is also `fmt`'s `%v` for float64.
pub fn format_float_v(f: f64) -> String {
    if let Some(s) = special(f) {
        return s;
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let (neg, digits, dp) = shortest_digits(f);
    let exp = dp - 1;
    // strconv: with shortest precision, %e is used when exp < -4 || exp >= 6.
    if !(-4..6).contains(&exp) {
        return fmt_e(neg, &digits, dp, None);
    }
    fmt_f_shortest(neg, &digits, dp)
}

/// `strconv.FormatFloat(f, 'f', -1, 64)`.
pub fn format_float_f(f: f64) -> String {
    if let Some(s) = special(f) {
        return s;
    }
    if f == 0.0 {
        return "0".into();
    }
    let (neg, digits, dp) = shortest_digits(f);
    fmt_f_shortest(neg, &digits, dp)
}

/// Go `encoding/json` float formatting.
pub fn format_float_json(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let (neg, digits, dp) = shortest_digits(f);
        let s = fmt_e(neg, &digits, dp, None);
        // clean up e-09 to e-9
        if let Some(idx) = s.find("e-0") {
            return format!("{}e-{}", &s[..idx], &s[idx + 3..]);
        }
        if let Some(idx) = s.find("e+0") {
            return format!("{}e+{}", &s[..idx], &s[idx + 3..]);
        }
        return s;
    }
    format_float_f(f)
}

/// Go `strconv.Quote`.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\x0b' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if ('\u{80}'..='\u{9f}').contains(&c) => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            '\u{feff}' => out.push_str("\\ufeff"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `strconv.ParseInt(s, 0, 64)`.
pub fn parse_int_base0(s: &str) -> Option<i64> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let body = body.replace('_', "");
    let lower = body.to_ascii_lowercase();
    let v = if let Some(h) = lower.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()?
    } else if let Some(o) = lower.strip_prefix("0o") {
        i64::from_str_radix(o, 8).ok()?
    } else if let Some(b) = lower.strip_prefix("0b") {
        i64::from_str_radix(b, 2).ok()?
    } else if lower.len() > 1 && lower.starts_with('0') {
        i64::from_str_radix(&lower[1..], 8).ok()?
    } else {
        if lower.is_empty() || !lower.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        lower.parse::<i64>().ok()?
    };
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats() {
        assert_eq!(format_float_v(1e6), "1e+06");
        assert_eq!(format_float_v(123456.0), "123456");
        assert_eq!(format_float_v(123456789.0), "1.23456789e+08");
        assert_eq!(format_float_v(0.00001), "1e-05");
        assert_eq!(format_float_v(0.0001), "0.0001");
        assert_eq!(format_float_v(3.0), "3");
        assert_eq!(format_float_v(1.5), "1.5");
        assert_eq!(format_float_json(1e21), "1e+21");
        assert_eq!(format_float_json(1e6), "1000000");
        assert_eq!(format_float_json(1e-7), "1e-7");
        assert_eq!(format_float_json(0.5), "0.5");
    }
}
