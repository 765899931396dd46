//! Resource types the server knows: the built-in kinds (core, apps, batch,
//! rbac, apiextensions, coordination, ...) and those registered by
//! `CustomResourceDefinition` objects. Owns scope, kind, verbs, short names
//! and subresources; the store asks it where objects live.

use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// One resource (a group + plural), possibly served at several versions.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceType {
    pub group: String,
    /// Served versions; the first is the preferred (storage) one.
    pub versions: Vec<String>,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub list_kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// Has a `/status` subresource.
    pub status: bool,
    /// Registered by a CRD (vs built in).
    pub crd: bool,
    /// A CRD's `additionalPrinterColumns` per served version (server-side `Table` output).
    pub printer_columns: std::collections::BTreeMap<String, Vec<Value>>,
}

impl ResourceType {
    /// Storage key: `group/plural` (version independent).
    pub fn key(&self) -> String {
        format!("{}/{}", self.group, self.plural)
    }
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{}", self.group, version)
        }
    }
    pub fn preferred_version(&self) -> &str {
        &self.versions[0]
    }
    pub fn qualified(&self) -> String {
        crate::status::qualified(&self.group, &self.plural)
    }
    pub fn verbs(&self) -> Vec<&'static str> {
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }
}

/// The set of served resources. Cheap to snapshot (`Arc`), replaced on CRD changes.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    by_key: BTreeMap<String, Arc<ResourceType>>,
    by_gvr: HashMap<(String, String, String), Arc<ResourceType>>,
    by_gk: HashMap<(String, String), Arc<ResourceType>>,
}

/// (group, version, plural, kind, namespaced, shortNames, status subresource)
type Builtin = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static [&'static str],
    bool,
);

const BUILTINS: &[Builtin] = &[
    ("", "v1", "namespaces", "Namespace", false, &["ns"], true),
    ("", "v1", "configmaps", "ConfigMap", true, &["cm"], false),
    ("", "v1", "secrets", "Secret", true, &[], false),
    ("", "v1", "services", "Service", true, &["svc"], true),
    (
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        true,
        &["sa"],
        false,
    ),
    ("", "v1", "pods", "Pod", true, &["po"], true),
    ("", "v1", "events", "Event", true, &["ev"], false),
    ("", "v1", "endpoints", "Endpoints", true, &["ep"], false),
    (
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        true,
        &["pvc"],
        true,
    ),
    (
        "",
        "v1",
        "persistentvolumes",
        "PersistentVolume",
        false,
        &["pv"],
        true,
    ),
    ("", "v1", "nodes", "Node", false, &["no"], true),
    (
        "",
        "v1",
        "limitranges",
        "LimitRange",
        true,
        &["limits"],
        false,
    ),
    (
        "",
        "v1",
        "resourcequotas",
        "ResourceQuota",
        true,
        &["quota"],
        true,
    ),
    (
        "",
        "v1",
        "replicationcontrollers",
        "ReplicationController",
        true,
        &["rc"],
        true,
    ),
    ("", "v1", "podtemplates", "PodTemplate", true, &[], false),
    (
        "apps",
        "v1",
        "deployments",
        "Deployment",
        true,
        &["deploy"],
        true,
    ),
    (
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        true,
        &["sts"],
        true,
    ),
    ("apps", "v1", "daemonsets", "DaemonSet", true, &["ds"], true),
    (
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        true,
        &["rs"],
        true,
    ),
    (
        "apps",
        "v1",
        "controllerrevisions",
        "ControllerRevision",
        true,
        &[],
        false,
    ),
    ("batch", "v1", "jobs", "Job", true, &[], true),
    ("batch", "v1", "cronjobs", "CronJob", true, &["cj"], true),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "roles",
        "Role",
        true,
        &[],
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "RoleBinding",
        true,
        &[],
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "ClusterRole",
        false,
        &[],
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        false,
        &[],
        false,
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
        &["crd", "crds"],
        true,
    ),
    (
        "coordination.k8s.io",
        "v1",
        "leases",
        "Lease",
        true,
        &[],
        false,
    ),
    (
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        true,
        &["ev"],
        false,
    ),
    (
        "networking.k8s.io",
        "v1",
        "ingresses",
        "Ingress",
        true,
        &["ing"],
        true,
    ),
    (
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "NetworkPolicy",
        true,
        &["netpol"],
        false,
    ),
    (
        "networking.k8s.io",
        "v1",
        "ingressclasses",
        "IngressClass",
        false,
        &[],
        false,
    ),
    (
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true,
        &["pdb"],
        true,
    ),
    (
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "StorageClass",
        false,
        &["sc"],
        false,
    ),
    (
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        true,
        &["hpa"],
        true,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        false,
        &[],
        false,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        false,
        &[],
        false,
    ),
    (
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "PriorityClass",
        false,
        &["pc"],
        false,
    ),
    (
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "EndpointSlice",
        true,
        &[],
        false,
    ),
];

pub const CRD_KEY: &str = "apiextensions.k8s.io/customresourcedefinitions";
pub const NAMESPACE_KEY: &str = "/namespaces";

impl Registry {
    pub fn builtin() -> Self {
        let mut r = Registry::default();
        for (g, v, plural, kind, namespaced, short, status) in BUILTINS {
            r.insert(ResourceType {
                group: g.to_string(),
                versions: vec![v.to_string()],
                plural: plural.to_string(),
                singular: kind.to_lowercase(),
                kind: kind.to_string(),
                list_kind: format!("{kind}List"),
                namespaced: *namespaced,
                short_names: short.iter().map(|s| s.to_string()).collect(),
                categories: if [
                    "pods",
                    "services",
                    "deployments",
                    "statefulsets",
                    "daemonsets",
                    "replicasets",
                    "jobs",
                    "cronjobs",
                    "replicationcontrollers",
                ]
                .contains(plural)
                {
                    vec!["all".into()]
                } else {
                    vec![]
                },
                status: *status,
                crd: false,
                printer_columns: Default::default(),
            });
        }
        r
    }

