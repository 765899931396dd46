//! Sprig defaults/flow, type conversion, integer and float math, regular expressions,
//! reflection, SemVer, UUID, paths and URLs. Certificate and password-hash generators are not
//! implemented (they return an error naming the function).

use std::collections::HashMap;

use super::args::{
    FR, arg_bool, arg_int, arg_str, is_empty, strval, to_f64, to_i64, want, want_min,
};
use super::semver::{Constraints, Version};
use crate::template::{Func, FuncError};
use crate::value::{Map, Value, deep_equal};

pub(super) fn register(m: &mut HashMap<&'static str, Func>) {
    m.insert("default", |_, a| {
        want_min("default", a, 1)?;
        let given = a.get(1);
        if a.len() > 2 {
            return Err(FuncError::Arg(format!(
                "wrong number of args for default: want 2 got {}",
                a.len()
            )));
        }
        match given {
            Some(v) if !is_empty(v) => Ok(v.clone()),
            _ => Ok(a[0].clone()),
        }
    });
    m.insert("empty", |_, a| {
        want("empty", a, 1)?;
        Ok(Value::Bool(is_empty(&a[0])))
    });
    m.insert("coalesce", |_, a| {
        Ok(a.iter().find(|v| !is_empty(v)).cloned().unwrap_or_default())
    });
    m.insert("all", |_, a| {
        Ok(Value::Bool(a.iter().all(|v| !is_empty(v))))
    });
    m.insert("any", |_, a| {
        Ok(Value::Bool(a.iter().any(|v| !is_empty(v))))
    });
    m.insert("ternary", |_, a| {
        want("ternary", a, 3)?;
        Ok(if arg_bool(&a[2])? {
            a[0].clone()
        } else {
            a[1].clone()
        })
    });
    m.insert("fail", |_, a| {
        want("fail", a, 1)?;
        let msg = arg_str(&a[0])?;
        Err(FuncError::call(format!("HELM_ERR_START{msg}HELM_ERR_END")))
    });
    m.insert("hello", |_, _| Ok(Value::from("Hello!")));
    // conversion
    m.insert("atoi", |_, a| {
        want("atoi", a, 1)?;
        Ok(Value::Int(arg_str(&a[0])?.parse::<i64>().unwrap_or(0)))
    });
    m.insert("int", |_, a| {
        want("int", a, 1)?;
        Ok(Value::Int(to_i64(&a[0])))
    });
    m.insert("int64", |_, a| {
        want("int64", a, 1)?;
        Ok(Value::Int(to_i64(&a[0])))
    });
    m.insert("float64", |_, a| {
        want("float64", a, 1)?;
        Ok(Value::Float(to_f64(&a[0])))
    });
    m.insert("toDecimal", |_, a| {
        want("toDecimal", a, 1)?;
        Ok(Value::Int(
            i64::from_str_radix(&strval(&a[0]), 8).unwrap_or(0),
        ))
    });
    m.insert("seq", |_, a| seq(a));
    // integer math
    m.insert("add", |_, a| Ok(Value::Int(a.iter().map(to_i64).sum())));
    m.insert("add1", |_, a| {
        want("add1", a, 1)?;
        Ok(Value::Int(to_i64(&a[0]) + 1))
    });
    m.insert("sub", |_, a| {
        want("sub", a, 2)?;
        Ok(Value::Int(to_i64(&a[0]) - to_i64(&a[1])))
    });
    m.insert("mul", |_, a| {
        want_min("mul", a, 1)?;
        Ok(Value::Int(a.iter().map(to_i64).product()))
    });
    m.insert("div", |_, a| {
        want("div", a, 2)?;
        let d = to_i64(&a[1]);
        if d == 0 {
            return Err(FuncError::call("runtime error: integer divide by zero"));
        }
        Ok(Value::Int(to_i64(&a[0]) / d))
    });
    m.insert("mod", |_, a| {
        want("mod", a, 2)?;
        let d = to_i64(&a[1]);
        if d == 0 {
            return Err(FuncError::call("runtime error: integer divide by zero"));
        }
        Ok(Value::Int(to_i64(&a[0]) % d))
    });
    m.insert("max", |_, a| {
        want_min("max", a, 1)?;
        Ok(Value::Int(a.iter().map(to_i64).max().unwrap_or(0)))
    });
    m.insert("biggest", |_, a| {
        want_min("biggest", a, 1)?;
        Ok(Value::Int(a.iter().map(to_i64).max().unwrap_or(0)))
    });
    m.insert("min", |_, a| {
        want_min("min", a, 1)?;
        Ok(Value::Int(a.iter().map(to_i64).min().unwrap_or(0)))
    });
    m.insert("floor", |_, a| {
        want("floor", a, 1)?;
        Ok(Value::Float(to_f64(&a[0]).floor()))
    });
    m.insert("ceil", |_, a| {
        want("ceil", a, 1)?;
        Ok(Value::Float(to_f64(&a[0]).ceil()))
    });
    m.insert("round", |_, a| {
        want_min("round", a, 2)?;
        let p = to_i64(&a[1]);
        let r = a.get(2).map(to_f64).unwrap_or(0.5);
        let pow = 10f64.powi(p as i32);
        let digit = pow * to_f64(&a[0]);
        let (int, frac) = (digit.trunc(), digit.fract());
        let v = if frac >= r { int + 1.0 } else { int };
        Ok(Value::Float(v / pow))
    });
    m.insert("until", |_, a| {
        want("until", a, 1)?;
        let n = arg_int(&a[0])?;
        let step = if n < 0 { -1 } else { 1 };
        Ok(until_step(0, n, step))
    });
    m.insert("untilStep", |_, a| {
        want("untilStep", a, 3)?;
        Ok(until_step(
            arg_int(&a[0])?,
            arg_int(&a[1])?,
            arg_int(&a[2])?,
        ))
    });
    // float math (Sprig uses shopspring/decimal; results are float64)
    m.insert("addf", |_, a| {
        Ok(Value::Float(dec_round(a.iter().map(to_f64).sum())))
    });
    m.insert("add1f", |_, a| {
        want("add1f", a, 1)?;
        Ok(Value::Float(dec_round(to_f64(&a[0]) + 1.0)))
    });
    m.insert("subf", |_, a| {
        want_min("subf", a, 1)?;
        let mut v = to_f64(&a[0]);
        for x in &a[1..] {
            v -= to_f64(x);
        }
        Ok(Value::Float(dec_round(v)))
    });
    m.insert("mulf", |_, a| {
        want_min("mulf", a, 1)?;
        Ok(Value::Float(dec_round(a.iter().map(to_f64).product())))
    });
    m.insert("divf", |_, a| {
        want_min("divf", a, 1)?;
        let mut v = to_f64(&a[0]);
        for x in &a[1..] {
            v /= to_f64(x);
        }
        Ok(Value::Float(dec_round(v)))
    });
    m.insert("maxf", |_, a| {
        want_min("maxf", a, 1)?;
        Ok(Value::Float(a.iter().map(to_f64).fold(f64::MIN, f64::max)))
    });
    m.insert("minf", |_, a| {
        want_min("minf", a, 1)?;
        Ok(Value::Float(a.iter().map(to_f64).fold(f64::MAX, f64::min)))
    });
    // reflection
    m.insert("typeOf", |_, a| {
        want("typeOf", a, 1)?;
        Ok(Value::from(a[0].type_name()))
    });
    m.insert("kindOf", |_, a| {
        want("kindOf", a, 1)?;
        Ok(Value::from(a[0].kind_name()))
    });
    m.insert("typeIs", |_, a| {
        want("typeIs", a, 2)?;
        Ok(Value::Bool(arg_str(&a[0])? == a[1].type_name()))
    });
    m.insert("typeIsLike", |_, a| {
        want("typeIsLike", a, 2)?;
        let t = arg_str(&a[0])?;
        let n = a[1].type_name();
        Ok(Value::Bool(t == n || t == format!("*{n}")))
    });
    m.insert("kindIs", |_, a| {
        want("kindIs", a, 2)?;
        let k = arg_str(&a[0])?;
        Ok(Value::Bool(k == a[1].kind_name()))
    });
    m.insert("deepEqual", |_, a| {
        want("deepEqual", a, 2)?;
        Ok(Value::Bool(deep_equal(&a[0], &a[1])))
    });
    // regex
    m.insert("regexMatch", |_, a| regex_match(a, false));
    m.insert("mustRegexMatch", |_, a| regex_match(a, true));
    m.insert("regexFind", |_, a| regex_find(a, false));
    m.insert("mustRegexFind", |_, a| regex_find(a, true));
    m.insert("regexFindAll", |_, a| regex_find_all(a, false));
    m.insert("mustRegexFindAll", |_, a| regex_find_all(a, true));
    m.insert("regexReplaceAll", |_, a| regex_replace(a, false, false));
    m.insert("mustRegexReplaceAll", |_, a| regex_replace(a, false, true));
    m.insert("regexReplaceAllLiteral", |_, a| {
        regex_replace(a, true, false)
    });
    m.insert("mustRegexReplaceAllLiteral", |_, a| {
        regex_replace(a, true, true)
    });
    m.insert("regexSplit", |_, a| regex_split(a, false));
    m.insert("mustRegexSplit", |_, a| regex_split(a, true));
    m.insert("regexQuoteMeta", |_, a| {
        want("regexQuoteMeta", a, 1)?;
        Ok(Value::from(regex::escape(arg_str(&a[0])?)))
    });
    // semver
    m.insert("semver", |_, a| {
        want("semver", a, 1)?;
        let v = Version::parse(arg_str(&a[0])?).map_err(FuncError::call)?;
        Ok(v.to_value())
    });
    m.insert("semverCompare", |_, a| {
        want("semverCompare", a, 2)?;
        let c = Constraints::parse(arg_str(&a[0])?).map_err(FuncError::call)?;
        let v = Version::parse(arg_str(&a[1])?).map_err(FuncError::call)?;
        Ok(Value::Bool(c.check(&v)))
    });
    // uuid
    m.insert("uuidv4", |_, _| {
        let mut b = [0u8; 16];
        let _ = getrandom::fill(&mut b);
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let h = hex::encode(b);
        Ok(Value::from(format!(
            "{}-{}-{}-{}-{}",
            &h[..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..]
        )))
    });
    m.insert("randInt", |_, a| {
        want("randInt", a, 2)?;
        let (lo, hi) = (to_i64(&a[0]), to_i64(&a[1]));
        if hi <= lo {
            return Err(FuncError::call("invalid argument to Intn"));
        }
        Ok(Value::Int(
            lo + (super::strings::rand_u64() % (hi - lo) as u64) as i64,
        ))
    });
    m.insert("randBytes", |_, a| {
        want("randBytes", a, 1)?;
        let mut b = vec![0u8; arg_int(&a[0])?.max(0) as usize];
        let _ = getrandom::fill(&mut b);
        use base64::Engine as _;
        Ok(Value::from(
            base64::engine::general_purpose::STANDARD.encode(b),
        ))
    });
    // paths
    m.insert("base", |_, a| {
        want("base", a, 1)?;
        Ok(Value::from(path_base(arg_str(&a[0])?)))
    });
    m.insert("dir", |_, a| {
        want("dir", a, 1)?;
        Ok(Value::from(path_dir(arg_str(&a[0])?)))
    });
    m.insert("clean", |_, a| {
        want("clean", a, 1)?;
        Ok(Value::from(path_clean(arg_str(&a[0])?)))
    });
    m.insert("ext", |_, a| {
        want("ext", a, 1)?;
        let s = arg_str(&a[0])?;
        let b = path_base(s);
        Ok(Value::from(
            b.rfind('.').map(|i| b[i..].to_string()).unwrap_or_default(),
        ))
    });
    m.insert("isAbs", |_, a| {
        want("isAbs", a, 1)?;
        Ok(Value::Bool(arg_str(&a[0])?.starts_with('/')))
    });
    m.insert("osBase", |_, a| {
        want("osBase", a, 1)?;
        Ok(Value::from(path_base(arg_str(&a[0])?)))
    });
    m.insert("osDir", |_, a| {
        want("osDir", a, 1)?;
        Ok(Value::from(path_dir(arg_str(&a[0])?)))
    });
    m.insert("osClean", |_, a| {
        want("osClean", a, 1)?;
        Ok(Value::from(path_clean(arg_str(&a[0])?)))
    });
    m.insert("osExt", |_, a| {
        want("osExt", a, 1)?;
        let b = path_base(arg_str(&a[0])?);
        Ok(Value::from(
            b.rfind('.').map(|i| b[i..].to_string()).unwrap_or_default(),
        ))
    });
    m.insert("osIsAbs", |_, a| {
        want("osIsAbs", a, 1)?;
        Ok(Value::Bool(arg_str(&a[0])?.starts_with('/')))
    });
    m.insert("urlParse", |_, a| {
        want("urlParse", a, 1)?;
        Ok(url_parse(arg_str(&a[0])?))
    });
    m.insert("urlJoin", |_, a| {
        want("urlJoin", a, 1)?;
        Ok(Value::from(url_join(&a[0])))
    });
    m.insert("getHostByName", |_, _| Ok(Value::from("")));
    m.insert("bcrypt", |_, a| {
        want("bcrypt", a, 1)?;
        Ok(Value::from(bcrypt_hash(arg_str(&a[0])?)))
    });
    m.insert("htpasswd", |_, a| {
        // Sprig v3.3 (Helm's): htpasswd(username, password string), bcrypt only
        want("htpasswd", a, 2)?;
        let user = arg_str(&a[0])?;
        if user.contains(':') {
            return Ok(Value::from(format!("invalid username: {user}")));
        }
        Ok(Value::from(format!(
            "{user}:{}",
            bcrypt_hash(arg_str(&a[1])?)
        )))
    });
}

