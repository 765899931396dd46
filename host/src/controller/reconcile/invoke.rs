//! Stage 4, invoke: the plugin step (contract sections 3.5 and 3.6).
//!
//! Resolves the item's Target (inline or `secretRef`, validated), reads its Context (with the
//! registry pull secrets it names), puts the finalizer on before the first reconcile, checks
//! the progressing timeout at the host's start checkpoint, calls the plugin with the
//! capabilities scoped to this item, and folds its answer into the in-memory status. Delete
//! removes the export and the finalizer once the plugin is done.
//!
//! Owns: the plugin's inputs and the call. Must not touch: the status write (`commit`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use landscaper_model::Response;

use super::decide::Step;
use super::item::{ItemCtx, StageError, TargetRef};
use crate::apierrors::{self, Lookup};
use crate::capabilities::{ItemServices, secret_ref_data};
use crate::clock::now;
use crate::contract::step::{self, Call};
use crate::contract::{ProgressingTimeout, StepError, target};
use crate::controller::context::Error;
use crate::controller::exports;
use crate::landscaper::{
    self, Context as LandscaperContext, DeployItem, FINALIZER, ResolvedTarget, Target, annotations,
    codes,
};
use plugin_runtime::Invocation;

/// What the plugin step produced, before it is folded into the status.
pub(super) struct StepOutcome {
    pub error: Option<StepError>,
    pub retry_after: Option<Duration>,
    /// The item's finalizer was removed: the object is gone or going.
    pub released: bool,
}

impl StepOutcome {
    fn done(retry_after: Option<Duration>) -> Self {
        StepOutcome {
            error: None,
            retry_after,
            released: false,
        }
    }
}

impl ItemCtx {
    /// Runs the step on `item`; its status carries the plugin's answer afterwards.
    pub(super) async fn invoke(
        &self,
        item: &mut DeployItem,
        target: &TargetRef,
        step: &Step,
    ) -> Result<StepOutcome, Error> {
        let result = match &step.early_error {
            Some(err) => Err(StageError::Step(err.clone())),
            None if step.deleting => self.delete_path(item, target.object.as_ref()).await,
            None => self.reconcile_path(item, target.object.as_ref()).await,
        };
        match result {
            Ok(outcome) => Ok(outcome),
            Err(StageError::Step(err)) => Ok(StepOutcome {
                error: Some(err),
                retry_after: *self.retry_hint.lock().unwrap_or_else(|e| e.into_inner()),
                released: false,
            }),
            Err(StageError::Api(e)) => Err(e),
        }
    }

    /// Reconcile path (contract section 3.5).
    async fn reconcile_path(
        &self,
        item: &mut DeployItem,
        target: Option<&Target>,
    ) -> Result<StepOutcome, StageError> {
        self.check_start(item, Call::Reconcile)?;
        let resolved = self.resolve_target(target, Call::Reconcile).await?;
        if !item.has_finalizer(FINALIZER) {
            *item = self.add_finalizer(item).await?;
        }
        let context = self.read_context(item, Call::Reconcile).await?;
        step::require_provider_config(item)?;
        let response = self
            .call_plugin(item, resolved, context, Call::Reconcile)
            .await?;
        // Everything the step writes is written before its phase counts: a failed export
        // write leaves the job open (retried, then ERR_TIMEOUT), never a false Succeeded.
        if let Some(values) = &response.exports {
            let export_ref = exports::write(&self.ctx.client, item, values)
                .await
                .map_err(|e| {
                    StepError::new(
                        "reconcile",
                        "CreateOrUpdateExport",
                        format!("writing the export Secret: {}", apierrors::message(&e)),
                    )
                })?;
            let mut s = item.status();
            s.export_ref = Some(export_ref);
            item.status = Some(s);
        }
        let mut s = item.status();
        step::apply_response(&mut s, &response, Call::Reconcile, &now());
        item.status = Some(s);
        Ok(StepOutcome::done(response.retry_after))
    }

