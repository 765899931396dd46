//! A small evaluator for the Kubernetes JSONPath dialect that Landscaper's readiness checks
//! and exports use (`.data.key`, `.secrets[0]`, `.status.conditions[?(@.type=="Ready")].status`,
//! `.items[*].metadata.name`, `{.a.b}`, `$.a`, `.metadata.annotations.a\.b/c`,
//! `['a.b']`, recursive `..name`).
//!
//! Owns: parsing a path once ([`JsonPath::parse`], errors name the position) and evaluating it
//! against a JSON value ([`JsonPath::eval`], all matches in document order; missing keys give
//! no match rather than an error, as Kubernetes' `allowMissingKeys`).
//! Must not touch: anything but `serde_json::Value`.
//!
//! Written here rather than taken from a crate: `jsonpath-rust` implements RFC 9535 (`$`-rooted,
//! different filter syntax), not the Kubernetes template dialect.

use serde_json::Value;

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    /// `.name` / `['name']`
    Field(String),
    /// `[n]` (negative counts from the end)
    Index(i64),
    /// `[a:b]`
    Slice(Option<i64>, Option<i64>),
    /// `.*` / `[*]`
    Wildcard,
    /// `..name`
    Recursive(String),
    /// `[?(@.path op literal)]` or `[?(@.path)]`
    Filter(Box<JsonPath>, Option<(String, Value)>),
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

impl JsonPath {
    /// Parses a path; `{…}` around it, a leading `$` and a missing leading `.` are accepted.
    pub fn parse(path: &str) -> Result<JsonPath, String> {
        let mut p = path.trim();
        if let Some(inner) = p.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            p = inner.trim();
        }
        if let Some(rest) = p.strip_prefix('$') {
            p = rest;
        }
        if p.is_empty() {
            return Err(format!("invalid jsonPath {path:?}: empty path"));
        }
        let owned;
        if !p.starts_with('.') && !p.starts_with('[') {
            owned = format!(".{p}");
            p = &owned;
        }
        Parser {
            s: p.as_bytes(),
            src: p,
            pos: 0,
        }
        .path(false)
        .map_err(|e| format!("invalid jsonPath {path:?}: {e}"))
    }

    /// All values the path selects, in document order (empty if nothing matches).
    pub fn eval<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        let mut cur = vec![root];
        for step in &self.steps {
            let mut next = Vec::new();
            for v in cur {
                apply(step, v, &mut next);
            }
            cur = next;
        }
        cur
    }
}

fn apply<'a>(step: &Step, v: &'a Value, out: &mut Vec<&'a Value>) {
    match step {
        Step::Field(name) => {
            if let Some(x) = v.as_object().and_then(|o| o.get(name)) {
                out.push(x);
            }
        }
        Step::Index(i) => {
            if let Some(a) = v.as_array() {
                let idx = if *i < 0 { a.len() as i64 + i } else { *i };
                if idx >= 0
                    && let Some(x) = a.get(idx as usize)
                {
                    out.push(x);
                }
            }
        }
        Step::Slice(from, to) => {
            if let Some(a) = v.as_array() {
                let len = a.len() as i64;
                let norm = |x: i64| if x < 0 { (len + x).max(0) } else { x.min(len) };
                let f = from.map(norm).unwrap_or(0);
                let t = to.map(norm).unwrap_or(len);
                if f < t {
                    out.extend(&a[f as usize..t as usize]);
                }
            }
        }
        Step::Wildcard => match v {
            Value::Object(o) => out.extend(o.values()),
            Value::Array(a) => out.extend(a.iter()),
            _ => {}
        },
        Step::Recursive(name) => recurse(name, v, out),
        Step::Filter(path, cmp) => {
            let items: Vec<&Value> = match v {
                Value::Array(a) => a.iter().collect(),
                Value::Object(o) => o.values().collect(),
                _ => Vec::new(),
            };
            for item in items {
                let found = path.eval(item);
                let keep = match cmp {
                    None => !found.is_empty(),
                    Some((op, lit)) => found.iter().any(|f| compare(f, op, lit)),
                };
                if keep {
                    out.push(item);
                }
            }
        }
    }
}

fn recurse<'a>(name: &str, v: &'a Value, out: &mut Vec<&'a Value>) {
    match v {
        Value::Object(o) => {
            if name == "*" {
                out.extend(o.values());
            } else if let Some(x) = o.get(name) {
                out.push(x);
            }
            for x in o.values() {
                recurse(name, x, out);
            }
        }
        Value::Array(a) => {
            for x in a {
                recurse(name, x, out);
            }
        }
        _ => {}
    }
}