/// Sprig's `seq`.
fn seq(a: &[Value]) -> FR {
    let p: Vec<i64> = a.iter().map(to_i64).collect();
    let (start, step, end) = match p.len() {
        0 => return Ok(Value::from("")),
        1 => (1, 1, p[0]),
        2 => (p[0], if p[1] >= p[0] { 1 } else { -1 }, p[1]),
        _ => (p[0], p[1], p[2]),
    };
    let mut out = Vec::new();
    if step == 0 {
        return Ok(Value::from(""));
    }
    let mut i = start;
    while (step > 0 && i <= end) || (step < 0 && i >= end) {
        out.push(i.to_string());
        i += step;
    }
    Ok(Value::from(out.join(" ")))
}

/// Go `bcrypt.GenerateFromPassword(p, 10)` (`$2a$` form, random salt).
fn bcrypt_hash(p: &str) -> String {
    let mut salt = [0u8; 16];
    let _ = getrandom::fill(&mut salt);
    match bcrypt::hash_with_salt(p.as_bytes(), 10, salt) {
        Ok(h) => h.format_for_version(bcrypt::Version::TwoA),
        Err(e) => e.to_string(),
    }
}

/// Rounds float results the way shopspring/decimal arithmetic on the inputs usually comes
/// out (e.g. `addf 0.1 0.2` is 0.3, not 0.30000000000000004).
fn dec_round(v: f64) -> f64 {
    if !v.is_finite() || v == 0.0 {
        return v;
    }
    let s = format!("{:.15e}", v);
    s.parse::<f64>().unwrap_or(v)
}

