//! One reconcile of one DeployItem, in the contract's order: responsibility (check 1 from
//! metadata, check 2 with target selectors), the job decision, pickup, the plugin call, and
//! the one status write that finishes a step — with the extension hooks at their points
//! (`hooks`) and the hook-forced re-apply of finished items (`reapply`).
//!
//! An item that is not ours returns before any write. A 409 on any write aborts the reconcile
//! (the item is re-read and decided again); nothing is retried blindly.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PartialObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use plugin_runtime::{DeployerError, DeployerPlugin, Invocation, Response};
use serde_json::json;
use tracing::Instrument;

mod hooks;
mod reapply;

use hooks::{Flow, HookView, action, hook_step_error, run_stage};
use reapply::reapplicable;

use super::services::ItemServices;
use super::{Deployer, Error, exports};
use crate::contract::status::{self, ConditionUpdate, StepError};
use crate::contract::{JobStep, ProgressingTimeout, next_step, responsibility, target};
use crate::hooks::{Accumulated, HookType};
use crate::landscaper::{
    Context, DeployItem, FINALIZER, Phase, ResolvedTarget, Target, TransitionTimes, annotations,
    codes,
};
use crate::locking::LockOutcome;
use crate::targetselector;

/// Reconciles the item behind `meta`.
pub async fn reconcile(
    meta: &PartialObjectMeta<DeployItem>,
    deployer: &Arc<Deployer>,
) -> Result<Action, Error> {
    let name = meta.metadata.name.clone().unwrap_or_default();
    let namespace = meta.metadata.namespace.clone().unwrap_or_default();
    let uid = meta.metadata.uid.clone().unwrap_or_default();
    let items: Api<DeployItem> = Api::namespaced(deployer.client.clone(), &namespace);
    let hooks = &deployer.hooks;
    let mut acc = Accumulated::default();
    let annotated = responsibility::route_from_annotations(meta.metadata.annotations.as_ref());
    let annotated_type = annotated.as_ref().map(|r| r.deploy_item_type.as_str());

    // Hooks: Start, the very first step (no item, no target).
    if hooks.has(annotated_type, HookType::Start) {
        deployer.stats.hook_stages.fetch_add(1, Ordering::Relaxed);
        let r = hooks
            .run(HookType::Start, annotated_type, None, None)
            .await
            .map_err(|e| Error::Hook(e.to_string()))?;
        acc.add(r);
        if acc.aborted() {
            return Ok(action(&acc, None));
        }
    }

    // An unchanged item we saw finished: nothing to read, lock or write — unless a hook may
    // take or reopen it.
    if let Some(rv) = meta.metadata.resource_version.as_deref()
        && !hooks.may_reopen(annotated_type)
        && deployer.finished.is_finished(&uid, rv)
    {
        return Ok(Action::await_change());
    }

    // Responsibility, check 1: the type (from annotations when present).
    let (route, mut prefetched) = match annotated {
        Some(route) => (route, None),
        None => {
            let Some(item) = items.get_opt(&name).await? else {
                return Ok(Action::await_change());
            };
            (responsibility::route_from_item(&item), Some(item))
        }
    };
    let Some(plugin) = deployer.plugins.for_type(&route.deploy_item_type) else {
        return Ok(Action::await_change());
    };
    let item_type = Some(route.deploy_item_type.as_str());

    // Responsibility, check 2: the Target, read from the item's own namespace.
    let targets: Api<Target> = Api::namespaced(deployer.client.clone(), &namespace);
    let mut target_missing = false;
    let mut target_obj = None;
    let mut responsible = true;
    if let Some(target_name) = &route.target_name {
        match targets.get_opt(target_name).await? {
            None => target_missing = true,
            Some(t) => {
                responsible = targetselector::matches_any(&deployer.target_selectors, &t)
                    .map_err(|e| Error::Invalid(e.to_string()))?;
                target_obj = Some(t);
            }
        }
    }
    let during_hooks = hooks.has(item_type, HookType::DuringResponsibilityCheck);
    if !responsible && !during_hooks {
        return Ok(Action::await_change());
    }

    // Only now the full item.
    let mut item = match prefetched.take() {
        Some(item) => item,
        None => match items.get_opt(&name).await? {
            Some(item) => item,
            None => {
                deployer.finished.remove(&uid);
                return Ok(Action::await_change());
            }
        },
    };
    if item.metadata.uid != meta.metadata.uid {
        return Err(Error::Invalid(format!(
            "item {namespace}/{name} was replaced while reconciling (different UID)"
        )));
    }

    // Hooks around the responsibility and "needs work" decisions. A hook error ends the
    // hook stages; it is recorded on the item if there is a job to record it in.
    let mut hook_error = None;
    let view = HookView::new(&item, target_obj.as_ref());
    if during_hooks {
        match run_stage(
            deployer,
            HookType::DuringResponsibilityCheck,
            &route.deploy_item_type,
            &view,
        )
        .await
        {
            Ok(r) => {
                // A result overrides the target responsibility check.
                if let Some(r) = r {
                    responsible = !r.abort_reconcile;
                }
                acc.add(r);
                acc.clear_abort();
            }
            Err(e) => hook_error = Some(e),
        }
    }
    if !responsible {
        return match hook_error {
            Some(e) => Err(Error::Hook(e.to_string())),
            None => Ok(action(&acc, None)),
        };
    }
    if hook_error.is_none() && hooks.has(item_type, HookType::AfterResponsibilityCheck) {
        match run_stage(
            deployer,
            HookType::AfterResponsibilityCheck,
            &route.deploy_item_type,
            &view,
        )
        .await
        {
            Ok(r) => {
                acc.add(r);
                if acc.aborted() {
                    return Ok(action(&acc, None));
                }
            }
            Err(e) => hook_error = Some(e),
        }
    }
    let needs_work = next_step(&item, target_missing) != JobStep::Finished;
    let mut forced = false;
    if hook_error.is_none() && hooks.has(item_type, HookType::ShouldReconcile) {
        match run_stage(
            deployer,
            HookType::ShouldReconcile,
            &route.deploy_item_type,
            &view,
        )
        .await
        {
            Ok(r) => {
                // Can force a reconcile; cannot stop one the default logic requires.
                forced =
                    !needs_work && r.is_some_and(|r| !r.abort_reconcile) && reapplicable(&item);
                acc.add(r);
                acc.clear_abort();
            }
            Err(e) => hook_error = Some(e),
        }
    }
    // Nothing to do: remember it, so its next unchanged event is free. Checked before locking,
    // so replicas never write a lock for an item that needs no work.
    if !needs_work && !forced {
        if let Some(e) = hook_error {
            deployer
                .events
                .warning(&item, "ExtensionHookFailed", e.to_string());
            return Err(Error::Hook(e.to_string()));
        }
        if let Some(rv) = item.metadata.resource_version.as_deref() {
            deployer.finished.insert(&uid, rv);
        }
        return Ok(action(&acc, None));
    }

    // Lock (only when several replicas may run), then re-read: another replica may have
    // finished the job between our read and our lock.
    let lock = match &deployer.locker {
        None => None,
        Some(locker) => match locker.lock(&namespace, &name, &uid).await? {
            LockOutcome::NotLocked => {
                tracing::debug!(item = %format!("{namespace}/{name}"), "locked by another replica");
                return Ok(Action::requeue(locker.config().retry_after));
            }
            LockOutcome::Locked(lock) => {
                match items.get_opt(&name).await {
                    Ok(Some(fresh)) if fresh.metadata.uid == item.metadata.uid => item = fresh,
                    other => {
                        locker.unlock(lock).await;
                        other?;
                        return Ok(Action::await_change());
                    }
                }
                Some(lock)
            }
        },
    };

    let job = item
        .status
        .as_ref()
        .map(|s| s.job_id.clone())
        .unwrap_or_default();
    let phase = item.status().phase;
    let span = tracing::info_span!(
        "reconcile",
        item = %format!("{namespace}/{name}"),
        job = %job,
        phase = %phase,
        plugin = %plugin.description().name
    );
    let ctx = ItemCtx {
        deployer: deployer.clone(),
        items,
        plugin,
        deploy_item_type: route.deploy_item_type.clone(),
        namespace,
        name,
    };
    let flow = Flow {
        forced,
        hook_error,
        acc,
    };
    let result = async move {
        let mut flow = flow;
        if crate::contract::job::has_test_reconcile(&item) {
            item = ctx.start_test_reconcile(&item).await?;
            flow.forced = true;
        }
        ctx.run_step(item, target_obj, target_missing, flow).await
    }
    .instrument(span)
    .await;
    if let (Some(locker), Some(lock)) = (&deployer.locker, lock) {
        locker.unlock(lock).await;
    }
    result
}

