//! The compiled configurations, cached while none is written.
//!
//! Owns: [`Webhooks`]. Must not touch: matching or calling.

use super::config::{self, Hook};
use crate::store::{Inner, Obj, rv_of};
use std::sync::{Arc, Mutex};

/// The compiled `ValidatingWebhookConfiguration`s, cached while none is written.
#[derive(Default)]
pub(crate) struct Webhooks {
    cache: Mutex<Option<Cached>>,
}

struct Cached {
    /// The number of configurations and their highest resourceVersion: any create, update or
    /// delete of a configuration changes one of the two.
    key: (usize, u64),
    hooks: Arc<[Arc<Hook>]>,
}

impl Webhooks {
    /// Every webhook of every stored configuration (configurations by name, webhooks in their
    /// order), or `None` when there is none — the fast path, one map lookup.
    pub(crate) fn configured(&self, inner: &Inner) -> Option<Arc<[Arc<Hook>]>> {
        let stored = inner.objects.get(config::VALIDATING_KEY)?;
        let configs: Vec<&Obj> = stored.values().flat_map(|n| n.values()).collect();
        if configs.is_empty() {
            return None;
        }
        let key = (
            configs.len(),
            configs.iter().map(|c| rv_of(c)).max().unwrap_or(0),
        );
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = cache.as_ref().filter(|c| c.key == key) {
            return Some(c.hooks.clone());
        }
        let hooks: Arc<[Arc<Hook>]> = config::compile(&configs).into();
        *cache = Some(Cached {
            key,
            hooks: hooks.clone(),
        });
        Some(hooks)
    }
}
