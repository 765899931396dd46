//! Resources served from another resource's storage, as a real kube-apiserver serves them:
//! `events.k8s.io/v1` Events are the `core/v1` Events, with renamed fields. One store, two
//! views, so an Event written through either API is listed, watched and described through
//! both (`kubectl get events` and `kubectl describe` read `core/v1`; controllers such as the
//! deployer host write `events.k8s.io/v1`).
//!
//! Owns the field mappings and the conversion of whole objects, partial ones (merge and
//! strategic patches, apply configurations), JSON-patch paths and field selectors. Must not
//! touch: storage, validation or admission (the routes hand this module the stored object or
//! the request body and use the storage resource for everything else).

use serde_json::{Map, Value};

use crate::registry::ResourceType;

/// A resource served as a view of another resource's storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// `events.k8s.io/v1` `events` over `core/v1` `events`.
    Events,
}

/// `events.k8s.io/v1` field → `core/v1` field (top level; everything else is the same).
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

impl View {
    /// The view `rt` is, if it is one.
    pub fn of(rt: &ResourceType) -> Option<View> {
        (rt.group == "events.k8s.io" && rt.plural == "events").then_some(View::Events)
    }

    /// Where the objects live: group, version, plural.
    pub fn storage(self) -> (&'static str, &'static str, &'static str) {
        match self {
            View::Events => ("", "v1", "events"),
        }
    }

    fn fields(self) -> &'static [(&'static str, &'static str)] {
        match self {
            View::Events => EVENT_FIELDS,
        }
    }

    fn rename(self, v: &Value, to_storage: bool) -> Value {
        let Some(obj) = v.as_object() else {
            return v.clone();
        };
        let mut out = Map::with_capacity(obj.len());
        for (k, val) in obj {
            let renamed = self
                .fields()
                .iter()
                .find(|(view, store)| if to_storage { view == k } else { store == k })
                .map(|(view, store)| if to_storage { *store } else { *view });
            out.insert(renamed.unwrap_or(k).to_string(), val.clone());
        }
        Value::Object(out)
    }

    /// A request body (whole object, merge/strategic patch or apply configuration) in the
    /// storage resource's terms.
    pub fn to_storage(self, v: &Value) -> Value {
        let mut out = self.rename(v, true);
        if let Some(o) = out.as_object_mut()
            && o.contains_key("apiVersion")
        {
            let (g, ver, _) = self.storage();
            let av = if g.is_empty() {
                ver.to_string()
            } else {
                format!("{g}/{ver}")
            };
            o.insert("apiVersion".into(), Value::String(av));
        }
        out
    }

    /// A stored object as the view shows it, with `api_version`.
    pub fn from_storage(self, v: &Value, api_version: &str) -> Value {
        let mut out = self.rename(v, false);
        if let Some(o) = out.as_object_mut() {
            o.insert("apiVersion".into(), Value::String(api_version.into()));
        }
        out
    }

    /// A JSON patch (RFC 6902) with its `path`s and `from`s in the storage resource's terms.
    pub fn json_patch_to_storage(self, ops: &Value) -> Value {
        let rewrite = |p: &str| -> String {
            let rest = p.strip_prefix('/').unwrap_or(p);
            let (first, tail) = rest
                .split_once('/')
                .map_or((rest, None), |(a, b)| (a, Some(b)));
            let first = self
                .fields()
                .iter()
                .find(|(view, _)| *view == first)
                .map_or(first, |(_, store)| store);
            match tail {
                Some(t) => format!("/{first}/{t}"),
                None => format!("/{first}"),
            }
        };
        let mut ops = ops.clone();
        for op in ops.as_array_mut().into_iter().flatten() {
            for key in ["path", "from"] {
                if let Some(p) = op.get(key).and_then(Value::as_str) {
                    let p = rewrite(p);
                    op[key] = Value::String(p);
                }
            }
        }
        ops
    }

    /// A field selector (`regarding.name=x,type=Warning`) in the storage resource's terms.
    pub fn field_selector_to_storage(self, selector: &str) -> String {
        selector
            .split(',')
            .map(|term| {
                let first = term.split(['.', '=', '!']).next().unwrap_or_default();
                match self.fields().iter().find(|(view, _)| *view == first) {
                    Some((view, store)) => format!("{store}{}", &term[view.len()..]),
                    None => term.to_string(),
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_events_k8s_io_event_round_trips_through_core_v1() {
        let view = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "eventTime": "2026-11-25T10:00:00.000000Z",
            "series": {"count": 3, "lastObservedTime": "2026-11-25T10:01:00.000000Z"},
            "regarding": {"kind": "DeployItem", "name": "a"}, "note": "it failed",
            "reason": "Failed", "type": "Warning", "action": "Reconcile",
            "reportingController": "wasm-deployer", "reportingInstance": "w-1",
            "deprecatedCount": 2
        });
        let core = View::Events.to_storage(&view);
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "a");
        assert_eq!(core["message"], "it failed");
        assert_eq!(core["reportingComponent"], "wasm-deployer");
        assert_eq!(core["count"], 2);
        assert_eq!(core["series"]["count"], 3);
        assert!(core.get("note").is_none() && core.get("regarding").is_none());
        assert_eq!(View::Events.from_storage(&core, "events.k8s.io/v1"), view);
    }

    #[test]
    fn patches_and_selectors_are_renamed_too() {
        assert_eq!(
            View::Events.to_storage(&json!({"series": {"count": 4}, "note": "x"})),
            json!({"series": {"count": 4}, "message": "x"})
        );
        assert_eq!(
            View::Events.json_patch_to_storage(&json!([
                {"op": "replace", "path": "/note", "value": "y"},
                {"op": "copy", "from": "/regarding/name", "path": "/reason"}
            ])),
            json!([
                {"op": "replace", "path": "/message", "value": "y"},
                {"op": "copy", "from": "/involvedObject/name", "path": "/reason"}
            ])
        );
        assert_eq!(
            View::Events.field_selector_to_storage("regarding.name=a,type!=Normal,note=x"),
            "involvedObject.name=a,type!=Normal,message=x"
        );
    }
}
