//! Label selectors (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`) and field
//! selectors (`metadata.name`, `metadata.namespace`, and any other dotted
//! path to a scalar; `=`, `==`, `!=`), matched against stored JSON objects.

use crate::status::ApiError;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

#[derive(Debug, Clone, PartialEq)]
enum FieldReq {
    Eq(String, String),
    NotEq(String, String),
}

/// A parsed label + field selector pair. The empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selector {
    labels: Vec<LabelReq>,
    fields: Vec<FieldReq>,
}

fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn bad(sel: &str, why: &str) -> ApiError {
    ApiError::bad_request(format!(
        "unable to parse requirement: {why} (selector {sel:?})"
    ))
}

fn parse_set(sel: &str, rest: &str) -> Result<Vec<String>, ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| bad(sel, "set must be enclosed in parentheses"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

impl Selector {
    pub fn parse(
        label_selector: Option<&str>,
        field_selector: Option<&str>,
    ) -> Result<Self, ApiError> {
        let mut s = Selector::default();
        if let Some(ls) = label_selector.filter(|l| !l.trim().is_empty()) {
            for term in split_top_level(ls) {
                let t = term.trim();
                if t.is_empty() {
                    continue;
                }
                s.labels.push(parse_label_term(ls, t)?);
            }
        }
        if let Some(fs) = field_selector.filter(|f| !f.trim().is_empty()) {
            for term in fs.split(',') {
                let t = term.trim();
                if t.is_empty() {
                    continue;
                }
                let req = if let Some((k, v)) = t.split_once("!=") {
                    FieldReq::NotEq(k.trim().into(), v.trim().into())
                } else if let Some((k, v)) = t.split_once("==") {
                    FieldReq::Eq(k.trim().into(), v.trim().into())
                } else if let Some((k, v)) = t.split_once('=') {
                    FieldReq::Eq(k.trim().into(), v.trim().into())
                } else {
                    return Err(ApiError::bad_request(format!(
                        "invalid selector: '{fs}'; can't understand '{t}'"
                    )));
                };
                s.fields.push(req);
            }
        }
        Ok(s)
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    pub fn matches(&self, obj: &Value) -> bool {
        if self.is_empty() {
            return true;
        }
        let labels = obj.pointer("/metadata/labels");
        let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        for r in &self.labels {
            let ok = match r {
                LabelReq::Eq(k, v) => label(k) == Some(v.as_str()),
                LabelReq::NotEq(k, v) => label(k) != Some(v.as_str()),
                LabelReq::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
                LabelReq::NotIn(k, vs) => label(k).is_none_or(|l| !vs.iter().any(|v| v == l)),
                LabelReq::Exists(k) => label(k).is_some(),
                LabelReq::NotExists(k) => label(k).is_none(),
            };
            if !ok {
                return false;
            }
        }
        for r in &self.fields {
            let (k, v, want) = match r {
                FieldReq::Eq(k, v) => (k, v, true),
                FieldReq::NotEq(k, v) => (k, v, false),
            };
            if (field_value(obj, k).as_deref().unwrap_or("") == v) != want {
                return false;
            }
        }
        true
    }
}

fn field_value(obj: &Value, path: &str) -> Option<String> {
    let mut cur = obj;
    for part in path.split('.') {
        cur = cur.get(part)?;
    }
    match cur {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn parse_label_term(sel: &str, t: &str) -> Result<LabelReq, ApiError> {
    if let Some(k) = t.strip_prefix('!') {
        let k = k.trim();
        if !valid_key(k) {
            return Err(bad(sel, "invalid label key"));
        }
        return Ok(LabelReq::NotExists(k.into()));
    }
    let end = t
        .find(|c: char| c.is_whitespace() || c == '=' || c == '!' || c == '(')
        .unwrap_or(t.len());
    let key = &t[..end];
    if !valid_key(key) {
        return Err(bad(sel, "invalid label key"));
    }
    let rest = t[end..].trim_start();
    if rest.is_empty() {
        return Ok(LabelReq::Exists(key.into()));
    }
    if let Some(v) = rest.strip_prefix("!=") {
        return Ok(LabelReq::NotEq(key.into(), v.trim().into()));
    }
    if let Some(v) = rest.strip_prefix("==") {
        return Ok(LabelReq::Eq(key.into(), v.trim().into()));
    }
    if let Some(v) = rest.strip_prefix('=') {
        return Ok(LabelReq::Eq(key.into(), v.trim().into()));
    }
    if let Some(r) = rest.strip_prefix("notin") {
        return Ok(LabelReq::NotIn(key.into(), parse_set(sel, r)?));
    }
    if let Some(r) = rest.strip_prefix("in") {
        return Ok(LabelReq::In(key.into(), parse_set(sel, r)?));
    }
    Err(bad(sel, "unknown operator"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns1", "labels": labels}})
    }

    #[test]
    fn label_operators() {
        let o = obj(json!({"app": "web", "tier": "fe"}));
        let m = |s: &str| Selector::parse(Some(s), None).unwrap().matches(&o);
        assert!(m("app=web"));
        assert!(m("app==web"));
        assert!(!m("app!=web"));
        assert!(m("app in (web, db)"));
        assert!(!m("app notin (web,db)"));
        assert!(m("env notin (prod)"));
        assert!(m("app"));
        assert!(!m("!app"));
        assert!(m("!env"));
        assert!(m("app in (web),tier=fe"));
        assert!(!m("app in (web),tier=be"));
        assert!(Selector::parse(Some("app in web"), None).is_err());
        assert!(Selector::parse(Some("a b c"), None).is_err());
    }

    #[test]
    fn field_selectors() {
        let o = obj(json!({}));
        let m = |s: &str| Selector::parse(None, Some(s)).unwrap().matches(&o);
        assert!(m("metadata.name=a"));
        assert!(m("metadata.name==a,metadata.namespace=ns1"));
        assert!(!m("metadata.name!=a"));
        assert!(!m("metadata.namespace=other"));
        assert!(Selector::parse(None, Some("nonsense")).is_err());
    }
}
