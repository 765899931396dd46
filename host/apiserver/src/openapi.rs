//! A stub OpenAPI v3: the index plus one document per group-version listing,
//! for every resource, POST/PUT/PATCH operations tagged with
//! `x-kubernetes-group-version-kind` and a `fieldValidation` query parameter.
//! That is what `kubectl apply` needs to use server-side field validation
//! (no schemas are served). `/openapi/v2` answers 404, which kubectl accepts.

use crate::registry::Registry;
use serde_json::{Map, Value, json};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// A hash that changes whenever the set of resources changes.
pub fn registry_hash(reg: &Registry) -> String {
    let mut s = String::new();
    for rt in reg.all() {
        s.push_str(&format!("{rt:?}"));
    }
    format!("{:08X}", crate::persist::crc32(s.as_bytes()))
}

pub fn index(reg: &Registry) -> Value {
    let hash = registry_hash(reg);
    let mut paths = Map::new();
    for (g, vs) in reg.groups() {
        for v in vs {
            let p = gv_path(&g, &v);
            paths.insert(
                p.clone(),
                json!({ "serverRelativeURL": format!("/openapi/v3/{p}?hash={hash}") }),
            );
        }
    }
    json!({ "paths": paths })
}

fn op(group: &str, version: &str, kind: &str, action: &str) -> Value {
    json!({
        "operationId": format!("{action}{kind}"),
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": kind},
        "parameters": [
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        ],
        "responses": {"200": {"description": "OK"}},
    })
}

/// The document for `/openapi/v3/<api|apis/g>/<v>`, or None if the group-version is unknown.
pub fn group_version_doc(reg: &Registry, path: &str) -> Option<Value> {
    let (group, version) = if let Some(v) = path.strip_prefix("api/") {
        (String::new(), v.to_string())
    } else {
        let rest = path.strip_prefix("apis/")?;
        let (g, v) = rest.split_once('/')?;
        (g.to_string(), v.to_string())
    };
    let rts = reg.in_group_version(&group, &version);
    if rts.is_empty() {
        return None;
    }
    let prefix = format!("/{}", gv_path(&group, &version));
    let mut paths = Map::new();
    for rt in rts {
        let base = if rt.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", rt.plural)
        } else {
            format!("{prefix}/{}", rt.plural)
        };
        paths.insert(
            base.clone(),
            json!({ "post": op(&group, &version, &rt.kind, "post") }),
        );
        paths.insert(
            format!("{base}/{{name}}"),
            json!({ "put": op(&group, &version, &rt.kind, "put"), "patch": op(&group, &version, &rt.kind, "patch") }),
        );
        if rt.status {
            paths.insert(
                format!("{base}/{{name}}/status"),
                json!({ "put": op(&group, &version, &rt.kind, "put"), "patch": op(&group, &version, &rt.kind, "patch") }),
            );
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (embedded-apiserver stub)", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}
