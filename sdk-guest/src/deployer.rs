//! The trait a deployer plugin implements.
//!
//! Owns: [`Deployer`]. Must not touch: the WIT glue (`wasm/` calls it).

use crate::{Ctx, DeployerError, Description, Invocation, Response};

/// A deployer: what a plugin implements.
///
/// All functions are associated functions (no `self`): a plugin instance is created fresh
/// for every invocation, so there is no state to keep between calls except what the
/// DeployItem status (phase, providerStatus) carries.
pub trait Deployer {
    /// Name, version and the DeployItem types handled. Called once at load time.
    fn describe() -> Description;
    /// One reconcile step for an item without deletionTimestamp. Must be idempotent.
    fn reconcile(ctx: &Ctx, inv: Invocation) -> Result<Response, DeployerError>;
    /// One delete step for an item with deletionTimestamp.
    fn delete(ctx: &Ctx, inv: Invocation) -> Result<Response, DeployerError>;
}
