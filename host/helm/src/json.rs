//! Go `encoding/json` compatibility: `Marshal`/`MarshalIndent` output (sorted keys, HTML-safe
//! escapes, Go float formatting) and `Unmarshal` into `interface{}` (numbers become float64).

use crate::strconv::format_float_json;
use crate::value::{Map, Value};

fn write_str(out: &mut String, s: &str, html: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' if html => out.push_str(&format!("\\u{:04x}", c as u32)),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write(out: &mut String, v: &Value, html: bool, indent: Option<&str>, level: usize) {
    let nl = |out: &mut String, level: usize| {
        if let Some(ind) = indent {
            out.push('\n');
            for _ in 0..level {
                out.push_str(ind);
            }
        }
    };
    match v {
        Value::Nil => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::Float(f) => out.push_str(&format_float_json(*f)),
        Value::Str(s) => write_str(out, s, html),
        Value::List(l) => {
            if l.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, e) in l.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                nl(out, level + 1);
                write(out, e, html, indent, level + 1);
            }
            nl(out, level);
            out.push(']');
        }
        Value::Map(m) => {
            let m = m.borrow();
            if m.is_empty() {
                out.push_str("{}");
                return;
            }
            out.push('{');
            for (i, (k, e)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                nl(out, level + 1);
                write_str(out, k, html);
                out.push(':');
                if indent.is_some() {
                    out.push(' ');
                }
                write(out, e, html, indent, level + 1);
            }
            nl(out, level);
            out.push('}');
        }
        Value::Obj(o) => write(out, &o.to_value(), html, indent, level),
    }
}

/// `json.Marshal` (HTML-escaped).
pub fn marshal(v: &Value) -> String {
    let mut s = String::new();
    write(&mut s, v, true, None, 0);
    s
}

/// `json.Marshal` without HTML escaping (Sprig `toRawJson`).
pub fn marshal_raw(v: &Value) -> String {
    let mut s = String::new();
    write(&mut s, v, false, None, 0);
    s
}

/// `json.MarshalIndent(v, "", "  ")`.
pub fn marshal_pretty(v: &Value) -> String {
    let mut s = String::new();
    write(&mut s, v, true, Some("  "), 0);
    s
}

/// Converts parsed JSON into a template value (numbers become float64).
pub fn from_serde(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Nil,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => Value::Float(n.as_f64().unwrap_or(0.0)),
        serde_json::Value::String(s) => Value::from(s.as_str()),
        serde_json::Value::Array(a) => Value::from(a.iter().map(from_serde).collect::<Vec<_>>()),
        serde_json::Value::Object(o) => {
            let m: Map = o.iter().map(|(k, v)| (k.clone(), from_serde(v))).collect();
            Value::from(m)
        }
    }
}

/// Converts an object of the Kubernetes API into a template value as client-go's unstructured
/// JSON decoding does (what `lookup` returns): whole numbers become int64, others float64.
pub fn from_unstructured(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(0.0)),
        },
        serde_json::Value::Array(a) => {
            Value::from(a.iter().map(from_unstructured).collect::<Vec<_>>())
        }
        serde_json::Value::Object(o) => {
            let m: Map = o
                .iter()
                .map(|(k, v)| (k.clone(), from_unstructured(v)))
                .collect();
            Value::from(m)
        }
        other => from_serde(other),
    }
}

/// Converts a template value to serde JSON (for schema validation).
pub fn to_serde(v: &Value) -> serde_json::Value {
    match v {
        Value::Nil => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Int(i) => serde_json::Value::from(*i),
        Value::Float(f) => {
            if f.fract() == 0.0 && f.abs() < 9e15 {
                serde_json::Value::from(*f as i64)
            } else {
                serde_json::Number::from_f64(*f)
                    .map(serde_json::Value::Number)
                    .unwrap_or(serde_json::Value::Null)
            }
        }
        Value::Str(s) => serde_json::Value::String(s.to_string()),
        Value::List(l) => serde_json::Value::Array(l.iter().map(to_serde).collect()),
        Value::Map(m) => serde_json::Value::Object(
            m.borrow()
                .iter()
                .map(|(k, v)| (k.clone(), to_serde(v)))
                .collect(),
        ),
        Value::Obj(o) => to_serde(&o.to_value()),
    }
}

/// `json.Unmarshal` into `interface{}`.
pub fn parse(s: &str) -> Result<Value, String> {
    serde_json::from_str::<serde_json::Value>(s)
        .map(|v| from_serde(&v))
        .map_err(|e| e.to_string())
}
