//! Server-side apply (simplified field ownership).
//!
//! Each `Apply` manager owns the set of *leaf* field paths it sent last time,
//! stored in `metadata.managedFields` in the real `FieldsV1` encoding
//! (`{"f:spec":{"f:replicas":{}}}`). Maps are merged recursively, lists are
//! atomic (owned as a whole) except `metadata.finalizers`, which is a set
//! (`v:"name"` items). Re-applying without a field removes it unless another
//! Apply manager owns it. Conflicts are only detected between Apply managers
//! (fields written by update/patch have no owner); `force=true` takes
//! ownership from the other managers.

use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

type Path = Vec<String>;

const META_SKIP: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
];

fn leaf_paths(v: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
    let Value::Object(m) = v else { return };
    for (k, child) in m {
        if prefix.is_empty() && (k == "apiVersion" || k == "kind") {
            continue;
        }
        if prefix.len() == 1 && prefix[0] == "f:metadata" && META_SKIP.contains(&k.as_str()) {
            continue;
        }
        prefix.push(format!("f:{k}"));
        match child {
            Value::Object(cm) if !cm.is_empty() => leaf_paths(child, prefix, out),
            Value::Array(items)
                if prefix.len() == 2 && prefix[0] == "f:metadata" && k == "finalizers" =>
            {
                for it in items {
                    let mut p = prefix.clone();
                    p.push(format!("v:{it}"));
                    out.insert(p);
                }
            }
            _ => {
                out.insert(prefix.clone());
            }
        }
        prefix.pop();
    }
}

pub fn encode(set: &BTreeSet<Path>) -> Value {
    let mut root = Value::Object(Map::new());
    for p in set {
        let mut cur = &mut root;
        for t in p {
            cur = cur
                .as_object_mut()
                .expect("map")
                .entry(t.clone())
                .or_insert_with(|| json!({}));
        }
    }
    root
}

pub fn decode(v: &Value) -> BTreeSet<Path> {
    fn walk(v: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
        let Some(m) = v.as_object() else { return };
        if m.is_empty() && !prefix.is_empty() {
            out.insert(prefix.clone());
        }
        for (k, c) in m {
            if k == "." {
                if !prefix.is_empty() {
                    out.insert(prefix.clone());
                }
                continue;
            }
            prefix.push(k.clone());
            walk(c, prefix, out);
            prefix.pop();
        }
    }
    let mut out = BTreeSet::new();
    walk(v, &mut vec![], &mut out);
    out
}

fn get_at<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = v;
    for t in path {
        cur = if let Some(f) = t.strip_prefix("f:") {
            cur.get(f)?
        } else if let Some(item) = t.strip_prefix("v:") {
            let want: Value = serde_json::from_str(item).ok()?;
            cur.as_array()?.iter().find(|x| **x == want)?
        } else {
            return None;
        };
    }
    Some(cur)
}

