//! wasm-deployer's host: a Kubernetes deployer for Gardener Landscaper that implements the
//! deployer contract once, natively, and runs the deployer logic as WebAssembly components.
//!
//! Data flows one way: [`controller`] (watch) → [`contract::responsibility`] and
//! [`targetselector`] (responsibility) → [`contract`] (job protocol, status) → plugin
//! (`plugin-runtime`) → status write. [`dev`] runs all of it against the embedded API server.

pub mod allocator;
pub mod apierrors;
pub mod capabilities;
pub mod cli;
pub mod clock;
pub mod config;
pub mod container;
pub mod contract;
pub mod controller;
pub mod crds;
pub mod dev;
pub mod hooks;
pub mod image;
pub mod landscaper;
pub mod limits;
pub mod locking;
pub mod membership;
pub mod metrics;
pub mod oci;
pub mod ocm;
pub mod plugin_sources;
pub mod plugins;
pub mod shrink;
pub mod targetselector;
pub mod telemetry;

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
