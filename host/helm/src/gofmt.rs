//! Go `fmt`/`strconv` compatibility: float formatting (`%v`, `'g'`, `'f'`, `'e'`, JSON), `printf`
//! verbs with Go's `%!verb(type=value)` error markers, and `strconv.Quote`.

use std::fmt::Write as _;

use crate::value::{Value, write_go};

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

/// `fmt.Sprint(args...)`: spaces between operands when neither side is a string.
pub fn sprint(args: &[Value]) -> String {
    let mut out = String::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 && !matches!(a, Value::Str(_)) && !matches!(args[i - 1], Value::Str(_)) {
            out.push(' ');
        }
        write_go(&mut out, a);
    }
    out
}

/// `fmt.Sprintln(args...)`: always spaces, trailing newline.
pub fn sprintln(args: &[Value]) -> String {
    let mut out = String::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        write_go(&mut out, a);
    }
    out.push('\n');
    out
}

#[derive(Default, Clone, Copy)]
struct Spec {
    minus: bool,
    plus: bool,
    zero: bool,
    sharp: bool,
    space: bool,
    width: Option<usize>,
    prec: Option<usize>,
}

fn bad(verb: char, v: &Value) -> String {
    match v {
        Value::Nil => format!("%!{verb}(<nil>)"),
        _ => format!("%!{verb}({}={})", v.type_name(), v.to_go_string()),
    }
}

fn pad(s: String, spec: &Spec, numeric: bool) -> String {
    let Some(w) = spec.width else { return s };
    let n = s.chars().count();
    if n >= w {
        return s;
    }
    let fill = w - n;
    if spec.minus {
        let mut s = s;
        s.extend(std::iter::repeat_n(' ', fill));
        s
    } else if spec.zero && numeric {
        let (sign, rest) = if s.starts_with('-') || s.starts_with('+') {
            s.split_at(1)
        } else {
            ("", s.as_str())
        };
        format!("{sign}{}{rest}", "0".repeat(fill))
    } else {
        format!("{}{s}", " ".repeat(fill))
    }
}

fn fmt_int(i: i64, verb: char, spec: &Spec) -> String {
    let mut s = match verb {
        'd' | 'v' => format!("{}", i.unsigned_abs()),
        'x' => format!("{:x}", i.unsigned_abs()),
        'X' => format!("{:X}", i.unsigned_abs()),
        'o' => format!("{:o}", i.unsigned_abs()),
        'b' => format!("{:b}", i.unsigned_abs()),
        _ => unreachable!(),
    };
    if let Some(p) = spec.prec {
        while s.len() < p {
            s.insert(0, '0');
        }
    }
    if spec.sharp {
        match verb {
            'x' => s.insert_str(0, "0x"),
            'X' => s.insert_str(0, "0X"),
            'o' => s.insert(0, '0'),
            _ => {}
        }
    }
    if i < 0 {
        s.insert(0, '-');
    } else if spec.plus {
        s.insert(0, '+');
    } else if spec.space {
        s.insert(0, ' ');
    }
    s
}

fn fmt_float(f: f64, verb: char, spec: &Spec) -> String {
    let mut s = match (verb, spec.prec) {
        ('v', _) | ('g', None) => format_float_v(f),
        ('f' | 'F', None) => format!("{:.6}", f),
        ('f' | 'F', Some(p)) => format!("{:.*}", p, f),
        ('e', p) => {
            let p = p.unwrap_or(6);
            let r = format!("{:.*e}", p, f);
            let (m, e) = r.split_once('e').unwrap();
            let e: i32 = e.parse().unwrap();
            format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
        }
        ('g', Some(p)) => {
            let p = p.max(1);
            let r = format!("{:.*e}", p - 1, f);
            let (_, e) = r.split_once('e').unwrap();
            let e: i32 = e.parse().unwrap();
            if e < -4 || e >= p as i32 {
                let (m, _) = r.split_once('e').unwrap();
                let m = if m.contains('.') {
                    m.trim_end_matches('0').trim_end_matches('.')
                } else {
                    m
                };
                format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
            } else {
                let s = format!("{:.*}", (p as i32 - 1 - e).max(0) as usize, f);
                if s.contains('.') {
                    s.trim_end_matches('0').trim_end_matches('.').to_string()
                } else {
                    s
                }
            }
        }
        _ => format_float_v(f),
    };
    if spec.plus && f >= 0.0 {
        s.insert(0, '+');
    }
    s
}

fn fmt_str_verb(v: &Value, verb: char, spec: &Spec) -> String {
    match v {
        Value::Str(s) => match verb {
            's' | 'v' => match spec.prec {
                Some(p) => s.chars().take(p).collect(),
                None => s.to_string(),
            },
            'q' => go_quote(s),
            'x' => s.bytes().map(|b| format!("{b:02x}")).collect(),
            'X' => s.bytes().map(|b| format!("{b:02X}")).collect(),
            _ => bad(verb, v),
        },
        _ => bad(verb, v),
    }
}