struct ItemCtx {
    deployer: Arc<Deployer>,
    items: Api<DeployItem>,
    plugin: Arc<dyn DeployerPlugin>,
    /// The type responsibility was decided on (annotation, else `spec.type`); hooks are
    /// chosen by it at every stage.
    deploy_item_type: String,
    namespace: String,
    name: String,
}

/// What the plugin step produced, before it is folded into the status.
struct StepOutcome {
    error: Option<StepError>,
    retry_after: Option<Duration>,
    /// The item's finalizer was removed: the object is gone or going.
    released: bool,
}

impl StepOutcome {
    fn failed(err: StepError) -> Self {
        StepOutcome {
            error: Some(err),
            retry_after: None,
            released: false,
        }
    }
}

impl ItemCtx {
    async fn run_step(
        &self,
        mut item: DeployItem,
        target_obj: Option<Target>,
        target_missing: bool,
        flow: Flow,
    ) -> Result<Action, Error> {
        let Flow {
            forced,
            hook_error,
            mut acc,
        } = flow;
        let step = next_step(&item, target_missing);
        let at = now();
        match step {
            JobStep::Finished if forced && hook_error.is_none() && reapplicable(&item) => {
                return self.reapply(item, target_obj, acc).await;
            }
            JobStep::Finished => return Ok(action(&acc, None)),
            JobStep::FailMissingTarget { deleting } => {
                let mut s = item.status();
                s.phase = if deleting {
                    Phase::DeleteFailed
                } else {
                    Phase::Failed
                };
                let err = StepError::new(
                    "reconcilePrivate",
                    "NoTargetFound",
                    "setting deploy item to failed due to missing target",
                );
                status::handle_step_result(&mut s, Some(&err), deleting, &at);
                item.status = Some(s);
                let item = self.write_status(&item).await?;
                self.deployer
                    .events
                    .warning(&item, &err.reason, err.message.clone());
                self.finished(&item);
                return Ok(action(&acc, None));
            }
            JobStep::FinishUnchanged => {
                let mut s = item.status();
                let generation = item.metadata.generation.unwrap_or_default();
                status::init_status(
                    &mut s,
                    generation,
                    &self.deployer.deployer,
                    Phase::Succeeded,
                    &at,
                );
                status::handle_step_result(&mut s, None, false, &at);
                item.status = Some(s);
                let item = self.write_status(&item).await?;
                self.finished(&item);
                return Ok(action(&acc, None));
            }
            JobStep::Start { deleting } => {
                let mut s = item.status();
                let generation = item.metadata.generation.unwrap_or_default();
                let phase = if deleting {
                    Phase::InitDelete
                } else {
                    Phase::Init
                };
                status::init_status(&mut s, generation, &self.deployer.deployer, phase, &at);
                item.status = Some(s);
                item = self.write_status(&item).await?;
                tracing::Span::current()
                    .record("phase", tracing::field::display(item.status().phase));
                tracing::info!("picked up job");
                self.deployer.events.normal(
                    &item,
                    "PickedUp",
                    format!(
                        "job {} picked up by {} ({})",
                        item.status().job_id,
                        self.deployer.deployer.name,
                        self.deployer.deployer.identity
                    ),
                );
            }
            JobStep::Continue { .. } => {}
        }
        let deleting = item.is_being_deleted();
        let before = item.status();

        // A hook that failed earlier fails the step; otherwise the Before* hooks run, and
        // may stop the reconcile here (the job stays open and is polled as usual).
        let early_error = match &hook_error {
            Some(e) => Some(hook_step_error(e)),
            None => {
                let kind = if self.timed_out(&item, deleting) {
                    HookType::BeforeAbort
                } else if forced {
                    HookType::BeforeForceReconcile
                } else if deleting {
                    HookType::BeforeDelete
                } else {
                    HookType::BeforeReconcile
                };
                match self
                    .before_hooks(kind, &item, target_obj.as_ref(), &mut acc)
                    .await
                {
                    Err(e) => Some(hook_step_error(&e)),
                    Ok(true) => return Ok(action(&acc, Some(self.deployer.requeue_interval))),
                    Ok(false) => None,
                }
            }
        };

        let outcome = match early_error {
            Some(err) => StepOutcome::failed(err),
            None => match self.resolve_target(target_obj.clone(), deleting).await? {
                Err(err) => StepOutcome::failed(err),
                Ok(resolved) => {
                    if deleting {
                        self.delete_path(&mut item, resolved).await?
                    } else {
                        self.reconcile_path(&mut item, resolved).await?
                    }
                }
            },
        };

        let now = now();
        let mut s = item.status();
        if let Some(err) = &outcome.error {
            tracing::warn!(error = %err, "step failed");
            self.deployer
                .events
                .warning(&item, &err.reason, err.message.clone());
        }
        let finished = status::handle_step_result(&mut s, outcome.error.as_ref(), deleting, &now);
        item.status = Some(s);
        if outcome.released {
            // The finalizer is gone; the API server removes the object. A final status write
            // would only race with that, and NotFound is success here.
            if item.status() != before {
                match self.write_status(&item).await {
                    Ok(_) => {}
                    Err(Error::Kube(kube::Error::Api(e))) if e.code == 404 || e.code == 409 => {}
                    Err(e) => return Err(e),
                }
            }
            self.deployer
                .stats
                .jobs_finished
                .fetch_add(1, Ordering::Relaxed);
            tracing::info!("deleted");
            self.end_hooks(&item, target_obj.as_ref(), &mut acc).await;
            return Ok(action(&acc, None));
        }
        if item.status() != before || finished {
            item = self.write_status(&item).await?;
        }
        let flow_requeue = if finished {
            self.finished(&item);
            None
        } else {
            Some(
                outcome
                    .retry_after
                    .unwrap_or(self.deployer.requeue_interval),
            )
        };
        if hook_error.is_none() {
            self.end_hooks(&item, target_obj.as_ref(), &mut acc).await;
        }
        Ok(action(&acc, flow_requeue))
    }

