//! Fuzzing every shipped plugin's provider configuration (the reliability suite,
//! `docs/reliability.md`): arbitrary JSON of any shape, valid configurations with one field
//! swapped for a wrong type, huge strings and deep nesting, given to each deployer's reconcile
//! and delete and to each hook at every hook type. Every call must come back — a response or a
//! typed error whose message says what is wrong — never a host panic; a plugin trap is allowed
//! only as an `ERR_INTERNAL_PROBLEM` error, and the plugin must go on working afterwards.
//!
//! `PROPTEST_CASES` (default 128 per plugin here) makes the run longer by hand.

mod common;

use std::sync::Arc;

use common::*;
use plugin_runtime::{
    DeployerError, DeployerPlugin, HookInput, HookPlugin, HookType, NoopHost, PluginRuntime,
    RuntimeConfig, WasmPlugin, codes,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,24}".prop_map(Value::from),
        // Strings that look like what configurations hold: durations, crons, paths, YAML.
        prop_oneof![
            Just("1h"),
            Just("-5s"),
            Just("0s"),
            Just("* * * * *"),
            Just("@every 1s"),
            Just("@every 0s"),
            Just("99 99 * * *"),
            Just(".data.x"),
            Just("{{"),
            Just("---\na: ["),
            Just("Succeeded"),
            Just("Progressing"),
            Just("Failed"),
            Just("v1"),
            Just("ConfigMap"),
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(config_key(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Keys the shipped plugins read, so fuzzed values land where parsing happens.
fn config_key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("apiVersion"),
        Just("kind"),
        Just("phase"),
        Just("initialPhase"),
        Just("providerStatus"),
        Just("export"),
        Just("manifests"),
        Just("manifest"),
        Just("policy"),
        Just("updateStrategy"),
        Just("readinessChecks"),
        Just("exports"),
        Just("deletionGroups"),
        Just("continuousReconcile"),
        Just("cron"),
        Just("every"),
        Just("timeout"),
        Just("custom"),
        Just("jsonPath"),
        Just("targetName"),
        Just("name"),
        Just("namespace"),
        Just("metadata"),
        Just("disableDefault"),
    ]
    .prop_map(String::from)
}

/// Valid configurations of the shipped deployers and hooks, as the starting point of mutations.
fn valid_configs() -> Vec<Value> {
    vec![
        json!({"apiVersion": "mock.deployer.landscaper.gardener.cloud/v1alpha1", "kind": "ProviderConfiguration",
            "phase": "Succeeded", "providerStatus": {"apiVersion": "x/v1", "kind": "S"}, "export": {"a": 1}}),
        json!({"apiVersion": "manifest.deployer.landscaper.gardener.cloud/v1alpha2", "kind": "ProviderConfiguration",
            "updateStrategy": "update", "manifests": [{"policy": "manage", "manifest":
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}}}],
            "readinessChecks": {"disableDefault": false, "timeout": "1m", "custom": [{"name": "c",
                "resourceSelector": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "namespace": "default"}],
                "requirements": [{"jsonPath": ".data.x", "operator": "exists"}]}]},
            "exports": {"exports": [{"key": "k", "jsonPath": ".data", "fromResource":
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "namespace": "default"}}]},
            "deletionGroups": [{"predefinedResourceGroup": {"type": "empty"}}]}),
        json!({"apiVersion": "mock.deployer.landscaper.gardener.cloud/v1alpha1", "kind": "ProviderConfiguration",
            "continuousReconcile": {"every": "1h"}}),
    ]
}

fn mutate(v: &mut Value, pick: u64, with: Value) {
    let descend = !pick.is_multiple_of(4);
    let i = (pick / 4) as usize;
    match v {
        Value::Object(m) if descend && !m.is_empty() => {
            let key = m.keys().nth(i % m.len()).cloned().unwrap();
            mutate(m.get_mut(&key).unwrap(), pick / 7, with)
        }
        Value::Array(a) if descend && !a.is_empty() => {
            let n = a.len();
            mutate(&mut a[i % n], pick / 7, with)
        }
        _ => *v = with,
    }
}

fn config() -> impl Strategy<Value = Value> {
    prop_oneof![
        any_json(),
        (0..valid_configs().len(), any::<u64>(), any_json()).prop_map(|(i, pick, with)| {
            let mut c = valid_configs()[i].clone();
            mutate(&mut c, pick, with);
            c
        }),
    ]
}

