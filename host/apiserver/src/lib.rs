//! Embedded Kubernetes-compatible API server.
//!
//! An axum [`Router`](axum::Router) over an in-memory store, usable
//! in-process through [`ApiServer::client`] (no socket) and served over HTTP
//! on loopback by [`ApiServer::serve`] / [`run_standalone`] for kubectl.
//! See `docs/apiserver.md` for the implemented semantics and simplifications.
//!
//! Modules: `server` ([`ApiServer`]: state, options, counters, installing objects), `http`
//! (the router, in-process client, serving, [`run_standalone`]), [`store`] (objects, rv, history, commit), [`ops`] (API
//! semantics), [`registry`] (resource types), [`routes`] (HTTP), [`watch`],
//! [`patch`], [`apply`] (server-side apply), [`selectors`], [`discovery`],
//! [`openapi`] (stub), [`persist`], [`faults`], [`status`] (error bodies),
//! [`schema`] (CRD validation, pruning, defaulting), [`builtin`] (built-in
//! kinds' defaults and validation), [`simulate`] (dev-mode workload status),
//! [`auth`] (authentication, only with [`Options::rbac`]), [`rbac`] (the RBAC authorizer),
//! [`reviews`] (TokenRequest, access and rules reviews), [`tls`] (HTTPS with a generated
//! certificate, [`Options::tls`]), [`tokens`] (kube-controller-manager's ServiceAccount token
//! controller: legacy token Secrets, and their tokens' authentication), `webhooks` (validating
//! admission webhooks: configurations, matching, the AdmissionReview calls).

pub mod apply;
pub mod auth;
pub mod builtin;
pub mod discovery;
pub mod faults;
mod http;
pub mod openapi;
pub mod ops;
pub mod patch;
pub mod persist;
pub mod proto;
pub mod rbac;
pub mod registry;
pub mod reviews;
mod routes;
pub mod schema;
pub mod selectors;
mod server;
pub mod simulate;
pub mod status;
pub mod store;
pub mod table;
pub mod tls;
pub mod tokens;
pub mod views;
pub mod watch;
mod webhooks;

pub use faults::FaultConfig;
pub use http::{LoopbackServing, run_standalone, run_standalone_until, write_kubeconfig};
pub use server::{ApiServer, AuditEntry, Options, Stats};
pub use status::ApiError;
