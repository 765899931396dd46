//! Masterminds/semver v3 versions and constraints (`semverCompare`, chart `kubeVersion`):
//! loose parsing (`v1`, `1.2`), prerelease ordering, `||`/`,` groups, hyphen ranges, wildcards,
//! `~`, `^`, and the rule that prerelease versions only satisfy constraints with a prerelease.

use std::cmp::Ordering;

use crate::value::{Map, Value};

/// A semantic version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    pub pre: String,
    pub meta: String,
    pub original: String,
}

impl Version {
    /// Parses a version loosely (like `semver.NewVersion`).
    pub fn parse(s: &str) -> Result<Version, String> {
        let orig = s;
        let s = s.trim();
        let s = s.strip_prefix('v').unwrap_or(s);
        let (s, meta) = match s.split_once('+') {
            Some((a, b)) => (a, b.to_string()),
            None => (s, String::new()),
        };
        let (core, pre) = match s.split_once('-') {
            Some((a, b)) => (a, b.to_string()),
            None => (s, String::new()),
        };
        let parts: Vec<&str> = core.split('.').collect();
        if parts.is_empty()
            || parts.len() > 3
            || parts
                .iter()
                .any(|p| p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit()))
        {
            return Err("Invalid Semantic Version".into());
        }
        let num = |i: usize| {
            parts
                .get(i)
                .map(|p| p.parse::<u64>().unwrap_or(0))
                .unwrap_or(0)
        };
        let ident_ok = |x: &str| {
            x.split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-'))
        };
        if (!pre.is_empty() && !ident_ok(&pre)) || (!meta.is_empty() && !ident_ok(&meta)) {
            return Err("Invalid Semantic Version".into());
        }
        Ok(Version {
            major: num(0),
            minor: num(1),
            patch: num(2),
            pre,
            meta,
            original: orig.to_string(),
        })
    }

    /// Version ordering (metadata ignored).
    pub fn compare(&self, o: &Version) -> Ordering {
        self.major
            .cmp(&o.major)
            .then(self.minor.cmp(&o.minor))
            .then(self.patch.cmp(&o.patch))
            .then_with(|| cmp_pre(&self.pre, &o.pre))
    }

    /// As a template value.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("Major".into(), Value::Int(self.major as i64));
        m.insert("Minor".into(), Value::Int(self.minor as i64));
        m.insert("Patch".into(), Value::Int(self.patch as i64));
        m.insert("Prerelease".into(), Value::from(self.pre.as_str()));
        m.insert("Metadata".into(), Value::from(self.meta.as_str()));
        m.insert("Original".into(), Value::from(self.original.as_str()));
        Value::from(m)
    }
}

