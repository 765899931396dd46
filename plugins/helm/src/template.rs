//! Template mode (`helmDeployment: false`, contract 7.3/7.4): render the chart, then apply the
//! objects through the manifest deployer's applier — chart `crds/` first, then every rendered
//! file (hook templates too, as ordinary objects, as Landscaper applies them; not
//! `NOTES.txt`), all with policy `manage`, plus the release Namespace with policy `keep` when
//! `createNamespace` is set; objects labelled with the DeployItem's name; orphans of the
//! previous job deleted by `deletionGroupsDuringUpdate`; uninstall by `deletionGroups`.
//! No release Secret is written.
//!
//! Decided deliberately (contract 7.4 note): uninstall honours policies, so the `keep`
//! Namespace created by `createNamespace` stays, as `helm uninstall` keeps a namespace that
//! `--create-namespace` made. Landscaper's manifest-only uninstall deletes it.
//!
//! Owns: turning a render into the applier's [`Spec`]. Must not touch: release storage.

use manifest_applier::deletion::Uninstall;
use manifest_applier::spec::{Manifest, Policy};
use manifest_applier::{applier, deletion};
use sdk_guest::{Ctx, DeployerError, Response, phase};
use serde_json::{Value, json};

use crate::common::{
    CP_APPLY_FILES, HELM_LABEL, OPTIONS, POLL, STEP_APPLIED, STEP_RELEASE, value_exports, waiting,
};
use crate::config::{Config, Progress, ProviderStatus};
use crate::source;

/// Renders `config`'s chart and returns the manifests to apply.
fn manifests(
    ctx: &Ctx,
    item_name: &str,
    config: &Config,
) -> Result<(Vec<Manifest>, Value), DeployerError> {
    let loaded = source::resolve(ctx, &config.chart)?;
    let values = value_exports(config, &loaded.chart)?;
    // Landscaper's template mode renders against the target cluster too.
    let cluster =
        crate::cluster::TargetCluster::read(ctx).map_err(|e| e.or_operation("Template"))?;
    let opts = cluster.options(helm_engine::RenderOptions {
        release_name: config.name.clone(),
        namespace: config.namespace.clone(),
        values_files: vec![config.values.to_string()],
        is_upgrade: false,
        // Landscaper's template mode renders with release options `Revision: 0`
        // (`pkg/deployer/helm/helm.go`, `Template`).
        revision: 0,
        // Helm 3's document split, as in `actions::render`.
        split_mode: helm_engine::sort::SplitMode::Legacy,
        ..Default::default()
    });
    let rendered = helm_engine::render(&loaded.chart, &opts).map_err(|e| {
        DeployerError::configuration("RenderHelmValues", e.to_string()).with_operation("Template")
    })?;
    // As Landscaper's manifest-only mode: the chart's `crds/`, then every rendered file —
    // hooks included, as ordinary objects; only `NOTES.txt` is left out — each decoded as a
    // YAML stream (so a block scalar that ends a document keeps its final newline).
    let mut docs: Vec<(String, String)> = rendered.crds.clone();
    docs.extend(
        rendered
            .files
            .iter()
            .filter(|(path, _)| !path.ends_with("/NOTES.txt") && path.as_str() != "NOTES.txt")
            .map(|(path, text)| (path.clone(), text.clone())),
    );
    let mut out = Vec::new();
    for (path, text) in docs {
        let documents = crate::actions::yaml_documents(&text).map_err(|e| {
            DeployerError::configuration(
                "RenderHelmValues",
                format!("YAML parse error on {path}: {e}"),
            )
            .with_operation("Template")
        })?;
        for doc in documents {
            let parsed = helm_engine::yaml::parse(&doc).map_err(|e| {
                DeployerError::configuration(
                    "RenderHelmValues",
                    format!("YAML parse error on {path}: {e}"),
                )
                .with_operation("Template")
            })?;
            let mut object = helm_engine::json::to_serde(&parsed);
            // Documents without apiVersion/kind (comments, empty) are skipped, as Landscaper does.
            if object["apiVersion"].as_str().unwrap_or("").is_empty()
                || object["kind"].as_str().unwrap_or("").is_empty()
            {
                continue;
            }
            default_namespace(ctx, &mut object, &config.namespace)?;
            label(&mut object, item_name);
            out.push(Manifest {
                policy: Policy::Manage,
                manifest: object,
                ..Default::default()
            });
        }
    }
    if config.create_namespace {
        let mut ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": config.namespace}});
        label(&mut ns, item_name);
        out.push(Manifest {
            policy: Policy::Keep,
            manifest: ns,
            ..Default::default()
        });
    }
    Ok((out, values))
}

