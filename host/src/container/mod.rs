//! The container deployer, native in the host (contract section 9): runs a DeployItem's image as
//! a Pod in the host cluster, with an init container that writes the item's inputs and state
//! into a shared volume and a wait container that carries state and exports back out — both
//! are this binary (`deployer-host container init|wait`, [`runner`]).
//!
//! It is a [`DeployerPlugin`] like any wasm plugin: the contract (pickup, locking, hooks,
//! timeouts, the final write with `jobIDFinished`, the export Secret, the item's finalizer) is
//! the host's, and this module only answers one reconcile or delete step at a time:
//!
//! ```text
//! step ──► pods of the item ──► another job's pod still running? stop it, wait
//!            │
//!            ├─ this job's pod: running → Progressing (poll) │ succeeded → exports, Succeeded
//!            │                  failed / image unpullable → providerStatus first, then the error
//!            ├─ no pod, but providerStatus has this job's result → that result again
//!            └─ no pod → Secrets + RBAC + Pod (OPERATION=RECONCILE|DELETE) → Progressing
//! ```
//!
//! A pod is found again by its job-ID and operation labels, so a step that is repeated (a
//! failed status write, another replica) never starts a second pod for one job.
//!
//! Owns: the host-cluster objects of container items and the in-pod programs. Must not touch:
//! the DeployItem (its status and finalizer are the contract's) or other deployers' objects.

pub mod config;
pub mod gc;
pub mod objects;
pub mod pod;
pub mod registry_auth;
pub mod runner;
pub mod state;
pub mod status;

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::api::Api;
use plugin_runtime::{DeployerError, DeployerPlugin, Description, HostServices, Invocation};
use serde_json::Value;

use crate::landscaper::{DeployItem, Phase};
use config::{ProviderConfiguration, Settings};
use objects::{HostObjects, PodInputs, api_error};
use plugin_runtime::Response;
use pod::{FORCE_CLEANUP, ItemKey, Operation, PodInput};
use status::{Outcome, ProviderStatus};

pub use config::{ContainerConfig, TYPE};

/// The container deployer.
pub struct ContainerDeployer {
    description: Description,
    settings: Settings,
    host: HostObjects,
    /// The Landscaper cluster (registry pull secrets named by the provider configuration).
    landscaper: Client,
}

/// Where the host puts the resolved descriptor list of `componentDescriptor.ref` in the
/// configuration the pod reads (beside `inline`, the root descriptor).
pub const RESOLVED_LIST: &str = "resolvedList";

/// `componentDescriptor.ref` and `blueprint.ref`, resolved by the host through its OCM reader
/// (the pod gets no registry credentials): the configuration the pod reads has the root
/// descriptor as `componentDescriptor.inline`, the resolved list (with the versions it
/// references) as `componentDescriptor.resolvedList`, and the blueprint's files as
/// `blueprint.inline.filesystem` — what `init` writes to COMPONENT_DESCRIPTOR_PATH and
/// CONTENT_PATH, as Landscaper's init container does.
async fn resolve_ocm(
    mut raw: Value,
    config: &ProviderConfiguration,
    services: &dyn HostServices,
) -> Result<Value, DeployerError> {
    let Some(cd_ref) = config
        .component_descriptor
        .as_ref()
        .and_then(|c| c.get("ref"))
    else {
        return Ok(raw);
    };
    let repository_context = cd_ref
        .get("repositoryContext")
        .filter(|v| !v.is_null())
        .cloned();
    let name = cd_ref["componentName"].as_str().unwrap_or_default();
    let version = cd_ref["version"].as_str().unwrap_or_default();
    let request = |resource_name: Option<String>| plugin_runtime::OcmComponentRequest {
        repository_context: repository_context.clone(),
        component_name: name.to_string(),
        version: version.to_string(),
        resource_name,
    };
    let fetched = services.ocm_component(request(None)).await?;
    let list: Value = serde_json::from_slice(&fetched.data).map_err(|e| {
        DeployerError::internal("ComponentDescriptor", format!("resolved list: {e}"))
    })?;
    raw["componentDescriptor"] = serde_json::json!({
        "inline": list["components"][0].clone(),
        RESOLVED_LIST: list,
    });
    if let Some(resource) = config
        .blueprint
        .as_ref()
        .and_then(|b| b.pointer("/ref/resourceName"))
        .and_then(Value::as_str)
    {
        let blob = services
            .ocm_component(request(Some(resource.to_string())))
            .await?;
        let what = format!("blueprint {resource} of component version {name}:{version}");
        let files = crate::ocm::tar_files(&blob.data)
            .map_err(|e| DeployerError::configuration("Blueprint", format!("{what}: {e}")))?;
        let mut filesystem = serde_json::Map::new();
        for (path, content) in files {
            let text = String::from_utf8(content).map_err(|_| {
                DeployerError::configuration(
                    "Blueprint",
                    format!(
                        "{what}: {path} is not text (the blueprint filesystem holds text files)"
                    ),
                )
            })?;
            let mut dir = &mut filesystem;
            let mut parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
            let file = parts.pop().unwrap_or_default();
            for part in parts {
                dir = dir
                    .entry(part.to_string())
                    .or_insert_with(|| Value::Object(Default::default()))
                    .as_object_mut()
                    .ok_or_else(|| {
                        DeployerError::configuration(
                            "Blueprint",
                            format!("{what}: {part} is both a file and a directory"),
                        )
                    })?;
            }
            dir.insert(file.to_string(), Value::String(text));
        }
        raw["blueprint"] = serde_json::json!({"inline": {"filesystem": filesystem}});
    }
    Ok(raw)
}