/// Formats one operand for `verb`.
fn fmt_value(v: &Value, verb: char, spec: &Spec) -> String {
    if let (Value::Obj(_), 'v') = (v, verb) {
        // the object's own `%v` (a struct prints `{a b}`)
        return pad(v.to_go_string(), spec, false);
    }
    let v = &v.plain();
    match verb {
        'v' => match v {
            Value::Float(f) => pad(fmt_float(*f, 'v', spec), spec, true),
            Value::Int(i) => pad(fmt_int(*i, 'd', spec), spec, true),
            Value::Str(s) if spec.sharp => go_quote(s),
            _ => pad(v.to_go_string(), spec, false),
        },
        'T' => pad(v.type_name().to_string(), spec, false),
        's' | 'q' | 'x' | 'X' | 'd' | 'o' | 'b' | 'c' | 't' | 'f' | 'F' | 'e' | 'g' => match v {
            Value::List(l) => {
                let parts: Vec<String> = l.iter().map(|e| fmt_value(e, verb, spec)).collect();
                format!("[{}]", parts.join(" "))
            }
            Value::Map(m) => {
                let parts: Vec<String> = m
                    .borrow()
                    .iter()
                    .map(|(k, e)| {
                        format!(
                            "{}:{}",
                            fmt_value(&Value::from(k.as_str()), verb, spec),
                            fmt_value(e, verb, spec)
                        )
                    })
                    .collect();
                format!("map[{}]", parts.join(" "))
            }
            Value::Int(i) => match verb {
                'd' | 'x' | 'X' | 'o' | 'b' => pad(fmt_int(*i, verb, spec), spec, true),
                'c' => char::from_u32(*i as u32)
                    .map(String::from)
                    .unwrap_or_default(),
                'q' => format!("'{}'", char::from_u32(*i as u32).unwrap_or('?')),
                _ => bad(verb, v),
            },
            Value::Float(f) => match verb {
                'f' | 'F' | 'e' | 'g' => pad(fmt_float(*f, verb, spec), spec, true),
                _ => bad(verb, v),
            },
            Value::Bool(b) => match verb {
                't' => pad(b.to_string(), spec, false),
                _ => bad(verb, v),
            },
            Value::Str(_) => pad(fmt_str_verb(v, verb, spec), spec, false),
            _ => bad(verb, v),
        },
        _ => format!("%!{verb}({}={})", v.type_name(), v.to_go_string()),
    }
}

/// Go `fmt.Sprintf`.
pub fn sprintf(format: &str, args: &[Value]) -> String {
    let mut out = String::with_capacity(format.len() + 16);
    let mut argi = 0;
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = Spec::default();
        loop {
            match chars.peek() {
                Some('-') => spec.minus = true,
                Some('+') => spec.plus = true,
                Some('0') => spec.zero = true,
                Some('#') => spec.sharp = true,
                Some(' ') => spec.space = true,
                _ => break,
            }
            chars.next();
        }
        let mut num = |chars: &mut std::iter::Peekable<std::str::Chars>| -> Option<usize> {
            if chars.peek() == Some(&'*') {
                chars.next();
                let v = args.get(argi).cloned();
                argi += 1;
                return match v {
                    Some(Value::Int(i)) => Some(i.max(0) as usize),
                    _ => None,
                };
            }
            let mut n = None;
            while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
                n = Some(n.unwrap_or(0) * 10 + d as usize);
                chars.next();
            }
            n
        };
        spec.width = num(&mut chars);
        if chars.peek() == Some(&'.') {
            chars.next();
            spec.prec = Some(num(&mut chars).unwrap_or(0));
        }
        let Some(verb) = chars.next() else {
            out.push_str("%!(NOVERB)");
            break;
        };
        if verb == '%' {
            out.push('%');
            continue;
        }
        match args.get(argi) {
            None => {
                let _ = write!(out, "%!{verb}(MISSING)");
            }
            Some(v) => out.push_str(&fmt_value(v, verb, &spec)),
        }
        argi += 1;
    }
    if argi < args.len() {
        out.push_str("%!(EXTRA ");
        let extra: Vec<String> = args[argi..]
            .iter()
            .map(|a| format!("{}={}", a.type_name(), a.to_go_string()))
            .collect();
        out.push_str(&extra.join(", "));
        out.push(')');
    }
    out
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

    #[test]
    fn printf() {
        let a = |s: &str| Value::from(s);
        assert_eq!(sprintf("%s-%d", &[a("x"), Value::Int(3)]), "x-3");
        assert_eq!(sprintf("%d", &[a("x")]), "%!d(string=x)");
        assert_eq!(sprintf("%v", &[Value::Float(1e6)]), "1e+06");
        assert_eq!(sprintf("%q", &[a("a\"b")]), "\"a\\\"b\"");
        assert_eq!(sprintf("%05.1f", &[Value::Float(2.25)]), "002.2");
        assert_eq!(sprintf("%s", &[]), "%!s(MISSING)");
    }
}
