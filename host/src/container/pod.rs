//! What the container deployer creates on the host cluster for one DeployItem: object names,
//! labels, the in-pod paths and environment (contract sections 9.2–9.4), and the Pod itself.
//!
//! Owns: pure functions from (item, configuration) to objects. Must not touch: the cluster.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use serde_json::{Value, json};

use super::config::Settings;

/// Finalizer on every pod, so its outcome is read before the pod can go away.
pub const POD_FINALIZER: &str = "container.deployer.landscaper.gardener.cloud/finalizer";
/// Annotation that skips the DELETE pod and only cleans up.
pub const FORCE_CLEANUP: &str = "container.deployer.landscaper.gardener.cloud/force-cleanup";

pub const LABEL_DEPLOYER_ID: &str = "container.deployer.landscaper.gardener.cloud/deployer-id";
pub const LABEL_NAME: &str = "container.deployer.landscaper.gardener.cloud/name";
pub const LABEL_TYPE: &str = "container.deployer.landscaper.gardener.cloud/type";
pub const LABEL_ITEM_NAME: &str = "deployitem.container.deployer.landscaper.gardener.cloud/name";
pub const LABEL_ITEM_NAMESPACE: &str =
    "deployitem.container.deployer.landscaper.gardener.cloud/namespace";
pub const LABEL_GENERATION: &str =
    "deployitem.container.deployer.landscaper.gardener.cloud/generation";
/// Ours: the job and operation a pod runs for, so a job finds its own pod again.
pub const LABEL_JOB_ID: &str = "container.deployer.landscaper.gardener.cloud/job-id";
pub const LABEL_OPERATION: &str = "container.deployer.landscaper.gardener.cloud/operation";

/// Ours: `<namespace>/<name>` of the DeployItem, unshortened (labels are cut at 63 characters).
pub const ANNOTATION_ITEM: &str = "container.deployer.landscaper.gardener.cloud/deploy-item";

/// State chunk annotations (contract section 9.6).
pub const ANNOTATION_UUID: &str = "container.deployer.landscaper.gardener.cloud/uuid";
pub const ANNOTATION_NUM: &str = "container.deployer.landscaper.gardener.cloud/num";
/// Ours: how many chunks the backup has, so a half-written backup is never restored.
pub const ANNOTATION_COUNT: &str = "container.deployer.landscaper.gardener.cloud/count";

/// Paths inside the pod (`BasePath` `/data/ls`, contract section 9.2).
pub mod paths {
    pub const SHARED: &str = "/data/ls/shared";
    pub const IMPORTS: &str = "/data/ls/shared/imports/import.json";
    pub const EXPORTS: &str = "/data/ls/shared/exports/values";
    pub const COMPONENT_DESCRIPTOR: &str = "/data/ls/shared/component_descriptor.json";
    pub const TARGET: &str = "/data/ls/shared/targets/target.json";
    pub const CONTENT: &str = "/data/ls/shared/content";
    pub const STATE: &str = "/data/ls/shared/state";
    pub const INTERNAL: &str = "/data/ls/internal";
    pub const CONFIGURATION: &str = "/data/ls/internal/configuration.json";
    pub const TARGET_MOUNT: &str = "/data/ls/targets";
    pub const TARGET_SOURCE: &str = "/data/ls/targets/target.json";
    pub const SERVICE_ACCOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
}

/// `RECONCILE` or `DELETE` (the `OPERATION` the main container sees).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Reconcile,
    Delete,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Reconcile => "RECONCILE",
            Operation::Delete => "DELETE",
        }
    }
}

/// The DeployItem an object belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ItemKey {
    pub namespace: String,
    pub name: String,
}

impl ItemKey {
    /// The key of `item` (its namespace and name).
    pub fn of(item: &crate::landscaper::DeployItem) -> Self {
        ItemKey {
            namespace: item.metadata.namespace.clone().unwrap_or_default(),
            name: item.metadata.name.clone().unwrap_or_default(),
        }
    }

    /// `<namespace>-<name>`: the prefix of every host object of the item (as Landscaper names
    /// them), shortened with a hash where a name would exceed Kubernetes' limits.
    pub fn base(&self) -> String {
        fit(&format!("{}-{}", self.namespace, self.name), 230)
    }

