//! The helm deployer (`landscaper.gardener.cloud/helm`, Landscaper contract section 7) as a
//! wasm-deployer plugin, on the project's own Helm engine (`helm-engine`).
//!
//! Two modes, as in Landscaper:
//! - `helmDeployment: true` (default): a real Helm release ([`actions`] on [`release`]
//!   storage): release Secrets exactly as Helm writes them, so real Helm can list, upgrade,
//!   roll back and uninstall what this plugin installed, and the other way round.
//! - `helmDeployment: false`: render, then apply through the manifest deployer's applier
//!   (`manifest-applier`): labels, CRDs first, `createNamespace` as a managed Namespace,
//!   deletion groups; no release Secret.
//!
//! Every invocation resumes from the persisted `providerStatus` (a `progress` marker with the
//! jobID and step, and the Helm action's own state), does what it can without waiting and
//! answers "not yet, call again after D" while hooks run, objects are not ready or exports are
//! not there. Steps: release (or apply) → readiness → exports → `Succeeded`.
//!
//! Modules: [`config`] (ProviderConfiguration, ProviderStatus), [`source`] (where the chart
//! comes from, through the host's `fetch` capability), [`release`] (Helm's release storage),
//! [`actions`] (install / upgrade / rollback / uninstall with hooks), `template` (template
//! mode).
//! Must not touch: status writes, the export Secret, finalizers — the host owns those.

pub mod actions;
mod cluster;
mod common;
pub mod config;
pub mod release;
pub mod source;
mod template;

pub use common::{
    CP_APPLY_FILES, CP_BEFORE_EXPORTS, CP_BEFORE_READINESS, CP_CUSTOM_READINESS,
    CP_DEFAULT_READINESS, CP_DELETING, CP_PROGRESSING, CP_START, CP_START_DELETE, HELM_LABEL,
    OPTIONS, OWNER_LABEL, TYPE,
};
use common::{
    POLL, STEP_APPLIED, STEP_DONE, STEP_READY, STEP_RELEASE, failed_attempt, unreported_failure,
    value_exports, waiting, workloads,
};

use config::{Config, Progress, ProviderStatus, ReleaseRef};
use manifest_applier::{exports, readiness, strategies};
use sdk_guest::{
    Ctx, Deployer, DeployerError, Description, Invocation, Response, export_deployer, phase,
};
use serde_json::{Map, Value};

/// The plugin.
pub struct HelmDeployer;

impl HelmDeployer {
    /// Release mode: one step of the Helm action. `Ok(Err(response))`: answer now.
    fn release_step(
        ctx: &Ctx,
        config: &Config,
        status: &mut ProviderStatus,
        job_id: &str,
    ) -> Result<Result<(), Response>, DeployerError> {
        ctx.checkpoint(CP_APPLY_FILES)?;
        let mut progress = match status.progress.clone() {
            Some(p) if p.job_id == job_id => p,
            previous => {
                // A new job while the previous one's action is still in flight (its job was
                // replaced): that action is abandoned (its pending record marked failed) so
                // this job's action is not blocked by it.
                let old: actions::ActionState = previous
                    .and_then(|p| serde_json::from_value(p.action).ok())
                    .unwrap_or_default();
                if !old.is_idle() {
                    let mut old = old;
                    actions::abandon(ctx, &mut old, "a new job started")?;
                }
                Progress {
                    job_id: job_id.into(),
                    step: STEP_RELEASE.into(),
                    ..Default::default()
                }
            }
        };
        let mut state: actions::ActionState =
            serde_json::from_value(progress.action.clone()).unwrap_or_default();
        let loaded = source::resolve(ctx, &config.chart)?;
        if progress.value_exports.is_none() {
            progress.value_exports = Some(value_exports(config, &loaded.chart)?);
        }
        let flags = |f: &config::ActionFlags| actions::Flags {
            atomic: f.atomic,
            wait: f.wait,
            force: f.force,
            take_ownership: f.take_ownership,
            skip_schema_validation: f.skip_schema_validation,
            timeout: f.timeout,
            create_namespace: config.create_namespace,
            max_history: 10,
        };
        let request = actions::Request {
            release_name: &config.name,
            namespace: &config.namespace,
            chart: &loaded.chart,
            values: &config.values,
            install: flags(&config.deployment.install),
            upgrade: flags(&config.deployment.upgrade),
        };
        let outcome = actions::install_or_upgrade(ctx, &request, &mut state);
        progress.action = serde_json::to_value(&state).unwrap_or_default();
        match outcome? {
            actions::Outcome::Pending {
                retry_after,
                message,
            } => {
                status.progress = Some(progress);
                let timeout = DeployerError::progressing_timeout(CP_APPLY_FILES);
                waiting(ctx, status, "HelmAction", message, retry_after, timeout).map(Err)
            }
            actions::Outcome::Done(release) => {
                status.managed_resources = workloads(&release.manifest, &config.namespace);
                status.release = Some(ReleaseRef {
                    name: release.name.clone(),
                    namespace: release.namespace.clone(),
                    revision: release.version,
                    chart: format!(
                        "{}-{}",
                        loaded.chart.metadata.name, loaded.chart.metadata.version
                    ),
                });
                progress.step = STEP_APPLIED.into();
                progress.action = Value::Null;
                status.progress = Some(progress);
                Ok(Ok(()))
            }
        }
    }
}

