//! OpenAPI for kubectl. v3: the index plus one document per group-version listing, for every
//! resource, POST/PUT/PATCH operations tagged with `x-kubernetes-group-version-kind` and a
//! `fieldValidation` query parameter — what `kubectl apply` needs to leave validation to the
//! server — and, for custom resources, the CRD's `openAPIV3Schema` as a component schema (so
//! `kubectl explain deployitem.spec` answers from the schema the server validates with).
//! v2: a document without definitions, JSON or gnostic protobuf as kubectl asks; kubectl reads
//! it to validate what it cannot send for server-side validation (the items of a `kind: List`)
//! and skips kinds it has no definition for — the server validates them when they arrive.
//! Built-in kinds get their schemas from k8s-openapi's `schemars` impls (the upstream OpenAPI
//! definitions, names like `io.k8s.api.core.v1.ConfigMap`).

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

/// The Rust type (k8s-openapi, with its `schemars` schemas) of each built-in kind the registry
/// serves; a kind missing here has no schema in the v3 documents.
macro_rules! builtin_kinds {
    ($($group:literal $version:literal $kind:literal => $ty:ty;)*) => {
        /// Adds the schema of a built-in kind (and everything it references) to `generator`;
        /// returns its component name, `None` for a kind without a known type.
        fn builtin_schema(
            generator: &mut schemars::SchemaGenerator,
            group: &str,
            version: &str,
            kind: &str,
        ) -> Option<String> {
            match (group, version, kind) {
                $(($group, $version, $kind) => {
                    generator.subschema_for::<$ty>();
                    Some(<$ty as schemars::JsonSchema>::schema_name().into_owned())
                })*
                _ => None,
            }
        }
    };
}

builtin_kinds! {
    "" "v1" "ConfigMap" => k8s_openapi::api::core::v1::ConfigMap;
    "" "v1" "Endpoints" => k8s_openapi::api::core::v1::Endpoints;
    "" "v1" "Event" => k8s_openapi::api::core::v1::Event;
    "" "v1" "LimitRange" => k8s_openapi::api::core::v1::LimitRange;
    "" "v1" "Namespace" => k8s_openapi::api::core::v1::Namespace;
    "" "v1" "Node" => k8s_openapi::api::core::v1::Node;
    "" "v1" "PersistentVolumeClaim" => k8s_openapi::api::core::v1::PersistentVolumeClaim;
    "" "v1" "PersistentVolume" => k8s_openapi::api::core::v1::PersistentVolume;
    "" "v1" "Pod" => k8s_openapi::api::core::v1::Pod;
    "" "v1" "PodTemplate" => k8s_openapi::api::core::v1::PodTemplate;
    "" "v1" "ReplicationController" => k8s_openapi::api::core::v1::ReplicationController;
    "" "v1" "ResourceQuota" => k8s_openapi::api::core::v1::ResourceQuota;
    "" "v1" "Secret" => k8s_openapi::api::core::v1::Secret;
    "" "v1" "ServiceAccount" => k8s_openapi::api::core::v1::ServiceAccount;
    "" "v1" "Service" => k8s_openapi::api::core::v1::Service;
    "admissionregistration.k8s.io" "v1" "MutatingWebhookConfiguration" => k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
    "admissionregistration.k8s.io" "v1" "ValidatingWebhookConfiguration" => k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    "apiextensions.k8s.io" "v1" "CustomResourceDefinition" => k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    "apps" "v1" "ControllerRevision" => k8s_openapi::api::apps::v1::ControllerRevision;
    "apps" "v1" "DaemonSet" => k8s_openapi::api::apps::v1::DaemonSet;
    "apps" "v1" "Deployment" => k8s_openapi::api::apps::v1::Deployment;
    "apps" "v1" "ReplicaSet" => k8s_openapi::api::apps::v1::ReplicaSet;
    "apps" "v1" "StatefulSet" => k8s_openapi::api::apps::v1::StatefulSet;
    "autoscaling" "v2" "HorizontalPodAutoscaler" => k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
    "batch" "v1" "CronJob" => k8s_openapi::api::batch::v1::CronJob;
    "batch" "v1" "Job" => k8s_openapi::api::batch::v1::Job;
    "coordination.k8s.io" "v1" "Lease" => k8s_openapi::api::coordination::v1::Lease;
    "discovery.k8s.io" "v1" "EndpointSlice" => k8s_openapi::api::discovery::v1::EndpointSlice;
    "events.k8s.io" "v1" "Event" => k8s_openapi::api::events::v1::Event;
    "networking.k8s.io" "v1" "IngressClass" => k8s_openapi::api::networking::v1::IngressClass;
    "networking.k8s.io" "v1" "Ingress" => k8s_openapi::api::networking::v1::Ingress;
    "networking.k8s.io" "v1" "NetworkPolicy" => k8s_openapi::api::networking::v1::NetworkPolicy;
    "policy" "v1" "PodDisruptionBudget" => k8s_openapi::api::policy::v1::PodDisruptionBudget;
    "rbac.authorization.k8s.io" "v1" "ClusterRoleBinding" => k8s_openapi::api::rbac::v1::ClusterRoleBinding;
    "rbac.authorization.k8s.io" "v1" "ClusterRole" => k8s_openapi::api::rbac::v1::ClusterRole;
    "rbac.authorization.k8s.io" "v1" "RoleBinding" => k8s_openapi::api::rbac::v1::RoleBinding;
    "rbac.authorization.k8s.io" "v1" "Role" => k8s_openapi::api::rbac::v1::Role;
    "scheduling.k8s.io" "v1" "PriorityClass" => k8s_openapi::api::scheduling::v1::PriorityClass;
    "storage.k8s.io" "v1" "StorageClass" => k8s_openapi::api::storage::v1::StorageClass;
}

