//! What every stage after the lock shares: the item's [`ItemCtx`], the [`TargetRef`]
//! responsibility found, and [`StageError`], why a stage could not produce its value.
//!
//! Owns: these three types. Must not touch: the stages themselves (they stand on this file).

use std::sync::Arc;

use kube::api::Api;
use plugin_runtime::DeployerPlugin;

use crate::contract::StepError;
use crate::controller::context::{Context, Error};
use crate::landscaper::{DeployItem, Target};

/// What every stage after the lock knows about the item being reconciled.
pub(super) struct ItemCtx {
    pub(super) ctx: Arc<Context>,
    pub(super) items: Api<DeployItem>,
    pub(super) plugin: Arc<dyn DeployerPlugin>,
    /// The type responsibility was decided on (annotation, else `spec.type`); hooks are
    /// chosen by it at every stage.
    pub(super) deploy_item_type: String,
    pub(super) namespace: String,
    pub(super) name: String,
    /// Set when the plugin failed because its Target cluster could not be reached: when that
    /// cluster is due to be tried again (the item is requeued then, not at the usual interval).
    pub(super) retry_hint: std::sync::Mutex<Option<std::time::Duration>>,
}

/// The item's Target as responsibility found it.
#[derive(Clone, Debug, Default)]
pub(super) struct TargetRef {
    /// The Target object, if the item names one that exists.
    pub(super) object: Option<Target>,
    /// The item names a Target that does not exist in its namespace.
    pub(super) missing: bool,
}

/// Why a stage could not produce its value: a step error is recorded on the item (the job
/// goes on, or fails by its codes); an API error aborts this reconcile (retried after backoff).
#[derive(Debug)]
pub(super) enum StageError {
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
