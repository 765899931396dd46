//! Go `fmt` compatibility: `Sprint`, `Sprintln` and `Sprintf` over template values, with
//! Go's `%!verb(type=value)` error markers. Owns: `fmt`'s verbs and padding. Must not touch:
//! number formatting itself ([`crate::strconv`]).

use std::fmt::Write as _;

use crate::strconv::{format_float_v, go_quote};
use crate::value::{Value, write_go};

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
