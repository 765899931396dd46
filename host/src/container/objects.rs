//! The container deployer's objects on the host cluster: the Secrets a pod reads, its
//! ServiceAccount and RBAC, the pod itself, and their clean-up (contract sections 9.3, 9.7).
//!
//! Owns: every write to the host cluster the deployer (not the pod) makes. Must not touch: the
//! DeployItem or anything in the Landscaper cluster.

use std::collections::BTreeMap;
use std::fmt::Debug;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use plugin_runtime::DeployerError;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::pod::{ItemKey, LABEL_TYPE, POD_FINALIZER};
use super::status::is_active;
use crate::landscaper::codes;

/// A failed API call as the job's error: 401/403 end the job (`ERR_UNAUTHORIZED`: the host's
/// RBAC is missing something), anything else is retried.
pub fn api_error(what: &str, e: kube::Error) -> DeployerError {
    match &e {
        kube::Error::Api(s) if s.code == 401 || s.code == 403 => DeployerError::new(
            &[codes::UNAUTHORIZED],
            s.reason.clone(),
            format!("{what}: {}", s.message),
        ),
        kube::Error::Api(s) => {
            DeployerError::retryable(s.reason.clone(), format!("{what}: {}", s.message))
        }
        other => DeployerError::retryable("Request", format!("{what}: {other}")),
    }
}

/// The host cluster namespace where an item's pods run.
#[derive(Clone)]
pub struct HostObjects {
    pub client: Client,
    pub namespace: String,
    pub identity: String,
}

/// Creates `obj`, or replaces what has its name.
pub async fn upsert<K>(api: &Api<K>, obj: &K) -> kube::Result<K>
where
    K: Clone + DeserializeOwned + Serialize + Debug + Resource,
{
    match api.create(&PostParams::default(), obj).await {
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let name = obj.name_any();
            let current = api.get(&name).await?;
            let mut next = obj.clone();
            next.meta_mut().resource_version = current.resource_version();
            api.replace(&name, &PostParams::default(), &next).await
        }
        other => other,
    }
}

/// Deletes `name`; `Ok(false)` if it was not there.
pub async fn delete_opt<K>(api: &Api<K>, name: &str) -> kube::Result<bool>
where
    K: Clone + DeserializeOwned + Debug + Resource,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Everything the pod of one run reads, besides the pod.
pub struct PodInputs {
    /// `spec.config` as stored in the DeployItem.
    pub provider_config: Value,
    /// The resolved Target (`{target, content}`) or `null`.
    pub target: Value,
    /// A Docker config for the main image's registry, if credentials exist.
    pub pull_secret: Option<Value>,
}

