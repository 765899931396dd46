//! OCI registries, the one client of the host: plugin delivery (`plugin_sources`), plugins'
//! downloads (`capabilities::fetch`), OCM component versions (`ocm`) and images (`image`) all
//! stand on it.
//!
//! ```text
//! client        clients: plain HTTP, extra CAs, credentials; parse, resolve
//! credentials   Docker configs, PEM bundles, one item's Context (pull secrets, ocmConfig)
//! ocm_config    OCM credential configurations → Docker configs and registry CAs
//! allowlist     `fetch.allow`
//! blob_cache    content-addressed blobs, the size limit
//! session       one repository for one item: manifest, blobs, layers
//! error         registry errors as Landscaper codes
//! wasm          wasm components as artifacts (pull, push)
//! signature     cosign signature artifacts (read, write)
//! ```
//!
//! Owns: talking to registries. Must not touch: what is fetched means (charts, components,
//! descriptors are the callers'), nor trusting it (the caller checks digests and signatures
//! before anything is compiled).

pub mod allowlist;
pub mod blob_cache;
pub mod client;
pub mod credentials;
pub mod error;
pub mod ocm_config;
pub mod session;
pub mod signature;
pub mod wasm;

pub use blob_cache::Blobs;
pub use client::{
    RegistryOptions, client_for, client_with, install_crypto, parse, repository_of, resolve,
};
pub use credentials::{ItemContext, RegistryCredentials, auth_for, pem_certificates};
pub use session::{Registries, Session};
pub use signature::{push_signature, signatures};
pub use wasm::{LEGACY_WASM_LAYER, Pulled, WASM_CONFIG_V0, WASM_LAYER, pull, push, push_as};