/// How soon a step that only recorded the pod's final state is called again.
const RECORDED: Duration = Duration::from_millis(100);

impl ContainerDeployer {
    /// A deployer that runs pods with `host` (the cluster the host runs in) and reads pull
    /// secrets with `landscaper`.
    pub fn new(settings: Settings, host: Client, landscaper: Client) -> Self {
        ContainerDeployer {
            description: Description {
                name: "container".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                deploy_item_types: vec![TYPE.into()],
                hook_types: vec![],
            },
            host: HostObjects {
                client: host,
                namespace: settings.namespace.clone(),
                identity: settings.identity.clone(),
            },
            settings,
            landscaper,
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The garbage collector of this deployer's host objects (run it beside the controller).
    pub fn garbage_collector(&self) -> gc::GarbageCollector {
        gc::GarbageCollector {
            host: self.host.clone(),
            landscaper: self.landscaper.clone(),
            keep_pods: self.settings.keep_pods,
            keep_pod: self.settings.keep_pod,
        }
    }

    async fn step(
        &self,
        inv: &Invocation,
        item: &DeployItem,
        services: &dyn HostServices,
        operation: Operation,
    ) -> Result<Response, DeployerError> {
        let key = ItemKey::of(item);
        let previous = ProviderStatus::decode(inv.previous_provider_status.as_ref());
        let config = match parse_config(inv) {
            Ok(c) => c,
            // Nothing of a config that never validated ran: a delete has nothing to undo.
            Err(_) if operation == Operation::Delete && previous.pod_status.is_none() => {
                self.host.cleanup(&key, self.settings.keep_pod).await?;
                return Ok(Response::default());
            }
            Err(e) => return Err(e),
        };
        let job_id = item.status().job_id;
        let pods = self.host.item_pods(&key).await?;

        // Only one pod of an item runs at a time: one left over from an earlier job (ended by
        // its timeout, or a reconcile when deletion starts) is stopped first.
        let (mine, others): (Vec<_>, Vec<_>) = pods.iter().partition(|p| {
            status::runs_job(p, &job_id)
                && p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(pod::LABEL_OPERATION))
                    .is_some_and(|o| o == operation.as_str())
        });
        if let Some(waiting) = self.stop_earlier_jobs(&key, &others, &previous).await? {
            return Ok(waiting);
        }
        if let Some(pod) = mine.first() {
            return self
                .follow_pod(&key, pod, &job_id, operation, &previous)
                .await;
        }
        if let Some(recorded) = self
            .recorded_result(&key, &job_id, operation, &previous)
            .await?
        {
            return Ok(recorded);
        }

        services.checkpoint("container deployer: create pod")?;
        let pod = self
            .start_pod(inv, item, &key, &config, operation, services)
            .await?;
        let started = status::observe(&pod, &job_id, operation, &Outcome::Active, &previous);
        self.host
            .prune_pods(
                &pods,
                self.settings.keep_pods.saturating_sub(1),
                self.settings.keep_pod,
            )
            .await?;
        Ok(Response {
            phase: Some(match operation {
                Operation::Reconcile => Phase::Progressing,
                Operation::Delete => Phase::Deleting,
            }),
            provider_status: Some(started.to_value()),
            retry_after: Some(self.settings.poll_interval),
            ..Default::default()
        })
    }

    /// Stops the still-active pods of earlier jobs; the answer to wait with, if there were any.
    async fn stop_earlier_jobs(
        &self,
        key: &ItemKey,
        others: &[&k8s_openapi::api::core::v1::Pod],
        previous: &ProviderStatus,
    ) -> Result<Option<Response>, DeployerError> {
        let stale: Vec<_> = others.iter().filter(|p| status::is_active(p)).collect();
        if stale.is_empty() {
            return Ok(None);
        }
        for p in &stale {
            tracing::info!(item = %key.name, pod = ?p.metadata.name, "stopping the pod of an earlier job");
            self.host.release_pod(p, false).await?;
        }
        Ok(Some(Response {
            provider_status: message_status(
                previous,
                "waiting for the pod of an earlier job to stop",
            ),
            retry_after: Some(self.settings.poll_interval),
            ..Default::default()
        }))
    }

    /// This job's pod: running → poll again; succeeded → exports (and cleanup on delete);
    /// failed → its final state into providerStatus first, then the error.
    async fn follow_pod(
        &self,
        key: &ItemKey,
        pod: &k8s_openapi::api::core::v1::Pod,
        job_id: &str,
        operation: Operation,
        previous: &ProviderStatus,
    ) -> Result<Response, DeployerError> {
        let outcome = status::outcome(pod);
        let observed = status::observe(pod, job_id, operation, &outcome, previous);
        match outcome {
            Outcome::Active => Ok(Response {
                provider_status: Some(observed.to_value()),
                retry_after: Some(self.settings.poll_interval),
                ..Default::default()
            }),
            Outcome::Succeeded => {
                let exports = self.exports(key).await?;
                if operation == Operation::Delete {
                    self.host.cleanup(key, self.settings.keep_pod).await?;
                }
                Ok(Response {
                    provider_status: Some(observed.to_value()),
                    exports,
                    ..Default::default()
                })
            }
            Outcome::Failed(error) => {
                // The pod's final state goes into providerStatus before the job ends with
                // the error (an error cannot carry a providerStatus).
                let recorded = previous
                    .pod_of(job_id, operation)
                    .filter(|r| {
                        r.pod_name
                            == observed
                                .pod_status
                                .as_ref()
                                .map(|p| p.pod_name.clone())
                                .unwrap_or_default()
                    })
                    .and_then(|r| r.error.as_ref());
                if recorded.is_none() {
                    return Ok(Response {
                        provider_status: Some(observed.to_value()),
                        retry_after: Some(RECORDED),
                        ..Default::default()
                    });
                }
                if status::is_active(pod) {
                    // An image that never comes: do not leave the pod pulling forever.
                    self.host.release_pod(pod, self.settings.keep_pod).await?;
                }
                Err(error)
            }
        }
    }

    /// The pod of this job is gone (collected) but its result was recorded: that result again.
    async fn recorded_result(
        &self,
        key: &ItemKey,
        job_id: &str,
        operation: Operation,
        previous: &ProviderStatus,
    ) -> Result<Option<Response>, DeployerError> {
        let Some(report) = previous.pod_of(job_id, operation) else {
            return Ok(None);
        };
        if let Some(error) = &report.error {
            return Err(error.to_error());
        }
        if report.last_successful_job_id != job_id {
            return Ok(None);
        }
        let exports = self.exports(key).await?;
        if operation == Operation::Delete {
            self.host.cleanup(key, self.settings.keep_pod).await?;
        }
        Ok(Some(Response {
            exports,
            ..Default::default()
        }))
    }

    async fn start_pod(
        &self,
        inv: &Invocation,
        item: &DeployItem,
        key: &ItemKey,
        config: &ProviderConfiguration,
        operation: Operation,
        services: &dyn HostServices,
    ) -> Result<k8s_openapi::api::core::v1::Pod, DeployerError> {
        let image = config.main_image(&self.settings);
        let pull_secret =
            registry_auth::pull_secret_for(&image, &self.docker_configs(inv, config).await?);
        let provider_config = resolve_ocm(
            inv.provider_config_raw().cloned().unwrap_or(Value::Null),
            config,
            services,
        )
        .await?;
        let inputs = PodInputs {
            provider_config,
            target: inv
                .target
                .as_ref()
                .map(|t| serde_json::to_value(t).unwrap_or_default())
                .unwrap_or(Value::Null),
            pull_secret,
        };
        self.host.prepare(key, &inputs).await?;
        let (command, args) = if config.image.is_some() {
            (config.command.clone(), config.args.clone())
        } else {
            // No image of its own: the configured default, with its entry point unless the
            // item names one.
            let d = &self.settings.default_image;
            (
                config.command.clone().or_else(|| d.command.clone()),
                config.args.clone().or_else(|| d.args.clone()),
            )
        };
        let pod = pod::pod(
            &PodInput {
                item: key,
                generation: item.metadata.generation.unwrap_or_default(),
                job_id: &item.status().job_id,
                operation,
                image,
                command,
                args,
                resources: config.resources.clone(),
                active_deadline_seconds: services
                    .remaining()
                    .map(|d| d.as_secs_f64().ceil() as i64),
                pull_secret: inputs.pull_secret.is_some(),
            },
            &self.settings,
        );
        let created = self.host.create_pod(&pod).await?;
        tracing::info!(item = %key.name, pod = ?created.metadata.name, operation = operation.as_str(), "started pod");
        Ok(created)
    }

    /// Docker configs that may hold the image's credentials: the provider configuration's
    /// `registryPullSecrets` (Landscaper cluster), then the Context's.
    async fn docker_configs(
        &self,
        inv: &Invocation,
        config: &ProviderConfiguration,
    ) -> Result<Vec<String>, DeployerError> {
        let mut docs = Vec::new();
        for r in &config.registry_pull_secrets {
            let secrets: Api<k8s_openapi::api::core::v1::Secret> =
                Api::namespaced(self.landscaper.clone(), &r.namespace);
            let secret = secrets
                .get_opt(&r.name)
                .await
                .map_err(|e| api_error("reading a registry pull secret", e))?
                .ok_or_else(|| {
                    DeployerError::configuration(
                        "RegistryPullSecretNotFound",
                        format!(
                            "spec.config.registryPullSecrets: secret {}/{} not found",
                            r.namespace, r.name
                        ),
                    )
                })?;
            if let Some(v) = secret
                .data
                .as_ref()
                .and_then(|d| d.get(".dockerconfigjson"))
            {
                docs.push(String::from_utf8_lossy(&v.0).into_owned());
            }
        }
        if let Some(resolved) = inv
            .context
            .as_ref()
            .and_then(|c| c.resolved_registry_pull_secrets.as_ref())
        {
            docs.extend(resolved.values().cloned());
        }
        Ok(docs)
    }

    /// The exports file of the run, parsed (JSON or YAML), if the program wrote one.
    async fn exports(&self, key: &ItemKey) -> Result<Option<Value>, DeployerError> {
        let Some(bytes) = self.host.read_exports(key).await? else {
            return Ok(None);
        };
        let value: Value = serde_yaml::from_slice(&bytes).map_err(|e| {
            DeployerError::internal(
                "ParseExports",
                format!("the exports file (EXPORTS_PATH) is not JSON or YAML: {e}"),
            )
        })?;
        match value {
            Value::Null => Ok(None),
            Value::Object(_) => Ok(Some(value)),
            other => Err(DeployerError::internal(
                "ParseExports",
                format!(
                    "the exports file (EXPORTS_PATH) must hold an object, got {}",
                    match other {
                        Value::Array(_) => "a list",
                        Value::String(_) => "a string",
                        _ => "a scalar",
                    }
                ),
            )),
        }
    }
}

/// A previous status with a new message (while waiting on something else than our pod).
fn message_status(previous: &ProviderStatus, message: &str) -> Option<Value> {
    let mut s = previous.clone();
    s.api_version = config::API_VERSION.into();
    s.kind = "ProviderStatus".into();
    s.message = message.into();
    Some(s.to_value())
}

fn parse_config(inv: &Invocation) -> Result<ProviderConfiguration, DeployerError> {
    let config: ProviderConfiguration = inv
        .provider_config()
        .map_err(|e| e.with_operation("InitContainerOperation"))?;
    config.validate().map_err(|message| {
        DeployerError::configuration("ValidateProviderConfiguration", message)
            .with_operation("InitContainerOperation")
    })?;
    Ok(config)
}

#[async_trait::async_trait]
impl DeployerPlugin for ContainerDeployer {
    fn description(&self) -> &Description {
        &self.description
    }

    fn origin(&self) -> String {
        format!(
            "native (container deployer, pods in namespace {:?})",
            self.settings.namespace
        )
    }

    async fn reconcile(
        &self,
        inv: Invocation,
        host: Arc<dyn HostServices>,
    ) -> Result<Response, DeployerError> {
        let item = inv.deploy_item_typed()?;
        self.step(&inv, &item, host.as_ref(), Operation::Reconcile)
            .await
    }

    async fn delete(
        &self,
        inv: Invocation,
        host: Arc<dyn HostServices>,
    ) -> Result<Response, DeployerError> {
        let item = inv.deploy_item_typed()?;
        if item.annotation(FORCE_CLEANUP).is_some() {
            let key = ItemKey::of(&item);
            tracing::info!(item = %key.name, "force-cleanup: no DELETE pod, removing the item's objects");
            self.host.cleanup(&key, false).await?;
            return Ok(Response::default());
        }
        self.step(&inv, &item, host.as_ref(), Operation::Delete)
            .await
    }
}
