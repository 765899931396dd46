//! The bootstrap policy a fresh cluster has: Kubernetes' default ClusterRoles and bindings, as
//! a table.
//!
//! Owns: [`bootstrap_objects`] and the aggregated `admin` / `edit` / `view` roles. Must not
//! touch: evaluation (that is `policy`).

use super::users::{ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, SYSTEM_MASTERS};
use serde_json::{Value, json};

/// The roles and bindings a fresh cluster with RBAC has (the part of Kubernetes' bootstrap
/// policy that concerns API clients): `cluster-admin` for `system:masters`,
/// `system:discovery`, `system:basic-user` and `system:public-info-viewer`, and the
/// user-facing aggregated roles `admin` ⊇ `edit` ⊇ `view` with the `system:aggregate-to-*`
/// roles that feed them (see [`aggregated_roles`]).
pub fn bootstrap_objects() -> Vec<Value> {
    let md = |name: &str| {
        json!({"name": name,
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}})
    };
    let role = |name: &str, rules: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": md(name), "rules": rules})
    };
    let binding = |name: &str, groups: &[&str]| {
        let subjects: Vec<Value> = groups
            .iter()
            .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
            .collect();
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": md(name),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": subjects})
    };
    let info = ["/healthz", "/livez", "/readyz", "/version", "/version/"];
    let mut discovery: Vec<&str> = vec![
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/openapi",
        "/openapi/*",
    ];
    discovery.extend(info);
    vec![
        role(
            "cluster-admin",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        ),
        binding("cluster-admin", &[SYSTEM_MASTERS]),
        role(
            "system:discovery",
            json!([{"nonResourceURLs": discovery, "verbs": ["get"]}]),
        ),
        binding("system:discovery", &[ALL_AUTHENTICATED]),
        role(
            "system:basic-user",
            json!([{"apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"],
                    "verbs": ["create"]}]),
        ),
        binding("system:basic-user", &[ALL_AUTHENTICATED]),
        role(
            "system:public-info-viewer",
            json!([{"nonResourceURLs": info, "verbs": ["get"]}]),
        ),
        binding(
            "system:public-info-viewer",
            &[ALL_AUTHENTICATED, ALL_UNAUTHENTICATED],
        ),
    ]
    .into_iter()
    .chain(aggregated_roles())
    .collect()
}

/// Kubernetes' user-facing roles: `admin`, `edit` and `view` carry no rules of their own but an
/// `aggregationRule` selecting `rbac.authorization.k8s.io/aggregate-to-<role>: "true"`; `edit`
/// is itself aggregated into `admin` and `view` into `edit`; the rules come from
/// `system:aggregate-to-admin|edit|view` (upstream's bootstrap rules for the API groups this
/// server serves). Anyone may add a ClusterRole with such a label to extend them, as CRD
/// authors do.
fn aggregated_roles() -> Vec<Value> {
    const AGG: &str = "rbac.authorization.k8s.io/aggregate-to-";
    let read = json!(["get", "list", "watch"]);
    let write = json!(["create", "delete", "deletecollection", "patch", "update"]);
    let read_write = json!([
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch"
    ]);
    let rule = |groups: &[&str], resources: &[&str], verbs: &Value| json!({"apiGroups": groups, "resources": resources, "verbs": verbs});
    let role = |name: &str, labels: Value, aggregate: Option<&str>, rules: Vec<Value>| {
        let mut labels = labels;
        labels["kubernetes.io/bootstrapping"] = json!("rbac-defaults");
        let mut r = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels,
                "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
            "rules": rules});
        if let Some(to) = aggregate {
            r["aggregationRule"] =
                json!({"clusterRoleSelectors": [{"matchLabels": {format!("{AGG}{to}"): "true"}}]});
        }
        r
    };
    let agg = |to: &[&str]| {
        let mut m = serde_json::Map::new();
        for t in to {
            m.insert(format!("{AGG}{t}"), json!("true"));
        }
        Value::Object(m)
    };
    let view_rules = vec![
        rule(
            &[""],
            &[
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "configmaps",
            ],
            &read,
        ),
        rule(
            &[""],
            &[
                "limitranges",
                "resourcequotas",
                "bindings",
                "events",
                "pods/status",
                "resourcequotas/status",
                "namespaces/status",
                "replicationcontrollers/status",
                "pods/log",
            ],
            &read,
        ),
        rule(&[""], &["namespaces"], &read),
        rule(&["discovery.k8s.io"], &["endpointslices"], &read),
        rule(
            &["apps"],
            &[
                "controllerrevisions",
                "statefulsets",
                "statefulsets/scale",
                "statefulsets/status",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
            ],
            &read,
        ),
        rule(
            &["autoscaling"],
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ],
            &read,
        ),
        rule(
            &["batch"],
            &["jobs", "jobs/status", "cronjobs", "cronjobs/status"],
            &read,
        ),
        rule(
            &["policy"],
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
            &read,
        ),
        rule(
            &["networking.k8s.io"],
            &["ingresses", "ingresses/status", "networkpolicies"],
            &read,
        ),
    ];
    let edit_rules = vec![
        rule(&[""], &["serviceaccounts"], &json!(["impersonate"])),
        rule(
            &[""],
            &[
                "pods",
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
            ],
            &write,
        ),
        rule(&[""], &["pods/eviction"], &json!(["create"])),
        rule(
            &[""],
            &[
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/proxy",
                "persistentvolumeclaims",
                "configmaps",
                "secrets",
                "events",
            ],
            &write,
        ),
        rule(&[""], &["serviceaccounts/token"], &json!(["create"])),
        rule(
            &["apps"],
            &[
                "statefulsets",
                "statefulsets/scale",
                "daemonsets",
                "deployments",
                "deployments/rollback",
                "deployments/scale",
                "replicasets",
                "replicasets/scale",
            ],
            &write,
        ),
        rule(&["autoscaling"], &["horizontalpodautoscalers"], &write),
        rule(&["batch"], &["jobs", "cronjobs"], &write),
        rule(&["policy"], &["poddisruptionbudgets"], &write),
        rule(
            &["networking.k8s.io"],
            &["ingresses", "networkpolicies"],
            &write,
        ),
        rule(&["coordination.k8s.io"], &["leases"], &read_write),
        rule(
            &[""],
            &[
                "pods/attach",
                "pods/exec",
                "pods/portforward",
                "pods/proxy",
                "secrets",
                "services/proxy",
            ],
            &read,
        ),
    ];
    let admin_rules = vec![
        rule(
            &["authorization.k8s.io"],
            &["localsubjectaccessreviews"],
            &json!(["create"]),
        ),
        rule(
            &["rbac.authorization.k8s.io"],
            &["rolebindings", "roles"],
            &read_write,
        ),
    ];
    vec![
        role("admin", json!({}), Some("admin"), vec![]),
        role("edit", agg(&["admin"]), Some("edit"), vec![]),
        role("view", agg(&["edit"]), Some("view"), vec![]),
        role(
            "system:aggregate-to-admin",
            agg(&["admin"]),
            None,
            admin_rules,
        ),
        role("system:aggregate-to-edit", agg(&["edit"]), None, edit_rules),
        role("system:aggregate-to-view", agg(&["view"]), None, view_rules),
    ]
}
