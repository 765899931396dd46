//! The host side of every WIT import, one module per capability, and which plugin is granted
//! which: a capability a plugin is not granted is not linked, so a component that imports it
//! fails to load (with the import named), instead of failing at call time.
//!
//! | capability | WIT | granted to |
//! |---|---|---|
//! | [`log`] | `log` | every plugin |
//! | [`clock`] | `clock` | every plugin |
//! | [`progress`] | `progress` | deployers |
//! | [`target_cluster`] | `kubernetes` (1.0), `cluster` (1.1) | deployers |
//! | [`secondary_targets`] | `secondary-targets` (1.1) | deployers |
//! | [`fetch`] | `fetch` (1.2) | deployers |
//! | [`ocm`] | `ocm` (1.3) | deployers |
//! | [`cluster_info`] | `cluster-info` (1.4) | deployers |
//! | [`http`] | `wasi:http/outgoing-handler@0.2` (1.5) | deployers |
//!
//! Hooks (components that export `hooks` but not `deployer`) get `log` and `clock` only: they
//! see the item and answer, they have no Kubernetes access. WASI p2 is linked for every plugin
//! so std-based guests instantiate, but the store's WASI context grants nothing
//! (`crate::wasm::store`).
//!
//! Adding a capability: a WIT interface in a new minor version of `wit/`, a method on
//! [`crate::HostServices`] if it needs the host, a module here implementing the binding's `Host`
//! trait for `State`, and a line in [`linker`] for the plugins granted it.
//!
//! Must not touch: Kubernetes or any resource itself — everything goes through
//! `HostServices`, which the controller scopes to the item.

pub(crate) mod clock;
pub(crate) mod cluster_info;
pub(crate) mod fetch;
pub(crate) mod http;
pub(crate) mod log;
pub(crate) mod ocm;
pub(crate) mod progress;
pub(crate) mod secondary_targets;
pub(crate) mod target_cluster;

use anyhow::Result;
use wasmtime::Engine;
use wasmtime::component::{Component, HasSelf, Linker};

use crate::wasm::store::State;

pub(crate) use crate::wasm::bindings::wasm_deployer::plugin as wit;

/// What a component is granted, decided by what it exports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Grants {
    /// Exports `deployer` (maybe `hooks` too): every capability.
    Deployer,
    /// Exports only `hooks`: `log` and `clock`.
    HookOnly,
}

impl Grants {
    /// The grants of `component`, from its exports.
    pub(crate) fn of(component: &Component, engine: &Engine) -> Self {
        let exports_deployer = component
            .component_type()
            .exports(engine)
            .any(|(name, _)| is_interface(name, "wasm-deployer:plugin/deployer"));
        if exports_deployer {
            Grants::Deployer
        } else {
            Grants::HookOnly
        }
    }
}

/// `name` is `interface` at any version (`…@1.1.0`) or unversioned.
fn is_interface(name: &str, interface: &str) -> bool {
    name.strip_prefix(interface)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('@'))
}

/// A linker with exactly the imports of `grants`.
pub(crate) fn linker(engine: &Engine, grants: Grants) -> Result<Linker<State>> {
    let mut linker: Linker<State> = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wit::types::add_to_linker::<_, HasSelf<State>>(&mut linker, |s| s)?;
    wit::log::add_to_linker::<_, HasSelf<State>>(&mut linker, |s| s)?;
    wit::clock::add_to_linker::<_, HasSelf<State>>(&mut linker, |s| s)?;
    if grants == Grants::Deployer {
        wit::progress::add_to_linker::<_, HasSelf<State>>(&mut linker, |s| s)?;
        wit::kubernetes::add_to_linker::<_, HasSelf<State>>(&mut linker, |s| s)?;
        wit::cluster::add_to_linker::<_, HasSelf<State>>(&mut linker, |s| s)?;
        wit::secondary_targets::add_to_linker::<_, HasSelf<State>>(&mut linker, |s| s)?;
        wit::fetch::add_to_linker::<_, HasSelf<State>>(&mut linker, |s| s)?;
        wit::ocm::add_to_linker::<_, HasSelf<State>>(&mut linker, |s| s)?;
        wit::cluster_info::add_to_linker::<_, HasSelf<State>>(&mut linker, |s| s)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    }
    Ok(linker)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interfaces_match_at_any_version_only_by_their_full_name() {
        let d = "wasm-deployer:plugin/deployer";
        assert!(is_interface("wasm-deployer:plugin/deployer@1.0.0", d));
        assert!(is_interface("wasm-deployer:plugin/deployer@1.1.0", d));
        assert!(is_interface("wasm-deployer:plugin/deployer", d));
        assert!(!is_interface(
            "wasm-deployer:plugin/deployer-extra@1.0.0",
            d
        ));
        assert!(!is_interface("wasm-deployer:plugin/hooks@1.1.0", d));
    }
}
