//! Manifest splitting and ordering as in Helm's `releaseutil`: files in path order, documents
//! split on `^---`, each parsed for its head (a YAML error names the file), hooks separated by
//! the `helm.sh/hook` annotation, and a stable sort by Helm's install order of kinds.

use crate::value::Value;
use crate::yaml;

/// Helm's `InstallOrder`.
pub const INSTALL_ORDER: &[&str] = &[
    "PriorityClass",
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "SecretList",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleList",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    "Role",
    "RoleList",
    "RoleBinding",
    "RoleBindingList",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

const EVENTS: &[&str] = &[
    "pre-install",
    "post-install",
    "pre-delete",
    "post-delete",
    "pre-upgrade",
    "post-upgrade",
    "pre-rollback",
    "post-rollback",
    "test",
];

/// A rendered, non-hook document.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// template path, e.g. `mychart/templates/service.yaml`
    pub name: String,
    /// the document text
    pub content: String,
    /// `kind`
    pub kind: String,
    /// `apiVersion`
    pub api_version: String,
    /// `metadata.name`
    pub object_name: String,
}

/// A hook document.
#[derive(Debug, Clone)]
pub struct Hook {
    pub name: String,
    pub kind: String,
    pub path: String,
    pub manifest: String,
    pub events: Vec<String>,
    pub weight: i64,
    pub delete_policies: Vec<String>,
}

impl Hook {
    /// Whether this is a `test` hook.
    pub fn is_test(&self) -> bool {
        self.events.iter().any(|e| e == "test")
    }
}

/// Which `releaseutil.SplitManifests` separator to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SplitMode {
    /// Helm ≥ 4.2.4 (and the helm-testdata goldens): `(?m)^---[ \t]*`; trailing newlines of a
    /// document are kept.
    #[default]
    LineAnchored,
    /// Helm 3 and Helm ≤ 4.2.3 (helm-python-sdk 0.2.2): `(?:^|\s*\n)---\s*`; whitespace before
    /// a separator belongs to the separator.
    Legacy,
}

/// `releaseutil.SplitManifests`, in document order.
pub fn split_manifests(big: &str, mode: SplitMode) -> Vec<String> {
    static LEGACY: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    static ANCHORED: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let sep = match mode {
        SplitMode::Legacy => {
            LEGACY.get_or_init(|| regex::Regex::new(r"(?:^|\s*\n)---\s*").expect("valid regex"))
        }
        SplitMode::LineAnchored => {
            ANCHORED.get_or_init(|| regex::Regex::new(r"(?m)^---[ \t]*").expect("valid regex"))
        }
    };
    let big = big.trim_start();
    sep.split(big)
        .filter(|d| !d.trim().is_empty())
        .map(|d| d.trim_start().to_string())
        .collect()
}

fn kind_rank(kind: &str) -> Option<usize> {
    INSTALL_ORDER.iter().position(|k| *k == kind)
}

fn less_by_kind(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match (kind_rank(a), kind_rank(b)) {
        (None, None) => a.cmp(b),
        (None, Some(_)) => Greater,
        (Some(_), None) => Less,
        (Some(x), Some(y)) => x.cmp(&y),
    }
}

/// A YAML error in a rendered file.
#[derive(Debug, Clone)]
pub struct SortError {
    pub path: String,
    pub message: String,
}

