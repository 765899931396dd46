//! Sprig list and dict functions (`list append first uniq without has dict get set unset
//! hasKey pluck keys pick omit values merge mergeOverwrite dig deepCopy …`), with mergo's merge
//! semantics and Go map reference semantics (`set`/`merge` mutate their argument).

use std::collections::HashMap;
use std::rc::Rc;

use super::args::{FR, arg_int, arg_list, arg_map, arg_str, is_empty, strval, want, want_min};
use crate::template::{Func, FuncError};
use crate::value::{Map, MapRef, Value, deep_equal};

fn list_of(v: Vec<Value>) -> Value {
    Value::from(v)
}

macro_rules! both {
    ($m:ident, $name:literal, $must:literal, $f:expr) => {
        $m.insert($name, |_, a| {
            let f: fn(&[Value]) -> FR = $f;
            f(a)
        });
        $m.insert($must, |_, a| {
            let f: fn(&[Value]) -> FR = $f;
            f(a)
        });
    };
}

pub(super) fn register(m: &mut HashMap<&'static str, Func>) {
    m.insert("list", |_, a| Ok(list_of(a.to_vec())));
    m.insert("tuple", |_, a| Ok(list_of(a.to_vec())));
    both!(m, "append", "mustAppend", |a| {
        want("append", a, 2)?;
        let l = arg_list("push", &a[0])?;
        let mut v = (*l).clone();
        v.push(a[1].clone());
        Ok(list_of(v))
    });
    both!(m, "push", "mustPush", |a| {
        want("push", a, 2)?;
        let l = arg_list("push", &a[0])?;
        let mut v = (*l).clone();
        v.push(a[1].clone());
        Ok(list_of(v))
    });
    both!(m, "prepend", "mustPrepend", |a| {
        want("prepend", a, 2)?;
        let l = arg_list("prepend", &a[0])?;
        let mut v = vec![a[1].clone()];
        v.extend(l.iter().cloned());
        Ok(list_of(v))
    });
    both!(m, "first", "mustFirst", |a| {
        want("first", a, 1)?;
        let l = arg_list("find first", &a[0])?;
        Ok(l.first().cloned().unwrap_or_default())
    });
    both!(m, "last", "mustLast", |a| {
        want("last", a, 1)?;
        let l = arg_list("find last", &a[0])?;
        Ok(l.last().cloned().unwrap_or_default())
    });
    both!(m, "rest", "mustRest", |a| {
        want("rest", a, 1)?;
        let l = arg_list("find rest", &a[0])?;
        if l.is_empty() {
            return Ok(Value::Nil);
        }
        Ok(list_of(l[1..].to_vec()))
    });
    both!(m, "initial", "mustInitial", |a| {
        want("initial", a, 1)?;
        let l = arg_list("find initial", &a[0])?;
        if l.is_empty() {
            return Ok(Value::Nil);
        }
        Ok(list_of(l[..l.len() - 1].to_vec()))
    });
    both!(m, "reverse", "mustReverse", |a| {
        want("reverse", a, 1)?;
        let l = arg_list("find reverse", &a[0])?;
        Ok(list_of(l.iter().rev().cloned().collect()))
    });
    both!(m, "uniq", "mustUniq", |a| {
        want("uniq", a, 1)?;
        let l = arg_list("find uniq", &a[0])?;
        let mut out: Vec<Value> = Vec::new();
        for e in l.iter() {
            if !out.iter().any(|x| deep_equal(x, e)) {
                out.push(e.clone());
            }
        }
        Ok(list_of(out))
    });
    both!(m, "compact", "mustCompact", |a| {
        want("compact", a, 1)?;
        let l = arg_list("compact", &a[0])?;
        Ok(list_of(
            l.iter().filter(|e| !is_empty(e)).cloned().collect(),
        ))
    });
    both!(m, "without", "mustWithout", |a| {
        want_min("without", a, 1)?;
        let l = arg_list("find without", &a[0])?;
        Ok(list_of(
            l.iter()
                .filter(|e| !a[1..].iter().any(|x| deep_equal(x, e)))
                .cloned()
                .collect(),
        ))
    });
    both!(m, "has", "mustHas", |a| {
        want("has", a, 2)?;
        if a[1].is_nil() {
            return Ok(Value::Bool(false));
        }
        let l = arg_list("find has", &a[1])?;
        Ok(Value::Bool(l.iter().any(|x| deep_equal(x, &a[0]))))
    });
    both!(m, "slice", "mustSlice", |a| {
        want_min("slice", a, 1)?;
        let l = arg_list("slice", &a[0])?;
        let len = l.len() as i64;
        let start = a.get(1).map(super::args::to_i64).unwrap_or(0);
        let end = a.get(2).map(super::args::to_i64).unwrap_or(len);
        if start < 0 || end > len || start > end {
            return Err(FuncError::call(format!(
                "slice bounds out of range [{start}:{end}]"
            )));
        }
        Ok(list_of(l[start as usize..end as usize].to_vec()))
    });
    both!(m, "chunk", "mustChunk", |a| {
        want("chunk", a, 2)?;
        let n = arg_int(&a[0])?.max(1) as usize;
        let l = arg_list("chunk", &a[1])?;
        Ok(list_of(l.chunks(n).map(|c| list_of(c.to_vec())).collect()))
    });
    m.insert("concat", |_, a| {
        let mut out = Vec::new();
        for l in a {
            out.extend(arg_list("concat", l)?.iter().cloned());
        }
        Ok(list_of(out))
    });
    m.insert("dict", |_, a| {
        let mut mp = Map::new();
        let mut i = 0;
        while i < a.len() {
            let k = strval(&a[i]);
            let v = a.get(i + 1).cloned().unwrap_or_else(|| Value::from(""));
            mp.insert(k, v);
            i += 2;
        }
        Ok(Value::from(mp))
    });
    m.insert("get", |_, a| {
        want("get", a, 2)?;
        let d = arg_map(&a[0])?;
        let k = arg_str(&a[1])?;
        Ok(d.and_then(|d| d.borrow().get(k).cloned())
            .unwrap_or_else(|| Value::from("")))
    });
    m.insert("set", |_, a| {
        want("set", a, 3)?;
        let d = arg_map(&a[0])?.ok_or_else(|| FuncError::call("assignment to entry in nil map"))?;
        let k = arg_str(&a[1])?;
        d.borrow_mut().insert(k.to_string(), a[2].clone());
        Ok(Value::Map(d))
    });
    m.insert("unset", |_, a| {
        want("unset", a, 2)?;
        let d = arg_map(&a[0])?;
        let k = arg_str(&a[1])?;
        if let Some(d) = &d {
            d.borrow_mut().remove(k);
        }
        Ok(d.map(Value::Map).unwrap_or_default())
    });
    m.insert("hasKey", |_, a| {
        want("hasKey", a, 2)?;
        let d = arg_map(&a[0])?;
        let k = arg_str(&a[1])?;
        Ok(Value::Bool(d.is_some_and(|d| d.borrow().contains_key(k))))
    });
    m.insert("pluck", |_, a| {
        want_min("pluck", a, 1)?;
        let k = arg_str(&a[0])?;
        let mut out = Vec::new();
        for d in &a[1..] {
            if let Some(d) = arg_map(d)?
                && let Some(v) = d.borrow().get(k)
            {
                out.push(v.clone());
            }
        }
        Ok(list_of(out))
    });
    m.insert("keys", |_, a| {
        let mut out = Vec::new();
        for d in a {
            if let Some(d) = arg_map(d)? {
                out.extend(d.borrow().keys().map(|k| Value::from(k.as_str())));
            }
        }
        Ok(list_of(out))
    });
    m.insert("values", |_, a| {
        want("values", a, 1)?;
        let d = arg_map(&a[0])?;
        Ok(list_of(
            d.map(|d| d.borrow().values().cloned().collect())
                .unwrap_or_default(),
        ))
    });
    m.insert("pick", |_, a| {
        want_min("pick", a, 1)?;
        let d = arg_map(&a[0])?;
        let mut out = Map::new();
        if let Some(d) = d {
            let d = d.borrow();
            for k in &a[1..] {
                let k = arg_str(k)?;
                if let Some(v) = d.get(k) {
                    out.insert(k.to_string(), v.clone());
                }
            }
        }
        Ok(Value::from(out))
    });
    m.insert("omit", |_, a| omit(a));
    m.insert("merge", |_, a| merge_fn(a, false));
    m.insert("mustMerge", |_, a| merge_fn(a, false));
    m.insert("mergeOverwrite", |_, a| merge_fn(a, true));
    m.insert("mustMergeOverwrite", |_, a| merge_fn(a, true));
    m.insert("deepCopy", |_, a| {
        want("deepCopy", a, 1)?;
        Ok(a[0].plain().deep_copy())
    });
    m.insert("mustDeepCopy", |_, a| {
        want("mustDeepCopy", a, 1)?;
        if a[0].is_nil() {
            return Err(FuncError::call(
                "reflect: call of reflect.Value.Type on zero Value",
            ));
        }
        Ok(a[0].plain().deep_copy())
    });
    m.insert("dig", |_, a| dig(a));
}