fn cmp_pre(a: &str, b: &str) -> Ordering {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        _ => {}
    }
    let (pa, pb): (Vec<&str>, Vec<&str>) = (a.split('.').collect(), b.split('.').collect());
    for i in 0..pa.len().max(pb.len()) {
        let (x, y) = match (pa.get(i), pb.get(i)) {
            (None, _) => return Ordering::Less,
            (_, None) => return Ordering::Greater,
            (Some(x), Some(y)) => (*x, *y),
        };
        let o = match (x.parse::<u64>(), y.parse::<u64>()) {
            (Ok(p), Ok(q)) => p.cmp(&q),
            (Ok(_), Err(_)) => Ordering::Less,
            (Err(_), Ok(_)) => Ordering::Greater,
            _ => x.cmp(y),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

#[derive(Debug, Clone)]
struct Constraint {
    op: String,
    v: Version,
    /// number of specified components (1..=3); fewer means wildcard
    parts: usize,
    any: bool,
}

/// A parsed constraint expression.
#[derive(Debug, Clone)]
pub struct Constraints {
    groups: Vec<Vec<Constraint>>,
}

fn parse_one(op: &str, ver: &str) -> Result<Constraint, String> {
    let ver = ver.trim();
    let ver_nov = ver.strip_prefix('v').unwrap_or(ver);
    if ver_nov.is_empty() || ver_nov == "*" || ver_nov.eq_ignore_ascii_case("x") {
        return Ok(Constraint {
            op: op.into(),
            v: Version::parse("0.0.0").unwrap(),
            parts: 0,
            any: true,
        });
    }
    let (core, rest) = match ver_nov.find(['-', '+']) {
        Some(i) => (&ver_nov[..i], &ver_nov[i..]),
        None => (ver_nov, ""),
    };
    let mut comps: Vec<&str> = core.split('.').collect();
    let mut parts = comps.len();
    if let Some(i) = comps
        .iter()
        .position(|c| *c == "*" || c.eq_ignore_ascii_case("x"))
    {
        parts = i;
        comps.truncate(i);
    }
    let mut fixed: Vec<String> = comps.iter().map(|s| s.to_string()).collect();
    while fixed.len() < 3 {
        fixed.push("0".into());
    }
    let v = Version::parse(&format!("{}{}", fixed.join("."), rest))
        .map_err(|_| format!("improper constraint: {op}{ver}"))?;
    Ok(Constraint {
        op: op.into(),
        v,
        parts,
        any: false,
    })
}

impl Constraints {
    /// Parses e.g. `>=1.21.0-0`, `~1.2 || ^2`, `1.2 - 1.4`.
    pub fn parse(s: &str) -> Result<Constraints, String> {
        let mut groups = Vec::new();
        for g in s.split("||") {
            let g = g.trim();
            let mut cs = Vec::new();
            // hyphen ranges
            let toks: Vec<String> = g
                .replace(',', " ")
                .split_whitespace()
                .map(String::from)
                .collect();
            let mut i = 0;
            // merge operators separated from versions by spaces (">= 1.2")
            let mut merged: Vec<String> = Vec::new();
            while i < toks.len() {
                let t = &toks[i];
                if t.chars().all(|c| "<>=!~^".contains(c)) && i + 1 < toks.len() {
                    merged.push(format!("{}{}", t, toks[i + 1]));
                    i += 2;
                } else {
                    merged.push(t.clone());
                    i += 1;
                }
            }
            let mut j = 0;
            while j < merged.len() {
                if j + 2 < merged.len() && merged[j + 1] == "-" {
                    cs.push(parse_one(">=", &merged[j])?);
                    cs.push(parse_one("<=", &merged[j + 2])?);
                    j += 3;
                    continue;
                }
                let t = &merged[j];
                let opend = t.find(|c: char| !"<>=!~^".contains(c)).unwrap_or(t.len());
                let (op, ver) = t.split_at(opend);
                let op = match op {
                    "=>" => ">=",
                    "=<" => "<=",
                    "~>" => "~",
                    "==" => "=",
                    o => o,
                };
                if !matches!(op, "" | "=" | "!=" | ">" | "<" | ">=" | "<=" | "~" | "^") {
                    return Err(format!("improper constraint: {t}"));
                }
                cs.push(parse_one(op, ver)?);
                j += 1;
            }
            if cs.is_empty() {
                cs.push(parse_one("", "*")?);
            }
            groups.push(cs);
        }
        Ok(Constraints { groups })
    }

    /// Whether `v` satisfies any group.
    pub fn check(&self, v: &Version) -> bool {
        self.groups
            .iter()
            .any(|g| g.iter().all(|c| check_one(c, v)))
    }
}

fn check_one(c: &Constraint, v: &Version) -> bool {
    if !v.pre.is_empty() && c.v.pre.is_empty() {
        return false;
    }
    if c.any {
        return c.op != "!=" && c.op != "<" && c.op != ">";
    }
    let cv = &c.v;
    let upper_wild = |v: &Version| -> Ordering {
        // compare only specified parts
        let o = v.major.cmp(&cv.major);
        if c.parts <= 1 || o != Ordering::Equal {
            return o;
        }
        let o = v.minor.cmp(&cv.minor);
        if c.parts <= 2 || o != Ordering::Equal {
            return o;
        }
        v.compare(cv)
    };
    match c.op.as_str() {
        "" | "=" => {
            if c.parts < 3 {
                upper_wild(v) == Ordering::Equal
            } else {
                v.compare(cv) == Ordering::Equal
            }
        }
        "!=" => {
            if c.parts < 3 {
                upper_wild(v) != Ordering::Equal
            } else {
                v.compare(cv) != Ordering::Equal
            }
        }
        ">" => {
            if c.parts < 3 {
                upper_wild(v) == Ordering::Greater
            } else {
                v.compare(cv) == Ordering::Greater
            }
        }
        ">=" => v.compare(cv) != Ordering::Less,
        "<" => v.compare(cv) == Ordering::Less,
        "<=" => {
            if c.parts < 3 {
                upper_wild(v) != Ordering::Greater
            } else {
                v.compare(cv) != Ordering::Greater
            }
        }
        "~" => {
            if v.compare(cv) == Ordering::Less {
                return false;
            }
            if c.parts >= 2 {
                v.major == cv.major && v.minor == cv.minor
            } else {
                v.major == cv.major
            }
        }
        "^" => {
            if v.compare(cv) == Ordering::Less {
                return false;
            }
            if cv.major > 0 || c.parts == 1 {
                v.major == cv.major
            } else if cv.minor > 0 || c.parts == 2 {
                v.major == 0 && v.minor == cv.minor
            } else {
                v.major == 0 && v.minor == 0 && v.patch == cv.patch
            }
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(c: &str, v: &str) -> bool {
        Constraints::parse(c)
            .unwrap()
            .check(&Version::parse(v).unwrap())
    }

    #[test]
    fn constraints() {
        assert!(ok(">=1.21.0-0", "v1.36.0"));
        assert!(ok(">=1.19-0", "1.20.0"));
        assert!(!ok(">=1.21.0", "1.20.0"));
        assert!(!ok(">=1.16.0", "1.20.0-beta.1"));
        assert!(ok(">=1.16.0-0", "1.20.0-beta.1"));
        assert!(ok("~1.2", "1.2.9"));
        assert!(!ok("~1.2", "1.3.0"));
        assert!(ok("^1.2", "1.9.0"));
        assert!(ok("1.2 - 1.4", "1.3.0"));
        assert!(ok("<1.19-0 || >=1.30", "1.31.0"));
        assert!(ok("1.x", "1.5.0"));
    }
}