/// Kubernetes' strategic-merge-patch metadata (the Go `patchStrategy` / `patchMergeKey` tags that
/// a real server publishes as `x-kubernetes-patch-strategy` / `x-kubernetes-patch-merge-key`)
/// for the lists kubectl users merge most: without them kubectl's client-side apply would
/// replace a Deployment's containers list instead of merging it by name. (definition,
/// property, strategy, merge key)
const PATCH_META: &[(&str, &str, &str, &str)] = &[
    ("io.k8s.api.core.v1.PodSpec", "containers", "merge", "name"),
    (
        "io.k8s.api.core.v1.PodSpec",
        "initContainers",
        "merge",
        "name",
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "ephemeralContainers",
        "merge",
        "name",
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "volumes",
        "merge,retainKeys",
        "name",
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "imagePullSecrets",
        "merge",
        "name",
    ),
    ("io.k8s.api.core.v1.PodSpec", "hostAliases", "merge", "ip"),
    (
        "io.k8s.api.core.v1.PodSpec",
        "topologySpreadConstraints",
        "merge",
        "topologyKey",
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "schedulingGates",
        "merge",
        "name",
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "resourceClaims",
        "merge,retainKeys",
        "name",
    ),
    (
        "io.k8s.api.core.v1.Container",
        "ports",
        "merge",
        "containerPort",
    ),
    ("io.k8s.api.core.v1.Container", "env", "merge", "name"),
    (
        "io.k8s.api.core.v1.Container",
        "volumeMounts",
        "merge",
        "mountPath",
    ),
    (
        "io.k8s.api.core.v1.Container",
        "volumeDevices",
        "merge",
        "devicePath",
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "ports",
        "merge",
        "containerPort",
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "env",
        "merge",
        "name",
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeMounts",
        "merge",
        "mountPath",
    ),
    ("io.k8s.api.core.v1.ServiceSpec", "ports", "merge", "port"),
    (
        "io.k8s.api.core.v1.PodStatus",
        "conditions",
        "merge",
        "type",
    ),
    (
        "io.k8s.api.core.v1.NodeStatus",
        "conditions",
        "merge",
        "type",
    ),
    (
        "io.k8s.api.core.v1.NodeStatus",
        "addresses",
        "merge",
        "type",
    ),
    (
        "io.k8s.api.core.v1.NamespaceStatus",
        "conditions",
        "merge",
        "type",
    ),
    (
        "io.k8s.api.apps.v1.DeploymentStatus",
        "conditions",
        "merge",
        "type",
    ),
    (
        "io.k8s.api.apps.v1.StatefulSetStatus",
        "conditions",
        "merge",
        "type",
    ),
    (
        "io.k8s.api.apps.v1.DaemonSetStatus",
        "conditions",
        "merge",
        "type",
    ),
    (
        "io.k8s.api.apps.v1.ReplicaSetStatus",
        "conditions",
        "merge",
        "type",
    ),
    (
        "io.k8s.api.batch.v1.JobStatus",
        "conditions",
        "merge",
        "type",
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "ownerReferences",
        "merge",
        "uid",
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "finalizers",
        "merge",
        "",
    ),
];

/// Adds [`PATCH_META`] to the definitions that are there.
fn add_patch_meta(schemas: &mut Map<String, Value>) {
    for (def, prop, strategy, key) in PATCH_META {
        if let Some(p) = schemas
            .get_mut(*def)
            .and_then(|d| d.pointer_mut(&format!("/properties/{prop}")))
            .and_then(Value::as_object_mut)
        {
            p.insert("x-kubernetes-patch-strategy".into(), json!(strategy));
            if !key.is_empty() {
                p.insert("x-kubernetes-patch-merge-key".into(), json!(key));
            }
        }
    }
}

/// The component schemas of the built-in kinds of one group-version (with everything they
/// reference, as `#/components/schemas/...`), each kind marked with its group-version-kind.
fn builtin_schemas<'a>(
    group: &str,
    version: &str,
    kinds: impl Iterator<Item = &'a str>,
) -> Map<String, Value> {
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    let roots: Vec<(String, &str)> = kinds
        .filter_map(|k| builtin_schema(&mut generator, group, version, k).map(|n| (n, k)))
        .collect();
    let mut schemas = generator.take_definitions(true);
    add_patch_meta(&mut schemas);
    for (name, kind) in roots {
        if let Some(s) = schemas.get_mut(&name).and_then(Value::as_object_mut) {
            s.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": group, "version": version, "kind": kind}]),
            );
        }
    }
    schemas
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
    let mut schemas = builtin_schemas(
        &group,
        &version,
        reg.in_group_version(&group, &version)
            .iter()
            .filter(|rt| !rt.crd)
            .map(|rt| rt.kind.as_str()),
    );
    schemas.extend(crd_schemas(crds, &group, &version));
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (embedded-apiserver stub)", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}