    pub fn config_secret(&self) -> String {
        format!("{}-config", self.base())
    }
    pub fn target_secret(&self) -> String {
        format!("{}-target", self.base())
    }
    pub fn export_secret(&self) -> String {
        format!("{}-export", self.base())
    }
    pub fn pull_secret(&self) -> String {
        format!("{}-imgpullsec", self.base())
    }
    /// The ServiceAccount, Role and RoleBinding of the init and wait containers.
    pub fn runner_account(&self) -> String {
        fit(&format!("{}-runner", self.base()), 253)
    }
    pub fn state_prefix(&self) -> String {
        fit(&format!("state-{}-", self.base()), 200)
    }

    /// The labels every object of the item carries.
    pub fn labels(&self, identity: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_DEPLOYER_ID.into(), label_value(identity)),
            (LABEL_NAME.into(), label_value(&self.name)),
            (LABEL_ITEM_NAME.into(), label_value(&self.name)),
            (LABEL_ITEM_NAMESPACE.into(), label_value(&self.namespace)),
        ])
    }

    /// The annotations every object of the item carries.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(
            ANNOTATION_ITEM.into(),
            format!("{}/{}", self.namespace, self.name),
        )])
    }

    /// Label selector of the item's objects (optionally of one `type`).
    pub fn selector(&self, kind: Option<&str>) -> String {
        let mut s = format!(
            "{LABEL_ITEM_NAME}={},{LABEL_ITEM_NAMESPACE}={}",
            label_value(&self.name),
            label_value(&self.namespace)
        );
        if let Some(kind) = kind {
            s.push_str(&format!(",{LABEL_TYPE}={kind}"));
        }
        s
    }
}

/// A short stable hash (FNV-1a, hex) for shortened names.
fn hash(s: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")[..10].to_string()
}

/// `s` if it has at most `max` bytes, else a prefix and a hash of the whole.
fn fit(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let keep = s
        .char_indices()
        .map(|(i, _)| i)
        .take_while(|&i| i <= max - 11)
        .last()
        .unwrap_or(0);
    let prefix = s[..keep].trim_end_matches(['-', '.']);
    format!("{prefix}-{}", hash(s))
}

/// A label value (at most 63 characters, alphanumeric at both ends).
pub fn label_value(s: &str) -> String {
    let v = fit(s, 63);
    v.trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// Everything the pod is built from.
pub struct PodInput<'a> {
    pub item: &'a ItemKey,
    pub generation: i64,
    pub job_id: &'a str,
    pub operation: Operation,
    pub image: String,
    pub command: Option<Vec<String>>,
    pub args: Option<Vec<String>>,
    pub resources: Option<ResourceRequirements>,
    /// Seconds the pod may run (the job's remaining progressing timeout); kubelet stops it after.
    pub active_deadline_seconds: Option<i64>,
    pub pull_secret: bool,
}

fn env(pairs: &[(&str, &str)]) -> Vec<Value> {
    pairs
        .iter()
        .map(|(k, v)| json!({"name": k, "value": v}))
        .collect()
}

fn downward(name: &str, field: &str) -> Value {
    json!({"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": field}}})
}

/// The environment every container gets (contract section 9.2).
fn common_env() -> Vec<Value> {
    let mut e = env(&[
        ("IMPORTS_PATH", paths::IMPORTS),
        ("EXPORTS_PATH", paths::EXPORTS),
        ("COMPONENT_DESCRIPTOR_PATH", paths::COMPONENT_DESCRIPTOR),
        ("TARGET_PATH", paths::TARGET),
        ("CONTENT_PATH", paths::CONTENT),
        ("STATE_PATH", paths::STATE),
    ]);
    e.push(downward("POD_NAME", "metadata.name"));
    e.push(downward("POD_NAMESPACE", "metadata.namespace"));
    e
}