    /// Whether the host is about to end this job for its progressing timeout (the same check
    /// as the host's checkpoint before the plugin call).
    fn timed_out(&self, item: &DeployItem, deleting: bool) -> bool {
        ProgressingTimeout::for_item(item, self.deployer.checkpoint_mode.clone())
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

    fn finished(&self, item: &DeployItem) {
        self.deployer
            .stats
            .jobs_finished
            .fetch_add(1, Ordering::Relaxed);
        if let (Some(uid), Some(rv)) = (&item.metadata.uid, &item.metadata.resource_version) {
            self.deployer.finished.insert(uid, rv);
        }
        let s = item.status();
        tracing::info!(phase = %s.phase, "job finished");
        let note = format!("job {} finished with phase {}", s.job_id, s.phase);
        if s.phase.is_failed() {
            self.deployer.events.warning(item, "JobFailed", note);
        } else {
            self.deployer.events.normal(item, "JobFinished", note);
        }
    }

    /// Reconcile path (contract section 3.5).
    async fn reconcile_path(
        &self,
        item: &mut DeployItem,
        resolved: Option<ResolvedTarget>,
    ) -> Result<StepOutcome, Error> {
        if !item.has_finalizer(FINALIZER) {
            *item = self.add_finalizer(item).await?;
        }
        let context = match self.read_context(item).await? {
            Ok(c) => c,
            Err(err) => return Ok(StepOutcome::failed(err.with_operation("reconcile"))),
        };
        let config_missing = match &item.spec.config {
            None | Some(serde_json::Value::Null) => true,
            Some(serde_json::Value::Object(m)) => m.is_empty(),
            Some(_) => false,
        };
        if config_missing {
            return Ok(StepOutcome::failed(
                StepError::new(
                    "reconcile",
                    "ProviderConfigurationMissing",
                    "provider configuration missing",
                )
                .with_code(codes::CONFIGURATION_PROBLEM),
            ));
        }
        let response = match self
            .call_plugin_checked(item, resolved, context, Call::Reconcile)
            .await
        {
            Ok(r) => r,
            Err(err) => return Ok(StepOutcome::failed(err)),
        };
        let mut s = item.status();
        let retry_after = response.retry_after;
        apply_response(&mut s, &response, &now());
        if response.phase.is_none() && retry_after.is_none() && !s.phase.is_final() {
            // Done and no phase named: the step succeeded.
            s.phase = Phase::Succeeded;
        }
        item.status = Some(s);
        if let Some(values) = &response.exports {
            match exports::write(&self.deployer.client, item, values).await {
                Ok(export_ref) => {
                    let mut s = item.status();
                    s.export_ref = Some(export_ref);
                    item.status = Some(s);
                }
                Err(e) => {
                    return Ok(StepOutcome::failed(StepError::new(
                        "reconcile",
                        "CreateOrUpdateExport",
                        e.to_string(),
                    )));
                }
            }
        }
        Ok(StepOutcome {
            error: None,
            retry_after,
            released: false,
        })
    }

    /// Delete path (contract section 3.6).
    async fn delete_path(
        &self,
        item: &mut DeployItem,
        resolved: Option<ResolvedTarget>,
    ) -> Result<StepOutcome, Error> {
        let without_uninstall =
            item.annotation(annotations::DELETE_WITHOUT_UNINSTALL) == Some("true");
        if !without_uninstall {
            let context = match self.read_context(item).await? {
                Ok(c) => c,
                Err(err) => return Ok(StepOutcome::failed(err.with_operation("delete"))),
            };
            let response = match self
                .call_plugin_checked(item, resolved, context, Call::Delete)
                .await
            {
                Ok(r) => r,
                Err(err) => return Ok(StepOutcome::failed(err)),
            };
            let mut s = item.status();
            apply_response(&mut s, &response, &now());
            if let Some(after) = response.retry_after {
                if s.phase == Phase::InitDelete {
                    s.phase = Phase::Deleting;
                }
                item.status = Some(s);
                return Ok(StepOutcome {
                    error: None,
                    retry_after: Some(after),
                    released: false,
                });
            }
            item.status = Some(s);
            if let Err(e) = exports::delete(&self.deployer.client, item).await {
                return Ok(StepOutcome::failed(StepError::new(
                    "delete",
                    "DeleteExport",
                    e.to_string(),
                )));
            }
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

    /// Calls the plugin and turns its error, or a response the API server would reject, into
    /// the step error. Conditions reported with an error (e.g. validation False) still count.
    async fn call_plugin_checked(
        &self,
        item: &mut DeployItem,
        resolved: Option<ResolvedTarget>,
        context: Option<Context>,
        call: Call,
    ) -> Result<Response, StepError> {
        let operation = if call == Call::Delete {
            "delete"
        } else {
            "reconcile"
        };
        match self.call_plugin(item, resolved, context, call).await {
            Ok(response) => match invalid_provider_status(&response) {
                Some(err) => Err(err.with_operation(operation)),
                None => Ok(response),
            },
            Err(e) => {
                let mut s = item.status();
                apply_conditions(&mut s, &e.conditions, &now());
                item.status = Some(s);
                Err(step_error(e, operation))
            }
        }
    }

    async fn call_plugin(
        &self,
        item: &DeployItem,
        resolved: Option<ResolvedTarget>,
        context: Option<Context>,
        call: Call,
    ) -> Result<Response, DeployerError> {
        let delete = call == Call::Delete;
        let mode = self.deployer.checkpoint_mode.clone();
        let timeout = match call {
            // No job, no initTime: the re-apply gets spec.timeout from now.
            Call::Reapply => ProgressingTimeout::starting_at(item, jiff::Timestamp::now(), mode),
            Call::Reconcile | Call::Delete => ProgressingTimeout::for_item(item, mode),
        }
        .map_err(to_deployer_error)?;
        // Every attempt starts at a checkpoint, so a step that keeps failing with a retryable
        // error still ends in ERR_TIMEOUT once the progressing timeout has passed.
        let checkpoint = self.start_checkpoint(delete);
        timeout
            .check(&checkpoint, jiff::Timestamp::now())
            .map_err(to_deployer_error)?;
        let invocation =
            build_invocation(item, resolved.as_ref(), context.as_ref()).map_err(|e| {
                to_deployer_error(
                    StepError::new("reconcile", "EncodeInvocation", e.to_string())
                        .with_code(codes::INTERNAL_PROBLEM),
                )
            })?;
        let services = Arc::new(
            ItemServices::new(
                timeout.clone(),
                resolved,
                self.deployer.target_clients.clone(),
            )
            .with_secondary_targets(self.deployer.client.clone(), self.namespace.clone()),
        );
        self.deployer
            .stats
            .plugin_calls
            .fetch_add(1, Ordering::Relaxed);
        if delete {
            self.plugin.delete(invocation, services).await
        } else {
            self.plugin.reconcile(invocation, services).await
        }
    }

    /// Resolves and validates the Target. `Ok(Err(_))` is a step error, `Err` an API failure.
    async fn resolve_target(
        &self,
        target: Option<Target>,
        deleting: bool,
    ) -> Result<Result<Option<ResolvedTarget>, StepError>, Error> {
        let operation = if deleting { "delete" } else { "reconcile" };
        let Some(target) = target else {
            return Ok(Ok(None));
        };
        let secret_data =
            super::services::secret_ref_data(&self.deployer.client, &self.namespace, &target)
                .await?;
        let resolved = match target::resolve(&target, secret_data.as_ref()) {
            Ok(r) => r,
            Err(message) => return Ok(Err(StepError::new(operation, "ResolveTarget", message))),
        };
        if let Err(message) = target::validate(&resolved) {
            return Ok(Err(StepError::new(operation, "ValidateTarget", message)
                .with_code(codes::CONFIGURATION_PROBLEM)));
        }
        Ok(Ok(Some(resolved)))
    }

    /// Reads the item's Context. `Ok(Err(_))` is a step error (retried), `Err` an API failure.
    async fn read_context(
        &self,
        item: &DeployItem,
    ) -> Result<Result<Option<Context>, StepError>, Error> {
        let contexts: Api<Context> = Api::namespaced(self.deployer.client.clone(), &self.namespace);
        let name = item.context_name();
        Ok(match contexts.get_opt(name).await? {
            Some(mut c) => match self.resolve_pull_secrets(&c).await? {
                Ok(resolved) => {
                    if !resolved.is_empty() {
                        c.resolved_registry_pull_secrets = Some(resolved);
                    }
                    Ok(Some(c))
                }
                Err(e) => Err(e),
            },
            None => Err(StepError::new(
                "reconcile",
                "GetLandscaperContext",
                format!(
                    "context {:?} not found in namespace {:?}",
                    name, self.namespace
                ),
            )),
        })
    }

    /// Reads the Context's `registryPullSecrets` (data key `.dockerconfigjson`, or
    /// `.ocmcredentialconfig`) so plugins that pull from registries get them with the Context.
    async fn resolve_pull_secrets(
        &self,
        context: &Context,
    ) -> Result<Result<std::collections::BTreeMap<String, String>, StepError>, Error> {
        let mut resolved = std::collections::BTreeMap::new();
        let secrets: Api<Secret> = Api::namespaced(self.deployer.client.clone(), &self.namespace);
        for name in context
            .registry_pull_secrets
            .iter()
            .map(|r| r.name.as_str())
            .filter(|n| !n.is_empty())
        {
            let Some(secret) = secrets.get_opt(name).await? else {
                return Ok(Err(StepError::new(
                    "reconcile",
                    "GetRegistryPullSecret",
                    format!("registry pull secret {name:?} of the context not found"),
                )));
            };
            let data = secret.data.unwrap_or_default();
            let value = [".dockerconfigjson", ".ocmcredentialconfig"]
                .iter()
                .find_map(|k| data.get(*k))
                .map(|v| String::from_utf8_lossy(&v.0).into_owned())
                .unwrap_or_default();
            resolved.insert(name.to_string(), value);
        }
        Ok(Ok(resolved))
    }

    async fn write_status(&self, item: &DeployItem) -> Result<DeployItem, Error> {
        Ok(self
            .items
            .replace_status(&self.name, &PostParams::default(), item)
            .await?)
    }

    async fn add_finalizer(&self, item: &DeployItem) -> Result<DeployItem, Error> {
        let mut finalizers = item.metadata.finalizers.clone().unwrap_or_default();
        finalizers.push(FINALIZER.to_string());
        self.patch_metadata(item, json!({ "finalizers": finalizers }))
            .await
    }

    async fn remove_finalizer(&self, item: &DeployItem) -> Result<(), Error> {
        let finalizers: Vec<String> = item
            .metadata
            .finalizers
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|f| f != FINALIZER)
            .collect();
        match self
            .patch_metadata(item, json!({ "finalizers": finalizers }))
            .await
        {
            Ok(_) => Ok(()),
            Err(Error::Kube(kube::Error::Api(e))) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// A merge patch of `metadata`, conditional on the item's resourceVersion.
    async fn patch_metadata(
        &self,
        item: &DeployItem,
        metadata: serde_json::Value,
    ) -> Result<DeployItem, Error> {
        let mut metadata = metadata;
        metadata["resourceVersion"] = json!(item.metadata.resource_version);
        let patch = json!({ "metadata": metadata });
        Ok(self
            .items
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?)
    }

    /// `operation: test-reconcile`: remove the annotation (spec write), then start a fresh job
    /// in memory with a random jobID.
    async fn start_test_reconcile(&self, item: &DeployItem) -> Result<DeployItem, Error> {
        let mut updated = self
            .patch_metadata(
                item,
                json!({ "annotations": { annotations::OPERATION: null } }),
            )
            .await?;
        let mut s = updated.status();
        s.job_id = uuid::Uuid::new_v4().to_string();
        s.transition_times = Some(TransitionTimes {
            trigger_time: Some(now()),
            ..Default::default()
        });
        updated.status = Some(s);
        Ok(updated)
    }
}

/// Which plugin call a step makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    Reconcile,
    Delete,
    /// A hook-forced re-apply of a finished item (reconcile, outside any job).
    Reapply,
}

/// `status.providerStatus` is an embedded resource: a real API server rejects it without
/// `apiVersion` and `kind`. Caught here, so the item fails with a message instead of its status
/// write being rejected on every retry.
fn invalid_provider_status(response: &Response) -> Option<StepError> {
    let ps = response.provider_status.as_ref()?;
    let has = |k: &str| {
        ps.get(k)
            .and_then(|v| v.as_str())
            .is_some_and(|v| !v.is_empty())
    };
    if ps.is_object() && has("apiVersion") && has("kind") {
        return None;
    }
    Some(
        StepError::new(
            "reconcile",
            "InvalidProviderStatus",
            "the plugin returned a providerStatus without apiVersion and kind; status.providerStatus is an embedded Kubernetes object and needs both",
        )
        .with_code(codes::INTERNAL_PROBLEM),
    )
}

/// Folds a plugin response into the status (the host owns condition timestamps).
fn apply_response(s: &mut crate::landscaper::DeployItemStatus, response: &Response, now: &str) {
    if let Some(phase) = &response.phase {
        s.phase = Phase::from(phase.as_str());
    } else if response.retry_after.is_some() && s.phase == Phase::Init {
        s.phase = Phase::Progressing;
    }
    if let Some(ps) = &response.provider_status {
        s.provider_status = Some(ps.clone());
    }
    apply_conditions(s, &response.conditions, now);
}

/// Applies plugin-reported conditions with the host's timestamps.
fn apply_conditions(
    s: &mut crate::landscaper::DeployItemStatus,
    conditions: &[plugin_runtime::ConditionReport],
    now: &str,
) {
    let updates: Vec<ConditionUpdate> = conditions
        .iter()
        .map(|c| ConditionUpdate {
            type_: c.type_.clone(),
            status: c.status.as_str().to_string(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            codes: c.codes.clone(),
        })
        .collect();
    status::update_conditions(&mut s.conditions, &updates, now);
}

fn build_invocation(
    item: &DeployItem,
    target: Option<&ResolvedTarget>,
    context: Option<&Context>,
) -> Result<Invocation, serde_json::Error> {
    Ok(Invocation {
        deploy_item: serde_json::to_value(item)?,
        target: target.cloned(),
        context: context.cloned(),
        previous_provider_status: item.status.as_ref().and_then(|s| s.provider_status.clone()),
    })
}

fn step_error(e: DeployerError, default_operation: &str) -> StepError {
    StepError {
        operation: if e.operation.is_empty() {
            default_operation.to_string()
        } else {
            e.operation
        },
        reason: if e.reason.is_empty() {
            "Reconcile".to_string()
        } else {
            e.reason
        },
        message: e.message,
        codes: e.codes,
    }
}

fn to_deployer_error(e: StepError) -> DeployerError {
    DeployerError {
        codes: e.codes,
        operation: e.operation,
        reason: e.reason,
        message: e.message,
        ..Default::default()
    }
}

/// Now, as a Kubernetes timestamp (RFC 3339, seconds).
pub fn now() -> String {
    let now = jiff::Timestamp::now();
    jiff::Timestamp::from_second(now.as_second())
        .unwrap_or(now)
        .to_string()
}
