//! Go `text/template` builtins: `not len index print printf println html js urlquery call`
//! and the comparison functions with Go's basic-kind rules (`eq` of float64 and int is an error).

use std::collections::HashMap;

use super::args::{FR, want, want_min};
use crate::gofmt::{sprint, sprintf, sprintln};
use crate::template::{Exec, Func, FuncError};
use crate::value::Value;

pub(super) fn register(m: &mut HashMap<&'static str, Func>) {
    m.insert("and", |_, a| Ok(a.last().cloned().unwrap_or_default()));
    m.insert("or", |_, a| Ok(a.last().cloned().unwrap_or_default()));
    m.insert("not", |_, a| {
        want("not", a, 1)?;
        Ok(Value::Bool(!a[0].truthy()))
    });
    m.insert("len", len);
    m.insert("index", index);
    m.insert("print", |_, a| Ok(Value::from(sprint(a))));
    m.insert("println", |_, a| Ok(Value::from(sprintln(a))));
    m.insert("printf", |_, a| {
        want_min("printf", a, 1)?;
        let f = super::args::arg_str(&a[0])?;
        Ok(Value::from(sprintf(f, &a[1..])))
    });
    m.insert("html", |_, a| Ok(Value::from(html_escape(&sprint(a)))));
    m.insert("js", |_, a| Ok(Value::from(js_escape(&sprint(a)))));
    m.insert("urlquery", |_, a| Ok(Value::from(query_escape(&sprint(a)))));
    m.insert("call", |_, _| Err(FuncError::call("call of non-function")));
    m.insert("eq", eq);
    m.insert("ne", |e, a| {
        want("ne", a, 2)?;
        Ok(Value::Bool(!eq(e, a)?.truthy()))
    });
    m.insert("lt", |_, a| cmp("lt", a, |o| o == std::cmp::Ordering::Less));
    m.insert("le", |_, a| {
        cmp("le", a, |o| o != std::cmp::Ordering::Greater)
    });
    m.insert("gt", |_, a| {
        cmp("gt", a, |o| o == std::cmp::Ordering::Greater)
    });
    m.insert("ge", |_, a| cmp("ge", a, |o| o != std::cmp::Ordering::Less));
}

fn len(_: &mut Exec, a: &[Value]) -> FR {
    want("len", a, 1)?;
    match a[0].plain() {
        Value::Nil => Err(FuncError::call("len of nil pointer")),
        v => match v.len() {
            Some(n) => Ok(Value::Int(n as i64)),
            None => Err(FuncError::call(format!("len of type {}", v.type_name()))),
        },
    }
}

fn index(_: &mut Exec, a: &[Value]) -> FR {
    if a.is_empty() {
        return Err(FuncError::Arg(
            "wrong number of args for index: want at least 1 got 0".into(),
        ));
    }
    let mut item = a[0].plain();
    for k in &a[1..] {
        item = match &item {
            Value::Map(m) => match k {
                Value::Str(s) => m.borrow().get(&**s).cloned().unwrap_or(Value::Nil),
                Value::Nil => Value::Nil,
                o => {
                    return Err(FuncError::call(format!(
                        "value has type {}; should be string",
                        o.type_name()
                    )));
                }
            },
            Value::List(l) => {
                let i = match k {
                    Value::Int(i) => *i,
                    o => {
                        return Err(FuncError::call(format!(
                            "cannot index slice/array with type {}",
                            o.type_name()
                        )));
                    }
                };
                if i < 0 || i as usize >= l.len() {
                    return Err(FuncError::call(format!("index out of range: {i}")));
                }
                l[i as usize].clone()
            }
            Value::Str(s) => {
                let i = match k {
                    Value::Int(i) => *i,
                    o => {
                        return Err(FuncError::call(format!(
                            "cannot index slice/array with type {}",
                            o.type_name()
                        )));
                    }
                };
                match s.as_bytes().get(i as usize) {
                    Some(b) => Value::Int(*b as i64),
                    None => return Err(FuncError::call(format!("index out of range: {i}"))),
                }
            }
            Value::Nil => return Err(FuncError::call("index of untyped nil")),
            o => {
                return Err(FuncError::call(format!(
                    "can't index item of type {}",
                    o.type_name()
                )));
            }
        };
        item = item.plain();
    }
    Ok(item)
}