impl Deployer for HelmDeployer {
    fn describe() -> Description {
        Description {
            name: "helm".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            deploy_item_types: vec![TYPE.into()],
            hook_types: vec![],
        }
    }

    fn reconcile(ctx: &Ctx, inv: Invocation) -> Result<Response, DeployerError> {
        ctx.checkpoint(CP_START)?;
        let raw = inv
            .provider_config_present()
            .map_err(|e| e.with_operation("Reconcile"))?;
        let config = config::parse(raw)?;
        let mut status = ProviderStatus::from_previous(inv.previous_provider_status.as_ref())?;
        ctx.checkpoint(CP_PROGRESSING)?;
        inv.require_kubernetes_target("helm deployer", "Reconcile")?;
        let (item_name, job_id) = inv.name_and_job();
        let mut step = status
            .progress
            .as_ref()
            .filter(|p| p.job_id == job_id)
            .map(|p| p.step.clone())
            .unwrap_or_default();

        if let Some(failure) = unreported_failure(&inv, &status, &job_id) {
            return Err(failure);
        }
        if let Some(p) = status.progress.as_mut() {
            p.failure = None;
        }
        if step.is_empty() || step == STEP_RELEASE {
            let attempt = if config.helm_deployment {
                Self::release_step(ctx, &config, &mut status, &job_id)
            } else {
                template::apply_step(ctx, &item_name, &job_id, &config, &mut status)
            };
            let answer = match attempt {
                Ok(answer) => answer,
                Err(e) => return failed_attempt(ctx, &inv, &mut status, &job_id, e),
            };
            if let Err(response) = answer {
                return Ok(response);
            }
            step = STEP_APPLIED.into();
        }

        if step == STEP_APPLIED {
            ctx.checkpoint(CP_BEFORE_READINESS)?;
            let round = readiness::check_all(
                ctx,
                &config.readiness,
                &status.managed_resources,
                &[],
                &OPTIONS,
            )?;
            if let Err(pending) = round {
                let timeout = readiness::timeout(pending.timeout());
                return waiting(
                    ctx,
                    &status,
                    "WaitingForReadiness",
                    pending.why,
                    POLL,
                    timeout,
                );
            }
            if let Some(p) = status.progress.as_mut() {
                p.step = STEP_READY.into();
            }
        }

        // Landscaper always writes the export Secret of a helm item (possibly `{}`).
        ctx.checkpoint(CP_BEFORE_EXPORTS)?;
        let mut values = status
            .progress
            .as_ref()
            .and_then(|p| p.value_exports.clone())
            .unwrap_or_else(|| Value::Object(Map::new()));
        let from_resources = config.as_spec(Vec::new()).exports;
        if !from_resources.is_empty() {
            match exports::read_all(ctx, &from_resources)? {
                Ok(found) => strategies::deep_merge(&mut values, &found),
                Err(pending) => {
                    let timeout = pending.timeout().with_operation("Export");
                    return waiting(
                        ctx,
                        &status,
                        "WaitingForExports",
                        pending.why,
                        POLL,
                        timeout,
                    );
                }
            }
        }
        if let Some(p) = status.progress.as_mut() {
            p.step = STEP_DONE.into();
            p.value_exports = None;
        }
        Ok(Response {
            phase: Some(phase::SUCCEEDED),
            provider_status: Some(status.to_json()),
            exports: Some(values),
            ..Default::default()
        })
    }