    /// Delete path (contract section 3.6).
    async fn delete_path(
        &self,
        item: &mut DeployItem,
        target: Option<&Target>,
    ) -> Result<StepOutcome, StageError> {
        let without_uninstall =
            item.annotation(annotations::DELETE_WITHOUT_UNINSTALL) == Some("true");
        if !without_uninstall {
            self.check_start(item, Call::Delete)?;
        }
        let resolved = self.resolve_target(target, Call::Delete).await?;
        if !without_uninstall {
            let context = self.read_context(item, Call::Delete).await?;
            let response = self
                .call_plugin(item, resolved, context, Call::Delete)
                .await?;
            let mut s = item.status();
            step::apply_response(&mut s, &response, Call::Delete, &now());
            item.status = Some(s);
            if response.retry_after.is_some() {
                return Ok(StepOutcome::done(response.retry_after));
            }
            exports::delete(&self.ctx.client, item).await.map_err(|e| {
                StepError::new(
                    "delete",
                    "DeleteExport",
                    format!("deleting the export Secret: {}", apierrors::message(&e)),
                )
            })?;
        }
        if item.has_finalizer(FINALIZER) {
            self.remove_finalizer(item).await?;
        }
        Ok(StepOutcome {
            error: None,
            retry_after: None,
            released: true,
        })
    }

    /// Calls the plugin: the progressing timeout is checked at the host's start checkpoint,
    /// then the plugin runs with the capabilities of this item. Its error, or an answer the API
    /// server would reject, is the step's error; conditions reported with an error (e.g.
    /// validation False) still count.
    pub(super) async fn call_plugin(
        &self,
        item: &mut DeployItem,
        resolved: Option<ResolvedTarget>,
        context: Option<LandscaperContext>,
        call: Call,
    ) -> Result<Response, StepError> {
        let mode = self.ctx.checkpoint_mode.clone();
        let timeout = match call {
            // No job, no initTime: the re-apply gets spec.timeout from now.
            Call::Reapply => ProgressingTimeout::starting_at(item, jiff::Timestamp::now(), mode),
            Call::Reconcile | Call::Delete => ProgressingTimeout::for_item(item, mode),
        }?;
        // Every attempt starts at a checkpoint, so a step that keeps failing with a retryable
        // error still ends in ERR_TIMEOUT once the progressing timeout has passed.
        timeout.check(
            &self.start_checkpoint(call == Call::Delete),
            jiff::Timestamp::now(),
        )?;
        let invocation = Invocation {
            deploy_item: super::plugin_view::for_plugins(serde_json::to_value(&*item).map_err(
                |e| {
                    StepError::new(call.operation(), "EncodeInvocation", e.to_string())
                        .with_code(codes::INTERNAL_PROBLEM)
                },
            )?),
            previous_provider_status: item.status.as_ref().and_then(|s| s.provider_status.clone()),
            target: resolved.clone(),
            context: context.clone(),
        };
        let services = Arc::new(
            ItemServices::new(timeout, resolved, self.ctx.target_clients.clone())
                .with_secondary_targets(
                    self.ctx.client.clone(),
                    self.namespace.clone(),
                    item.spec.config.as_ref(),
                )
                .with_fetch(
                    self.ctx.fetcher.clone(),
                    self.ctx.client.clone(),
                    self.namespace.clone(),
                    context.clone(),
                )
                .with_http(
                    self.ctx.http.clone(),
                    self.ctx.client.clone(),
                    self.namespace.clone(),
                    item.spec.config.as_ref(),
                ),
        );
        self.ctx.stats.plugin_calls.fetch_add(1, Ordering::Relaxed);
        let started = std::time::Instant::now();
        let answer = if call == Call::Delete {
            self.plugin.delete(invocation, services.clone()).await
        } else {
            self.plugin.reconcile(invocation, services.clone()).await
        };
        let stats = &self.ctx.stats;
        let labels = [self.deploy_item_type.as_str(), call.operation()];
        stats
            .plugin_call_durations
            .observe(labels, started.elapsed().as_secs_f64());
        if let Err(e) = &answer {
            let [kind, operation] = labels;
            stats
                .plugin_call_failures
                .inc([kind, operation, failure_reason(&e.reason)]);
        }
        match answer {
            Ok(response) => {
                step::check_response(&response, call)?;
                Ok(response)
            }
            Err(e) => {
                *self.retry_hint.lock().unwrap_or_else(|e| e.into_inner()) = services.retry_hint();
                let mut s = item.status();
                step::apply_conditions(&mut s, &e.conditions, &now());
                item.status = Some(s);
                Err(StepError::from_plugin(e, call.operation()))
            }
        }
    }

    /// Resolves and validates the Target (`None`: the item has none).
    pub(super) async fn resolve_target(
        &self,
        target: Option<&Target>,
        call: Call,
    ) -> Result<Option<ResolvedTarget>, StageError> {
        let Some(target) = target else {
            return Ok(None);
        };
        let operation = call.operation();
        let secret_data = secret_ref_data(&self.ctx.client, &self.namespace, target).await?;
        let resolved = target::resolve(target, secret_data.as_ref())
            .map_err(|message| StepError::new(operation, "ResolveTarget", message))?;
        target::validate(&resolved).map_err(|message| {
            StepError::new(operation, "ValidateTarget", message)
                .with_code(codes::CONFIGURATION_PROBLEM)
        })?;
        Ok(Some(resolved))
    }

