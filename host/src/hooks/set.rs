//! The configured hooks: which hook plugin runs for which DeployItem types at which hook
//! types, in registration order (= execution order), and running one stage of them.

use std::collections::BTreeSet;
use std::sync::Arc;

use anyhow::bail;
use plugin_runtime::{DeployerError, EncodedHookInput, HookPlugin, PluginRegistry};
use sdk_guest::{HookResult, HookType};

use super::aggregation::aggregate;
use crate::config::HookRegistration;

/// One registration: a hook plugin, the DeployItem types it runs for, its hook types.
struct Registration {
    plugin: Arc<dyn HookPlugin>,
    /// `None` = every type (`*`).
    deploy_item_types: Option<BTreeSet<String>>,
    hook_types: BTreeSet<HookType>,
}

impl Registration {
    /// `deploy_item_type` `None` (not known yet, e.g. at `Start` without the type annotation)
    /// matches only registrations for every type.
    fn applies(&self, deploy_item_type: Option<&str>, hook_type: HookType) -> bool {
        self.hook_types.contains(&hook_type)
            && match (&self.deploy_item_types, deploy_item_type) {
                (None, _) => true,
                (Some(types), Some(t)) => types.contains(t),
                (Some(_), None) => false,
            }
    }
}

/// A failed hook: the stage's results are discarded (seed: "an empty result with the error").
#[derive(Clone, Debug)]
pub struct HookError {
    /// Position of the failing hook among the hooks of this stage (0-based).
    pub index: usize,
    pub hook_type: HookType,
    pub plugin: String,
    pub error: DeployerError,
}

impl std::fmt::Display for HookError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "error executing reconciliation extension hook {} of type {:?} (plugin {:?}): {}",
            self.index,
            self.hook_type.as_str(),
            self.plugin,
            self.error.message
        )
    }
}

impl std::error::Error for HookError {}

/// All hook registrations of a host, in execution order.
#[derive(Default)]
pub struct HookSet {
    registrations: Vec<Registration>,
}

impl std::fmt::Debug for HookSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(
                self.registrations
                    .iter()
                    .map(|r| (&r.plugin.setup().name, &r.deploy_item_types, &r.hook_types)),
            )
            .finish()
    }
}

/// The hook set serving now: swapped by plugin delivery together with the plugins (a stage
/// that started runs on the set it started with).
pub struct LiveHooks {
    current: std::sync::RwLock<std::sync::Arc<HookSet>>,
}

impl LiveHooks {
    pub fn new(set: HookSet) -> Self {
        LiveHooks {
            current: std::sync::RwLock::new(std::sync::Arc::new(set)),
        }
    }

    pub fn current(&self) -> std::sync::Arc<HookSet> {
        self.current.read().expect("hooks lock").clone()
    }

    pub fn replace(&self, set: HookSet) {
        *self.current.write().expect("hooks lock") = std::sync::Arc::new(set);
    }

    /// See [`HookSet::has`].
    pub fn has(&self, deploy_item_type: Option<&str>, hook_type: HookType) -> bool {
        self.current().has(deploy_item_type, hook_type)
    }

    /// See [`HookSet::may_reopen`].
    pub fn may_reopen(&self, deploy_item_type: Option<&str>) -> bool {
        self.current().may_reopen(deploy_item_type)
    }

    /// See [`HookSet::run`].
    pub async fn run(
        &self,
        hook_type: HookType,
        deploy_item_type: Option<&str>,
        item: Option<&str>,
        target: Option<&str>,
    ) -> Result<Option<HookResult>, HookError> {
        let set = self.current();
        set.run(hook_type, deploy_item_type, item, target).await
    }
}

impl HookSet {
    /// Resolves the configuration against the loaded hook plugins. Errors name the
    /// registration: an unknown plugin, an unknown hook type, or a hook type the plugin was
    /// not written for (its `describe`).
    pub fn from_config(
        registrations: &[HookRegistration],
        registry: &PluginRegistry,
    ) -> anyhow::Result<Self> {
        let mut out = Vec::with_capacity(registrations.len());
        for (i, r) in registrations.iter().enumerate() {
            let Some(plugin) = registry.hook(&r.plugin) else {
                let loaded: Vec<&str> = registry.hooks().map(|h| h.setup().name.as_str()).collect();
                bail!(
                    "hooks[{i}]: no hook plugin named {:?} is loaded (hook plugins: {loaded:?})",
                    r.plugin
                );
            };
            let declared: BTreeSet<HookType> = plugin.setup().hook_types.iter().copied().collect();
            let hook_types = if r.hook_types.is_empty() {
                declared
            } else {
                let mut chosen = BTreeSet::new();
                for name in &r.hook_types {
                    let Some(t) = HookType::parse(name) else {
                        bail!(
                            "hooks[{i}].hookTypes: unknown hook type {name:?} (known: {})",
                            HookType::ALL.map(HookType::as_str).join(", ")
                        );
                    };
                    if !declared.contains(&t) {
                        bail!(
                            "hooks[{i}].hookTypes: plugin {:?} was not written for {name:?} (it declares {:?})",
                            r.plugin,
                            declared.iter().map(|t| t.as_str()).collect::<Vec<_>>()
                        );
                    }
                    chosen.insert(t);
                }
                chosen
            };
            let deploy_item_types =
                if r.deploy_item_types.is_empty() || r.deploy_item_types.iter().any(|t| t == "*") {
                    None
                } else {
                    Some(r.deploy_item_types.iter().cloned().collect())
                };
            out.push(Registration {
                plugin,
                deploy_item_types,
                hook_types,
            });
        }
        Ok(HookSet { registrations: out })
    }

