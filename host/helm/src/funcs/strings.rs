//! Sprig string functions: case, trimming, indentation, quoting, splitting/joining, random
//! strings, hashes and base64/base32.

use std::collections::HashMap;

use base64::Engine as _;
use sha2::Digest;

use super::args::{FR, arg_int, arg_str, strslice, strval, want};
use crate::strconv::go_quote;
use crate::template::Func;
use crate::value::{Map, Value};

macro_rules! s1 {
    ($m:ident, $name:literal, $f:expr) => {
        $m.insert($name, |_, a| {
            want($name, a, 1)?;
            let s = arg_str(&a[0])?;
            let f: fn(&str) -> String = $f;
            Ok(Value::from(f(s)))
        });
    };
}

macro_rules! s2 {
    ($m:ident, $name:literal, $f:expr) => {
        $m.insert($name, |_, a| {
            want($name, a, 2)?;
            let x = arg_str(&a[0])?;
            let y = arg_str(&a[1])?;
            let f: fn(&str, &str) -> Value = $f;
            Ok(f(x, y))
        });
    };
}

pub(super) fn register(m: &mut HashMap<&'static str, Func>) {
    s1!(m, "upper", |s| s.to_uppercase());
    s1!(m, "lower", |s| s.to_lowercase());
    s1!(m, "title", title);
    s1!(m, "untitle", |s| {
        let mut out = String::new();
        let mut prev_space = true;
        for c in s.chars() {
            if prev_space {
                out.extend(c.to_lowercase())
            } else {
                out.push(c)
            }
            prev_space = c.is_whitespace();
        }
        out
    });
    s1!(m, "trim", |s| s.trim().to_string());
    s1!(m, "nospace", |s| s
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect());
    s1!(m, "initials", |s| s
        .split_whitespace()
        .filter_map(|w| w.chars().next())
        .collect());
    s1!(m, "swapcase", |s| s
        .chars()
        .map(|c| if c.is_uppercase() {
            c.to_lowercase().next().unwrap_or(c)
        } else {
            c.to_uppercase().next().unwrap_or(c)
        })
        .collect());
    s1!(m, "snakecase", |s| case_words(s, "_", false));
    s1!(m, "kebabcase", |s| case_words(s, "-", false));
    s1!(m, "camelcase", camelcase);
    s1!(m, "b64enc", |s| base64::engine::general_purpose::STANDARD
        .encode(s));
    s1!(
        m,
        "b64dec",
        |s| match base64::engine::general_purpose::STANDARD.decode(s) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) => e.to_string(),
        }
    );
    s1!(m, "b32enc", b32enc);
    s1!(m, "b32dec", |s| b32dec(s)
        .unwrap_or_else(|| "illegal base32 data".into()));
    s1!(m, "sha256sum", |s| hex::encode(sha2::Sha256::digest(
        s.as_bytes()
    )));
    s1!(m, "sha512sum", |s| hex::encode(sha2::Sha512::digest(
        s.as_bytes()
    )));
    s1!(m, "sha1sum", |s| {
        use sha1::Digest as _;
        hex::encode(sha1::Sha1::digest(s.as_bytes()))
    });
    s1!(m, "adler32sum", |s| {
        let (mut a, mut b) = (1u32, 0u32);
        for &c in s.as_bytes() {
            a = (a + c as u32) % 65521;
            b = (b + a) % 65521;
        }
        ((b << 16) | a).to_string()
    });
    s2!(m, "trimSuffix", |suf, s| Value::from(
        s.strip_suffix(suf).unwrap_or(s)
    ));
    s2!(m, "trimPrefix", |pre, s| Value::from(
        s.strip_prefix(pre).unwrap_or(s)
    ));
    s2!(m, "trimAll", |cut, s| Value::from(
        s.trim_matches(|c| cut.contains(c))
    ));
    s2!(m, "trimall", |cut, s| Value::from(
        s.trim_matches(|c| cut.contains(c))
    ));
    s2!(m, "contains", |sub, s| Value::Bool(s.contains(sub)));
    s2!(m, "hasPrefix", |pre, s| Value::Bool(s.starts_with(pre)));
    s2!(m, "hasSuffix", |suf, s| Value::Bool(s.ends_with(suf)));
    s2!(m, "splitList", |sep, s| Value::from(
        go_split(s, sep)
            .into_iter()
            .map(Value::from)
            .collect::<Vec<_>>()
    ));
    s2!(m, "split", |sep, s| {
        let mut mp = Map::new();
        for (i, p) in go_split(s, sep).into_iter().enumerate() {
            mp.insert(format!("_{i}"), Value::from(p));
        }
        Value::from(mp)
    });
    m.insert("splitn", |_, a| splitn(a));
    m.insert("replace", |_, a| {
        want("replace", a, 3)?;
        let (old, new, s) = (arg_str(&a[0])?, arg_str(&a[1])?, arg_str(&a[2])?);
        Ok(Value::from(go_replace(s, old, new)))
    });
    m.insert("repeat", |_, a| {
        want("repeat", a, 2)?;
        let n = arg_int(&a[0])?;
        let s = arg_str(&a[1])?;
        Ok(Value::from(s.repeat(n.max(0) as usize)))
    });
    m.insert("substr", |_, a| {
        want("substr", a, 3)?;
        let (start, end, s) = (arg_int(&a[0])?, arg_int(&a[1])?, arg_str(&a[2])?);
        let len = s.len() as i64;
        let r = if start < 0 {
            s.get(..end.clamp(0, len) as usize)
        } else if end < 0 || end > len {
            s.get(start.min(len) as usize..)
        } else {
            s.get(start.min(end) as usize..end as usize)
        };
        Ok(Value::from(r.unwrap_or("")))
    });
    m.insert("trunc", |_, a| {
        want("trunc", a, 2)?;
        let c = arg_int(&a[0])?;
        let s = arg_str(&a[1])?;
        let len = s.len() as i64;
        let r = if c < 0 && len + c > 0 {
            s.get((len + c) as usize..).unwrap_or(s)
        } else if c >= 0 && len > c {
            s.get(..c as usize).unwrap_or(s)
        } else {
            s
        };
        Ok(Value::from(r))
    });
    m.insert("abbrev", |_, a| {
        want("abbrev", a, 2)?;
        let w = arg_int(&a[0])?;
        let s = arg_str(&a[1])?;
        if w < 4 || s.len() as i64 <= w {
            return Ok(Value::from(s));
        }
        Ok(Value::from(format!("{}...", &s[..(w - 3) as usize])))
    });
    m.insert("abbrevboth", |_, a| {
        want("abbrevboth", a, 3)?;
        let s = arg_str(&a[2])?;
        Ok(Value::from(s))
    });
    m.insert("indent", |_, a| {
        want("indent", a, 2)?;
        let n = arg_int(&a[0])?;
        let s = arg_str(&a[1])?;
        Ok(Value::from(indent(n, s)))
    });
    m.insert("nindent", |_, a| {
        want("nindent", a, 2)?;
        let n = arg_int(&a[0])?;
        let s = arg_str(&a[1])?;
        Ok(Value::from(format!("\n{}", indent(n, s))))
    });
    m.insert("quote", |_, a| {
        let parts: Vec<String> = a
            .iter()
            .filter(|v| !v.is_nil())
            .map(|v| go_quote(&strval(v)))
            .collect();
        Ok(Value::from(parts.join(" ")))
    });
    m.insert("squote", |_, a| {
        let parts: Vec<String> = a
            .iter()
            .filter(|v| !v.is_nil())
            .map(|v| format!("'{}'", strval(v)))
            .collect();
        Ok(Value::from(parts.join(" ")))
    });
    m.insert("cat", |_, a| {
        let parts: Vec<String> = a
            .iter()
            .filter(|v| !v.is_nil())
            .map(|v| v.to_go_string())
            .collect();
        Ok(Value::from(parts.join(" ")))
    });
    m.insert("join", |_, a| {
        want("join", a, 2)?;
        let sep = arg_str(&a[0])?;
        Ok(Value::from(strslice(&a[1].plain()).join(sep)))
    });
    m.insert("sortAlpha", |_, a| {
        want("sortAlpha", a, 1)?;
        let mut v = match a[0].plain() {
            Value::List(_) => strslice(&a[0].plain()),
            Value::Nil => Vec::new(),
            o => vec![strval(&o)],
        };
        v.sort();
        Ok(Value::from(
            v.into_iter().map(Value::from).collect::<Vec<_>>(),
        ))
    });
    m.insert("toStrings", |_, a| {
        want("toStrings", a, 1)?;
        Ok(Value::from(
            strslice(&a[0].plain())
                .into_iter()
                .map(Value::from)
                .collect::<Vec<_>>(),
        ))
    });
    m.insert("plural", |_, a| {
        want("plural", a, 3)?;
        let one = arg_str(&a[0])?;
        let many = arg_str(&a[1])?;
        let n = arg_int(&a[2])?;
        Ok(Value::from(if n == 1 { one } else { many }))
    });
    m.insert("wrap", |_, a| {
        want("wrap", a, 2)?;
        let n = arg_int(&a[0])?;
        Ok(Value::from(wrap(arg_str(&a[1])?, n as usize, "\n")))
    });
    m.insert("wrapWith", |_, a| {
        want("wrapWith", a, 3)?;
        let n = arg_int(&a[0])?;
        Ok(Value::from(wrap(
            arg_str(&a[2])?,
            n as usize,
            arg_str(&a[1])?,
        )))
    });
    m.insert("randAlphaNum", |_, a| {
        rand_str(
            a,
            "randAlphaNum",
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
        )
    });
    m.insert("randAlpha", |_, a| {
        rand_str(
            a,
            "randAlpha",
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
        )
    });
    m.insert("randNumeric", |_, a| {
        rand_str(a, "randNumeric", b"0123456789")
    });
    m.insert("randAscii", |_, a| {
        let set: Vec<u8> = (32u8..127).collect();
        want("randAscii", a, 1)?;
        let n = arg_int(&a[0])?;
        Ok(Value::from(random_from(&set, n.max(0) as usize)))
    });
    m.insert("shuffle", |_, a| {
        want("shuffle", a, 1)?;
        let mut c: Vec<char> = arg_str(&a[0])?.chars().collect();
        for i in (1..c.len()).rev() {
            let j = (rand_u64() % (i as u64 + 1)) as usize;
            c.swap(i, j);
        }
        Ok(Value::from(c.into_iter().collect::<String>()))
    });
    m.insert("toString", |_, a| {
        want("toString", a, 1)?;
        Ok(Value::from(strval(&a[0].plain())))
    });
}

