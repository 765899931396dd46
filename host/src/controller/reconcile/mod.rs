//! One reconcile of one DeployItem, as stages that run in this order and hand each other plain
//! values:
//!
//! ```text
//!  admit ───────► lock ──────► decide ──────► invoke ──────► commit
//!  admit.rs       (here)       decide.rs      invoke.rs      commit.rs
//!  Start hook,    SyncObject   the job step   Target,        the step's result
//!  item memory,   (several     (contract),    Context,       → status (the one
//!  type,          replicas     pickup write,  finalizer,     write path), export,
//!  Target and     only), then  Before* hooks  plugin call    events, End hook
//!  selectors,     re-read
//!  During/After/
//!  ShouldReconcile
//! ```
//!
//! An item that is not ours leaves `admit` before any write. A 409 on any write aborts the
//! reconcile (the item is re-read and decided again); other API errors back off per item.
//! Hook points are in `hooks`; the hook-forced re-apply of finished items in `reapply`.

use std::sync::Arc;

use kube::api::Api;
use kube::runtime::controller::Action;
use plugin_runtime::DeployerPlugin;
use tracing::Instrument;

mod admit;
mod commit;
mod decide;
mod hooks;
mod invoke;
mod reapply;

use super::Watched;
use super::context::{Context, Error};
use crate::contract::StepError;
use crate::landscaper::{DeployItem, Target};
use crate::locking::{Lock, LockOutcome};
use admit::{Admission, Admitted};

/// Reconciles the item the watch delivered.
pub async fn reconcile(watched: Watched<'_>, ctx: &Arc<Context>) -> Result<Action, Error> {
    let Admitted {
        mut item,
        deploy_item_type,
        plugin,
        target,
        flow,
    } = match admit::admit(watched, ctx).await? {
        Admission::Skip(action) => return Ok(action),
        Admission::Admitted(admitted) => *admitted,
    };
    let namespace = item.metadata.namespace.clone().unwrap_or_default();
    let name = item.metadata.name.clone().unwrap_or_default();
    let items: Api<DeployItem> = Api::namespaced(ctx.client.clone(), &namespace);
    let lock = match lock(ctx, &items, &mut item).await? {
        Locked::Elsewhere(action) => return Ok(action),
        Locked::Here(lock) => lock,
    };
    let being_deleted = item.is_being_deleted();
    let status = item.status();
    let span = tracing::info_span!(
        "reconcile",
        item = %format!("{namespace}/{name}"),
        job = %status.job_id,
        phase = %status.phase,
        plugin = %plugin.description().name
    );
    let item_ctx = ItemCtx {
        ctx: ctx.clone(),
        items,
        plugin,
        deploy_item_type,
        namespace,
        name,
    };
    let result = async {
        match item_ctx.decide(item, &target, flow).await? {
            decide::Decided::Done(action) => Ok(action),
            decide::Decided::Run(run) => {
                let (step, mut item) = *run;
                let outcome = item_ctx.invoke(&mut item, &target, &step).await?;
                item_ctx.commit(item, &target, step, outcome).await
            }
        }
    }
    .instrument(span)
    .await;
    if let (Some(locker), Some(lock)) = (&ctx.locker, lock) {
        // An item being deleted may be gone once its job ends (the finalizer removed, or the
        // removal answered with an error after it applied): then its lock goes with it.
        locker.unlock(lock, being_deleted).await;
    }
    result
}

/// The outcome of the lock stage.
enum Locked {
    /// Locked by this replica (`None`: no locking configured).
    Here(Option<Lock>),
    /// Another replica holds the lock: try again later.
    Elsewhere(Action),
}

/// Takes the item's SyncObject (only when several replicas may run), then re-reads the item:
/// another replica may have finished the job between our read and our lock.
async fn lock(
    ctx: &Context,
    items: &Api<DeployItem>,
    item: &mut DeployItem,
) -> Result<Locked, Error> {
    let Some(locker) = &ctx.locker else {
        return Ok(Locked::Here(None));
    };
    let namespace = item.metadata.namespace.as_deref().unwrap_or_default();
    let name = item.metadata.name.as_deref().unwrap_or_default();
    let uid = item.metadata.uid.as_deref().unwrap_or_default();
    let lock = match locker.lock(namespace, name, uid).await? {
        LockOutcome::NotLocked => {
            tracing::debug!(item = %format!("{namespace}/{name}"), "locked by another replica");
            return Ok(Locked::Elsewhere(Action::requeue(
                locker.config().retry_after,
            )));
        }
        LockOutcome::Locked(lock) => lock,
    };
    match items.get_opt(name).await {
        Ok(Some(fresh)) if fresh.metadata.uid == item.metadata.uid => {
            *item = fresh;
            Ok(Locked::Here(Some(lock)))
        }
        // Gone, or deleted and created again: its lock goes with it.
        other => {
            locker.unlock(lock, true).await;
            other?;
            Ok(Locked::Elsewhere(Action::await_change()))
        }
    }
}