#[derive(PartialEq, Clone, Copy, Debug)]
enum Kind {
    Invalid,
    Bool,
    Int,
    Float,
    Str,
    Other,
}

fn kind(v: &Value) -> Kind {
    match v {
        Value::Nil => Kind::Invalid,
        Value::Bool(_) => Kind::Bool,
        Value::Int(_) => Kind::Int,
        Value::Float(_) => Kind::Float,
        Value::Str(_) => Kind::Str,
        _ => Kind::Other,
    }
}

/// Go's `eq`.
pub(crate) fn eq(_: &mut Exec, a: &[Value]) -> FR {
    if a.len() < 2 {
        return Err(FuncError::call("missing argument for comparison"));
    }
    let a1 = a[0].plain();
    let k1 = kind(&a1);
    for b in &a[1..] {
        let b = b.plain();
        let k2 = kind(&b);
        let truth = if k1 != k2 {
            if k1 != Kind::Invalid && k2 != Kind::Invalid {
                return Err(FuncError::call("incompatible types for comparison"));
            }
            false
        } else {
            match (&a1, &b) {
                (Value::Bool(x), Value::Bool(y)) => x == y,
                (Value::Int(x), Value::Int(y)) => x == y,
                (Value::Float(x), Value::Float(y)) => x == y,
                (Value::Str(x), Value::Str(y)) => x == y,
                (Value::Nil, Value::Nil) => true,
                (x, y) => {
                    return Err(FuncError::call(format!(
                        "non-comparable types {}: {}, {}: {}",
                        x.to_go_string(),
                        x.type_name(),
                        y.type_name(),
                        y.to_go_string()
                    )));
                }
            }
        };
        if truth {
            return Ok(Value::Bool(true));
        }
    }
    Ok(Value::Bool(false))
}

fn cmp(name: &str, a: &[Value], f: fn(std::cmp::Ordering) -> bool) -> FR {
    want(name, a, 2)?;
    let (x, y) = (a[0].plain(), a[1].plain());
    let (kx, ky) = (kind(&x), kind(&y));
    if matches!(kx, Kind::Invalid | Kind::Other | Kind::Bool)
        || matches!(ky, Kind::Invalid | Kind::Other | Kind::Bool)
    {
        return Err(FuncError::call("invalid type for comparison"));
    }
    if kx != ky {
        return Err(FuncError::call("incompatible types for comparison"));
    }
    let o = match (&x, &y) {
        (Value::Int(p), Value::Int(q)) => p.cmp(q),
        (Value::Float(p), Value::Float(q)) => p.partial_cmp(q).unwrap_or(std::cmp::Ordering::Equal),
        (Value::Str(p), Value::Str(q)) => p.cmp(q),
        _ => std::cmp::Ordering::Equal,
    };
    Ok(Value::Bool(f(o)))
}

fn html_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => o.push_str("&#34;"),
            '\'' => o.push_str("&#39;"),
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '\0' => o.push('\u{FFFD}'),
            c => o.push(c),
        }
    }
    o
}

fn js_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '\'' => o.push_str("\\'"),
            '"' => o.push_str("\\\""),
            '<' => o.push_str("\\u003C"),
            '>' => o.push_str("\\u003E"),
            '&' => o.push_str("\\u0026"),
            '=' => o.push_str("\\u003D"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04X}", c as u32)),
            c => o.push(c),
        }
    }
    o
}

/// Go `url.QueryEscape`.
pub(crate) fn query_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                o.push(b as char)
            }
            b' ' => o.push('+'),
            b => o.push_str(&format!("%{b:02X}")),
        }
    }
    o
}
