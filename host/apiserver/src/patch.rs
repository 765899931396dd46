//! Patch application: JSON merge patch (RFC 7386), JSON patch (RFC 6902,
//! including `test`, `move`, `copy`, `~1` escapes and `-`), strategic merge
//! patch (merge patch + list merge by key for well-known fields + directives)
//! and the field-set bookkeeping of server-side apply (see `apply`).

use serde_json::{Map, Value};

/// Why a patch could not be applied: malformed (400) or not applicable (422).
#[derive(Debug, Clone, PartialEq)]
pub enum PatchError {
    BadRequest(String),
    Invalid(String),
}

/// RFC 7386 JSON merge patch.
pub fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let t = target.as_object_mut().expect("object");
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

fn unescape(tok: &str) -> String {
    tok.replace("~1", "/").replace("~0", "~")
}

fn tokens(path: &str) -> Result<Vec<String>, PatchError> {
    if path.is_empty() {
        return Ok(vec![]);
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(PatchError::BadRequest(format!(
            "invalid JSON pointer {path:?}"
        )));
    };
    Ok(rest.split('/').map(unescape).collect())
}

fn index(tok: &str, len: usize, allow_end: bool) -> Option<usize> {
    if tok == "-" {
        return allow_end.then_some(len);
    }
    if tok.len() > 1 && tok.starts_with('0') {
        return None;
    }
    let i: usize = tok.parse().ok()?;
    if i < len || (allow_end && i == len) {
        Some(i)
    } else {
        None
    }
}

fn parent_mut<'a>(
    doc: &'a mut Value,
    toks: &[String],
    path: &str,
) -> Result<&'a mut Value, PatchError> {
    let mut cur = doc;
    for t in toks {
        cur = match cur {
            Value::Object(m) => m.get_mut(t),
            Value::Array(a) => index(t, a.len(), false).and_then(move |i| a.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| PatchError::Invalid(format!("doc is missing path: {path:?}")))?;
    }
    Ok(cur)
}

fn get<'a>(doc: &'a Value, path: &str) -> Result<Option<&'a Value>, PatchError> {
    let mut cur = doc;
    for t in tokens(path)? {
        let next = match cur {
            Value::Object(m) => m.get(&t),
            Value::Array(a) => index(&t, a.len(), false).and_then(|i| a.get(i)),
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return Ok(None),
        }
    }
    Ok(Some(cur))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    let toks = tokens(path)?;
    let Some((last, parents)) = toks.split_last() else {
        *doc = value;
        return Ok(());
    };
    match parent_mut(doc, parents, path)? {
        Value::Object(m) => {
            m.insert(last.clone(), value);
        }
        Value::Array(a) => {
            let i = index(last, a.len(), true)
                .ok_or_else(|| PatchError::Invalid(format!("invalid index in path {path:?}")))?;
            a.insert(i, value);
        }
        _ => {
            return Err(PatchError::Invalid(format!(
                "doc is missing path: {path:?}"
            )));
        }
    }
    Ok(())
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, PatchError> {
    let toks = tokens(path)?;
    let Some((last, parents)) = toks.split_last() else {
        return Err(PatchError::Invalid(
            "cannot remove the whole document".into(),
        ));
    };
    let missing = || {
        PatchError::Invalid(format!(
            "unable to remove nonexistent key: {last}: missing value"
        ))
    };
    match parent_mut(doc, parents, path)? {
        Value::Object(m) => m.remove(last).ok_or_else(missing),
        Value::Array(a) => {
            let i = index(last, a.len(), false).ok_or_else(missing)?;
            Ok(a.remove(i))
        }
        _ => Err(missing()),
    }
}