fn remove_at(v: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for t in parents {
        let Some(f) = t.strip_prefix("f:") else {
            return;
        };
        match cur.get_mut(f) {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(m) = cur.as_object_mut() {
            m.remove(f);
        }
    } else if let Some(item) = last.strip_prefix("v:")
        && let Ok(want) = serde_json::from_str::<Value>(item)
        && let Some(a) = cur.as_array_mut()
    {
        a.retain(|x| *x != want);
    }
}

fn merge_applied(target: &mut Value, cfg: &Value, depth: usize, in_meta: bool) {
    let Value::Object(c) = cfg else { return };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let t = target.as_object_mut().expect("object");
    for (k, v) in c {
        if depth == 1
            && in_meta
            && META_SKIP.contains(&k.as_str())
            && k != "namespace"
            && k != "name"
        {
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        match (t.get_mut(k), v) {
            (Some(Value::Array(cur)), Value::Array(items))
                if depth == 1 && in_meta && k == "finalizers" =>
            {
                for it in items {
                    if !cur.contains(it) {
                        cur.push(it.clone());
                    }
                }
            }
            (Some(cur @ Value::Object(_)), Value::Object(_)) => merge_applied(
                cur,
                v,
                depth + 1,
                in_meta || (depth == 0 && k == "metadata"),
            ),
            _ => {
                t.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Which part of the object an apply request may touch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scope {
    /// The main resource; `status` is ignored when the kind has a status subresource.
    Main { ignore_status: bool },
    /// The `/status` subresource: only `status` is applied.
    Status,
}

fn path_str(p: &Path) -> String {
    p.iter()
        .map(|t| format!(".{}", t.get(2..).unwrap_or("")))
        .collect()
}

/// Apply `cfg` for `manager` on top of `current` (None = create).
/// Returns the new object, or a conflict message (HTTP 409).
pub fn apply(
    current: Option<&Value>,
    cfg: &Value,
    manager: &str,
    scope: Scope,
    force: bool,
    now: &str,
) -> Result<Value, String> {
    let mut cfg = cfg.clone();
    if let Some(m) = cfg.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    let restricted = applied_part(&cfg, scope);
    let sub = matches!(scope, Scope::Status).then_some("status");
    let mut new_set = BTreeSet::new();
    leaf_paths(&restricted, &mut vec![], &mut new_set);

    let mut obj = current.cloned().unwrap_or_else(|| json!({}));
    let mut entries: Vec<Value> = obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let is_mine = |e: &Value| {
        e.get("manager").and_then(Value::as_str) == Some(manager)
            && e.get("operation").and_then(Value::as_str) == Some("Apply")
            && e.get("subresource").and_then(Value::as_str) == sub
    };
    let mine = entries.iter().position(is_mine);
    let old_set = mine
        .map(|i| decode(entries[i].get("fieldsV1").unwrap_or(&Value::Null)))
        .unwrap_or_default();
    let others = other_appliers(&entries, mine);
    let conflicts = conflicts(&obj, &restricted, &new_set, &others);
    if !conflicts.is_empty() && !force {
        let n = conflicts.len();
        return Err(format!(
            "Apply failed with {n} conflict{}: {}",
            if n == 1 { "" } else { "s" },
            conflicts.join("; ")
        ));
    }
    let owned_by_others: BTreeSet<Path> = others
        .iter()
        .flat_map(|(_, _, s)| s.iter().cloned())
        .collect();
    for p in old_set.difference(&new_set) {
        if !owned_by_others.contains(p) {
            remove_at(&mut obj, p);
        }
    }
    merge_applied(&mut obj, &restricted, 0, false);
    if matches!(scope, Scope::Status) {
        // Keep apiVersion/kind/metadata.name from the current object.
    } else {
        for k in ["apiVersion", "kind"] {
            if let Some(v) = cfg.get(k) {
                obj[k] = v.clone();
            }
        }
    }
    if force {
        take_over_fields(&mut entries, &others, &new_set);
    }
    let api_version = cfg
        .get("apiVersion")
        .cloned()
        .or_else(|| obj.get("apiVersion").cloned())
        .unwrap_or(Value::Null);
    let mine = entries.iter().position(is_mine);
    if new_set.is_empty() {
        if let Some(i) = mine {
            entries.remove(i);
        }
    } else {
        let fields = encode(&new_set);
        match mine {
            Some(i) if entries[i].get("fieldsV1") == Some(&fields) => {}
            Some(i) => {
                entries[i]["fieldsV1"] = fields;
                entries[i]["time"] = json!(now);
            }
            None => {
                let mut e = json!({
                    "manager": manager, "operation": "Apply", "apiVersion": api_version,
                    "time": now, "fieldsType": "FieldsV1", "fieldsV1": fields,
                });
                if let Some(s) = sub {
                    e["subresource"] = json!(s);
                }
                entries.push(e);
            }
        }
    }
    set_managed_fields(&mut obj, entries);
    Ok(obj)
}

/// The part of the configuration the apply owns: `status` alone for the status subresource;
/// otherwise all of it, without `status` when the kind has a status subresource.
fn applied_part(cfg: &Value, scope: Scope) -> Value {
    match scope {
        Scope::Status => json!({ "status": cfg.get("status").cloned().unwrap_or(json!({})) }),
        Scope::Main { ignore_status } => {
            let mut c = cfg.clone();
            if ignore_status && let Some(m) = c.as_object_mut() {
                m.remove("status");
            }
            c
        }
    }
}

/// Other Apply managers (index into `entries`, name, field set); `mine` is skipped.
fn other_appliers(entries: &[Value], mine: Option<usize>) -> Vec<(usize, String, BTreeSet<Path>)> {
    let mut others = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if Some(i) == mine || e.get("operation").and_then(Value::as_str) != Some("Apply") {
            continue;
        }
        let name = e
            .get("manager")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        others.push((i, name, decode(e.get("fieldsV1").unwrap_or(&Value::Null))));
    }
    others
}

/// Fields another applier owns that this apply sets to a different value.
fn conflicts(
    obj: &Value,
    restricted: &Value,
    new_set: &BTreeSet<Path>,
    others: &[(usize, String, BTreeSet<Path>)],
) -> Vec<String> {
    let mut conflicts = Vec::new();
    for (_, name, set) in others {
        for p in new_set.intersection(set) {
            if get_at(obj, p) != get_at(restricted, p) {
                conflicts.push(format!("conflict with \"{name}\": {}", path_str(p)));
            }
        }
    }
    conflicts
}

/// Forced: other managers lose the fields we now own (an entry left with none goes).
fn take_over_fields(
    entries: &mut Vec<Value>,
    others: &[(usize, String, BTreeSet<Path>)],
    new_set: &BTreeSet<Path>,
) {
    for (i, _, set) in others {
        let shared: Vec<&Path> = set.intersection(new_set).collect();
        if !shared.is_empty() {
            let remaining: BTreeSet<Path> = set.difference(new_set).cloned().collect();
            entries[*i]["fieldsV1"] = encode(&remaining);
        }
    }
    entries.retain(|e| {
        e.get("fieldsV1")
            .is_none_or(|f| f.as_object().is_none_or(|m| !m.is_empty()))
    });
}

/// `metadata.managedFields` = `entries` (removed when empty).
fn set_managed_fields(obj: &mut Value, entries: Vec<Value>) {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    if entries.is_empty() {
        obj["metadata"]
            .as_object_mut()
            .expect("map")
            .remove("managedFields");
    } else {
        obj["metadata"]["managedFields"] = Value::Array(entries);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: Scope = Scope::Main {
        ignore_status: true,
    };

    #[test]
    fn reapply_without_field_removes_it() {
        let cfg1 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "labels": {"a": "1"}}, "data": {"k1": "v", "k2": "v"}});
        let o1 = apply(None, &cfg1, "me", M, false, "t1").unwrap();
        assert_eq!(o1["data"], json!({"k1": "v", "k2": "v"}));
        let cfg2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k1": "v"}});
        let o2 = apply(Some(&o1), &cfg2, "me", M, false, "t2").unwrap();
        assert_eq!(o2["data"], json!({"k1": "v"}));
        assert!(
            o2.pointer("/metadata/labels")
                .is_none_or(|l| l.get("a").is_none())
        );
        // Another manager's fields survive.
        let o3 = apply(
            Some(&o2),
            &json!({"metadata": {"name": "x"}, "data": {"other": "1"}}),
            "you",
            M,
            false,
            "t3",
        )
        .unwrap();
        let o4 = apply(
            Some(&o3),
            &json!({"metadata": {"name": "x"}, "data": {}}),
            "me",
            M,
            false,
            "t4",
        )
        .unwrap();
        assert_eq!(o4["data"], json!({"other": "1"}));
    }

    #[test]
    fn conflicts_between_managers() {
        let o1 = apply(
            None,
            &json!({"metadata": {"name": "x"}, "data": {"k": "a"}}),
            "one",
            M,
            false,
            "t",
        )
        .unwrap();
        let err = apply(
            Some(&o1),
            &json!({"metadata": {"name": "x"}, "data": {"k": "b"}}),
            "two",
            M,
            false,
            "t",
        )
        .unwrap_err();
        assert!(err.contains("conflict with \"one\": .data.k"), "{err}");
        // Same value is shared ownership, no conflict.
        apply(
            Some(&o1),
            &json!({"metadata": {"name": "x"}, "data": {"k": "a"}}),
            "two",
            M,
            false,
            "t",
        )
        .unwrap();
        let forced = apply(
            Some(&o1),
            &json!({"metadata": {"name": "x"}, "data": {"k": "b"}}),
            "two",
            M,
            true,
            "t",
        )
        .unwrap();
        assert_eq!(forced["data"]["k"], "b");
        let managers: Vec<&str> = forced["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(managers, vec!["two"]);
    }

    #[test]
    fn fields_v1_roundtrip() {
        let mut s = BTreeSet::new();
        leaf_paths(
            &json!({"metadata": {"name": "x", "finalizers": ["a"], "labels": {"l": "1"}}, "spec": {"x": 1}}),
            &mut vec![],
            &mut s,
        );
        let enc = encode(&s);
        assert_eq!(
            enc,
            json!({"f:metadata": {"f:finalizers": {"v:\"a\"": {}}, "f:labels": {"f:l": {}}}, "f:spec": {"f:x": {}}})
        );
        assert_eq!(decode(&enc), s);
    }
}