/// What every stage after the lock knows about the item being reconciled.
struct ItemCtx {
    ctx: Arc<Context>,
    items: Api<DeployItem>,
    plugin: Arc<dyn DeployerPlugin>,
    /// The type responsibility was decided on (annotation, else `spec.type`); hooks are
    /// chosen by it at every stage.
    deploy_item_type: String,
    namespace: String,
    name: String,
}

/// The item's Target as responsibility found it.
#[derive(Clone, Debug, Default)]
struct TargetRef {
    /// The Target object, if the item names one that exists.
    object: Option<Target>,
    /// The item names a Target that does not exist in its namespace.
    missing: bool,
}

/// Why a stage could not produce its value: a step error is recorded on the item (the job
/// goes on, or fails by its codes); an API error aborts this reconcile (retried after backoff).
#[derive(Debug)]
enum StageError {
    Step(StepError),
    Api(Error),
}

impl From<StepError> for StageError {
    fn from(e: StepError) -> Self {
        StageError::Step(e)
    }
}

impl From<Error> for StageError {
    fn from(e: Error) -> Self {
        StageError::Api(e)
    }
}

impl From<kube::Error> for StageError {
    fn from(e: kube::Error) -> Self {
        StageError::Api(e.into())
    }
}

/// A DeployItem as hooks see it, as [`for_plugins`] makes it, but encoded straight to JSON text
/// (no `serde_json::Value` in between: this runs for every version of every item a hook sees).
pub(crate) fn item_json_for_plugins(item: &DeployItem) -> serde_json::Result<String> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct View<'a> {
        api_version: &'a str,
        kind: &'a str,
        metadata: &'a ObjectMeta,
        spec: &'a crate::landscaper::DeployItemSpec,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: &'a Option<crate::landscaper::DeployItemStatus>,
    }
    serde_json::to_string(&View {
        api_version: &item.api_version,
        kind: &item.kind,
        // Read without managedFields (`landscaper_model::meta`).
        metadata: &item.metadata,
        spec: &item.spec,
        status: &item.status,
    })
}

/// An object as plugins and hooks see it: without `metadata.managedFields`, which only the API
/// server and field managers read, and which would otherwise be most of every encoded item.
pub(crate) fn for_plugins(mut v: serde_json::Value) -> serde_json::Value {
    if let Some(m) = v.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        m.remove("managedFields");
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The direct encoding and the `Value` route give the same JSON, minus managedFields.
    #[test]
    fn item_json_for_plugins_is_the_item_without_managed_fields() {
        let item: DeployItem = serde_json::from_value(serde_json::json!({
            "apiVersion": "landscaper.gardener.cloud/v1alpha1",
            "kind": "DeployItem",
            "metadata": {
                "name": "a", "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
                "generation": 2, "creationTimestamp": "2026-11-26T00:00:00Z",
                "labels": {"l": "1"}, "annotations": {"a": "b"},
                "finalizers": ["finalizer.landscaper.gardener.cloud"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "u-0"}],
                "managedFields": [{"manager": "landscaper", "operation": "Update",
                                   "apiVersion": "landscaper.gardener.cloud/v1alpha1",
                                   "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]
            },
            "spec": {"type": "landscaper.gardener.cloud/mock", "config": {"phase": "Succeeded"}},
            "status": {"phase": "Succeeded", "jobID": "j", "jobIDFinished": "j"}
        }))
        .unwrap();
        let direct: serde_json::Value =
            serde_json::from_str(&item_json_for_plugins(&item).unwrap()).unwrap();
        let via_value = for_plugins(serde_json::to_value(&item).unwrap());
        assert_eq!(direct, via_value);
        assert!(direct["metadata"].get("managedFields").is_none());
        assert_eq!(direct["metadata"]["ownerReferences"][0]["name"], "o");
    }
}
