//! Server-side printing: the `meta.k8s.io/v1` `Table` a client gets when it asks with
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` (what `kubectl get` sends).
//!
//! Columns: a CRD's `additionalPrinterColumns` of the served version (JSONPath, type, format,
//! priority — `kubectl get -o wide` shows priority > 0), or `Name` + `Age` when it has none;
//! for the built-in kinds kubectl users know, the columns a real kube-apiserver prints (Pods,
//! Deployments, ReplicaSets, StatefulSets, ConfigMaps, Secrets, Namespaces, Services, Events);
//! everything else `Name` + `Age`. Each row carries the object's metadata
//! (`includeObject=Metadata`, the default) or the whole object (`includeObject=Object`).
//!
//! Owns: turning stored objects into rows. Must not touch: the store or selection (the caller
//! lists or watches as usual and hands the objects over).

use serde_json::{Value, json};

use crate::registry::ResourceType;
use crate::store::partial_metadata;

/// Whether the Accept header asks for a Table (any `as=Table;g=meta.k8s.io` media type).
pub fn wanted(accept: &str) -> bool {
    accept.split(',').any(|mt| {
        let params: Vec<&str> = mt.split(';').map(str::trim).collect();
        params.contains(&"as=Table") && params.contains(&"g=meta.k8s.io")
    })
}

/// One column: its definition and how a cell is computed.
struct Column {
    name: String,
    ty: String,
    format: String,
    description: String,
    priority: i64,
    cell: Cell,
}

enum Cell {
    Name,
    /// A CRD column's JSONPath (`.status.phase`).
    Path(String),
    /// A built-in column.
    Builtin(fn(&Value) -> Value),
}

fn col(name: &str, ty: &str, description: &str, priority: i64, cell: Cell) -> Column {
    Column {
        name: name.into(),
        ty: ty.into(),
        format: if matches!(cell, Cell::Name) {
            "name".into()
        } else {
            String::new()
        },
        description: description.into(),
        priority,
        cell,
    }
}

const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

fn name_col() -> Column {
    col("Name", "string", NAME_DESC, 0, Cell::Name)
}

fn age_col() -> Column {
    col("Age", "string", AGE_DESC, 0, Cell::Builtin(age))
}

fn columns(rt: &ResourceType, version: &str) -> Vec<Column> {
    if rt.crd {
        let defs = rt.printer_columns.get(version).cloned().unwrap_or_default();
        if defs.is_empty() {
            return vec![name_col(), age_col()];
        }
        let mut cols = vec![name_col()];
        for d in defs {
            let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            cols.push(Column {
                name: s("name"),
                ty: s("type"),
                format: s("format"),
                description: s("description"),
                priority: d.get("priority").and_then(Value::as_i64).unwrap_or(0),
                cell: Cell::Path(s("jsonPath")),
            });
        }
        return cols;
    }
    let built = |cols: &[Builtin]| -> Vec<Column> {
        cols.iter()
            .map(|(name, ty, desc, prio, f)| col(name, ty, desc, *prio, Cell::Builtin(*f)))
            .collect()
    };
    if matches!(
        (rt.group.as_str(), rt.kind.as_str()),
        ("", "Event") | ("events.k8s.io", "Event")
    ) {
        // Events print without a Name column (kubectl shows it with `-o wide`).
        let mut cols = built(EVENT);
        let mut name = name_col();
        name.priority = 1;
        cols.push(name);
        return cols;
    }
    let (before_age, wide) = builtin_columns(&rt.group, &rt.kind);
    let mut cols = vec![name_col()];
    cols.extend(built(before_age));
    cols.push(age_col());
    cols.extend(built(wide));
    cols
}

/// A built-in column: name, type, description, priority (1 = `-o wide`), cell.
type Builtin = (
    &'static str,
    &'static str,
    &'static str,
    i64,
    fn(&Value) -> Value,
);

const READY_REPLICAS: Builtin = (
    "Ready",
    "string",
    "Number of the pod with ready state",
    0,
    |o| ready_of(o, "/status/readyReplicas"),
);
const CONTAINERS: Builtin = (
    "Containers",
    "string",
    "Names of each container in the template.",
    1,
    containers,
);
const IMAGES: Builtin = (
    "Images",
    "string",
    "Images referenced by each container in the template.",
    1,
    images,
);

const EVENT: &[Builtin] = &[
    (
        "Last Seen",
        "string",
        "Time since the event was last seen.",
        0,
        event_last_seen,
    ),
    (
        "Type",
        "string",
        "Type of this event (Normal, Warning).",
        0,
        |o| str_or_none(o.get("type")),
    ),
    ("Reason", "string", "Why the action was taken.", 0, |o| {
        str_or_none(o.get("reason"))
    }),
    (
        "Object",
        "string",
        "The object this event is about.",
        0,
        event_object,
    ),
    (
        "Message",
        "string",
        "A human-readable description of the status of this operation.",
        0,
        |o| str_or_none(o.get("message").or_else(|| o.get("note"))),
    ),
];

/// The columns a real kube-apiserver prints for a built-in kind: those between Name and Age,
/// and those after Age (`-o wide`). Kinds not listed print Name and Age.
fn builtin_columns(group: &str, kind: &str) -> (&'static [Builtin], &'static [Builtin]) {
    match (group, kind) {
        ("", "Pod") => (
            &[
                (
                    "Ready",
                    "string",
                    "The aggregate readiness state of this pod for accepting traffic.",
                    0,
                    pod_ready,
                ),
                (
                    "Status",
                    "string",
                    "The aggregate status of the containers in this pod.",
                    0,
                    pod_status,
                ),
                (
                    "Restarts",
                    "string",
                    "The number of times the containers in this pod have been restarted.",
                    0,
                    pod_restarts,
                ),
            ],
            &[
                ("IP", "string", "IP address allocated to the pod.", 1, |o| {
                    str_or_none(o.pointer("/status/podIP"))
                }),
                (
                    "Node",
                    "string",
                    "NodeName is a request to schedule this pod onto a specific node.",
                    1,
                    |o| str_or_none(o.pointer("/spec/nodeName")),
                ),
            ],
        ),
        ("apps", "Deployment") => (
            &[
                READY_REPLICAS,
                (
                    "Up-to-date",
                    "string",
                    "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
                    0,
                    |o| int_at(o, "/status/updatedReplicas"),
                ),
                (
                    "Available",
                    "string",
                    "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
                    0,
                    |o| int_at(o, "/status/availableReplicas"),
                ),
            ],
            &[
                CONTAINERS,
                IMAGES,
                (
                    "Selector",
                    "string",
                    "Label selector for pods.",
                    1,
                    selector,
                ),
            ],
        ),
        ("apps", "StatefulSet") => (&[READY_REPLICAS], &[CONTAINERS, IMAGES]),
        ("apps", "ReplicaSet") => (
            &[
                (
                    "Desired",
                    "integer",
                    "Replicas is the number of desired replicas.",
                    0,
                    |o| int_at(o, "/spec/replicas"),
                ),
                (
                    "Current",
                    "integer",
                    "Replicas is the most recently observed number of replicas.",
                    0,
                    |o| int_at(o, "/status/replicas"),
                ),
                (
                    "Ready",
                    "integer",
                    "The number of ready replicas for this replica set.",
                    0,
                    |o| int_at(o, "/status/readyReplicas"),
                ),
            ],
            &[],
        ),
        ("", "ConfigMap") => (
            &[(
                "Data",
                "integer",
                "Number of data items in the configmap.",
                0,
                |o| json!(count(o, "data") + count(o, "binaryData")),
            )],
            &[],
        ),
        ("", "Secret") => (
            &[
                ("Type", "string", "The type of the secret", 0, |o| {
                    str_or_none(o.get("type"))
                }),
                (
                    "Data",
                    "integer",
                    "Number of data items in the secret.",
                    0,
                    |o| json!(count(o, "data")),
                ),
            ],
            &[],
        ),
        ("", "Namespace") => (
            &[("Status", "string", "The status of the namespace", 0, |o| {
                json!(
                    o.pointer("/status/phase")
                        .and_then(Value::as_str)
                        .unwrap_or("Active")
                )
            })],
            &[],
        ),
        ("", "Service") => (
            &[
                ("Type", "string", "The type of the service.", 0, |o| {
                    json!(
                        o.pointer("/spec/type")
                            .and_then(Value::as_str)
                            .unwrap_or("ClusterIP")
                    )
                }),
                (
                    "Cluster-IP",
                    "string",
                    "The IP address of the service.",
                    0,
                    |o| str_or_none(o.pointer("/spec/clusterIP")),
                ),
                ("Port(s)", "string", "The ports of the service.", 0, ports),
            ],
            &[],
        ),
        _ => (&[], &[]),
    }
}

/// The `Table` of `objects` as `rt` at `version`. `include_object`: `Metadata` (default),
/// `Object` or `None`.
pub fn table(
    rt: &ResourceType,
    version: &str,
    objects: &[&Value],
    include_object: &str,
    list_meta: Value,
) -> Value {
    let cols = columns(rt, version);
    let defs: Vec<Value> = cols
        .iter()
        .map(|c| {
            json!({"name": c.name, "type": c.ty, "format": c.format,
                   "description": c.description, "priority": c.priority})
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| row(&cols, o, include_object))
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": defs,
        "rows": rows,
    })
}

fn row(cols: &[Column], obj: &Value, include_object: &str) -> Value {
    let cells: Vec<Value> = cols
        .iter()
        .map(|c| match &c.cell {
            Cell::Name => json!(
                obj.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            ),
            Cell::Builtin(f) => f(obj),
            Cell::Path(p) => crd_cell(obj, p, &c.ty),
        })
        .collect();
    let mut r = json!({"cells": cells});
    match include_object {
        "None" => {}
        "Object" => r["object"] = obj.clone(),
        _ => r["object"] = partial_metadata(obj),
    }
    r
}

/// A CRD column's cell: the JSONPath's value; `date` columns as an age, like the real server.
fn crd_cell(obj: &Value, path: &str, ty: &str) -> Value {
    let Some(v) = json_path(obj, path) else {
        return Value::Null;
    };
    match (ty, v) {
        ("date", Value::String(s)) => json!(since(s)),
        (_, v) => v.clone(),
    }
}

/// The simple JSONPaths printer columns use: `.a.b`, `.a[0].b`, `{.a.b}`, `.a['b.c']`, and
/// the filter `.a[?(@.k=="v")].b` (conditions by type; the first match, as a column shows it).
pub fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let p = path.trim();
    let p = p
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(p);
    let mut cur = obj;
    let mut rest = p.strip_prefix('.').unwrap_or(p);
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("['") {
            let end = r.find("']")?;
            cur = cur.get(&r[..end])?;
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix("[?(") {
            let end = r.find(")]")?;
            let (field, want) = filter(&r[..end])?;
            cur = cur
                .as_array()?
                .iter()
                .find(|e| json_path(e, field).and_then(Value::as_str) == Some(want))?;
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            cur = cur.get(r[..end].parse::<usize>().ok()?)?;
            rest = &r[end + 1..];
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            cur = cur.get(&rest[..end])?;
            rest = &rest[end..];
        }
        rest = rest.strip_prefix('.').unwrap_or(rest);
    }
    Some(cur)
}

/// `@.k=="v"` (or `'v'`) of a JSONPath filter: the path under `@` and the value.
fn filter(expr: &str) -> Option<(&str, &str)> {
    let (left, right) = expr.split_once("==")?;
    let field = left.trim().strip_prefix('@')?;
    let right = right.trim();
    let value = right
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .or_else(|| right.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))?;
    Some((field, value))
}

fn str_or_none(v: Option<&Value>) -> Value {
    match v.and_then(Value::as_str) {
        Some(s) if !s.is_empty() => json!(s),
        _ => json!("<none>"),
    }
}

fn int_at(o: &Value, p: &str) -> Value {
    json!(o.pointer(p).and_then(Value::as_i64).unwrap_or(0))
}

fn count(o: &Value, key: &str) -> usize {
    o.get(key).and_then(Value::as_object).map_or(0, |m| m.len())
}

fn ready_of(o: &Value, ready: &str) -> Value {
    let want = o
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let have = o.pointer(ready).and_then(Value::as_i64).unwrap_or(0);
    json!(format!("{have}/{want}"))
}

fn age(o: &Value) -> Value {
    match o
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
    {
        Some(t) => json!(since(t)),
        None => json!("<unknown>"),
    }
}

/// Time since an RFC 3339 timestamp, as Kubernetes' `duration.HumanDuration` prints it.
fn since(ts: &str) -> String {
    match ts.parse::<jiff::Timestamp>() {
        Ok(t) => human_duration(jiff::Timestamp::now().as_second() - t.as_second()),
        Err(_) => "<invalid>".into(),
    }
}

/// `k8s.io/apimachinery/pkg/util/duration.HumanDuration`, from whole seconds.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn pod_containers<'a>(o: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    o.pointer(&format!("/status/{key}"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn pod_ready(o: &Value) -> Value {
    let total = o
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let ready = pod_containers(o, "containerStatuses")
        .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    json!(format!("{ready}/{total}"))
}

fn pod_status(o: &Value) -> Value {
    if o.pointer("/metadata/deletionTimestamp").is_some() {
        return json!("Terminating");
    }
    let waiting_or_terminated = pod_containers(o, "containerStatuses").find_map(|c| {
        c.pointer("/state/waiting/reason")
            .or_else(|| c.pointer("/state/terminated/reason"))
            .and_then(Value::as_str)
    });
    let reason = o.pointer("/status/reason").and_then(Value::as_str);
    let phase = o
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    json!(waiting_or_terminated.or(reason).unwrap_or(phase))
}

fn pod_restarts(o: &Value) -> Value {
    let n: i64 = pod_containers(o, "containerStatuses")
        .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
        .sum();
    json!(n.to_string())
}

fn template_containers(o: &Value) -> impl Iterator<Item = &Value> {
    o.pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn containers(o: &Value) -> Value {
    let names: Vec<&str> = template_containers(o)
        .filter_map(|c| c.get("name").and_then(Value::as_str))
        .collect();
    json!(names.join(","))
}

fn images(o: &Value) -> Value {
    let images: Vec<&str> = template_containers(o)
        .filter_map(|c| c.get("image").and_then(Value::as_str))
        .collect();
    json!(images.join(","))
}

fn selector(o: &Value) -> Value {
    let labels = o
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object);
    match labels {
        Some(m) if !m.is_empty() => json!(
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        ),
        _ => json!("<none>"),
    }
}

fn ports(o: &Value) -> Value {
    let ports: Vec<String> = o
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
            match p.get("nodePort").and_then(Value::as_i64) {
                Some(np) => format!("{port}:{np}/{proto}"),
                None => format!("{port}/{proto}"),
            }
        })
        .collect();
    if ports.is_empty() {
        json!("<none>")
    } else {
        json!(ports.join(","))
    }
}

fn event_last_seen(o: &Value) -> Value {
    let t = [
        "/series/lastObservedTime",
        "/lastTimestamp",
        "/eventTime",
        "/deprecatedLastTimestamp",
        "/metadata/creationTimestamp",
    ]
    .iter()
    .find_map(|p| {
        o.pointer(p)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    });
    match t {
        Some(t) => json!(since(t)),
        None => json!("<unknown>"),
    }
}

fn event_object(o: &Value) -> Value {
    let r = o.get("involvedObject").or_else(|| o.get("regarding"));
    match r {
        Some(r) => json!(format!(
            "{}/{}",
            r.get("kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_lowercase(),
            r.get("name").and_then(Value::as_str).unwrap_or("")
        )),
        None => json!("<none>"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_duration_matches_kubernetes() {
        for (s, want) in [
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (47 * 3600, "47h"),
            (49 * 3600, "2d1h"),
            (10 * 86400, "10d"),
            (3 * 365 * 86400, "3y"),
        ] {
            assert_eq!(human_duration(s), want, "{s}");
        }
    }

    #[test]
    fn printer_column_paths() {
        let o = json!({"status": {"phase": "Succeeded", "c": [{"t": "x"}]}, "metadata": {"labels": {"a.b/c": "v"}}});
        assert_eq!(json_path(&o, ".status.phase"), Some(&json!("Succeeded")));
        assert_eq!(json_path(&o, "{.status.c[0].t}"), Some(&json!("x")));
        assert_eq!(
            json_path(&o, ".metadata.labels['a.b/c']"),
            Some(&json!("v"))
        );
        assert_eq!(json_path(&o, ".status.exportRef.name"), None);
        // Conditions by type, as the WasmPlugin CRD's columns read them.
        let o = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True"}, {"type": "UpToDate", "status": "False", "reason": "NotWasm"}]}});
        assert_eq!(
            json_path(&o, r#".status.conditions[?(@.type=="UpToDate")].reason"#),
            Some(&json!("NotWasm"))
        );
        assert_eq!(
            json_path(&o, ".status.conditions[?(@.type=='Ready')].status"),
            Some(&json!("True"))
        );
        assert_eq!(
            json_path(&o, r#".status.conditions[?(@.type=="Gone")].status"#),
            None
        );
    }

    #[test]
    fn the_accept_header_kubectl_sends_asks_for_a_table() {
        assert!(wanted(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        ));
        assert!(!wanted("application/json"));
        assert!(!wanted(
            "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
        ));
    }
}