/// `releaseutil.SortManifests` with `InstallOrder`.
pub fn sort_manifests(
    files: &[(String, String)],
    mode: SplitMode,
) -> Result<(Vec<Hook>, Vec<Manifest>), SortError> {
    let mut files: Vec<&(String, String)> = files.iter().collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut hooks = Vec::new();
    let mut generic = Vec::new();
    for (path, content) in files {
        let base = path.rsplit('/').next().unwrap_or(path);
        if base.starts_with('_') || content.trim().is_empty() {
            continue;
        }
        for doc in split_manifests(content, mode) {
            let head = yaml::parse(&doc).map_err(|e| SortError {
                path: path.clone(),
                message: e.0,
            })?;
            let head = match head {
                Value::Map(_) | Value::Nil => head,
                _ => {
                    return Err(SortError {
                        path: path.clone(),
                        message: "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go value of type util.SimpleHead".into(),
                    });
                }
            };
            let kind = head.get("kind").as_str().unwrap_or("").to_string();
            let api_version = head.get("apiVersion").as_str().unwrap_or("").to_string();
            let meta = head.get("metadata");
            let object_name = meta.get("name").as_str().unwrap_or("").to_string();
            let ann = meta.get("annotations");
            let hook_ann = match &ann {
                Value::Map(m) => m.borrow().get("helm.sh/hook").map(|v| v.to_go_string()),
                _ => None,
            };
            let Some(hook_types) = hook_ann else {
                generic.push(Manifest {
                    name: path.clone(),
                    content: doc,
                    kind,
                    api_version,
                    object_name,
                });
                continue;
            };
            let weight = ann
                .get("helm.sh/hook-weight")
                .as_str()
                .and_then(|s| s.parse::<i64>().ok())
                .unwrap_or(0);
            let mut events = Vec::new();
            let mut unknown = false;
            for t in hook_types.split(',') {
                let t = t.trim().to_lowercase();
                let t = if t == "test-success" {
                    "test".to_string()
                } else {
                    t
                };
                if EVENTS.contains(&t.as_str()) {
                    events.push(t);
                } else {
                    unknown = true;
                    break;
                }
            }
            if unknown {
                continue;
            }
            let delete_policies = ann
                .get("helm.sh/hook-delete-policy")
                .as_str()
                .map(|s| s.split(',').map(|p| p.trim().to_lowercase()).collect())
                .unwrap_or_default();
            hooks.push(Hook {
                name: object_name,
                kind,
                path: path.clone(),
                manifest: doc,
                events,
                weight,
                delete_policies,
            });
        }
    }
    generic.sort_by(|a, b| less_by_kind(&a.kind, &b.kind));
    hooks.sort_by(|a, b| less_by_kind(&a.kind, &b.kind));
    Ok((hooks, generic))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split() {
        let d = split_manifests("\n---\na: 1\n\n---  \nb: 2\n", SplitMode::Legacy);
        assert_eq!(d, vec!["a: 1".to_string(), "b: 2\n".to_string()]);
        let d = split_manifests("a: 1\n---\nb: 2", SplitMode::LineAnchored);
        assert_eq!(d, vec!["a: 1\n".to_string(), "b: 2".to_string()]);
        let d = split_manifests("---apiVersion: v1\nkind: X\n", SplitMode::LineAnchored);
        assert_eq!(d, vec!["apiVersion: v1\nkind: X\n".to_string()]);
    }

    /// bitnami redis/valkey `scripts-configmap.yaml` ends its last script with `\n---` (an
    /// empty document follows). Helm ≤ 4.2.3 and Helm 3 (the legacy separator eats the
    /// newline) give the script no trailing newline; Helm ≥ 4.2.4 keeps it. Expected values:
    /// the split code of Helm v4.2.4 and v4.2.3 (`pkg/release/v1/util/manifest.go`) run by Go;
    /// the legacy one is also what helm-python-sdk 0.2.2 (Helm 4.2.3) stores for redis.
    #[test]
    fn trailing_separator_after_a_block_scalar() {
        let src = "data:\n  start.sh: |\n    exec redis-server\n---\n";
        assert_eq!(
            split_manifests(src, SplitMode::LineAnchored),
            vec!["data:\n  start.sh: |\n    exec redis-server\n".to_string()]
        );
        assert_eq!(
            split_manifests(src, SplitMode::Legacy),
            vec!["data:\n  start.sh: |\n    exec redis-server".to_string()]
        );
    }
}