    pub fn insert(&mut self, rt: ResourceType) {
        self.remove(&rt.key());
        let rt = Arc::new(rt);
        for v in &rt.versions {
            self.by_gvr
                .insert((rt.group.clone(), v.clone(), rt.plural.clone()), rt.clone());
        }
        self.by_gk
            .insert((rt.group.clone(), rt.kind.clone()), rt.clone());
        self.by_key.insert(rt.key(), rt);
    }

    pub fn remove(&mut self, key: &str) -> Option<Arc<ResourceType>> {
        let rt = self.by_key.remove(key)?;
        self.by_gvr.retain(|_, v| v.key() != key);
        if self
            .by_gk
            .get(&(rt.group.clone(), rt.kind.clone()))
            .is_some_and(|v| v.key() == key)
        {
            self.by_gk.remove(&(rt.group.clone(), rt.kind.clone()));
        }
        Some(rt)
    }

    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<&Arc<ResourceType>> {
        self.by_gvr
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
    }

    pub fn by_key(&self, key: &str) -> Option<&Arc<ResourceType>> {
        self.by_key.get(key)
    }

    /// Look up by `apiVersion` + `kind` (as found in a manifest).
    pub fn by_api_version_kind(&self, api_version: &str, kind: &str) -> Option<&Arc<ResourceType>> {
        let (g, v) = split_api_version(api_version);
        self.by_gk
            .get(&(g.to_string(), kind.to_string()))
            .filter(|rt| rt.versions.iter().any(|x| x == v))
    }

    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceType>> {
        self.by_key.values()
    }

    /// Groups in discovery order (core first, then by name), each with its versions.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for rt in self.by_key.values() {
            let e = m.entry(rt.group.clone()).or_default();
            for v in &rt.versions {
                if !e.contains(v) {
                    e.push(v.clone());
                }
            }
        }
        for vs in m.values_mut() {
            vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        }
        m.into_iter().collect()
    }

    pub fn in_group_version(&self, group: &str, version: &str) -> Vec<Arc<ResourceType>> {
        self.by_key
            .values()
            .filter(|rt| rt.group == group && rt.versions.iter().any(|v| v == version))
            .cloned()
            .collect()
    }
}

pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

/// Kubernetes version priority: GA > beta > alpha, higher numbers first.
pub fn version_priority(v: &str) -> (u8, u32, u32) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let Ok(major) = digits.parse::<u32>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    let (level, t) = if tail.is_empty() {
        return (3, major, 0);
    } else if let Some(t) = tail.strip_prefix("beta") {
        (2, t)
    } else if let Some(t) = tail.strip_prefix("alpha") {
        (1, t)
    } else {
        return (0, 0, 0);
    };
    match t.parse::<u32>() {
        Ok(minor) => (level, major, minor),
        Err(_) => (0, 0, 0),
    }
}

/// The resource a CRD object defines, or an error message if the CRD is unusable.
pub fn from_crd(crd: &Value) -> Result<ResourceType, String> {
    let spec = crd.get("spec").ok_or("spec is required")?;
    let group = spec
        .get("group")
        .and_then(Value::as_str)
        .ok_or("spec.group is required")?;
    let names = spec.get("names").ok_or("spec.names is required")?;
    let plural = names
        .get("plural")
        .and_then(Value::as_str)
        .ok_or("spec.names.plural is required")?;
    let kind = names
        .get("kind")
        .and_then(Value::as_str)
        .ok_or("spec.names.kind is required")?;
    let singular = names
        .get("singular")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_lowercase());
    let list_kind = names
        .get("listKind")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| format!("{kind}List"));
    let strs = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let scope = spec
        .get("scope")
        .and_then(Value::as_str)
        .unwrap_or("Namespaced");
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .ok_or("spec.versions is required")?;
    let mut served = Vec::new();
    let mut storage = None;
    let mut status = false;
    let mut printer_columns = std::collections::BTreeMap::new();
    // apiextensions v1beta1 had them for every version at the top.
    let top_columns = spec.get("additionalPrinterColumns");
    for v in versions {
        let Some(name) = v.get("name").and_then(Value::as_str) else {
            continue;
        };
        if let Some(cols) = v
            .get("additionalPrinterColumns")
            .or(top_columns)
            .and_then(Value::as_array)
        {
            printer_columns.insert(name.to_string(), cols.clone());
        }
        if v.get("served").and_then(Value::as_bool).unwrap_or(true) {
            served.push(name.to_string());
            if v.pointer("/subresources/status").is_some() {
                status = true;
            }
        }
        if v.get("storage").and_then(Value::as_bool).unwrap_or(false) {
            storage = Some(name.to_string());
        }
    }
    if served.is_empty() {
        return Err("spec.versions must have at least one served version".into());
    }
    served.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    if let Some(s) = storage
        && let Some(pos) = served.iter().position(|v| *v == s)
        && pos != 0
        && version_priority(&served[0]) == version_priority(&s)
    {
        served.swap(0, pos);
    }
    Ok(ResourceType {
        group: group.to_string(),
        versions: served,
        plural: plural.to_string(),
        singular,
        kind: kind.to_string(),
        list_kind,
        namespaced: scope != "Cluster",
        short_names: strs(names.get("shortNames")),
        categories: strs(names.get("categories")),
        status,
        crd: true,
        printer_columns,
    })
}