fn until_step(start: i64, stop: i64, step: i64) -> Value {
    let mut v = Vec::new();
    if step == 0 || (step > 0 && start >= stop) || (step < 0 && start <= stop) {
        return Value::from(v);
    }
    let mut i = start;
    while (step > 0 && i < stop) || (step < 0 && i > stop) {
        v.push(Value::Int(i));
        i += step;
    }
    Value::from(v)
}

fn compile(re: &str, must: bool) -> Result<Option<regex::Regex>, FuncError> {
    match regex::Regex::new(re) {
        Ok(r) => Ok(Some(r)),
        Err(e) if must => Err(FuncError::call(format!("error parsing regexp: {e}"))),
        Err(_) => Ok(None),
    }
}

fn regex_match(a: &[Value], must: bool) -> FR {
    want("regexMatch", a, 2)?;
    let r = compile(arg_str(&a[0])?, must)?;
    Ok(Value::Bool(
        r.is_some_and(|r| r.is_match(arg_str(&a[1]).unwrap_or(""))),
    ))
}

fn regex_find(a: &[Value], must: bool) -> FR {
    want("regexFind", a, 2)?;
    let r = compile(arg_str(&a[0])?, must)?;
    let s = arg_str(&a[1])?;
    Ok(Value::from(
        r.and_then(|r| r.find(s).map(|m| m.as_str().to_string()))
            .unwrap_or_default(),
    ))
}