/// Sprig's `omit`.
fn omit(a: &[Value]) -> FR {
    want_min("omit", a, 1)?;
    let d = arg_map(&a[0])?;
    let mut drop = Vec::new();
    for k in &a[1..] {
        drop.push(arg_str(k)?.to_string());
    }
    let mut out = Map::new();
    if let Some(d) = d {
        for (k, v) in d.borrow().iter() {
            if !drop.contains(k) {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(Value::from(out))
}

/// Sprig's `dig`.
fn dig(a: &[Value]) -> FR {
    want_min("dig", a, 3)?;
    let n = a.len();
    let d = arg_map(&a[n - 1])?;
    let default = a[n - 2].clone();
    let mut keys = Vec::new();
    for k in &a[..n - 2] {
        keys.push(arg_str(k)?.to_string());
    }
    let mut cur = match d {
        Some(d) => Value::Map(d),
        None => return Ok(default),
    };
    for (i, k) in keys.iter().enumerate() {
        let next = match &cur {
            Value::Map(m) => m.borrow().get(k).cloned(),
            _ => None,
        };
        match next {
            Some(v) => {
                if i + 1 < keys.len() && !matches!(v, Value::Map(_)) {
                    return Err(FuncError::call(format!(
                        "interface conversion: interface {{}} is {}, not map[string]interface {{}}",
                        v.type_name()
                    )));
                }
                cur = v;
            }
            None => return Ok(default),
        }
    }
    Ok(cur)
}

fn merge_fn(a: &[Value], overwrite: bool) -> FR {
    want_min("merge", a, 1)?;
    let dst = arg_map(&a[0])?.unwrap_or_else(|| Rc::new(std::cell::RefCell::new(Map::new())));
    for src in &a[1..] {
        if let Some(src) = arg_map(src)? {
            if Rc::ptr_eq(&src, &dst) {
                continue;
            }
            mergo(&dst, &src.borrow(), overwrite);
        }
    }
    Ok(Value::Map(dst))
}

/// mergo's `Merge`/`Merge(WithOverride)` for `map[string]interface{}`.
pub(crate) fn mergo(dst: &MapRef, src: &Map, overwrite: bool) {
    for (k, sv) in src.iter() {
        if sv.is_nil() {
            if overwrite {
                dst.borrow_mut().insert(k.clone(), Value::Nil);
            }
            continue;
        }
        let dv = dst.borrow().get(k).cloned();
        if let (Value::Map(sm), Some(Value::Map(dm))) = (sv, &dv) {
            if !Rc::ptr_eq(sm, dm) {
                let sm = sm.borrow().clone();
                mergo(dm, &sm, overwrite);
            }
            if !dm.borrow().is_empty() {
                continue;
            }
        }
        if let (Value::List(_), Some(d)) = (sv, &dv)
            && !is_empty(d)
            && !overwrite
        {
            continue;
        }
        let set = overwrite || dv.as_ref().is_none_or(is_empty);
        if set {
            dst.borrow_mut().insert(k.clone(), sv.clone());
        }
    }
}
