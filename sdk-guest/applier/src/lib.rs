//! # manifest-applier — apply Kubernetes manifests from a deployer plugin
//!
//! The machinery of Landscaper's manifest deployer (contract section 6), for any plugin that
//! deploys a list of manifests to its Target: the manifest deployer today, the helm deployer's
//! template mode (`helmDeployment: false`) next. Every function does what it can without
//! waiting and answers "not yet" ([`wait::Pending`]) instead of blocking an instance; the
//! deployer persists what it needs in its providerStatus and is called again.
//!
//! Modules: [`spec`] (what to apply and its validation), [`applier`] (one apply pass:
//! `List` expansion, discovery order, policies, update strategies, the managed list),
//! [`strategies`] (the merge and update rules), [`readiness`] (default per kind and custom
//! checks), [`exports`] (jsonPath and `fromObjectRef`), [`deletion`] (policies and deletion
//! groups), [`jsonpath`] (Kubernetes JSONPath), [`cluster`] (the item's Target or a secondary
//! Target), [`wait`].
//!
//! Owns: reading and writing objects on the Target through the SDK's Kubernetes capability.
//! Must not touch: the DeployItem's status, the export Secret, finalizers (the host owns
//! those), or a deployer's ProviderConfiguration envelope (each decodes its own into a
//! [`spec::Spec`]). Builds natively and for `wasm32-wasip2`; no kube, no runtime.
//!
//! ```no_run
//! use manifest_applier::{Options, applier, spec::Spec};
//! # fn demo(ctx: &sdk_guest::Ctx, spec: &Spec) -> Result<(), sdk_guest::DeployerError> {
//! const MINE: Options = Options {
//!     owner_label: "helm.deployer.landscaper.gardener.cloud/deployitem",
//!     field_manager: "helm.deployer.landscaper.gardener.cloud",
//!     default_readiness_checkpoint: "helm deployer: default readiness checks",
//!     custom_readiness_checkpoint: "helm deployer: custom readiness checks",
//!     config_operation: "InitHelmOperation",
//! };
//! spec.validate()?;
//! let outcome = applier::apply(ctx, "my-item", spec, &MINE, &[])?;
//! let _applied = outcome.applied; // store in providerStatus, then readiness, exports …
//! # Ok(()) }
//! ```

pub mod applier;
pub mod cluster;
pub mod deletion;
pub mod exports;
pub mod jsonpath;
pub mod readiness;
pub mod spec;
pub mod strategies;
pub mod wait;

/// What the unit tests share: a host that only answers Kubernetes calls, and a deployer's
/// options.
#[cfg(test)]
mod test_host {
    use sdk_guest::{DeployerError, KubeOp, LogLevel, NativeHost};
    use std::time::Duration;

    /// Options of the tests' deployer.
    pub(crate) const OPTS: crate::Options = crate::Options {
        owner_label: "test/item",
        field_manager: "test",
        default_readiness_checkpoint: "test: default readiness checks",
        custom_readiness_checkpoint: "test: custom readiness checks",
        config_operation: "Test",
    };

    /// A host whose Kubernetes calls the closure answers; no logs, no deadline.
    pub(crate) struct KubeOnly<F>(pub F);

    impl<F> NativeHost for KubeOnly<F>
    where
        F: Fn(KubeOp) -> Result<Option<String>, DeployerError> + Send + Sync,
    {
        fn log(&self, _level: LogLevel, _message: &str) {}
        fn checkpoint(&self, _name: &str) -> Result<(), DeployerError> {
            Ok(())
        }
        fn remaining(&self) -> Option<Duration> {
            None
        }
        fn kube(&self, op: KubeOp) -> Result<Option<String>, DeployerError> {
            (self.0)(op)
        }
    }
}

/// What makes the applier one deployer's: the label that marks the objects it owns, the field
/// manager of its server-side applies, and the names of its readiness checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Ownership label on every object created or updated (value: the DeployItem's name).
    pub owner_label: &'static str,
    /// Field manager of server-side apply (`updateStrategy: patch`).
    pub field_manager: &'static str,
    /// Checkpoint of the default readiness check.
    pub default_readiness_checkpoint: &'static str,
    /// Checkpoint of the custom readiness checks.
    pub custom_readiness_checkpoint: &'static str,
    /// Operation of configuration errors found while applying (e.g. a `List` item that is not
    /// an object); Landscaper's manifest deployer says `InitManifestOperation`.
    pub config_operation: &'static str,
}

/// Checkpoints of Landscaper's shared deployer library (contract 3.9), the same for every
/// deployer that applies manifests.
pub mod checkpoints {
    /// Before orphans are deleted.
    pub const CLEANUP: &str = "deployer: cleanup orphaned";
    /// Classifying the managed objects.
    pub const PROCESS_MANAGED: &str = "deployer: process managed resource manifests";
    /// Classifying the manifests.
    pub const PROCESS: &str = "deployer: process manifests";
    /// Applying each manifest.
    pub const APPLY: &str = "deployer: apply manifests";
    /// Deleting objects.
    pub const DELETE: &str = "deployer: delete resources";
    /// Each object of a readiness check.
    pub const DURING_READINESS: &str = "deployer: during readiness check";
}