fn item_with(type_: &str, config: Value) -> Value {
    json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": "fuzz", "namespace": "default", "generation": 1},
        "spec": {"type": type_, "config": config},
        "status": {"phase": "Init", "jobID": "1", "lastReconcileTime": "2026-01-01T00:00:00Z"},
    })
}

/// An error must say what is wrong. A shipped plugin never traps on a bad configuration (a
/// panic message tells the user nothing about their config), and never runs out of its limits.
fn assert_typed(plugin: &str, e: &DeployerError, config: &Value) {
    assert!(
        !e.reason.is_empty() && !e.message.is_empty(),
        "{plugin}: an error without reason or message: {e:?} for {config}"
    );
    assert!(
        !e.reason.starts_with("Plugin"),
        "{plugin} failed as a plugin, not with a verdict on the config: {e:?} for {config}"
    );
    if e.codes.contains(&codes::CONFIGURATION_PROBLEM.to_string()) {
        assert!(e.message.len() > 10, "{plugin}: say what is wrong: {e:?}");
    }
}

async fn shipped() -> Vec<Arc<WasmPlugin>> {
    let rt = PluginRuntime::new(shared_cache(RuntimeConfig::default())).unwrap();
    rt.load_dir(&plugin_dir()).await.unwrap()
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(128)
}

#[test]
fn every_shipped_plugin_answers_any_provider_configuration_with_a_result_or_a_typed_error() {
    let rt = tokio_runtime();
    let plugins = rt.block_on(shipped());
    assert!(
        plugins.len() >= 3,
        "mock, manifest, continuous-reconcile at least"
    );
    let host = Arc::new(NoopHost);
    let hook_types = [
        HookType::ShouldReconcile,
        HookType::BeforeAnyReconcile,
        HookType::DuringResponsibilityCheck,
        HookType::End,
    ];
    for plugin in &plugins {
        let name = plugin.description().name.clone();
        let types = plugin.description().deploy_item_types.clone();
        let item_type = types.first().cloned().unwrap_or_else(|| "any/type".into());
        let mut runner = TestRunner::new(Config {
            cases: cases(),
            failure_persistence: None,
            ..Config::default()
        });
        runner
            .run(&config(), |config| {
                let item = item_with(&item_type, config.clone());
                rt.block_on(async {
                    if !types.is_empty() {
                        for delete in [false, true] {
                            let inv = plugin_runtime::Invocation::for_item(item.clone());
                            let r = if delete {
                                plugin.delete(inv, host.clone()).await
                            } else {
                                plugin.reconcile(inv, host.clone()).await
                            };
                            if let Err(e) = r {
                                assert_typed(&name, &e, &config);
                            }
                        }
                    }
                    if plugin.hook_setup().is_some() {
                        for hook_type in hook_types {
                            let input = HookInput {
                                hook_type,
                                deploy_item: Some(item.clone()),
                                target: None,
                            };
                            if let Err(e) = plugin.run_hook(input).await {
                                assert_typed(&name, &e, &config);
                            }
                        }
                    }
                });
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    // Every plugin still works after the storm.
    rt.block_on(async {
        let mock = plugins
            .iter()
            .find(|p| p.description().name == "mock")
            .unwrap();
        let r = mock
            .reconcile(
                plugin_runtime::Invocation::for_item(item_with(
                    "landscaper.gardener.cloud/mock",
                    valid_configs()[0].clone(),
                )),
                host.clone(),
            )
            .await
            .unwrap();
        assert_eq!(r.phase.as_deref(), Some("Succeeded"));
    });
}

#[test]
fn huge_and_deep_provider_configurations_fail_cleanly() {
    let rt = tokio_runtime();
    let plugins = rt.block_on(shipped());
    let host = Arc::new(NoopHost);
    let mut deep = json!(1);
    for _ in 0..120 {
        deep = json!({"manifests": [deep]});
    }
    let huge = json!({"apiVersion": "x/v1", "kind": "ProviderConfiguration", "phase": "x".repeat(3 << 20)});
    for plugin in plugins
        .iter()
        .filter(|p| !p.description().deploy_item_types.is_empty())
    {
        let name = plugin.description().name.clone();
        let item_type = plugin.description().deploy_item_types[0].clone();
        for config in [&deep, &huge] {
            let inv = plugin_runtime::Invocation::for_item(item_with(&item_type, config.clone()));
            if let Err(e) = rt.block_on(plugin.reconcile(inv, host.clone())) {
                assert_typed(&name, &e, &json!("(huge or deep)"));
            }
        }
    }
}