    fn delete(ctx: &Ctx, inv: Invocation) -> Result<Response, DeployerError> {
        ctx.checkpoint(CP_START_DELETE)?;
        let previous = inv
            .previous_provider_status
            .as_ref()
            .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()));
        // Never deployed: nothing to uninstall (contract 7.4).
        if previous.is_none() {
            return Ok(Response::default());
        }
        let mut status = ProviderStatus::from_previous(previous)?;
        let config = match inv.provider_config_raw() {
            Some(raw) => Some(config::parse(raw)?),
            None => None,
        };
        ctx.checkpoint(CP_DELETING)?;
        let helm_deployment = config.as_ref().is_none_or(|c| c.helm_deployment);
        if !helm_deployment {
            inv.require_kubernetes_target("helm deployer", "delete")?;
            let (item_name, _) = inv.name_and_job();
            return template::delete_step(ctx, &item_name, config.as_ref(), &mut status);
        }
        // The release this item installed (its status), else the configured one.
        let (name, namespace) = match (&status.release, &config) {
            (Some(r), _) => (r.name.clone(), r.namespace.clone()),
            (None, Some(c)) => (c.name.clone(), c.namespace.clone()),
            (None, None) => return Ok(Response::default()),
        };
        inv.require_kubernetes_target("helm deployer", "delete")?;
        let wait = config.as_ref().is_some_and(|c| c.deployment.uninstall.wait);
        // `uninstall.timeout` bounds the uninstall (its hooks and `wait`); without it, the
        // item's remaining progressing time does (Landscaper's timeout).
        let timeout = config.as_ref().and_then(|c| c.deployment.uninstall.timeout);
        let mut progress = status.progress.clone().unwrap_or_default();
        if progress.step != "delete" {
            progress = Progress {
                step: "delete".into(),
                ..Default::default()
            };
        }
        let mut state: actions::ActionState =
            serde_json::from_value(progress.action.clone()).unwrap_or_default();
        let outcome =
            actions::uninstall_with_timeout(ctx, &name, &namespace, wait, timeout, &mut state);
        progress.action = serde_json::to_value(&state).unwrap_or_default();
        let fail = |e: DeployerError| DeployerError {
            operation: "DeleteHelmRelease".into(),
            reason: "Uninstall".into(),
            message: format!("uninstalling release {namespace}/{name}: {}", e.message),
            ..e
        };
        match outcome.map_err(fail)? {
            actions::Outcome::Pending {
                retry_after,
                message,
            } => {
                status.progress = Some(progress);
                let timeout = fail(DeployerError::progressing_timeout(CP_DELETING));
                let mut r = waiting(ctx, &status, "Uninstalling", message, retry_after, timeout)?;
                r.phase = Some(phase::DELETING);
                Ok(r)
            }
            actions::Outcome::Done(_) => Ok(Response {
                provider_status: Some(
                    ProviderStatus {
                        managed_resources: Vec::new(),
                        release: None,
                        progress: None,
                    }
                    .to_json(),
                ),
                ..Default::default()
            }),
        }
    }
}