/// The pod of one operation: init (inputs and state in), main (the user's image), wait (state
/// and exports out). Only init and wait get API credentials; main gets none.
pub fn pod(input: &PodInput<'_>, settings: &Settings) -> Pod {
    let item = input.item;
    let mut labels = item.labels(&settings.identity);
    labels.insert(LABEL_GENERATION.into(), input.generation.to_string());
    labels.insert(LABEL_JOB_ID.into(), label_value(input.job_id));
    labels.insert(LABEL_OPERATION.into(), input.operation.as_str().into());

    let (init_env, main_env, wait_env) = container_env(input, settings);
    let shared = json!({"name": "shared-volume", "mountPath": paths::SHARED});
    let token =
        json!({"name": "runner-token", "mountPath": paths::SERVICE_ACCOUNT, "readOnly": true});
    let init = runner_container(
        "init",
        &settings.init,
        init_env,
        vec![
            json!({"name": "configuration", "mountPath": paths::INTERNAL, "readOnly": true}),
            json!({"name": "target", "mountPath": paths::TARGET_MOUNT, "readOnly": true}),
            token.clone(),
            shared.clone(),
        ],
    );
    let wait = runner_container(
        "wait",
        &settings.wait,
        wait_env,
        vec![token, shared.clone()],
    );
    let main = main_container(input, settings, main_env, shared);
    let spec = pod_spec(input, init, main, wait);
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": format!("{}-", fit(&item.name, 57).trim_end_matches(['-', '.'])),
            "namespace": settings.namespace,
            "labels": labels,
            "annotations": item.annotations(),
            "finalizers": [POD_FINALIZER],
        },
        "spec": spec,
    });
    serde_json::from_value(pod).expect("the pod template is a valid Pod")
}

/// The environment of init, main and wait: all get the paths; init and wait the item, init
/// where its inputs are, main the operation, wait how often it polls.
fn container_env(
    input: &PodInput<'_>,
    settings: &Settings,
) -> (Vec<Value>, Vec<Value>, Vec<Value>) {
    let item = input.item;
    let item_env = env(&[
        ("DEPLOY_ITEM_NAME", &item.name),
        ("DEPLOY_ITEM_NAMESPACE", &item.namespace),
        ("DEPLOYER_ID", &settings.identity),
    ]);
    let mut init_env = common_env();
    init_env.extend(env(&[
        ("CONFIGURATION_PATH", paths::CONFIGURATION),
        ("TARGET_SOURCE_PATH", paths::TARGET_SOURCE),
    ]));
    init_env.extend(item_env.clone());
    let mut main_env = common_env();
    main_env.extend(env(&[("OPERATION", input.operation.as_str())]));
    let mut wait_env = common_env();
    wait_env.extend(item_env);
    wait_env.extend(env(&[(
        "WAIT_POLL_INTERVAL",
        &format!("{}ms", settings.wait_poll_interval.as_millis()),
    )]));
    (init_env, main_env, wait_env)
}

/// One of our own containers (init, wait): no privilege, nothing written outside the shared
/// volume.
fn runner_container(
    name: &str,
    spec: &super::config::ContainerSpec,
    env: Vec<Value>,
    mounts: Vec<Value>,
) -> Value {
    let hardened = json!({
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "capabilities": {"drop": ["ALL"]},
    });
    let mut c = json!({
        "name": name,
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "env": env,
        "volumeMounts": mounts,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": hardened,
    });
    if let Some(command) = &spec.command {
        c["command"] = json!(command);
    }
    if let Some(args) = &spec.args {
        c["args"] = json!(args);
    }
    c
}

/// The user's container: their image, command, args and resources, only the shared volume.
fn main_container(
    input: &PodInput<'_>,
    settings: &Settings,
    env: Vec<Value>,
    shared: Value,
) -> Value {
    let mut main = json!({
        "name": "main",
        "image": input.image,
        "imagePullPolicy": "IfNotPresent",
        "env": env,
        "volumeMounts": [shared],
        "terminationMessagePolicy": "FallbackToLogsOnError",
    });
    if let Some(command) = &input.command {
        main["command"] = json!(command);
    }
    if let Some(args) = &input.args {
        main["args"] = json!(args);
    }
    if let Some(resources) = input
        .resources
        .as_ref()
        .or(settings.default_resources.as_ref())
    {
        main["resources"] = serde_json::to_value(resources).unwrap_or_default();
    }
    main
}