/// RFC 6902 JSON patch. A failed `test` is `Invalid` (422), as on the real server.
/// Like the real server, `test` of a missing path against `null` succeeds.
pub fn json_patch(doc: &mut Value, ops: &Value) -> Result<(), PatchError> {
    let ops = ops.as_array().ok_or_else(|| {
        PatchError::BadRequest("json patch must be an array of operations".into())
    })?;
    let mut work = doc.clone();
    for op in ops {
        let name = op
            .get("op")
            .and_then(Value::as_str)
            .ok_or_else(|| PatchError::BadRequest("operation is missing \"op\"".into()))?;
        let path = op.get("path").and_then(Value::as_str).ok_or_else(|| {
            PatchError::BadRequest(format!("operation {name:?} is missing \"path\""))
        })?;
        let value = || {
            op.get("value").cloned().ok_or_else(|| {
                PatchError::BadRequest(format!("operation {name:?} is missing \"value\""))
            })
        };
        let from = || {
            op.get("from").and_then(Value::as_str).ok_or_else(|| {
                PatchError::BadRequest(format!("operation {name:?} is missing \"from\""))
            })
        };
        match name {
            "add" => add(&mut work, path, value()?)?,
            "remove" => {
                remove(&mut work, path)?;
            }
            "replace" => {
                let v = value()?;
                remove(&mut work, path).map_err(|_| {
                    PatchError::Invalid(format!(
                        "replace operation does not apply: doc is missing key: {path}"
                    ))
                })?;
                add(&mut work, path, v)?;
            }
            "move" => {
                let f = from()?;
                let v = remove(&mut work, f)?;
                add(&mut work, path, v)?;
            }
            "copy" => {
                let f = from()?;
                let v = get(&work, f)?
                    .cloned()
                    .ok_or_else(|| PatchError::Invalid(format!("copy from missing path {f:?}")))?;
                add(&mut work, path, v)?;
            }
            "test" => {
                let want = value()?;
                let got = get(&work, path)?;
                let ok = match got {
                    Some(g) => *g == want,
                    None => want.is_null(),
                };
                if !ok {
                    return Err(PatchError::Invalid(format!(
                        "testing value {path} failed: test operation failed"
                    )));
                }
            }
            other => {
                return Err(PatchError::BadRequest(format!(
                    "unexpected operation {other:?}"
                )));
            }
        }
    }
    *doc = work;
    Ok(())
}

/// Merge keys of well-known lists in built-in kinds (patchMergeKey in k8s.io/api).
fn merge_key(field: &str, sample: &[Value]) -> Option<&'static str> {
    let has = |k: &str| sample.iter().all(|e| e.get(k).is_some()) && !sample.is_empty();
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "readinessGates" => Some("name"),
        "volumeMounts" => Some("mountPath"),
        "volumeDevices" => Some("devicePath"),
        "conditions" => Some("type"),
        "hostAliases" => Some("ip"),
        "topologySpreadConstraints" => Some("topologyKey"),
        "ports" if has("containerPort") => Some("containerPort"),
        "ports" if has("port") => Some("port"),
        _ => None,
    }
}

/// Primitive lists merged as sets (`patchStrategy: merge` on a list of strings).
fn merge_set_list(field: &str) -> bool {
    field == "finalizers"
}