/// Sprig's `splitn`.
fn splitn(a: &[Value]) -> FR {
    want("splitn", a, 3)?;
    let sep = arg_str(&a[0])?;
    let n = arg_int(&a[1])?;
    let s = arg_str(&a[2])?;
    let parts: Vec<&str> = if n < 0 {
        s.split(sep).collect()
    } else {
        s.splitn(n as usize, sep).collect()
    };
    let mut mp = Map::new();
    for (i, p) in parts.into_iter().enumerate() {
        mp.insert(format!("_{i}"), Value::from(p));
    }
    Ok(Value::from(mp))
}

fn rand_str(a: &[Value], name: &str, set: &[u8]) -> FR {
    want(name, a, 1)?;
    let n = arg_int(&a[0])?;
    Ok(Value::from(random_from(set, n.max(0) as usize)))
}

/// A random u64 from the platform source.
pub(crate) fn rand_u64() -> u64 {
    let mut b = [0u8; 8];
    let _ = getrandom::fill(&mut b);
    u64::from_le_bytes(b)
}

fn random_from(set: &[u8], n: usize) -> String {
    (0..n)
        .map(|_| set[(rand_u64() % set.len() as u64) as usize] as char)
        .collect()
}

/// Go `strings.Split`.
pub(crate) fn go_split(s: &str, sep: &str) -> Vec<String> {
    if sep.is_empty() {
        return s.chars().map(|c| c.to_string()).collect();
    }
    s.split(sep).map(String::from).collect()
}