    /// No hooks at all: the flow is exactly the contract's.
    pub fn is_empty(&self) -> bool {
        self.registrations.is_empty()
    }

    /// Whether any hook runs at `hook_type` for items of `deploy_item_type`.
    pub fn has(&self, deploy_item_type: Option<&str>, hook_type: HookType) -> bool {
        self.registrations
            .iter()
            .any(|r| r.applies(deploy_item_type, hook_type))
    }

    /// Whether a hook may take or reopen an item the default logic leaves alone
    /// (`DuringResponsibilityCheck`, `ShouldReconcile`). `None`: of any type.
    pub fn may_reopen(&self, deploy_item_type: Option<&str>) -> bool {
        self.registrations.iter().any(|r| {
            [
                HookType::DuringResponsibilityCheck,
                HookType::ShouldReconcile,
            ]
            .into_iter()
            .any(|t| match deploy_item_type {
                Some(_) => r.applies(deploy_item_type, t),
                None => r.hook_types.contains(&t),
            })
        })
    }

    /// Runs the hooks of one stage in registration order and aggregates their results. The
    /// first error ends the stage and discards the results. `item` and `target` are JSON, encoded
    /// once by the caller for every hook of every stage that sees that version of the item.
    pub async fn run(
        &self,
        hook_type: HookType,
        deploy_item_type: Option<&str>,
        item: Option<&str>,
        target: Option<&str>,
    ) -> Result<Option<HookResult>, HookError> {
        let mut results = Vec::new();
        for (index, r) in self
            .registrations
            .iter()
            .filter(|r| r.applies(deploy_item_type, hook_type))
            .enumerate()
        {
            let input = EncodedHookInput {
                hook_type,
                deploy_item: item,
                target,
            };
            match r.plugin.run_hook_encoded(input).await {
                Ok(result) => results.push(result),
                Err(error) => {
                    return Err(HookError {
                        index,
                        hook_type,
                        plugin: r.plugin.setup().name.clone(),
                        error,
                    });
                }
            }
        }
        Ok(aggregate(hook_type, &results))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plugin_runtime::{HookInput, HookSetup, NativeHooks};
    use sdk_guest::{Ctx, Hooks};

    struct OnlyEnd;

    impl Hooks for OnlyEnd {
        fn describe() -> HookSetup {
            HookSetup {
                name: "only-end".into(),
                version: "0.1.0".into(),
                hook_types: vec![HookType::End],
            }
        }
        fn run(_: &Ctx, _: HookInput) -> Result<Option<HookResult>, DeployerError> {
            Ok(None)
        }
    }

    fn registry() -> PluginRegistry {
        PluginRegistry::with_hooks(
            Vec::new(),
            vec![Arc::new(NativeHooks::<OnlyEnd>::default())],
        )
        .unwrap()
    }

    fn reg(plugin: &str, types: &[&str], hook_types: &[&str]) -> HookRegistration {
        HookRegistration {
            plugin: plugin.into(),
            deploy_item_types: types.iter().map(|s| s.to_string()).collect(),
            hook_types: hook_types.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn registrations_match_types_and_default_to_what_the_plugin_declares() {
        let set = HookSet::from_config(&[reg("only-end", &["a/x"], &[])], &registry()).unwrap();
        assert!(set.has(Some("a/x"), HookType::End));
        assert!(
            !set.has(Some("a/y"), HookType::End),
            "other types are not hooked"
        );
        assert!(
            !set.has(None, HookType::End),
            "an unknown type matches only `*`"
        );
        assert!(!set.has(Some("a/x"), HookType::Start));
        assert!(!set.may_reopen(None));
        let every =
            HookSet::from_config(&[reg("only-end", &["*"], &["End"])], &registry()).unwrap();
        assert!(every.has(None, HookType::End) && every.has(Some("any/type"), HookType::End));
    }

    #[test]
    fn configuration_mistakes_are_start_up_errors_naming_the_entry() {
        let err = |r: HookRegistration| {
            HookSet::from_config(&[r], &registry())
                .unwrap_err()
                .to_string()
        };
        let e = err(reg("nope", &[], &[]));
        assert!(
            e.contains("hooks[0]") && e.contains("\"nope\"") && e.contains("only-end"),
            "{e}"
        );
        let e = err(reg("only-end", &[], &["Finish"]));
        assert!(e.contains("unknown hook type \"Finish\""), "{e}");
        let e = err(reg("only-end", &[], &["Start"]));
        assert!(e.contains("was not written for \"Start\""), "{e}");
    }
}
