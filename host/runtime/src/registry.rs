//! The DeployItem-type → plugin map, and the hook plugins by name.
//!
//! Owns: building the map from each plugin's `describe` and refusing ambiguity (two plugins
//! claiming one type, two deployers or two hook plugins with one name) with a start-up
//! error naming both. Which hooks run for which types is the host's configuration.
//! Must not touch: loading or invoking plugins.

use crate::api::{DeployerPlugin, HookPlugin};
use anyhow::bail;
use std::collections::HashMap;
use std::sync::Arc;

/// All plugins of a host, indexed by the DeployItem types they handle.
pub struct PluginRegistry {
    plugins: Vec<Arc<dyn DeployerPlugin>>,
    by_type: HashMap<String, usize>,
    hooks: Vec<Arc<dyn HookPlugin>>,
}

impl std::fmt::Debug for PluginRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut m = f.debug_map();
        for (t, i) in &self.by_type {
            m.entry(t, &self.plugins[*i].description().name);
        }
        m.finish()
    }
}

fn label(p: &dyn DeployerPlugin) -> String {
    let d = p.description();
    format!("plugin {:?} {} from {}", d.name, d.version, p.origin())
}

impl PluginRegistry {
    /// Build the registry. Errors if two plugins claim the same DeployItem type or share a
    /// name; the message names both plugins and where they came from.
    pub fn new(plugins: Vec<Arc<dyn DeployerPlugin>>) -> anyhow::Result<Self> {
        let mut by_type: HashMap<String, usize> = HashMap::new();
        let mut by_name: HashMap<&str, usize> = HashMap::new();
        for (i, p) in plugins.iter().enumerate() {
            let d = p.description();
            if let Some(&j) = by_name.get(d.name.as_str()) {
                bail!(
                    "two plugins are named {:?}: {} and {}; remove one of them",
                    d.name,
                    label(plugins[j].as_ref()),
                    label(p.as_ref())
                );
            }
            by_name.insert(d.name.as_str(), i);
            for t in &d.deploy_item_types {
                if let Some(&j) = by_type.get(t) {
                    bail!(
                        "deploy item type {t:?} is claimed by two plugins: {} and {}; \
                         remove one of them",
                        label(plugins[j].as_ref()),
                        label(p.as_ref())
                    );
                }
                by_type.insert(t.clone(), i);
            }
        }
        Ok(PluginRegistry {
            plugins,
            by_type,
            hooks: Vec::new(),
        })
    }

    /// Build the registry with hook plugins as well. Errors as [`PluginRegistry::new`], and
    /// if two hook plugins share a name.
    pub fn with_hooks(
        plugins: Vec<Arc<dyn DeployerPlugin>>,
        hooks: Vec<Arc<dyn HookPlugin>>,
    ) -> anyhow::Result<Self> {
        let mut registry = Self::new(plugins)?;
        let mut by_name: HashMap<&str, usize> = HashMap::new();
        for (i, h) in hooks.iter().enumerate() {
            let name = h.setup().name.as_str();
            if let Some(&j) = by_name.get(name) {
                bail!(
                    "two hook plugins are named {name:?}: {} and {}; remove one of them",
                    hooks[j].origin(),
                    h.origin()
                );
            }
            by_name.insert(name, i);
        }
        registry.hooks = hooks;
        Ok(registry)
    }

    /// The hook plugin named `name`, if loaded.
    pub fn hook(&self, name: &str) -> Option<Arc<dyn HookPlugin>> {
        self.hooks.iter().find(|h| h.setup().name == name).cloned()
    }

    /// All hook plugins, in load order.
    pub fn hooks(&self) -> impl Iterator<Item = &Arc<dyn HookPlugin>> {
        self.hooks.iter()
    }

    /// The plugin handling `deploy_item_type`, if any.
    pub fn for_type(&self, deploy_item_type: &str) -> Option<Arc<dyn DeployerPlugin>> {
        self.by_type
            .get(deploy_item_type)
            .map(|&i| self.plugins[i].clone())
    }

    /// All plugins, in the order given to [`PluginRegistry::new`].
    pub fn plugins(&self) -> impl Iterator<Item = &Arc<dyn DeployerPlugin>> {
        self.plugins.iter()
    }

    /// All handled DeployItem types (sorted).
    pub fn deploy_item_types(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.by_type.keys().map(String::as_str).collect();
        v.sort_unstable();
        v
    }
}