fn regex_find_all(a: &[Value], must: bool) -> FR {
    want("regexFindAll", a, 3)?;
    let r = compile(arg_str(&a[0])?, must)?;
    let s = arg_str(&a[1])?;
    let n = arg_int(&a[2])?;
    let Some(r) = r else {
        return Ok(Value::from(Vec::new()));
    };
    let it = r.find_iter(s).map(|m| Value::from(m.as_str()));
    let v: Vec<Value> = if n < 0 {
        it.collect()
    } else {
        it.take(n as usize).collect()
    };
    Ok(Value::from(v))
}

fn regex_replace(a: &[Value], literal: bool, must: bool) -> FR {
    want("regexReplaceAll", a, 3)?;
    let r = compile(arg_str(&a[0])?, must)?;
    let s = arg_str(&a[1])?;
    let repl = arg_str(&a[2])?;
    let Some(r) = r else {
        return Ok(Value::from(s));
    };
    let out = if literal {
        r.replace_all(s, regex::NoExpand(repl)).into_owned()
    } else {
        r.replace_all(s, repl).into_owned()
    };
    Ok(Value::from(out))
}

fn regex_split(a: &[Value], must: bool) -> FR {
    want("regexSplit", a, 3)?;
    let r = compile(arg_str(&a[0])?, must)?;
    let s = arg_str(&a[1])?;
    let n = arg_int(&a[2])?;
    let Some(r) = r else {
        return Ok(Value::from(Vec::new()));
    };
    let v: Vec<Value> = if n < 0 {
        r.split(s).map(Value::from).collect()
    } else {
        r.splitn(s, n as usize).map(Value::from).collect()
    };
    Ok(Value::from(v))
}