/// Namespaced objects without a namespace go to the release namespace.
fn default_namespace(ctx: &Ctx, object: &mut Value, namespace: &str) -> Result<(), DeployerError> {
    if object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty())
    {
        return Ok(());
    }
    let api_version = object["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    let namespaced = match ctx.kube_discover(&api_version, &kind)? {
        Some(info) => info.namespaced,
        // Not served yet (a CRD of this very chart): assume namespaced unless it is a CRD's
        // cluster-scoped kind; the apply reports what the server says.
        None => !matches!(kind.as_str(), "Namespace" | "CustomResourceDefinition"),
    };
    if namespaced && let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("namespace".into(), namespace.into());
    }
    Ok(())
}

fn label(object: &mut Value, item_name: &str) {
    manifest_applier::strategies::set_labels(object, &[(HELM_LABEL, item_name)]);
}

/// The apply step: render, apply, delete orphans. `Ok(Err(response))`: answer now.
pub(crate) fn apply_step(
    ctx: &Ctx,
    item_name: &str,
    job_id: &str,
    config: &Config,
    status: &mut ProviderStatus,
) -> Result<Result<(), Response>, DeployerError> {
    ctx.checkpoint(CP_APPLY_FILES)?;
    let (manifests, values) = manifests(ctx, item_name, config)?;
    ctx.checkpoint("helm deployer: start apply manifests")?;
    let spec = config.as_spec(manifests);
    let old = status.managed_resources.clone();
    let outcome = applier::apply(ctx, item_name, &spec, &OPTIONS, &old)?;
    let progress = Progress {
        job_id: job_id.into(),
        step: STEP_RELEASE.into(),
        value_exports: Some(values),
        ..Default::default()
    };
    if let Some(err) = outcome.error {
        // Record everything that may exist before reporting the error.
        let mut managed = outcome.applied;
        managed.extend(applier::not_in(&old, &managed).into_iter().cloned());
        status.managed_resources = managed;
        status.progress = Some(progress);
        return Err(err);
    }
    let orphans: Vec<_> = applier::not_in(&old, &outcome.applied)
        .into_iter()
        .cloned()
        .collect();
    let mut remaining = Vec::new();
    if !orphans.is_empty() {
        ctx.checkpoint(manifest_applier::checkpoints::CLEANUP)?;
        let to_delete = deletion::prepare(ctx, item_name, &orphans, &OPTIONS)?;
        remaining =
            deletion::delete_in_groups(ctx, to_delete, &config.deletion_groups_during_update)?;
    }
    let mut managed = outcome.applied;
    let waiting_for_orphans = !remaining.is_empty();
    managed.extend(remaining);
    status.managed_resources = managed;
    status.progress = Some(progress);
    if waiting_for_orphans {
        let timeout = DeployerError::progressing_timeout(manifest_applier::checkpoints::DELETE)
            .with_operation("ApplyObjects");
        return waiting(
            ctx,
            status,
            "DeletingOrphans",
            "waiting for removed resources to be deleted".into(),
            POLL,
            timeout,
        )
        .map(Err);
    }
    if let Some(p) = status.progress.as_mut() {
        p.step = STEP_APPLIED.into();
    }
    Ok(Ok(()))
}

/// Uninstall in template mode: the managed objects by `deletionGroups`.
pub(crate) fn delete_step(
    ctx: &Ctx,
    item_name: &str,
    config: Option<&Config>,
    status: &mut ProviderStatus,
) -> Result<Response, DeployerError> {
    if status.managed_resources.is_empty() {
        return Ok(Response::default());
    }
    let groups = config
        .map(|c| c.deletion_groups.clone())
        .unwrap_or_default();
    status.progress = None;
    match deletion::uninstall(ctx, item_name, &status.managed_resources, &groups, &OPTIONS)? {
        Uninstall::Done => {
            status.managed_resources = Vec::new();
            Ok(Response {
                provider_status: Some(status.to_json()),
                ..Default::default()
            })
        }
        Uninstall::Waiting {
            remaining,
            message,
            timeout,
        } => {
            status.managed_resources = remaining;
            let mut r = waiting(ctx, status, "WaitingForDeletion", message, POLL, timeout)?;
            r.phase = Some(phase::DELETING);
            Ok(r)
        }
    }
}