    /// Reads the item's Context, with its registry pull secrets resolved. A missing Context is
    /// a step error (retried until the progressing timeout).
    pub(super) async fn read_context(
        &self,
        item: &DeployItem,
        call: Call,
    ) -> Result<Option<LandscaperContext>, StageError> {
        let name = item.context_name();
        let missing = |why: String| {
            StageError::Step(StepError::new(
                call.operation(),
                "GetLandscaperContext",
                why,
            ))
        };
        let mut context = match self.ctx.lookups.contexts.get(&self.namespace, name).await? {
            Lookup::Found(context) => context,
            Lookup::Missing => {
                return Err(missing(format!(
                    "context {:?} not found in namespace {:?}",
                    name, self.namespace
                )));
            }
            // Landscaper requires the Context as well; a cluster without the kind gets told so.
            Lookup::KindNotServed => {
                return Err(missing(format!(
                    "context {:?} in namespace {:?} cannot be read: the cluster does not serve {}/{} (is Landscaper's Context CRD installed?)",
                    name,
                    self.namespace,
                    landscaper::API_VERSION,
                    "contexts"
                )));
            }
        };
        let resolved = self.resolve_pull_secrets(&context, call).await?;
        if !resolved.is_empty() {
            context.resolved_registry_pull_secrets = Some(resolved);
        }
        Ok(Some(context))
    }

    /// Reads the Context's `registryPullSecrets` (data key `.dockerconfigjson`, or
    /// `.ocmcredentialconfig`) so plugins that pull from registries get them with the Context.
    async fn resolve_pull_secrets(
        &self,
        context: &LandscaperContext,
        call: Call,
    ) -> Result<BTreeMap<String, String>, StageError> {
        let mut resolved = BTreeMap::new();
        let secrets: Api<Secret> = Api::namespaced(self.ctx.client.clone(), &self.namespace);
        for name in context
            .registry_pull_secrets
            .iter()
            .map(|r| r.name.as_str())
            .filter(|n| !n.is_empty())
        {
            let Some(secret) = secrets.get_opt(name).await? else {
                return Err(StepError::new(
                    call.operation(),
                    "GetRegistryPullSecret",
                    format!("registry pull secret {name:?} of the context not found"),
                )
                .into());
            };
            let data = secret.data.unwrap_or_default();
            let value = [".dockerconfigjson", ".ocmcredentialconfig"]
                .iter()
                .find_map(|k| data.get(*k))
                .map(|v| String::from_utf8_lossy(&v.0).into_owned())
                .unwrap_or_default();
            resolved.insert(name.to_string(), value);
        }
        Ok(resolved)
    }

    /// The host's start checkpoint, first in every attempt that will call the plugin: a step
    /// that keeps failing before the plugin (a missing Context or Target Secret) still ends in
    /// `ERR_TIMEOUT` once the progressing timeout has passed, instead of retrying forever.
    fn check_start(&self, item: &DeployItem, call: Call) -> Result<(), StepError> {
        ProgressingTimeout::for_item(item, self.ctx.checkpoint_mode.clone())?
            .check(
                &self.start_checkpoint(call == Call::Delete),
                jiff::Timestamp::now(),
            )
            .map(|_| ())
    }

    /// Whether the host is about to end this job for its progressing timeout (the same check
    /// as the host's checkpoint before the plugin call).
    pub(super) fn timed_out(&self, item: &DeployItem, deleting: bool) -> bool {
        ProgressingTimeout::for_item(item, self.ctx.checkpoint_mode.clone())
            .and_then(|t| t.check(&self.start_checkpoint(deleting), jiff::Timestamp::now()))
            .is_err_and(|e| e.codes.iter().any(|c| c == codes::TIMEOUT))
    }

    fn start_checkpoint(&self, deleting: bool) -> String {
        format!(
            "{} deployer: start {}",
            self.plugin.description().name,
            if deleting { "delete" } else { "reconcile" }
        )
    }
}

/// The `reason` label of a failed plugin call: the error's reason, bounded so a plugin that
/// invents reasons cannot grow the host's metrics (`Other` past 64 characters or with spaces).
fn failure_reason(reason: &str) -> &str {
    if reason.is_empty() {
        "Reconcile"
    } else if reason.len() > 64
        || !reason
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        "Other"
    } else {
        reason
    }
}
