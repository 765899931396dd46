//! `values.schema.json` validation (Helm's `ValidateAgainstSchema`): each chart's schema is
//! checked against its own coalesced values, subcharts against their section. A compact JSON
//! Schema validator covering the keywords charts use (type, properties, required,
//! additionalProperties, patternProperties, items, enum, const, numeric/string/array bounds,
//! pattern, allOf/anyOf/oneOf/not, if/then/else, local `$ref`).

use serde_json::{Map, Value as J};

use crate::deps::WChart;
use crate::json::to_serde;
use crate::value::{MapRef, Value};

/// Validates the whole tree; returns Helm's aggregated message on failure.
pub fn validate_tree(c: &WChart, vals: &MapRef) -> Result<(), String> {
    let mut sb = String::new();
    if let Some(schema) = &c.schema {
        let schema: J =
            serde_json::from_slice(schema).map_err(|e| format!("{}:\n{e}", c.name()))?;
        let inst = to_serde(&Value::Map(vals.clone()));
        let mut errs = Vec::new();
        check(&schema, &schema, &inst, "", &mut errs);
        if !errs.is_empty() {
            sb.push_str(&format!("{}:\n", c.name()));
            sb.push_str("jsonschema validation failed with 'file:///values.schema.json#'\n");
            for e in errs {
                sb.push_str(&format!("- {e}\n"));
            }
        }
    }
    for d in &c.deps {
        let sub = vals.borrow().get(d.name()).cloned();
        match sub {
            None | Some(Value::Nil) => {}
            Some(Value::Map(m)) => {
                if let Err(e) = validate_tree(d, &m) {
                    sb.push_str(&e);
                }
            }
            Some(other) => sb.push_str(&format!(
                "{}:\ninvalid type for values: expected object (map), got {}\n",
                d.name(),
                other.type_name()
            )),
        }
    }
    if sb.is_empty() { Ok(()) } else { Err(sb) }
}

fn type_of(v: &J) -> &'static str {
    match v {
        J::Null => "null",
        J::Bool(_) => "boolean",
        J::Number(n) => {
            if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) {
                "integer"
            } else {
                "number"
            }
        }
        J::String(_) => "string",
        J::Array(_) => "array",
        J::Object(_) => "object",
    }
}

fn type_ok(want: &str, v: &J) -> bool {
    let t = type_of(v);
    t == want || (want == "number" && t == "integer")
}

fn resolve<'a>(root: &'a J, r: &str) -> Option<&'a J> {
    let p = r.strip_prefix('#')?;
    if p.is_empty() {
        return Some(root);
    }
    root.pointer(p)
}

fn check(root: &J, s: &J, v: &J, at: &str, errs: &mut Vec<String>) {
    let loc = if at.is_empty() {
        "''".to_string()
    } else {
        format!("'{at}'")
    };
    let J::Object(s) = s else {
        if s == &J::Bool(false) {
            errs.push(format!("at {loc}: false schema"));
        }
        return;
    };
    if let Some(J::String(r)) = s.get("$ref")
        && let Some(t) = resolve(root, r)
    {
        check(root, t, v, at, errs);
    }
    if !check_type(s, v, &loc, errs) {
        return;
    }
    check_enum_const(s, v, &loc, errs);
    check_number(s, v, &loc, errs);
    check_string(s, v, &loc, errs);
    check_array(root, s, v, at, &loc, errs);
    check_object(root, s, v, at, &loc, errs);
    check_combinators(root, s, v, at, &loc, errs);
}