/// Strategic merge patch. Lists with a known merge key are merged element by
/// element; `finalizers` are merged as a set; every other list is replaced.
/// Directives `$patch` (replace/delete/merge), `$retainKeys`,
/// `$deleteFromPrimitiveList/<f>` and `$setElementOrder/<f>` are honoured.
pub fn strategic(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return Ok(());
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut v = patch.clone();
            strip_directives(&mut v);
            *target = v;
            return Ok(());
        }
        Some("delete") => {
            *target = Value::Null;
            return Ok(());
        }
        _ => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let t = target.as_object_mut().expect("object");
    for (k, v) in p {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(cur)), Value::Array(del)) = (t.get_mut(field), v) {
                cur.retain(|x| !del.contains(x));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        match (t.get_mut(k), v) {
            (Some(Value::Array(cur)), Value::Array(items)) => {
                if merge_set_list(k) {
                    for it in items {
                        if !cur.contains(it) {
                            cur.push(it.clone());
                        }
                    }
                } else if let Some(key) = merge_key(k, items) {
                    for it in items {
                        let id = it.get(key);
                        let pos = cur
                            .iter()
                            .position(|c| c.get(key).is_some() && c.get(key) == id);
                        let del = it.get("$patch").and_then(Value::as_str) == Some("delete");
                        match (pos, del) {
                            (Some(i), true) => {
                                cur.remove(i);
                            }
                            (None, true) => {}
                            (Some(i), false) => strategic(&mut cur[i], it)?,
                            (None, false) => {
                                let mut n = it.clone();
                                strip_directives(&mut n);
                                cur.push(n);
                            }
                        }
                    }
                } else {
                    let mut n = v.clone();
                    strip_directives(&mut n);
                    *t.get_mut(k).expect("present") = n;
                }
            }
            (Some(cur @ Value::Object(_)), Value::Object(_)) => {
                strategic(cur, v)?;
                if cur.is_null() {
                    t.remove(k);
                }
            }
            _ => {
                let mut n = v.clone();
                strip_directives(&mut n);
                if !n.is_null() {
                    t.insert(k.clone(), n);
                }
            }
        }
    }
    if let Some(Value::Array(keep)) = p.get("$retainKeys") {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        t.retain(|k, _| keep.contains(&k.as_str()));
    }
    Ok(())
}

/// Remove `$...` directive keys (recursively).
pub fn strip_directives(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !k.starts_with('$'));
            m.values_mut().for_each(strip_directives);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_directives),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_deletes_with_null() {
        let mut d = json!({"a": {"b": 1, "c": 2}, "l": [1, 2]});
        merge(&mut d, &json!({"a": {"b": null, "d": 3}, "l": [3]}));
        assert_eq!(d, json!({"a": {"c": 2, "d": 3}, "l": [3]}));
    }

    #[test]
    fn json_patch_ops() {
        let mut d = json!({"metadata": {"annotations": {"a/b": "x"}}, "l": [1, 2]});
        json_patch(
            &mut d,
            &json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": ["f"]},
                {"op": "add", "path": "/l/-", "value": 3},
                {"op": "replace", "path": "/metadata/annotations/a~1b", "value": "y"},
                {"op": "copy", "from": "/l/0", "path": "/first"},
                {"op": "move", "from": "/first", "path": "/moved"},
                {"op": "remove", "path": "/l/0"},
            ]),
        )
        .unwrap();
        assert_eq!(
            d,
            json!({"metadata": {"annotations": {"a/b": "y"}, "finalizers": ["f"]}, "l": [2, 3], "moved": 1})
        );
        let before = d.clone();
        let err = json_patch(
            &mut d,
            &json!([{"op": "remove", "path": "/l/0"}, {"op": "test", "path": "/l/0", "value": 99}]),
        )
        .unwrap_err();
        assert!(matches!(err, PatchError::Invalid(_)));
        assert_eq!(d, before, "a failed patch changes nothing");
        assert!(matches!(
            json_patch(&mut d, &json!({"op": "add"})),
            Err(PatchError::BadRequest(_))
        ));
        assert!(matches!(
            json_patch(&mut d, &json!([{"op": "remove", "path": "/nope"}])),
            Err(PatchError::Invalid(_))
        ));
    }

    #[test]
    fn strategic_merges_containers_by_name() {
        let mut d = json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}, "metadata": {"finalizers": ["x"]}});
        strategic(
            &mut d,
            &json!({
                "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
                "spec": {"containers": [{"name": "b", "image": "2"}, {"name": "c", "image": "3"}, {"name": "a", "$patch": "delete"}]},
                "metadata": {"finalizers": ["y"]}
            }),
        )
        .unwrap();
        assert_eq!(
            d,
            json!({"spec": {"containers": [{"name": "b", "image": "2"}, {"name": "c", "image": "3"}]}, "metadata": {"finalizers": ["x", "y"]}})
        );
    }
}