/// The pod spec: the runner account without an automounted token, non-root, the volumes, the
/// deadline and the pull secret.
fn pod_spec(input: &PodInput<'_>, init: Value, main: Value, wait: Value) -> Value {
    let item = input.item;
    let mut spec = json!({
        "serviceAccountName": item.runner_account(),
        "automountServiceAccountToken": false,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 300,
        "securityContext": {"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000, "runAsNonRoot": true},
        "initContainers": [init],
        "containers": [main, wait],
        "volumes": [
            {"name": "shared-volume", "emptyDir": {}},
            {"name": "configuration", "secret": {"secretName": item.config_secret()}},
            {"name": "target", "secret": {"secretName": item.target_secret()}},
            // What Kubernetes itself mounts for a ServiceAccount, but only into init and wait.
            {"name": "runner-token", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ]}},
        ],
    });
    if let Some(seconds) = input.active_deadline_seconds {
        spec["activeDeadlineSeconds"] = json!(seconds.max(1));
    }
    if input.pull_secret {
        spec["imagePullSecrets"] = json!([{"name": item.pull_secret()}]);
    }
    spec
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::container::config::ContainerConfig;

    fn settings() -> Settings {
        ContainerConfig {
            namespace: Some("deployer".into()),
            host_image: Some("reg/deployer-host:1".into()),
            ..Default::default()
        }
        .settings("host-a")
        .unwrap()
    }

    fn key() -> ItemKey {
        ItemKey {
            namespace: "ls".into(),
            name: "my-item".into(),
        }
    }

    #[test]
    fn names_follow_landscaper_and_long_names_stay_valid() {
        let k = key();
        assert_eq!(k.config_secret(), "ls-my-item-config");
        assert_eq!(k.export_secret(), "ls-my-item-export");
        assert_eq!(k.state_prefix(), "state-ls-my-item-");
        let long = ItemKey {
            namespace: "ns".into(),
            name: "x".repeat(250),
        };
        assert!(long.base().len() <= 230);
        assert_ne!(
            long.base(),
            ItemKey {
                name: "x".repeat(251),
                ..long.clone()
            }
            .base()
        );
        let v = label_value(&long.name);
        assert!(v.len() <= 63, "{v}");
        assert_eq!(label_value("a-"), "a");
    }

    #[test]
    fn the_pod_has_landscapers_contract() {
        let pod = pod(
            &PodInput {
                item: &key(),
                generation: 3,
                job_id: "job-1",
                operation: Operation::Delete,
                image: "alpine:3".into(),
                command: Some(vec!["sh".into(), "-c".into()]),
                args: Some(vec!["echo".into()]),
                resources: None,
                active_deadline_seconds: Some(600),
                pull_secret: true,
            },
            &settings(),
        );
        let v = serde_json::to_value(&pod).unwrap();
        let m = &v["metadata"];
        assert_eq!(m["generateName"], "my-item-");
        assert_eq!(m["namespace"], "deployer");
        assert_eq!(m["finalizers"][0], POD_FINALIZER);
        assert_eq!(m["labels"][LABEL_GENERATION], "3");
        assert_eq!(m["labels"][LABEL_JOB_ID], "job-1");
        assert_eq!(m["labels"][LABEL_OPERATION], "DELETE");
        assert_eq!(m["labels"][LABEL_DEPLOYER_ID], "host-a");
        let s = &v["spec"];
        assert_eq!(s["restartPolicy"], "Never");
        assert_eq!(s["automountServiceAccountToken"], false);
        assert_eq!(s["activeDeadlineSeconds"], 600);
        assert_eq!(s["securityContext"]["runAsUser"], 1000);
        assert_eq!(s["securityContext"]["runAsGroup"], 3000);
        assert_eq!(s["securityContext"]["fsGroup"], 2000);
        assert_eq!(s["imagePullSecrets"][0]["name"], "ls-my-item-imgpullsec");
        assert_eq!(s["initContainers"][0]["image"], "reg/deployer-host:1");
        assert_eq!(
            s["initContainers"][0]["command"],
            json!(["deployer-host", "container", "init"])
        );
        let main = &s["containers"][0];
        assert_eq!(main["name"], "main");
        assert_eq!(main["image"], "alpine:3");
        let env_of = |c: &Value, name: &str| {
            c["env"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == name)
                .cloned()
        };
        assert_eq!(env_of(main, "OPERATION").unwrap()["value"], "DELETE");
        assert_eq!(
            env_of(main, "IMPORTS_PATH").unwrap()["value"],
            paths::IMPORTS
        );
        assert_eq!(
            env_of(main, "EXPORTS_PATH").unwrap()["value"],
            paths::EXPORTS
        );
        assert_eq!(
            env_of(main, "POD_NAME").unwrap()["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.name"
        );
        // The user's container gets the shared volume and nothing else: no API token.
        assert_eq!(main["volumeMounts"].as_array().unwrap().len(), 1);
        let wait = &s["containers"][1];
        assert_eq!(wait["name"], "wait");
        assert!(env_of(wait, "DEPLOY_ITEM_NAME").is_some());
        assert!(
            wait["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["mountPath"] == paths::SERVICE_ACCOUNT)
        );
        assert_eq!(wait["securityContext"]["readOnlyRootFilesystem"], true);
    }
}
