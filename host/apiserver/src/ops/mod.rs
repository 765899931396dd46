//! API semantics on top of the store (all under the store lock): create,
//! update (main and `/status`), patch, delete (finalizers, preconditions,
//! propagation, ownerReference GC, namespace termination), list and get.
//! Enforces: no-op writes are not written, `generation` bumps only on spec
//! changes, status/spec separation, optimistic concurrency.
//!
//! One file per topic: `options` (what a request asks for, what a DELETE did), `admission`
//! (shape checks, defaults and validation a write passes before storage), `read` (get, list),
//! `write` (create, update, patch), `delete` (finalizers, preconditions, propagation,
//! ownerReference GC, namespace termination).
//!
//! Must not touch: HTTP (that is `routes`) or the store's own bookkeeping (`store`).

mod admission;
mod delete;
mod options;
mod read;
mod write;

pub use options::{DeleteOpts, Deleted, PatchKind, WriteOpts};
