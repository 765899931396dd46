//! Values as Helm handles them: reading values files (sigs.k8s.io/yaml semantics), merging
//! `-f` files and `--set`/`--set-string` (pkg/strvals), and Helm's coalescing of user values with
//! chart defaults (`chartutil/coalesce.go`: null deletes a default, globals flow down).

use std::rc::Rc;

use crate::value::{Map, MapRef, Value};
use crate::yaml;

/// Reads a values document; an empty document is an empty map.
pub fn read_values(src: &str) -> Result<Value, String> {
    match yaml::parse(src).map_err(|e| e.0)? {
        Value::Nil => Ok(Value::new_map()),
        v @ Value::Map(_) => Ok(v),
        other => Err(format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            match other {
                Value::List(_) => "array",
                Value::Str(_) => "string",
                Value::Bool(_) => "bool",
                _ => "number",
            }
        )),
    }
}

/// `cli/values.mergeMaps`: a deep merge where `b` wins; returns a new map.
pub fn merge_maps(a: &MapRef, b: &MapRef) -> MapRef {
    let mut out: Map = a.borrow().clone();
    for (k, v) in b.borrow().iter() {
        if let Value::Map(vm) = v
            && let Some(Value::Map(bv)) = out.get(k)
        {
            let merged = merge_maps(bv, vm);
            out.insert(k.clone(), Value::Map(merged));
            continue;
        }
        out.insert(k.clone(), v.clone());
    }
    Rc::new(std::cell::RefCell::new(out))
}

fn typed_val(v: &str, as_string: bool) -> Value {
    if as_string {
        return Value::from(v);
    }
    if v.eq_ignore_ascii_case("true") {
        return Value::Bool(true);
    }
    if v.eq_ignore_ascii_case("false") {
        return Value::Bool(false);
    }
    if v.eq_ignore_ascii_case("null") {
        return Value::Nil;
    }
    if v == "0" {
        return Value::Int(0);
    }
    if !v.is_empty()
        && !v.starts_with('0')
        && let Ok(i) = v.parse::<i64>()
    {
        return Value::Int(i);
    }
    Value::from(v)
}