/// Go `path.Base`.
pub(crate) fn path_base(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        return "/".into();
    }
    t.rsplit('/').next().unwrap_or(t).to_string()
}

/// Go `path.Dir`.
pub(crate) fn path_dir(p: &str) -> String {
    let dir = match p.rfind('/') {
        Some(i) => &p[..=i],
        None => "",
    };
    path_clean(dir)
}

/// Go `path.Clean`.
pub(crate) fn path_clean(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let rooted = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let j = parts.join("/");
    match (rooted, j.is_empty()) {
        (true, _) => format!("/{j}"),
        (false, true) => ".".into(),
        (false, false) => j,
    }
}

fn url_parse(s: &str) -> Value {
    let mut m = Map::new();
    let (rest, fragment) = s.split_once('#').unwrap_or((s, ""));
    let (scheme, rest) = match rest.split_once("://") {
        Some((sc, r)) if !sc.contains('/') => (sc, format!("//{r}")),
        _ => ("", rest.to_string()),
    };
    let (rest, query) = rest
        .split_once('?')
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .unwrap_or((rest.clone(), String::new()));
    let (authority, path) = if let Some(r) = rest.strip_prefix("//") {
        match r.find('/') {
            Some(i) => (r[..i].to_string(), r[i..].to_string()),
            None => (r.to_string(), String::new()),
        }
    } else {
        (String::new(), rest)
    };
    let (userinfo, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (u.to_string(), h.to_string()),
        None => (String::new(), authority.clone()),
    };
    let hostname = if host.starts_with('[') {
        host.split(']')
            .next()
            .unwrap_or("")
            .trim_start_matches('[')
            .to_string()
    } else {
        host.split(':').next().unwrap_or("").to_string()
    };
    m.insert("scheme".into(), Value::from(scheme));
    m.insert("host".into(), Value::from(host));
    m.insert("hostname".into(), Value::from(hostname));
    m.insert("path".into(), Value::from(path));
    m.insert("query".into(), Value::from(query));
    m.insert("opaque".into(), Value::from(""));
    m.insert("fragment".into(), Value::from(fragment));
    m.insert("userinfo".into(), Value::from(userinfo));
    Value::from(m)
}

fn url_join(v: &Value) -> String {
    let g = |k: &str| strval(&v.get(k)).replace("<nil>", "");
    let mut out = String::new();
    let scheme = g("scheme");
    if !scheme.is_empty() {
        out.push_str(&scheme);
        out.push(':');
    }
    let host = g("host");
    if !host.is_empty() {
        out.push_str("//");
        let ui = g("userinfo");
        if !ui.is_empty() {
            out.push_str(&ui);
            out.push('@');
        }
        out.push_str(&host);
    }
    out.push_str(&g("path"));
    let q = g("query");
    if !q.is_empty() {
        out.push('?');
        out.push_str(&q);
    }
    let f = g("fragment");
    if !f.is_empty() {
        out.push('#');
        out.push_str(&f);
    }
    out
}