fn compare(a: &Value, op: &str, b: &Value) -> bool {
    let num = |v: &Value| v.as_f64();
    match op {
        "==" => a == b || (num(a).is_some() && num(a) == num(b)),
        "!=" => !(a == b || (num(a).is_some() && num(a) == num(b))),
        "<" | "<=" | ">" | ">=" => match (num(a), num(b)) {
            (Some(x), Some(y)) => match op {
                "<" => x < y,
                "<=" => x <= y,
                ">" => x > y,
                _ => x >= y,
            },
            _ => false,
        },
        _ => false,
    }
}

struct Parser<'a> {
    s: &'a [u8],
    src: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at position {}", self.pos))
    }

    /// Parses steps until the end (or, inside a filter, until `)` or an operator).
    fn path(&mut self, in_filter: bool) -> Result<JsonPath, String> {
        let mut steps = Vec::new();
        while let Some(c) = self.peek() {
            match c {
                b'.' => {
                    self.pos += 1;
                    if self.peek() == Some(b'.') {
                        self.pos += 1;
                        let name = self.name()?;
                        if name.is_empty() {
                            return self.err("expected a field name after '..'");
                        }
                        steps.push(Step::Recursive(name));
                    } else if self.peek() == Some(b'*') {
                        self.pos += 1;
                        steps.push(Step::Wildcard);
                    } else if self.peek() == Some(b'[') {
                        // `.[0]` is accepted like `[0]`
                    } else {
                        let name = self.name()?;
                        if name.is_empty() {
                            if self.peek().is_none() && steps.is_empty() {
                                // `.` alone: the root
                                break;
                            }
                            return self.err("expected a field name");
                        }
                        steps.push(Step::Field(name));
                    }
                }
                b'[' => {
                    self.pos += 1;
                    steps.push(self.bracket()?);
                }
                b' ' | b')' | b'=' | b'!' | b'<' | b'>' if in_filter => break,
                _ => return self.err(&format!("unexpected character {:?}", c as char)),
            }
        }
        Ok(JsonPath { steps })
    }

    /// A dotted field name; `\.` escapes a dot.
    fn name(&mut self) -> Result<String, String> {
        let mut out = String::new();
        while let Some(c) = self.peek() {
            match c {
                b'\\' => {
                    self.pos += 1;
                    match self.peek() {
                        Some(e) => {
                            out.push(e as char);
                            self.pos += 1;
                        }
                        None => return self.err("dangling '\\'"),
                    }
                }
                b'.' | b'[' | b']' | b' ' | b')' | b'(' | b'=' | b'!' | b'<' | b'>' | b'{'
                | b'}' | b'?' | b'@' | b'\'' | b'"' | b',' => break,
                _ => {
                    // keep UTF-8 intact: copy the whole char
                    let ch = self.src[self.pos..].chars().next().unwrap_or('?');
                    out.push(ch);
                    self.pos += ch.len_utf8();
                }
            }
        }
        Ok(out)
    }

    /// A string in `q` quotes, the opening quote at the current position.
    fn quoted(&mut self, q: u8, what: &str) -> Result<String, String> {
        self.pos += 1;
        let start = self.pos;
        while self.peek().is_some_and(|c| c != q) {
            self.pos += 1;
        }
        if self.peek().is_none() {
            return self.err(what);
        }
        let s = self.src[start..self.pos].to_string();
        self.pos += 1;
        Ok(s)
    }

    fn bracket(&mut self) -> Result<Step, String> {
        let step = match self.peek() {
            Some(b'*') => {
                self.pos += 1;
                Step::Wildcard
            }
            Some(q @ (b'\'' | b'"')) => Step::Field(self.quoted(q, "unterminated quoted name")?),
            Some(b'?') => {
                self.pos += 1;
                if self.peek() != Some(b'(') {
                    return self.err("expected '(' after '?'");
                }
                self.pos += 1;
                self.skip_ws();
                if self.peek() != Some(b'@') {
                    return self.err("expected '@' in filter");
                }
                self.pos += 1;
                let path = self.path(true)?;
                self.skip_ws();
                let cmp = if self.peek() == Some(b')') {
                    None
                } else {
                    let op = self.operator()?;
                    self.skip_ws();
                    let lit = self.literal()?;
                    self.skip_ws();
                    Some((op, lit))
                };
                if self.peek() != Some(b')') {
                    return self.err("expected ')' to close the filter");
                }
                self.pos += 1;
                Step::Filter(Box::new(path), cmp)
            }
            _ => {
                let start = self.pos;
                while self.peek().is_some_and(|c| c != b']') {
                    self.pos += 1;
                }
                let body = self.src[start..self.pos].trim();
                let int = |s: &str| -> Result<Option<i64>, String> {
                    let s = s.trim();
                    if s.is_empty() {
                        Ok(None)
                    } else {
                        s.parse::<i64>()
                            .map(Some)
                            .map_err(|_| format!("invalid array index {s:?}"))
                    }
                };
                match body.split_once(':') {
                    Some((a, b)) => Step::Slice(int(a)?, int(b.split(':').next().unwrap_or(""))?),
                    None => match int(body)? {
                        Some(i) => Step::Index(i),
                        None => return self.err("empty brackets"),
                    },
                }
            }
        };
        if self.peek() != Some(b']') {
            return self.err("expected ']'");
        }
        self.pos += 1;
        Ok(step)
    }

    fn skip_ws(&mut self) {
        while self.peek() == Some(b' ') {
            self.pos += 1;
        }
    }

    fn operator(&mut self) -> Result<String, String> {
        for op in ["==", "!=", "<=", ">=", "<", ">"] {
            if self.src[self.pos..].starts_with(op) {
                self.pos += op.len();
                return Ok(op.to_string());
            }
        }
        self.err("expected a comparison operator")
    }

    fn literal(&mut self) -> Result<Value, String> {
        match self.peek() {
            Some(q @ (b'\'' | b'"')) => Ok(Value::String(
                self.quoted(q, "unterminated string literal")?,
            )),
            _ => {
                let start = self.pos;
                while self.peek().is_some_and(|c| c != b')' && c != b' ') {
                    self.pos += 1;
                }
                let raw = &self.src[start..self.pos];
                serde_json::from_str(raw).map_err(|_| format!("invalid literal {raw:?}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eval(path: &str, v: &Value) -> Vec<Value> {
        JsonPath::parse(path)
            .unwrap()
            .eval(v)
            .into_iter()
            .cloned()
            .collect()
    }

    #[test]
    fn fields_indexes_and_the_forms_users_write() {
        let v = json!({"data": {"key": "val", "a.b/c": 1}, "secrets": [{"name": "s0"}, {"name": "s1"}]});
        assert_eq!(eval(".data.key", &v), vec![json!("val")]);
        assert_eq!(eval("data.key", &v), vec![json!("val")]);
        assert_eq!(eval("{.data.key}", &v), vec![json!("val")]);
        assert_eq!(eval("$.data.key", &v), vec![json!("val")]);
        assert_eq!(eval(".data", &v), vec![v["data"].clone()]);
        assert_eq!(eval(".secrets[0]", &v), vec![json!({"name": "s0"})]);
        assert_eq!(eval(".secrets[-1].name", &v), vec![json!("s1")]);
        assert_eq!(eval(".secrets[*].name", &v), vec![json!("s0"), json!("s1")]);
        assert_eq!(eval(".secrets[0:1].name", &v), vec![json!("s0")]);
        assert_eq!(eval(r".data.a\.b/c", &v), vec![json!(1)]);
        assert_eq!(eval(".data['a.b/c']", &v), vec![json!(1)]);
        assert_eq!(eval("..name", &v), vec![json!("s0"), json!("s1")]);
        assert!(eval(".data.missing", &v).is_empty());
        assert!(eval(".secrets[5]", &v).is_empty());
    }

    #[test]
    fn filters_select_array_elements() {
        let v = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True", "n": 2},
            {"type": "Other", "status": "False", "n": 1}]}});
        assert_eq!(
            eval(r#".status.conditions[?(@.type=="Ready")].status"#, &v),
            vec![json!("True")]
        );
        assert_eq!(
            eval(".status.conditions[?(@.n > 1)].type", &v),
            vec![json!("Ready")]
        );
        assert_eq!(eval(".status.conditions[?(@.n)].n", &v).len(), 2);
    }

    #[test]
    fn quoted_names_address_keys_with_dots() {
        let v = json!({"data": {"a.b": 1, "c": 2}});
        assert_eq!(eval(".data['a.b']", &v), vec![json!(1)]);
        assert_eq!(eval(r#".data["c"]"#, &v), vec![json!(2)]);
        let e = JsonPath::parse(".data['a.b").unwrap_err();
        assert!(e.contains("unterminated quoted name"), "{e}");
    }

    #[test]
    fn invalid_paths_are_rejected_with_a_position() {
        for bad in ["", ".a[", ".a[x]", ".a[?(@.b=='x']", ".a..", "{}"] {
            let e = JsonPath::parse(bad).unwrap_err();
            assert!(e.starts_with("invalid jsonPath"), "{bad}: {e}");
        }
    }
}
