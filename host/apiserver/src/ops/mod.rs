//! API semantics on top of the store (all under the store lock): create,
//! update (main and `/status`), patch, delete (finalizers, preconditions,
//! propagation, ownerReference GC, namespace termination), list and get.
//! Enforces: no-op writes are not written, `generation` bumps only on spec
//! changes, status/spec separation, optimistic concurrency.
//!
//! One file per topic: `admission` (shape checks, defaults and validation a write passes
//! before storage), `read` (get, list), `write` (create, update, patch), `delete` (finalizers,
//! preconditions, propagation, ownerReference GC, namespace termination).
//!
//! Must not touch: HTTP (that is `routes`) or the store's own bookkeeping (`store`).

mod admission;
mod delete;
mod read;
mod write;

use crate::store::Obj;

/// The largest object etcd stores (its default `--max-request-bytes`, 1.5 MiB).
pub(crate) const MAX_STORED_BYTES: usize = 3 << 19;

/// Request options shared by all writes.
#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    pub dry_run: bool,
    pub field_manager: Option<String>,
    pub force: bool,
    /// `fieldValidation=Strict`: a field the schema does not know is an error, not pruned
    /// silently (kubectl sends it by default).
    pub strict_fields: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Merge,
    Json,
    Strategic,
    Apply,
}

/// DeleteOptions (body and query).
#[derive(Debug, Clone, Default)]
pub struct DeleteOpts {
    pub propagation: Option<String>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub dry_run: bool,
}

/// Outcome of a DELETE.
#[derive(Debug, Clone)]
pub enum Deleted {
    /// Removed; the last state (with the deletion's rv).
    Gone(Obj),
    /// Kept because of finalizers; `deletionTimestamp` is set.
    Terminating(Obj),
}