/// Splits on unescaped `sep` outside `{…}`; keeps backslashes for later unescaping.
fn split_top(s: &str, sep: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                cur.push(c);
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '{' => {
                depth += 1;
                cur.push(c);
            }
            '}' => {
                depth -= 1;
                cur.push(c);
            }
            c if c == sep && depth == 0 => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

enum Seg {
    Key(String),
    Index(usize),
}

fn parse_key(k: &str) -> Result<Vec<Seg>, String> {
    let mut segs = Vec::new();
    for part in split_top(k, '.') {
        let mut p = part.as_str();
        let name_end = p.find('[').unwrap_or(p.len());
        let name = unescape(&p[..name_end]);
        if !name.is_empty() {
            segs.push(Seg::Key(name));
        }
        p = &p[name_end..];
        while let Some(rest) = p.strip_prefix('[') {
            let end = rest
                .find(']')
                .ok_or_else(|| format!("key {k:?} has no closing bracket"))?;
            let idx: usize = rest[..end]
                .parse()
                .map_err(|_| format!("failed to parse index {:?}", &rest[..end]))?;
            if idx > 65536 {
                return Err(format!(
                    "index of {idx} is greater than maximum supported index of 65536"
                ));
            }
            segs.push(Seg::Index(idx));
            p = &rest[end + 1..];
        }
    }
    Ok(segs)
}

fn set_path(cur: Value, segs: &[Seg], val: Value) -> Value {
    let Some(seg) = segs.first() else { return val };
    match seg {
        Seg::Key(k) => {
            let m = match cur {
                Value::Map(m) => m,
                _ => Rc::new(std::cell::RefCell::new(Map::new())),
            };
            let existing = m.borrow().get(k).cloned().unwrap_or_default();
            let nv = set_path(existing, &segs[1..], val);
            m.borrow_mut().insert(k.clone(), nv);
            Value::Map(m)
        }
        Seg::Index(i) => {
            let mut l = match cur {
                Value::List(l) => (*l).clone(),
                _ => Vec::new(),
            };
            while l.len() <= *i {
                l.push(Value::Nil);
            }
            let existing = std::mem::take(&mut l[*i]);
            l[*i] = set_path(existing, &segs[1..], val);
            Value::from(l)
        }
    }
}

/// `strvals.ParseInto` (or `ParseIntoString` when `as_string`): applies `a.b=c,d[0]=e,f={x,y}`.
pub fn parse_set(expr: &str, base: &MapRef, as_string: bool) -> Result<(), String> {
    for assign in split_top(expr, ',') {
        if assign.is_empty() {
            continue;
        }
        let Some(eq) = find_unescaped(&assign, '=') else {
            return Err(format!("key {:?} has no value", unescape(&assign)));
        };
        let (k, v) = (&assign[..eq], &assign[eq + 1..]);
        let val = if v.starts_with('{') && v.ends_with('}') && !as_string {
            let inner = &v[1..v.len() - 1];
            Value::from(
                split_top(inner, ',')
                    .iter()
                    .filter(|x| !x.is_empty())
                    .map(|x| typed_val(&unescape(x), false))
                    .collect::<Vec<_>>(),
            )
        } else {
            typed_val(&unescape(v), as_string)
        };
        let segs = parse_key(k)?;
        let root = Value::Map(base.clone());
        set_path(root, &segs, val);
    }
    Ok(())
}

fn find_unescaped(s: &str, c: char) -> Option<usize> {
    let mut esc = false;
    for (i, ch) in s.char_indices() {
        if esc {
            esc = false;
            continue;
        }
        if ch == '\\' {
            esc = true;
        } else if ch == c {
            return Some(i);
        }
    }
    None
}

fn is_table(v: &Value) -> bool {
    matches!(v, Value::Map(_))
}

/// Removes nil values recursively.
pub fn clean_nil(m: &MapRef) {
    let keys: Vec<String> = m
        .borrow()
        .iter()
        .filter(|(_, v)| v.is_nil())
        .map(|(k, _)| k.clone())
        .collect();
    for k in keys {
        m.borrow_mut().remove(&k);
    }
    for v in m.borrow().values() {
        if let Value::Map(sub) = v {
            clean_nil(sub);
        }
    }
}

/// `coalesceTablesFullKey`: merges defaults `src` into `dst` (dst wins).
pub fn coalesce_tables(dst: &MapRef, src: &MapRef, merge: bool) {
    if Rc::ptr_eq(dst, src) {
        return;
    }
    let src_non_nil: Vec<String> = src
        .borrow()
        .iter()
        .filter(|(_, v)| !v.is_nil())
        .map(|(k, _)| k.clone())
        .collect();
    let dst_nil: Vec<String> = dst
        .borrow()
        .iter()
        .filter(|(_, v)| v.is_nil())
        .map(|(k, _)| k.clone())
        .collect();
    for k in dst_nil {
        src.borrow_mut().insert(k, Value::Nil);
    }
    let entries: Vec<(String, Value)> = src
        .borrow()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, val) in entries {
        let dv = dst.borrow().get(&k).cloned();
        match dv {
            Some(Value::Nil) if !merge && src_non_nil.contains(&k) => {
                dst.borrow_mut().remove(&k);
            }
            None => {
                dst.borrow_mut().insert(k, val);
            }
            Some(Value::Map(dm)) if is_table(&val) => {
                if let Value::Map(sm) = &val {
                    coalesce_tables(&dm, sm, merge);
                }
            }
            _ => {}
        }
    }
}

/// Looks up a dotted path of tables (`Values.Table`).
pub fn table(v: &MapRef, path: &str) -> Option<MapRef> {
    let mut cur = v.clone();
    for p in path.split('.').filter(|p| !p.is_empty()) {
        let next = match cur.borrow().get(p) {
            Some(Value::Map(m)) => m.clone(),
            _ => return None,
        };
        cur = next;
    }
    Some(cur)
}

/// `Values.PathValue`: the value at a dotted path (the last element may be any value).
pub fn path_value(v: &MapRef, path: &str) -> Option<Value> {
    let (parent, key) = match path.rsplit_once('.') {
        Some((p, k)) => (p, k),
        None => ("", path),
    };
    let t = table(v, parent)?;
    t.borrow().get(key).cloned()
}