/// `type`; `false` when the value has the wrong type (nothing else is checked then).
fn check_type(s: &Map<String, J>, v: &J, loc: &str, errs: &mut Vec<String>) -> bool {
    if let Some(t) = s.get("type") {
        let ok = match t {
            J::String(w) => type_ok(w, v),
            J::Array(ws) => ws.iter().any(|w| w.as_str().is_some_and(|w| type_ok(w, v))),
            _ => true,
        };
        if !ok {
            let want = match t {
                J::Array(ws) => ws
                    .iter()
                    .filter_map(|w| w.as_str())
                    .collect::<Vec<_>>()
                    .join(" or "),
                J::String(w) => w.clone(),
                _ => String::new(),
            };
            errs.push(format!("at {loc}: got {}, want {want}", type_of(v)));
            return false;
        }
    }
    true
}

/// `enum`, `const`.
fn check_enum_const(s: &Map<String, J>, v: &J, loc: &str, errs: &mut Vec<String>) {
    if let Some(J::Array(e)) = s.get("enum")
        && !e.contains(v)
    {
        errs.push(format!(
            "at {loc}: value must be one of {}",
            e.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some(c) = s.get("const")
        && c != v
    {
        errs.push(format!("at {loc}: value must be {c}"));
    }
}

/// `minimum`, `maximum`, their exclusive forms, `multipleOf`.
fn check_number(s: &Map<String, J>, v: &J, loc: &str, errs: &mut Vec<String>) {
    if let Some(n) = v.as_f64() {
        let num = |k: &str| s.get(k).and_then(|x| x.as_f64());
        if let Some(m) = num("minimum")
            && n < m
        {
            errs.push(format!("at {loc}: minimum: got {v}, want {m}"));
        }
        if let Some(m) = num("maximum")
            && n > m
        {
            errs.push(format!("at {loc}: maximum: got {v}, want {m}"));
        }
        if let Some(m) = num("exclusiveMinimum")
            && n <= m
        {
            errs.push(format!("at {loc}: exclusiveMinimum: got {v}, want {m}"));
        }
        if let Some(m) = num("exclusiveMaximum")
            && n >= m
        {
            errs.push(format!("at {loc}: exclusiveMaximum: got {v}, want {m}"));
        }
        if let Some(m) = num("multipleOf")
            && m != 0.0
            && (n / m).fract() != 0.0
        {
            errs.push(format!("at {loc}: multipleOf: got {v}, want {m}"));
        }
    }
}

/// `minLength`, `maxLength`, `pattern`.
fn check_string(s: &Map<String, J>, v: &J, loc: &str, errs: &mut Vec<String>) {
    if let J::String(st) = v {
        let len = st.chars().count() as u64;
        if let Some(m) = s.get("minLength").and_then(|x| x.as_u64())
            && len < m
        {
            errs.push(format!("at {loc}: minLength: got {len}, want {m}"));
        }
        if let Some(m) = s.get("maxLength").and_then(|x| x.as_u64())
            && len > m
        {
            errs.push(format!("at {loc}: maxLength: got {len}, want {m}"));
        }
        if let Some(J::String(p)) = s.get("pattern")
            && let Ok(re) = regex::Regex::new(p)
            && !re.is_match(st)
        {
            errs.push(format!("at {loc}: '{st}' does not match pattern '{p}'"));
        }
    }
}

/// `minItems`, `maxItems`, `uniqueItems`, `items`.
fn check_array(root: &J, s: &Map<String, J>, v: &J, at: &str, loc: &str, errs: &mut Vec<String>) {
    if let J::Array(items) = v {
        let len = items.len() as u64;
        if let Some(m) = s.get("minItems").and_then(|x| x.as_u64())
            && len < m
        {
            errs.push(format!("at {loc}: minItems: got {len}, want {m}"));
        }
        if let Some(m) = s.get("maxItems").and_then(|x| x.as_u64())
            && len > m
        {
            errs.push(format!("at {loc}: maxItems: got {len}, want {m}"));
        }
        if s.get("uniqueItems") == Some(&J::Bool(true)) {
            for i in 0..items.len() {
                if items[i + 1..].contains(&items[i]) {
                    errs.push(format!("at {loc}: items at {i} are equal"));
                    break;
                }
            }
        }
        match s.get("items") {
            Some(J::Array(ts)) => {
                for (i, (t, x)) in ts.iter().zip(items.iter()).enumerate() {
                    check(root, t, x, &format!("{at}/{i}"), errs);
                }
            }
            Some(t) => {
                for (i, x) in items.iter().enumerate() {
                    check(root, t, x, &format!("{at}/{i}"), errs);
                }
            }
            None => {}
        }
    }
}

/// `minProperties`, `maxProperties`, `required`, `properties`, `patternProperties`,
/// `additionalProperties`.
fn check_object(root: &J, s: &Map<String, J>, v: &J, at: &str, loc: &str, errs: &mut Vec<String>) {
    if let J::Object(o) = v {
        if let Some(m) = s.get("minProperties").and_then(|x| x.as_u64())
            && (o.len() as u64) < m
        {
            errs.push(format!(
                "at {loc}: minProperties: got {}, want {m}",
                o.len()
            ));
        }
        if let Some(m) = s.get("maxProperties").and_then(|x| x.as_u64())
            && (o.len() as u64) > m
        {
            errs.push(format!(
                "at {loc}: maxProperties: got {}, want {m}",
                o.len()
            ));
        }
        if let Some(J::Array(req)) = s.get("required") {
            let missing: Vec<String> = req
                .iter()
                .filter_map(|r| r.as_str())
                .filter(|r| !o.contains_key(*r))
                .map(|r| format!("'{r}'"))
                .collect();
            if !missing.is_empty() {
                errs.push(format!("at {loc}: missing property {}", missing.join(", ")));
            }
        }
        let props = s.get("properties").and_then(|p| p.as_object());
        let pprops = s.get("patternProperties").and_then(|p| p.as_object());
        for (k, x) in o {
            let mut matched = false;
            if let Some(t) = props.and_then(|p| p.get(k)) {
                matched = true;
                check(root, t, x, &format!("{at}/{k}"), errs);
            }
            if let Some(pp) = pprops {
                for (pat, t) in pp {
                    if regex::Regex::new(pat).is_ok_and(|re| re.is_match(k)) {
                        matched = true;
                        check(root, t, x, &format!("{at}/{k}"), errs);
                    }
                }
            }
            if !matched {
                match s.get("additionalProperties") {
                    Some(J::Bool(false)) => {
                        errs.push(format!("at {loc}: additional properties '{k}' not allowed"))
                    }
                    Some(t @ J::Object(_)) => check(root, t, x, &format!("{at}/{k}"), errs),
                    _ => {}
                }
            }
        }
    }
}

/// `allOf`, `anyOf`, `oneOf`, `not`, `if`/`then`/`else`.
fn check_combinators(
    root: &J,
    s: &Map<String, J>,
    v: &J,
    at: &str,
    loc: &str,
    errs: &mut Vec<String>,
) {
    if let Some(J::Array(all)) = s.get("allOf") {
        for t in all {
            check(root, t, v, at, errs);
        }
    }
    let passes = |t: &J| {
        let mut e = Vec::new();
        check(root, t, v, at, &mut e);
        e.is_empty()
    };
    if let Some(J::Array(any)) = s.get("anyOf")
        && !any.iter().any(passes)
    {
        errs.push(format!("at {loc}: anyOf failed"));
    }
    if let Some(J::Array(one)) = s.get("oneOf")
        && one.iter().filter(|t| passes(t)).count() != 1
    {
        errs.push(format!("at {loc}: oneOf failed"));
    }
    if let Some(n) = s.get("not")
        && passes(n)
    {
        errs.push(format!("at {loc}: not failed"));
    }
    if let Some(i) = s.get("if") {
        if passes(i) {
            if let Some(t) = s.get("then") {
                check(root, t, v, at, errs);
            }
        } else if let Some(e) = s.get("else") {
            check(root, e, v, at, errs);
        }
    }
}
