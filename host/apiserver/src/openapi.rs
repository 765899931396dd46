//! OpenAPI for kubectl. v3: the index plus one document per group-version listing, for every
//! resource, POST/PUT/PATCH operations tagged with `x-kubernetes-group-version-kind` and a
//! `fieldValidation` query parameter — what `kubectl apply` needs to leave validation to the
//! server — and, for custom resources, the CRD's `openAPIV3Schema` as a component schema (so
//! `kubectl explain deployitem.spec` answers from the schema the server validates with).
//! v2: a document without definitions, JSON or gnostic protobuf as kubectl asks; kubectl reads
//! it to validate what it cannot send for server-side validation (the items of a `kind: List`)
//! and skips kinds it has no definition for — the server validates them when they arrive.
//! Built-in kinds have no schemas here (documented in docs/apiserver.md).

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

/// `/openapi/v2` as `(content type, body)`: gnostic protobuf when the client accepts it (kubectl
/// asks for nothing else), JSON otherwise.
pub fn v2_document(accept: &str) -> (&'static str, Vec<u8>) {
    const TITLE: &str = "Kubernetes (embedded-apiserver)";
    const VERSION: &str = "v1.33.0";
    if accept.contains("application/com.github.proto-openapi.spec.v2") {
        // gnostic openapi_v2.Document { swagger = 1; info = 2 { title = 1; version = 2 } }
        fn field(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
            out.push(tag);
            let mut n = bytes.len();
            while n >= 0x80 {
                out.push((n as u8 & 0x7f) | 0x80);
                n >>= 7;
            }
            out.push(n as u8);
            out.extend_from_slice(bytes);
        }
        let mut info = Vec::new();
        field(&mut info, 0x0a, TITLE.as_bytes());
        field(&mut info, 0x12, VERSION.as_bytes());
        let mut doc = Vec::new();
        field(&mut doc, 0x0a, b"2.0");
        field(&mut doc, 0x12, &info);
        (
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
            doc,
        )
    } else {
        let doc = json!({"swagger": "2.0", "info": {"title": TITLE, "version": VERSION},
                         "paths": {}, "definitions": {}});
        (
            "application/json",
            serde_json::to_vec(&doc).unwrap_or_default(),
        )
    }
}

/// The name kube gives a CRD's schema: the group reversed, the version, the kind
/// (`cloud.gardener.landscaper.v1alpha1.DeployItem`).
fn schema_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    format!("{}.{version}.{kind}", parts.join("."))
}

/// The component schemas of the CRDs served in `group`/`version`, from `crds` (the stored
/// CustomResourceDefinition objects).
fn crd_schemas(crds: &[Value], group: &str, version: &str) -> Map<String, Value> {
    let mut out = Map::new();
    for crd in crds {
        if crd.pointer("/spec/group").and_then(Value::as_str) != Some(group) {
            continue;
        }
        let kind = crd
            .pointer("/spec/names/kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        for v in crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if v.get("name").and_then(Value::as_str) != Some(version)
                || v.get("served").and_then(Value::as_bool) == Some(false)
            {
                continue;
            }
            let Some(schema) = v
                .pointer("/schema/openAPIV3Schema")
                .or_else(|| crd.pointer("/spec/validation/openAPIV3Schema"))
            else {
                continue;
            };
            let mut schema = schema.clone();
            schema["x-kubernetes-group-version-kind"] =
                json!([{"group": group, "version": version, "kind": kind}]);
            out.insert(schema_name(group, version, kind), schema);
        }
    }
    out
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

/// The document for `/openapi/v3/<api|apis/g>/<v>`, or None if the group-version is unknown;
/// `crds` are the stored CustomResourceDefinitions (their schemas become components).
pub fn group_version_doc(reg: &Registry, path: &str, crds: &[Value]) -> Option<Value> {
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
        "components": {"schemas": crd_schemas(crds, &group, &version)},
    }))
}