impl HostObjects {
    fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Metadata of an object of the item: its labels (with `type: kind`) and annotations.
    fn meta(&self, name: &str, key: &ItemKey, kind: &str) -> ObjectMeta {
        let mut labels = key.labels(&self.identity);
        labels.insert(LABEL_TYPE.into(), kind.into());
        ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(self.namespace.clone()),
            labels: Some(labels),
            annotations: Some(key.annotations()),
            ..Default::default()
        }
    }

    fn secret(
        metadata: ObjectMeta,
        data: BTreeMap<String, Vec<u8>>,
        type_: Option<&str>,
    ) -> Secret {
        Secret {
            metadata,
            data: Some(data.into_iter().map(|(k, v)| (k, ByteString(v))).collect()),
            type_: type_.map(String::from),
            ..Default::default()
        }
    }

    /// The item's pods (those holding our finalizer), newest first.
    pub async fn item_pods(&self, key: &ItemKey) -> Result<Vec<Pod>, DeployerError> {
        let pods: Api<Pod> = self.api();
        let mut list: Vec<Pod> = pods
            .list(&ListParams::default().labels(&key.selector(None)))
            .await
            .map_err(|e| api_error("listing the item's pods", e))?
            .items
            .into_iter()
            .filter(|p| p.finalizers().iter().any(|f| f == POD_FINALIZER))
            .collect();
        list.sort_by(|a, b| {
            b.creation_timestamp()
                .map(|t| t.0)
                .cmp(&a.creation_timestamp().map(|t| t.0))
                .then_with(|| b.name_any().cmp(&a.name_any()))
        });
        Ok(list)
    }

    /// Writes what the next pod reads: configuration and Target Secrets, the pull secret, the
    /// runner's ServiceAccount and RBAC; removes the previous run's exports.
    pub async fn prepare(&self, key: &ItemKey, inputs: &PodInputs) -> Result<(), DeployerError> {
        let secrets: Api<Secret> = self.api();
        let write = |what: &'static str| move |e| api_error(what, e);
        // (name, type label, data key, value, Secret type, what it is); `None` deletes.
        let wanted = [
            (
                key.config_secret(),
                "configuration",
                "configuration.json",
                Some(&inputs.provider_config),
                None,
                "the configuration Secret",
            ),
            (
                key.target_secret(),
                "target",
                "target.json",
                Some(&inputs.target),
                None,
                "the target Secret",
            ),
            (
                key.pull_secret(),
                "registry-pull-secret",
                ".dockerconfigjson",
                inputs.pull_secret.as_ref(),
                Some("kubernetes.io/dockerconfigjson"),
                "the image pull Secret",
            ),
        ];
        for (name, kind, data_key, value, type_, what) in wanted {
            match value {
                Some(value) => {
                    let secret = Self::secret(
                        self.meta(&name, key, kind),
                        [(
                            data_key.to_string(),
                            serde_json::to_vec(value).unwrap_or_default(),
                        )]
                        .into(),
                        type_,
                    );
                    upsert(&secrets, &secret)
                        .await
                        .map_err(|e| api_error(&format!("writing {what}"), e))?;
                }
                None => {
                    delete_opt(&secrets, &name)
                        .await
                        .map_err(|e| api_error(&format!("deleting {what}"), e))?;
                }
            }
        }
        // A run that writes no exports must not hand on the previous run's.
        delete_opt(&secrets, &key.export_secret())
            .await
            .map_err(write("deleting the previous export Secret"))?;
        self.runner_rbac(key).await
    }

    /// The ServiceAccount of init and wait: read and write Secrets (state, exports) and read
    /// Pods (wait watches its own) in this namespace; nothing else.
    async fn runner_rbac(&self, key: &ItemKey) -> Result<(), DeployerError> {
        let name = key.runner_account();
        let sa = ServiceAccount {
            metadata: self.meta(&name, key, "runner"),
            automount_service_account_token: Some(false),
            ..Default::default()
        };
        upsert(&self.api::<ServiceAccount>(), &sa)
            .await
            .map_err(|e| api_error("writing the runner ServiceAccount", e))?;
        let rule = |resources: &str, verbs: &[&str]| PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec![resources.into()]),
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            ..Default::default()
        };
        let role = Role {
            metadata: self.meta(&name, key, "runner"),
            rules: Some(vec![
                rule("secrets", &["get", "list", "create", "update", "delete"]),
                rule("pods", &["get"]),
            ]),
        };
        upsert(&self.api::<Role>(), &role)
            .await
            .map_err(|e| api_error("writing the runner Role", e))?;
        let binding = RoleBinding {
            metadata: self.meta(&name, key, "runner"),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "Role".into(),
                name: name.clone(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: name.clone(),
                namespace: Some(self.namespace.clone()),
                ..Default::default()
            }]),
        };
        upsert(&self.api::<RoleBinding>(), &binding)
            .await
            .map_err(|e| api_error("writing the runner RoleBinding", e))?;
        Ok(())
    }

    pub async fn create_pod(&self, pod: &Pod) -> Result<Pod, DeployerError> {
        self.api::<Pod>()
            .create(&PostParams::default(), pod)
            .await
            .map_err(|e| match &e {
                // The API server refused the pod as built from the item: the item is wrong.
                kube::Error::Api(s) if s.code == 422 => DeployerError::configuration(
                    "CreatePod",
                    format!("the pod for this item is invalid: {}", s.message),
                ),
                _ => api_error("creating the pod", e),
            })
    }

    /// Removes our finalizer from `pod` and deletes it (unless `keep`).
    pub async fn release_pod(&self, pod: &Pod, keep: bool) -> Result<(), DeployerError> {
        let pods: Api<Pod> = self.api();
        let name = pod.name_any();
        if pod.finalizers().iter().any(|f| f == POD_FINALIZER) {
            let rest: Vec<&String> = pod
                .finalizers()
                .iter()
                .filter(|f| *f != POD_FINALIZER)
                .collect();
            let patch = json!({"metadata": {
                "finalizers": rest,
                "resourceVersion": pod.resource_version(),
            }});
            match pods
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
                Err(e) => return Err(api_error("removing the pod's finalizer", e)),
            }
        }
        if !keep {
            delete_opt(&pods, &name)
                .await
                .map_err(|e| api_error("deleting the pod", e))?;
        }
        Ok(())
    }

    /// Keeps the newest `keep` finished pods of the item and releases the others; active pods
    /// are left alone.
    pub async fn prune_pods(
        &self,
        pods: &[Pod],
        keep: usize,
        keep_pod: bool,
    ) -> Result<(), DeployerError> {
        for pod in pods.iter().filter(|p| !is_active(p)).skip(keep) {
            self.release_pod(pod, keep_pod).await?;
        }
        Ok(())
    }

    /// The exports the wait container stored, if any.
    pub async fn read_exports(&self, key: &ItemKey) -> Result<Option<Vec<u8>>, DeployerError> {
        let secrets: Api<Secret> = self.api();
        let found = secrets
            .get_opt(&key.export_secret())
            .await
            .map_err(|e| api_error("reading the export Secret", e))?;
        Ok(found
            .and_then(|s| s.data)
            .and_then(|mut d| d.remove("config"))
            .map(|b| b.0))
    }

    /// Removes everything of the item from the host cluster: pods (finalizers first), Secrets
    /// (configuration, target, pull secret, exports, state) and the runner's RBAC.
    pub async fn cleanup(&self, key: &ItemKey, keep_pod: bool) -> Result<(), DeployerError> {
        for pod in self.item_pods(key).await? {
            self.release_pod(&pod, keep_pod).await?;
        }
        let secrets: Api<Secret> = self.api();
        let del = |what: &'static str| move |e| api_error(what, e);
        for name in [
            key.config_secret(),
            key.target_secret(),
            key.pull_secret(),
            key.export_secret(),
        ] {
            delete_opt(&secrets, &name)
                .await
                .map_err(del("deleting the item's Secrets"))?;
        }
        let state = secrets
            .list(&ListParams::default().labels(&key.selector(Some("state"))))
            .await
            .map_err(del("listing the state Secrets"))?;
        for s in state.items {
            delete_opt(&secrets, &s.name_any())
                .await
                .map_err(del("deleting a state Secret"))?;
        }
        let name = key.runner_account();
        delete_opt(&self.api::<RoleBinding>(), &name)
            .await
            .map_err(del("deleting the runner RoleBinding"))?;
        delete_opt(&self.api::<Role>(), &name)
            .await
            .map_err(del("deleting the runner Role"))?;
        delete_opt(&self.api::<ServiceAccount>(), &name)
            .await
            .map_err(del("deleting the runner ServiceAccount"))?;
        Ok(())
    }
}
