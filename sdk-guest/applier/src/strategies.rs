//! Update strategies (contract 6.4) as pure functions on JSON: what to send for `update`,
//! `merge` and `mergeOverwrite`, the deep merge used by `patchAfterDeployment` /
//! `patchBeforeDelete`, and the fields copied from the live object before a PUT.
//!
//! `patch` is server-side apply (see `applier`), so it has no function here.
//! Owns: JSON transformations only. Must not touch: the cluster.

use serde_json::{Map, Value};

/// Whether a value counts as "empty" in Go's mergo sense (zero value).
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// `merge`: fills missing or empty fields of `live` from `desired`; maps merge recursively;
/// existing values (including lists) are kept.
pub fn merge_keep(live: &mut Value, desired: &Value) {
    match (live, desired) {
        (Value::Object(l), Value::Object(d)) => {
            for (k, dv) in d {
                match l.get_mut(k) {
                    Some(lv) if lv.is_object() && dv.is_object() => merge_keep(lv, dv),
                    Some(lv) if !is_empty(lv) => {}
                    _ => {
                        l.insert(k.clone(), dv.clone());
                    }
                }
            }
        }
        (l, d) => {
            if is_empty(l) {
                *l = d.clone();
            }
        }
    }
}

/// `mergeOverwrite`: non-empty `desired` values override `live`; maps merge recursively;
/// lists are replaced; empty desired values do not override.
pub fn merge_overwrite(live: &mut Value, desired: &Value) {
    match (live, desired) {
        (Value::Object(l), Value::Object(d)) => {
            for (k, dv) in d {
                match l.get_mut(k) {
                    Some(lv) if lv.is_object() && dv.is_object() => merge_overwrite(lv, dv),
                    Some(_) if is_empty(dv) => {}
                    _ => {
                        l.insert(k.clone(), dv.clone());
                    }
                }
            }
        }
        (l, d) => {
            if !is_empty(d) {
                *l = d.clone();
            }
        }
    }
}

/// Deep merge with override (`patchAfterDeployment`, `patchBeforeDelete`): maps merge
/// recursively, every other patch value replaces the live one (`null` included).
pub fn deep_merge(live: &mut Value, patch: &Value) {
    match (live, patch) {
        (Value::Object(l), Value::Object(p)) => {
            for (k, pv) in p {
                match l.get_mut(k) {
                    Some(lv) if lv.is_object() && pv.is_object() => deep_merge(lv, pv),
                    _ => {
                        l.insert(k.clone(), pv.clone());
                    }
                }
            }
        }
        (l, p) => *l = p.clone(),
    }
}

/// Sets `labels` on `obj` (keeps other labels).
pub fn set_labels(obj: &mut Value, labels: &[(&str, &str)]) {
    let meta = obj.as_object_mut().map(|o| {
        o.entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()))
    });
    if let Some(Value::Object(meta)) = meta {
        let l = meta
            .entry("labels")
            .or_insert_with(|| Value::Object(Map::new()));
        if !l.is_object() {
            *l = Value::Object(Map::new());
        }
        for (k, v) in labels {
            l[*k] = Value::String(v.to_string());
        }
    }
}

/// Merges `annotations` into `obj` (the given ones win).
pub fn set_annotations<'a>(
    obj: &mut Value,
    annotations: impl IntoIterator<Item = (&'a String, &'a String)>,
) {
    let meta = obj.as_object_mut().map(|o| {
        o.entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()))
    });
    if let Some(Value::Object(meta)) = meta {
        let a = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if !a.is_object() {
            *a = Value::Object(Map::new());
        }
        for (k, v) in annotations {
            a[k.as_str()] = Value::String(v.clone());
        }
    }
}

/// Before a PUT of `desired` over `live`: copy fields the API server requires or treats as
/// immutable (`SetRequiredNestedFieldsFromObj`): always `metadata.resourceVersion`; Job
/// `spec.selector` and `spec.template.metadata.labels`; Service `spec.clusterIP`;
/// ServiceAccount `secrets` if the desired object has none.
pub fn copy_required_fields(desired: &mut Value, live: &Value) {
    if let Some(rv) = live.pointer("/metadata/resourceVersion")
        && let Some(meta) = desired.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.insert("resourceVersion".into(), rv.clone());
    }
    let kind = live.get("kind").and_then(Value::as_str).unwrap_or("");
    let group = live
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|a| a.rsplit_once('/').map(|(g, _)| g))
        .unwrap_or("");
    let copy = |desired: &mut Value, path: &[&str]| {
        let ptr = format!("/{}", path.join("/"));
        if let Some(v) = live.pointer(&ptr).cloned() {
            let mut cur = desired;
            for (i, seg) in path.iter().enumerate() {
                if !cur.is_object() {
                    return;
                }
                if i == path.len() - 1 {
                    cur[*seg] = v;
                    return;
                }
                if cur.get(*seg).is_none() {
                    cur[*seg] = Value::Object(Map::new());
                }
                cur = &mut cur[*seg];
            }
        }
    };
    match (group, kind) {
        ("batch", "Job") => {
            copy(desired, &["spec", "selector"]);
            copy(desired, &["spec", "template", "metadata", "labels"]);
        }
        ("", "Service") => copy(desired, &["spec", "clusterIP"]),
        ("", "ServiceAccount") if desired.get("secrets").is_none() => copy(desired, &["secrets"]),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_keeps_live_values_and_fills_missing_ones() {
        let mut live = json!({"data": {"a": "live", "x": "external"}, "list": [1], "e": ""});
        merge_keep(
            &mut live,
            &json!({"data": {"a": "desired", "b": "new"}, "list": [2], "e": "filled"}),
        );
        assert_eq!(
            live,
            json!({"data": {"a": "live", "x": "external", "b": "new"}, "list": [1], "e": "filled"})
        );
    }

    #[test]
    fn merge_overwrite_lets_non_empty_desired_values_win() {
        let mut live = json!({"data": {"a": "live", "x": "external"}, "list": [1], "keep": "k"});
        merge_overwrite(
            &mut live,
            &json!({"data": {"a": "desired"}, "list": [2, 3], "keep": ""}),
        );
        assert_eq!(
            live,
            json!({"data": {"a": "desired", "x": "external"}, "list": [2, 3], "keep": "k"})
        );
    }

    #[test]
    fn deep_merge_overrides_and_recurses() {
        let mut live = json!({"data": {"key1": "val1", "key2": "val2"}});
        deep_merge(
            &mut live,
            &json!({"data": {"key1": "val1b", "key3": "val3"}}),
        );
        assert_eq!(
            live,
            json!({"data": {"key1": "val1b", "key2": "val2", "key3": "val3"}})
        );
    }

    #[test]
    fn required_fields_come_from_the_live_object() {
        let live = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"resourceVersion": "7"},
            "spec": {"clusterIP": "10.0.0.1"}});
        let mut desired =
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {}});
        copy_required_fields(&mut desired, &live);
        assert_eq!(desired["metadata"]["resourceVersion"], "7");
        assert_eq!(desired["spec"]["clusterIP"], "10.0.0.1");
    }
}
