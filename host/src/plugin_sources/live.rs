//! The plugins serving right now, swapped as a whole when delivery brings a new good set.
//!
//! Owns: the serving set and its change signal. Must not touch: loading or trusting plugins.

use std::sync::Arc;

use plugin_runtime::{DeployerPlugin, PluginRegistry};

/// The deployers and hooks serving right now. Plugin delivery swaps the whole set atomically
/// ([`LivePlugins::replace`]); a call in flight holds the `Arc` of the plugin it started with and
/// finishes on that version.
pub struct LivePlugins {
    current: std::sync::RwLock<Arc<PluginRegistry>>,
    generation: tokio::sync::watch::Sender<u64>,
    /// Plugins of the plugin directory still compiling after start-up (metric
    /// `wasm_deployer_plugins_loading`).
    pub loading: Arc<std::sync::atomic::AtomicUsize>,
}

impl LivePlugins {
    pub fn new(registry: Arc<PluginRegistry>) -> Self {
        LivePlugins {
            current: std::sync::RwLock::new(registry),
            generation: tokio::sync::watch::Sender::new(0),
            loading: Default::default(),
        }
    }

    /// The set serving now.
    pub fn current(&self) -> Arc<PluginRegistry> {
        self.current.read().expect("plugins lock").clone()
    }

    /// The deployer for a DeployItem type, if one serves it now.
    pub fn for_type(&self, deploy_item_type: &str) -> Option<Arc<dyn DeployerPlugin>> {
        self.current().for_type(deploy_item_type)
    }

    pub fn deploy_item_types(&self) -> Vec<String> {
        self.current()
            .deploy_item_types()
            .into_iter()
            .map(String::from)
            .collect()
    }

    /// Serves `registry` from now on and tells [`LivePlugins::changes`] listeners.
    pub fn replace(&self, registry: Arc<PluginRegistry>) {
        *self.current.write().expect("plugins lock") = registry;
        self.generation.send_modify(|g| *g += 1);
    }

    /// A stream that yields after every [`LivePlugins::replace`] (the controller looks at every
    /// item again: items of a type that just gained a deployer are taken).
    pub fn changes(&self) -> impl futures::Stream<Item = ()> + Send + 'static {
        let rx = self.generation.subscribe();
        futures::stream::unfold(rx, |mut rx| async move {
            rx.changed().await.ok()?;
            Some(((), rx))
        })
    }
}