/// Go `strings.Replace(s, old, new, -1)` (an empty `old` inserts between runes).
pub(crate) fn go_replace(s: &str, old: &str, new: &str) -> String {
    if old.is_empty() {
        let mut out = String::from(new);
        for c in s.chars() {
            out.push(c);
            out.push_str(new);
        }
        return out;
    }
    s.replace(old, new)
}

/// Sprig `indent`.
pub(crate) fn indent(n: i64, s: &str) -> String {
    let pad = " ".repeat(n.max(0) as usize);
    let mut out = String::with_capacity(s.len() + pad.len() * 4);
    out.push_str(&pad);
    out.push_str(&s.replace('\n', &format!("\n{pad}")));
    out
}

fn title(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut prev_letter = false;
    for c in s.chars() {
        if !prev_letter {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
        prev_letter = c.is_alphanumeric() || c == '_' || c == '\'';
    }
    out
}

fn split_words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = s.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            continue;
        }
        if c.is_uppercase() && !cur.is_empty() {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower) {
                words.push(std::mem::take(&mut cur));
            }
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

fn case_words(s: &str, sep: &str, _upper: bool) -> String {
    split_words(s)
        .into_iter()
        .map(|w| w.to_lowercase())
        .collect::<Vec<_>>()
        .join(sep)
}

fn camelcase(s: &str) -> String {
    s.split('_')
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

fn wrap(s: &str, width: usize, nl: &str) -> String {
    let width = width.max(1);
    let mut out = String::new();
    for (li, line) in s.split('\n').enumerate() {
        if li > 0 {
            out.push('\n');
        }
        let mut col = 0;
        for (wi, w) in line.split(' ').enumerate() {
            if wi > 0 {
                if col + 1 + w.len() > width {
                    out.push_str(nl);
                    col = 0;
                } else {
                    out.push(' ');
                    col += 1;
                }
            }
            out.push_str(w);
            col += w.len();
        }
    }
    out
}

const B32: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

fn b32enc(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::new();
    for chunk in b.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let v = u64::from_be_bytes([0, 0, 0, buf[0], buf[1], buf[2], buf[3], buf[4]]);
        let n = match chunk.len() {
            1 => 2,
            2 => 4,
            3 => 5,
            4 => 7,
            _ => 8,
        };
        for i in 0..8 {
            if i < n {
                out.push(B32[((v >> (35 - i * 5)) & 31) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn b32dec(s: &str) -> Option<String> {
    let mut bits = 0u64;
    let mut nbits = 0;
    let mut out = Vec::new();
    for c in s.trim_end_matches('=').bytes() {
        let v = B32.iter().position(|x| *x == c)? as u64;
        bits = (bits << 5) | v;
        nbits += 5;
        if nbits >= 8 {
            nbits -= 8;
            out.push((bits >> nbits) as u8);
            bits &= (1 << nbits) - 1;
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}