export_deployer!(HelmDeployer);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn only_the_workload_kinds_of_a_release_are_managed_resources() {
        let manifest = "---\n# Source: c/templates/a.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n---\n# Source: c/templates/b.yaml\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: other\n";
        let w = workloads(manifest, "apps");
        let got: Vec<_> = w
            .iter()
            .map(|m| {
                format!(
                    "{} {}/{}",
                    m.resource.kind, m.resource.namespace, m.resource.name
                )
            })
            .collect();
        assert_eq!(got, ["Deployment apps/web", "Pod other/p"]);
        assert!(w.iter().all(|m| m.resource.uid.is_empty()));
    }

    #[test]
    fn uninstall_timeout_bounds_the_uninstall() {
        use actions::fake::FakeCluster;
        let cluster = FakeCluster::new();
        let ctx = Ctx::native(&cluster);
        cluster.set_remaining(Some(Duration::from_secs(600)));
        // A release with a pre-delete Job hook that never completes (no controller runs it).
        let job = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: cleanup\n  annotations:\n    helm.sh/hook: pre-delete\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: busybox\n";
        let chart = helm_engine::Chart::load_files(vec![
            (
                "Chart.yaml".into(),
                b"apiVersion: v2\nname: c\nversion: 1.0.0\n".to_vec(),
            ),
            ("templates/job.yaml".into(), job.as_bytes().to_vec()),
        ])
        .unwrap();
        let mut state = actions::ActionState::default();
        let request = actions::Request {
            release_name: "web",
            namespace: "apps",
            chart: &chart,
            values: &json!({}),
            install: actions::Flags::default(),
            upgrade: actions::Flags::default(),
        };
        actions::install_or_upgrade(&ctx, &request, &mut state).unwrap();
        let invocation = |timeout: &str| {
            let mut inv = Invocation::for_item(json!({
                "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"type": TYPE, "config": {
                    "apiVersion": config::API_VERSION, "kind": "ProviderConfiguration",
                    "name": "web", "namespace": "apps", "chart": {"archive": {"raw": "x"}},
                    "helmDeploymentConfig": {"uninstall": {"timeout": timeout}},
                }},
            }));
            inv.target = Some(
                serde_json::from_value(json!({"target": {
                    "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
                    "metadata": {"name": "t", "namespace": "default"},
                    "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster"}},
                    "content": ""}))
                .unwrap(),
            );
            inv
        };
        let mut previous = json!({
            "apiVersion": config::API_VERSION, "kind": "ProviderStatus",
            "release": {"name": "web", "namespace": "apps", "revision": 1, "chart": "c-1.0.0"},
        });
        // The hook runs: the uninstall waits for it.
        let mut inv = invocation("30s");
        inv.previous_provider_status = Some(previous.clone());
        let r = HelmDeployer::delete(&ctx, inv).unwrap();
        assert!(r.retry_after.is_some(), "{r:?}");
        previous = r.provider_status.unwrap();
        // Past `uninstall.timeout` (not the item's ten minutes): the uninstall fails.
        cluster.advance(Duration::from_secs(31));
        let mut inv = invocation("30s");
        inv.previous_provider_status = Some(previous);
        let e = HelmDeployer::delete(&ctx, inv).unwrap_err();
        assert!(
            e.message.contains("timed out waiting for the condition")
                && e.message.contains("cleanup"),
            "{}",
            e.message
        );
        assert!(e.has_code(sdk_guest::codes::TIMEOUT), "{e:?}");
        assert_eq!(e.operation, "DeleteHelmRelease");
    }

    #[test]
    fn value_exports_read_the_merged_values() {
        let chart = helm_engine::Chart::load_files(vec![
            (
                "Chart.yaml".into(),
                b"apiVersion: v2\nname: c\nversion: 1.2.3\n".to_vec(),
            ),
            (
                "values.yaml".into(),
                b"image:\n  repository: nginx\n  tag: '1.0'\nreplicas: 1\n".to_vec(),
            ),
        ])
        .unwrap();
        let config = config::parse(&json!({
            "apiVersion": config::API_VERSION, "kind": "ProviderConfiguration",
            "name": "web", "namespace": "apps", "chart": {"archive": {"raw": "x"}},
            "values": {"image": {"tag": "2.0"}},
            "exports": {"exports": [
                {"key": "image.tag", "jsonPath": ".Values.image.tag"},
                {"key": "repo", "jsonPath": ".Values.image.repository"},
                {"key": "chart", "jsonPath": ".Chart.Version"},
                {"key": "chartName", "jsonPath": ".Chart.name"},
                {"key": "appVersion", "jsonPath": ".Chart.AppVersion"},
                {"key": "release.ns", "jsonPath": ".Release.Namespace"},
                {"key": "release.install", "jsonPath": ".Release.IsInstall"},
                {"key": "release.revision", "jsonPath": ".Release.Revision"},
                {"key": "release.service", "jsonPath": ".Release.Service"},
                {"key": "kube", "jsonPath": ".Capabilities.KubeVersion.Major"},
            ]},
        }))
        .unwrap();
        let out = value_exports(&config, &chart).unwrap();
        assert_eq!(
            out,
            json!({"image": {"tag": "2.0"}, "repo": "nginx", "chart": "1.2.3",
                   "chartName": "c", "appVersion": "",
                   "release": {"ns": "apps", "install": true, "revision": 0, "service": "Helm"},
                   "kube": "1"})
        );
        let whole = config::parse(&json!({
            "apiVersion": config::API_VERSION, "kind": "ProviderConfiguration",
            "name": "web", "namespace": "apps", "chart": {"archive": {"raw": "x"}},
            "exports": {"exports": [{"key": "apis", "jsonPath": ".Capabilities.APIVersions"}]},
        }))
        .unwrap();
        let apis = value_exports(&whole, &chart).unwrap();
        assert!(
            apis["apis"]
                .as_array()
                .is_some_and(|a| a.contains(&json!("apps/v1"))),
            "{apis}"
        );
        let missing = config::parse(&json!({
            "apiVersion": config::API_VERSION, "kind": "ProviderConfiguration",
            "name": "web", "namespace": "apps", "chart": {"archive": {"raw": "x"}},
            "exports": {"exports": [{"key": "x", "jsonPath": ".Values.nope"}]},
        }))
        .unwrap();
        let e = value_exports(&missing, &chart).unwrap_err();
        assert!(e.message.contains(".Values.nope"), "{}", e.message);
    }
}
