//! Landscaper's API as the host sees it: the `DeployItem`, `Target` and `Context` resources,
//! the annotation, label and finalizer names, phases and error codes.
//!
//! This module only describes data (serde types and constants, exactly as
//! `../shared/reference/landscaper-contract.md` section 1 and 2 name them). It performs no I/O and
//! makes no decisions; the contract module decides, the controller talks to the API server.

mod duration;
mod types;

pub use duration::{GoDuration, parse_go_duration};
pub use types::*;

/// API group and version of every Landscaper core resource.
pub const GROUP: &str = "landscaper.gardener.cloud";
pub const VERSION: &str = "v1alpha1";
pub const API_VERSION: &str = "landscaper.gardener.cloud/v1alpha1";

/// The finalizer the Landscaper and every deployer put on a DeployItem.
pub const FINALIZER: &str = "finalizer.landscaper.gardener.cloud";

/// Annotations on DeployItems (contract section 2.1).
pub mod annotations {
    pub const DEPLOYER_TYPE: &str = "landscaper.gardener.cloud/deployer-type";
    pub const DEPLOYER_TARGET_NAME: &str = "landscaper.gardener.cloud/deployer-target-name";
    /// Value of [`DEPLOYER_TARGET_NAME`] that means "this item has no target".
    pub const NO_TARGET_NAME: &str = ".noTargetName";
    pub const OPERATION: &str = "landscaper.gardener.cloud/operation";
    pub const DELETE_WITHOUT_UNINSTALL: &str = "landscaper.gardener.cloud/delete-without-uninstall";
}

/// Values of the `landscaper.gardener.cloud/operation` annotation.
pub mod operations {
    pub const RECONCILE: &str = "reconcile";
    pub const FORCE_RECONCILE: &str = "force-reconcile";
    pub const TEST_RECONCILE: &str = "test-reconcile";
    pub const INTERRUPT: &str = "interrupt";
}

/// Landscaper's `ErrorCode` values (contract section 1.2.5): the SDK's constants, shared with
/// plugins, plus the host's check for codes that end a job.
pub mod codes {
    pub use sdk_guest::codes::*;

    /// True for the codes that end a job as `Failed` / `DeleteFailed` instead of retrying it.
    pub fn is_unrecoverable(code: &str) -> bool {
        UNRECOVERABLE.contains(&code)
    }
}

/// Target type of a Kubernetes cluster target.
pub const KUBERNETES_CLUSTER_TARGET_TYPE: &str = "landscaper.gardener.cloud/kubernetes-cluster";

/// Name of the Context an item uses when `spec.context` is empty.
pub const DEFAULT_CONTEXT: &str = "default";
