//! End-to-end tests of the plugin runtime against the real components in
//! `<target-dir>/plugins/` and `<target-dir>/test-plugins/` (`cargo xtask build-plugins`).

mod common;

use common::*;
use plugin_runtime::{
    ConditionStatus, DeployerPlugin, EncodedHookInput, Limits, LoadOutcome, NativePlugin, NoopHost,
    OptLevel, PluginRegistry, PluginRuntime, RuntimeConfig, codes,
};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn faulty_limits() -> RuntimeConfig {
    shared_cache(RuntimeConfig {
        plugin_limits: HashMap::from([(
            "faulty".to_string(),
            Limits {
                deadline: Duration::from_millis(500),
                memory_bytes: 16 << 20,
            },
        )]),
        ..Default::default()
    })
}

fn noop() -> Arc<NoopHost> {
    Arc::new(NoopHost)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_works() {
    let rt = PluginRuntime::new(shared_cache(RuntimeConfig::default())).unwrap();
    let mock = rt.load_bytes("mock.wasm", &mock_wasm()).await.unwrap();
    let d = mock.description();
    assert_eq!(d.name, "mock");
    assert_eq!(d.version, "0.1.0");
    assert_eq!(d.deploy_item_types, vec!["landscaper.gardener.cloud/mock"]);
    assert!(d.hook_types.is_empty());
    assert_eq!(mock.sha256().len(), 64);
    assert!(mock.origin().contains("mock.wasm"));

    let faulty = rt.load_bytes("faulty.wasm", &faulty_wasm()).await.unwrap();
    assert_eq!(
        faulty.description().deploy_item_types,
        vec!["test.wasm-deployer.dev/faulty"]
    );

    // Same bytes again: the prepared component is reused.
    rt.load_bytes("again.wasm", &mock_wasm()).await.unwrap();
    let stats = rt.stats();
    assert_eq!(stats.compiled + stats.cache_hits, 2);
    assert_eq!(stats.reused, 1);
    assert_eq!(stats.loads.last().unwrap().outcome, LoadOutcome::Reused);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_dir_loads_shipped_plugins_only() {
    let rt = PluginRuntime::new(shared_cache(RuntimeConfig::default())).unwrap();
    let plugins = rt.load_dir(&plugin_dir()).await.unwrap();
    let names: Vec<_> = plugins
        .iter()
        .map(|p| p.description().name.clone())
        .collect();
    assert!(names.contains(&"mock".to_string()), "{names:?}");
    assert!(
        !names.contains(&"faulty".to_string()),
        "test plugins must not ship: {names:?}"
    );
    let registry = PluginRegistry::new(
        plugins
            .into_iter()
            .map(|p| p as Arc<dyn DeployerPlugin>)
            .collect(),
    )
    .unwrap();
    assert!(
        registry
            .for_type("landscaper.gardener.cloud/mock")
            .is_some()
    );
    assert!(registry.for_type("unknown").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_reports_what_it_keeps_resident_once_the_instances_have_ended() {
    let rt = PluginRuntime::new(shared_cache(RuntimeConfig::default())).unwrap();
    let mock = rt.load_bytes("mock.wasm", &mock_wasm()).await.unwrap();
    // `describe` at load ran an instance already; nothing runs now.
    let after_load = rt.pool_idle_resident_bytes();
    assert!(after_load > 0, "a used slot keeps its first pages resident");
    for _ in 0..3 {
        mock.reconcile(mock_item(json!({}), "Init"), noop())
            .await
            .unwrap();
    }
    let idle = rt.pool_idle_resident_bytes();
    // One call at a time reuses the same warm slot: what is kept does not grow with calls,
    // and stays within the keep-resident bound of a slot's memories, tables and stack.
    assert!(idle >= after_load, "{idle} < {after_load}");
    assert!(
        idle <= 4 * (4 << 20) + (8 << 20),
        "{idle} bytes kept resident"
    );
    // The process-wide gauge counts this runtime while it lives.
    assert!(plugin_runtime::pool_idle_resident_bytes() >= idle);
    // Without a pool there is nothing kept.
    let on_demand = PluginRuntime::new(shared_cache(RuntimeConfig {
        instance_slots: 0,
        ..Default::default()
    }))
    .unwrap();
    let m = on_demand
        .load_bytes("mock.wasm", &mock_wasm())
        .await
        .unwrap();
    m.reconcile(mock_item(json!({}), "Init"), noop())
        .await
        .unwrap();
    assert_eq!(on_demand.pool_idle_resident_bytes(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mock_reconcile_cases() {
    let rt = PluginRuntime::new(shared_cache(RuntimeConfig::default())).unwrap();
    let mock = rt.load_bytes("mock.wasm", &mock_wasm()).await.unwrap();

    // default: Succeeded + DeployItemValidation=True
    let r = mock
        .reconcile(mock_item(json!({}), "Init"), noop())
        .await
        .unwrap();
    assert_eq!(r.phase.as_deref(), Some("Succeeded"));
    assert_eq!(r.conditions.len(), 1);
    assert_eq!(r.conditions[0].type_, "DeployItemValidation");
    assert_eq!(r.conditions[0].status, ConditionStatus::True);
    assert_eq!(r.conditions[0].reason, "SuccessfullValidation");
    assert_eq!(
        r.conditions[0].message,
        "Successfully validated configuration"
    );
    assert_eq!(r.exports, None);
    assert_eq!(r.provider_status, None);
    assert_eq!(r.retry_after, None);

    // phase overrides
    let r = mock
        .reconcile(mock_item(json!({"phase": "Progressing"}), "Init"), noop())
        .await
        .unwrap();
    assert_eq!(r.phase.as_deref(), Some("Progressing"));

    // initialPhase: applied from Init / empty, otherwise the phase is kept
    let r = mock
        .reconcile(
            mock_item(json!({"initialPhase": "Progressing"}), "Init"),
            noop(),
        )
        .await
        .unwrap();
    assert_eq!(r.phase.as_deref(), Some("Progressing"));
    let r = mock
        .reconcile(
            mock_item(json!({"initialPhase": "Progressing"}), "Progressing"),
            noop(),
        )
        .await
        .unwrap();
    // Landscaper's mock stays in the phase it has: no automatic Succeeded.
    assert_eq!(r.phase.as_deref(), Some("Progressing"));

    // providerStatus + export verbatim
    let ps = json!({"apiVersion": "mock/v1", "kind": "ProviderStatus", "x": [1, {"y": null}]});
    let r = mock
        .reconcile(
            mock_item(
                json!({"providerStatus": ps, "export": {"a": "b", "n": 1.5}}),
                "Init",
            ),
            noop(),
        )
        .await
        .unwrap();
    assert_eq!(r.provider_status, Some(ps));
    assert_eq!(r.exports, Some(json!({"a": "b", "n": 1.5})));

    // bad config → ERR_CONFIGURATION_PROBLEM with a message saying what is wrong
    let e = mock
        .reconcile(
            mock_item(json!({"phase": ["not", "a", "string"]}), "Init"),
            noop(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.codes, vec![codes::CONFIGURATION_PROBLEM]);
    assert_eq!(e.operation, "reconcile");
    assert_eq!(e.reason, "FailedUnmarshal");
    assert!(e.message.contains("invalid type"), "{}", e.message);
    assert_eq!(e.conditions[0].status, ConditionStatus::False);

    // delete: no phase, no error
    let r = mock
        .delete(mock_item(json!({}), "InitDelete"), noop())
        .await
        .unwrap();
    assert_eq!(r, plugin_runtime::Response::default());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misbehaving_plugins_fail_only_their_item() {
    let rt = PluginRuntime::new(faulty_limits()).unwrap();
    let faulty = rt.load_bytes("faulty.wasm", &faulty_wasm()).await.unwrap();
    let mock = rt.load_bytes("mock.wasm", &mock_wasm()).await.unwrap();

    // trap → ERR_INTERNAL_PROBLEM with the trap message and the panic text from stderr
    let e = faulty
        .reconcile(faulty_item("trap"), noop())
        .await
        .unwrap_err();
    assert_eq!(e.codes, vec![codes::INTERNAL_PROBLEM], "{e}");
    assert_eq!(e.reason, "PluginTrapped");
    assert!(e.message.contains("trapped"), "{}", e.message);
    assert!(e.message.contains("deliberate trap"), "{}", e.message);
    assert_eq!(e.operation, "reconcile");

    // the next invocation of the same plugin works
    let r = faulty.reconcile(faulty_item("ok"), noop()).await.unwrap();
    assert_eq!(r.phase.as_deref(), Some("Succeeded"));

    // loop → ERR_TIMEOUT at the deadline, while other items proceed
    let looping = {
        let faulty = faulty.clone();
        tokio::spawn(async move {
            let t = Instant::now();
            (
                faulty
                    .reconcile(faulty_item("loop"), Arc::new(NoopHost))
                    .await,
                t.elapsed(),
            )
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let t = Instant::now();
    for _ in 0..5 {
        mock.reconcile(mock_item(json!({}), "Init"), noop())
            .await
            .unwrap();
    }
    assert!(
        t.elapsed() < Duration::from_millis(400),
        "mock starved: {:?}",
        t.elapsed()
    );
    let (res, took) = looping.await.unwrap();
    let e = res.unwrap_err();
    assert_eq!(e.codes, vec![codes::TIMEOUT], "{e}");
    assert_eq!(e.reason, "PluginDeadlineExceeded");
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_secs(2),
        "{took:?}"
    );
    faulty.reconcile(faulty_item("ok"), noop()).await.unwrap();

    // allocate → ERR_INTERNAL_PROBLEM naming the memory cap
    let e = faulty
        .reconcile(faulty_item("allocate"), noop())
        .await
        .unwrap_err();
    assert_eq!(e.codes, vec![codes::INTERNAL_PROBLEM], "{e}");
    assert_eq!(e.reason, "PluginMemoryLimitExceeded");
    assert!(
        e.message.contains("exceeded its memory limit of 16 MiB"),
        "{}",
        e.message
    );
    faulty.reconcile(faulty_item("ok"), noop()).await.unwrap();

    // unbounded recursion → ERR_INTERNAL_PROBLEM (Rust's shadow stack lives in linear
    // memory, so this shows up as an out-of-bounds access or a wasm stack overflow)
    let e = faulty
        .reconcile(faulty_item("recurse"), noop())
        .await
        .unwrap_err();
    assert_eq!(e.codes, vec![codes::INTERNAL_PROBLEM], "{e}");
    assert!(
        e.message.contains("stack overflow") || e.message.contains("out of bounds"),
        "{}",
        e.message
    );

    // exit() → ERR_INTERNAL_PROBLEM, not a host exit
    let e = faulty
        .reconcile(faulty_item("exit"), noop())
        .await
        .unwrap_err();
    assert_eq!(e.codes, vec![codes::INTERNAL_PROBLEM], "{e}");
    assert!(e.message.contains("called exit("), "{}", e.message);

    // delete path is classified the same way
    let r = faulty.delete(faulty_item("trap"), noop()).await.unwrap();
    assert_eq!(r.phase, None);

    faulty.reconcile(faulty_item("ok"), noop()).await.unwrap();
    mock.reconcile(mock_item(json!({}), "Init"), noop())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_ambient_authority() {
    unsafe { std::env::set_var("WASM_DEPLOYER_SECRET_PROBE", "leak") };
    let rt = PluginRuntime::new(shared_cache(RuntimeConfig::default())).unwrap();
    let faulty = rt.load_bytes("faulty.wasm", &faulty_wasm()).await.unwrap();

    let r = faulty.reconcile(faulty_item("env"), noop()).await.unwrap();
    let ps = r.provider_status.unwrap();
    assert_eq!(ps["env"], json!([]), "{ps}");
    assert_eq!(ps["args"], json!([]), "{ps}");

    let r = faulty.reconcile(faulty_item("fs"), noop()).await.unwrap();
    let ps = r.provider_status.unwrap();
    for key in ["root", "dot"] {
        assert!(
            ps[key].as_str().unwrap().starts_with("error"),
            "{key}: {ps}"
        );
    }
    assert!(
        ps["passwd"].is_string(),
        "reading /etc/passwd must fail: {ps}"
    );
    assert!(ps["write"].is_string(), "writing a file must fail: {ps}");

    let r = faulty.reconcile(faulty_item("net"), noop()).await.unwrap();
    let ps = r.provider_status.unwrap();
    assert!(ps["connect"].is_string(), "connecting must fail: {ps}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_imports_reach_host_services() {
    let rt = PluginRuntime::new(shared_cache(RuntimeConfig::default())).unwrap();
    let faulty = rt.load_bytes("faulty.wasm", &faulty_wasm()).await.unwrap();

    let host = Arc::new(FakeHost::default());
    let r = faulty
        .reconcile(faulty_item("kube"), host.clone())
        .await
        .unwrap();
    let ps = r.provider_status.unwrap();
    assert_eq!(ps["get"]["data"]["k"], "v");
    assert_eq!(ps["created"]["metadata"]["name"], "made");
    assert_eq!(ps["deleted"], false);
    assert_eq!(host.ops.lock().unwrap().len(), 3);

    let r = faulty
        .reconcile(faulty_item("checkpoint"), host.clone())
        .await
        .unwrap();
    assert_eq!(r.provider_status.unwrap()["remainingMs"], 42_000);
    assert_eq!(
        host.checkpoints.lock().unwrap().as_slice(),
        ["faulty: checkpoint"]
    );

    let late = Arc::new(FakeHost {
        timed_out: true,
        ..Default::default()
    });
    let e = faulty
        .reconcile(faulty_item("checkpoint"), late)
        .await
        .unwrap_err();
    assert_eq!(e.codes, vec![codes::TIMEOUT]);
    assert_eq!(e.reason, "ProgressingTimeout");
    assert_eq!(e.message, "timeout at: \"faulty: checkpoint\"");

    let r = faulty.reconcile(faulty_item("log"), noop()).await.unwrap();
    let ps = r.provider_status.unwrap();
    assert!(ps["now"].as_str().unwrap().ends_with('Z'));

    let e = faulty
        .reconcile(faulty_item("nope"), noop())
        .await
        .unwrap_err();
    assert_eq!(e.codes, vec![codes::CONFIGURATION_PROBLEM]);
    assert_eq!(e.reason, "UnknownAction");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_plugins_claiming_one_type_is_an_error() {
    let rt = PluginRuntime::new(shared_cache(RuntimeConfig::default())).unwrap();
    let wasm_mock = rt
        .load_bytes("/plugins/mock.wasm", &mock_wasm())
        .await
        .unwrap();
    let native: Arc<dyn DeployerPlugin> = Arc::new(NativePlugin::<mock::Mock>::new());
    let err = PluginRegistry::new(vec![wasm_mock.clone(), native])
        .unwrap_err()
        .to_string();
    assert!(err.contains("mock"), "{err}");
    assert!(err.contains("/plugins/mock.wasm"), "{err}");
    assert!(err.contains("native"), "{err}");

    // Two files with the same plugin in a plugin directory.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.wasm"), mock_wasm()).unwrap();
    std::fs::write(dir.path().join("b.wasm"), mock_wasm()).unwrap();
    std::fs::write(dir.path().join("README"), "ignored").unwrap();
    let plugins = rt.load_dir(dir.path()).await.unwrap();
    assert_eq!(plugins.len(), 2);
    let err = PluginRegistry::new(
        plugins
            .into_iter()
            .map(|p| p as Arc<dyn DeployerPlugin>)
            .collect(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("a.wasm") && err.contains("b.wasm"), "{err}");

    // A type claimed twice under different names.
    struct Other;
    impl sdk_guest::Deployer for Other {
        fn describe() -> sdk_guest::Description {
            sdk_guest::Description {
                name: "other".into(),
                version: "1.0.0".into(),
                deploy_item_types: vec!["landscaper.gardener.cloud/mock".into()],
                hook_types: vec![],
            }
        }
        fn reconcile(
            _: &sdk_guest::Ctx,
            _: sdk_guest::Invocation,
        ) -> Result<sdk_guest::Response, sdk_guest::DeployerError> {
            Ok(Default::default())
        }
        fn delete(
            _: &sdk_guest::Ctx,
            _: sdk_guest::Invocation,
        ) -> Result<sdk_guest::Response, sdk_guest::DeployerError> {
            Ok(Default::default())
        }
    }
    let err = PluginRegistry::new(vec![wasm_mock, Arc::new(NativePlugin::<Other>::new())])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"landscaper.gardener.cloud/mock\" is claimed by two plugins"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifact_cache() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = |opt| RuntimeConfig {
        cache_dir: Some(dir.path().to_path_buf()),
        opt_level: opt,
        ..Default::default()
    };
    let bytes = mock_wasm();
    async fn check(p: &plugin_runtime::WasmPlugin) {
        let r = p
            .reconcile(mock_item(json!({}), "Init"), Arc::new(NoopHost))
            .await
            .unwrap();
        assert_eq!(r.phase.as_deref(), Some("Succeeded"));
    }

    // 1. cold: compiled and written
    let rt = PluginRuntime::new(cfg(OptLevel::Speed)).unwrap();
    let p = rt.load_bytes("mock.wasm", &bytes).await.unwrap();
    let s = rt.stats();
    assert_eq!((s.compiled, s.cache_hits, s.cache_writes), (1, 0, 1));
    let cached = |dir: &std::path::Path| -> Vec<std::path::PathBuf> {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
            .collect();
        files.sort();
        files
    };
    let files = cached(dir.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let file = files[0].clone();
    assert!(
        file.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(&format!("{}-", p.sha256()))
    );
    drop((p, rt));

    // 2. warm: deserialized from disk, not compiled
    let rt = PluginRuntime::new(cfg(OptLevel::Speed)).unwrap();
    let p = rt.load_bytes("mock.wasm", &bytes).await.unwrap();
    let s = rt.stats();
    assert_eq!((s.compiled, s.cache_hits, s.cache_rejected), (0, 1, 0));
    assert_eq!(s.loads[0].outcome, LoadOutcome::CacheHit);
    check(&p).await;
    drop((p, rt));

    // 3. tampered artifact: rejected, recompiled, rewritten
    let mut blob = std::fs::read(&file).unwrap();
    let n = blob.len();
    blob[n / 2] ^= 0xff;
    std::fs::write(&file, &blob).unwrap();
    let rt = PluginRuntime::new(cfg(OptLevel::Speed)).unwrap();
    let p = rt.load_bytes("mock.wasm", &bytes).await.unwrap();
    let s = rt.stats();
    assert_eq!((s.compiled, s.cache_hits, s.cache_rejected), (1, 0, 1));
    assert!(
        matches!(&s.loads[0].outcome, LoadOutcome::Compiled { cache_rejected: Some(r) } if r.contains("tag")),
        "{:?}",
        s.loads[0].outcome
    );
    check(&p).await;
    drop((p, rt));

    // 4. foreign artifact: a valid wasmtime artifact this runtime did not write
    let foreign = wasmtime::Engine::default()
        .precompile_component(&bytes)
        .unwrap();
    std::fs::write(&file, &foreign).unwrap();
    let rt = PluginRuntime::new(cfg(OptLevel::Speed)).unwrap();
    let p = rt.load_bytes("mock.wasm", &bytes).await.unwrap();
    let s = rt.stats();
    assert_eq!((s.compiled, s.cache_hits, s.cache_rejected), (1, 0, 1));
    check(&p).await;
    drop((p, rt));

    // 5. another engine (another optimisation level, as another architecture or wasmtime
    // would be): compiled into a file of its own, the first engine's file untouched,
    let rt = PluginRuntime::new(cfg(OptLevel::None)).unwrap();
    let p = rt.load_bytes("mock.wasm", &bytes).await.unwrap();
    let s = rt.stats();
    assert_eq!(
        (s.compiled, s.cache_hits, s.cache_rejected, s.cache_writes),
        (1, 0, 0, 1)
    );
    check(&p).await;
    drop((p, rt));
    assert_eq!(cached(dir.path()).len(), 2);
    // so each engine hits its own from now on.
    for level in [OptLevel::Speed, OptLevel::None] {
        let rt = PluginRuntime::new(cfg(level)).unwrap();
        rt.load_bytes("mock.wasm", &bytes).await.unwrap();
        let s = rt.stats();
        assert_eq!((s.compiled, s.cache_hits), (0, 1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn differential_native_vs_wasm_mock() {
    let rt = PluginRuntime::new(shared_cache(RuntimeConfig::default())).unwrap();
    let wasm: Arc<dyn DeployerPlugin> = rt.load_bytes("mock.wasm", &mock_wasm()).await.unwrap();
    let native: Arc<dyn DeployerPlugin> = Arc::new(NativePlugin::<mock::Mock>::new());
    assert_eq!(wasm.description(), native.description());

    let cases = vec![
        mock_item(json!({}), "Init"),
        mock_item(json!({}), ""),
        mock_item(json!({"phase": "Failed"}), "Init"),
        mock_item(
            json!({"phase": "Progressing", "initialPhase": "Init"}),
            "Progressing",
        ),
        mock_item(json!({"initialPhase": "Progressing"}), "Init"),
        mock_item(json!({"initialPhase": "Progressing"}), "Progressing"),
        mock_item(
            json!({"providerStatus": {"apiVersion": "a/v1", "kind": "S", "deep": {"l": [1, 2, 3]}}}),
            "Init",
        ),
        mock_item(
            json!({"export": {"s": "ü ✓", "n": -1, "f": 0.25, "b": true, "z": null}}),
            "Init",
        ),
        mock_item(json!({"export": "just a string"}), "Init"),
        mock_item(
            json!({"continuousReconcile": {"every": "1h"}, "unknownField": 1}),
            "Init",
        ),
        mock_item(json!({"phase": 1}), "Init"),
        mock_item(json!({"export": {}, "initialPhase": false}), "Init"),
        deploy_item(
            "landscaper.gardener.cloud/mock",
            json!({"apiVersion": "v1", "kind": "ConfigMap"}),
            "Init",
        ),
        deploy_item("landscaper.gardener.cloud/mock", json!(null), "Init"),
        deploy_item("landscaper.gardener.cloud/mock", json!("scalar"), "Init"),
    ];
    for (i, inv) in cases.into_iter().enumerate() {
        let w = wasm.reconcile(inv.clone(), noop()).await;
        let n = native.reconcile(inv.clone(), noop()).await;
        assert_eq!(w, n, "reconcile case {i}: {}", inv.deploy_item);
        let w = wasm.delete(inv.clone(), noop()).await;
        let n = native.delete(inv.clone(), noop()).await;
        assert_eq!(w, n, "delete case {i}");
    }
}

/// An older build of the mock answers as today's does.
async fn answer_alike(old: &plugin_runtime::WasmPlugin, new: &plugin_runtime::WasmPlugin) {
    for config in [
        json!({}),
        json!({"phase": "Failed"}),
        json!({"export": {"a": 1}, "providerStatus": {"apiVersion": "x/v1", "kind": "S"}}),
    ] {
        let a = old
            .reconcile(mock_item(config.clone(), "Init"), noop())
            .await;
        let b = new
            .reconcile(mock_item(config.clone(), "Init"), noop())
            .await;
        assert_eq!(a, b, "config {config}");
    }
}

/// The versioning promise of `wit/deployer.wit`: a plugin built against an older 1.x minor
/// keeps working. `fixtures/mock-wit-1.0.0.wasm` is the mock plugin as built against WIT
/// 1.0.0 (before `secondary-targets` and `hooks`); it must load and answer exactly like
/// today's build.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_built_against_wit_1_0_runs_on_this_host() {
    let old = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mock-wit-1.0.0.wasm"),
    )
    .unwrap();
    let imports_1_0 = String::from_utf8_lossy(&old).contains("wasm-deployer:plugin/deployer@1.0.0");
    assert!(imports_1_0, "the fixture must be a WIT 1.0.0 component");
    let rt = PluginRuntime::new(shared_cache(RuntimeConfig::default())).unwrap();
    let old = rt.load_bytes("mock-wit-1.0.0.wasm", &old).await.unwrap();
    let new = rt.load_bytes("mock.wasm", &mock_wasm()).await.unwrap();
    assert_eq!(
        old.description().deploy_item_types,
        new.description().deploy_item_types
    );
    assert!(old.exports_deployer() && old.hook_setup().is_none());
    answer_alike(&old, &new).await;
}

/// The same promise for the minor before outgoing HTTP: `fixtures/mock-wit-1.4.0.wasm` is the
/// mock plugin as built against WIT 1.4.0 (before `wasi:http`, commit ce8e994). It loads on this
/// 1.5 host, says it was built against 1.4.0, imports no `wasi:http`, and answers exactly like
/// today's build.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_built_against_wit_1_4_runs_unchanged_on_this_host() {
    let old = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mock-wit-1.4.0.wasm"),
    )
    .unwrap();
    let rt = PluginRuntime::new(shared_cache(RuntimeConfig::default())).unwrap();
    let old = rt.load_bytes("mock-wit-1.4.0.wasm", &old).await.unwrap();
    let new = rt.load_bytes("mock.wasm", &mock_wasm()).await.unwrap();
    assert_eq!(old.wit_version().as_deref(), Some("1.4.0"));
    assert_eq!(new.wit_version().as_deref(), Some(sdk_guest::WIT_VERSION));
    let (imports, _) = old.interfaces();
    assert!(
        !imports.iter().any(|i| i.starts_with("wasi:http")),
        "{imports:?}"
    );
    answer_alike(&old, &new).await;
}

/// A component may export `deployer`, `hooks` or both; the runtime finds out at load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_export_a_deployer_hooks_or_both() {
    use plugin_runtime::{HookInput, HookPlugin, HookType};
    let rt = PluginRuntime::new(shared_cache(RuntimeConfig::default())).unwrap();
    let load = |sub: &'static str, name: &'static str| {
        let rt = rt.clone();
        async move {
            let bytes = std::fs::read(component(sub, name)).unwrap();
            rt.load_bytes(name, &bytes).await.unwrap()
        }
    };
    let mock = load("plugins", "mock").await;
    assert!(mock.exports_deployer() && mock.hook_setup().is_none());

    let hook_only = load("plugins", "continuous-reconcile").await;
    assert!(!hook_only.exports_deployer());
    assert_eq!(
        hook_only.hook_setup().unwrap().hook_types,
        vec![HookType::ShouldReconcile]
    );
    assert!(hook_only.description().deploy_item_types.is_empty());

    let both = load("test-plugins", "test-hooks").await;
    assert!(both.exports_deployer());
    assert_eq!(
        both.hook_setup().unwrap().hook_types,
        HookType::ALL.to_vec()
    );
    // The hook runs in its own instance and answers; Start has no item, so no opinion.
    let answer = both
        .run_hook(HookInput {
            hook_type: HookType::Start,
            deploy_item: None,
            target: None,
        })
        .await;
    assert_eq!(answer, Ok(None));
    // A scripted trap is this call's ERR_INTERNAL_PROBLEM, named after the hook type.
    let item = json!({"metadata": {"name": "x", "annotations": {
        "hooks.test.wasm-deployer.dev/script": "{\"End\": \"trap\"}"}}});
    let text = item.to_string();
    let err = both
        .run_hook(HookInput {
            hook_type: HookType::End,
            deploy_item: Some(item),
            target: None,
        })
        .await
        .unwrap_err();
    assert!(err.has_code(codes::INTERNAL_PROBLEM), "{err:?}");
    assert_eq!(err.operation, "End");
    assert!(err.message.contains("trapped"), "{}", err.message);
    // The same call with the item as JSON text (what the controller passes) reaches the guest
    // unchanged: the same trap.
    let encoded = both
        .run_hook_encoded(EncodedHookInput {
            hook_type: HookType::End,
            deploy_item: Some(&text),
            target: None,
        })
        .await
        .unwrap_err();
    assert_eq!(encoded, err);
    // An item that is due for a continuous reconcile: the same answer by either path.
    let due = json!({"metadata": {"name": "x"},
        "spec": {"config": {"continuousReconcile": {"every": "1m"}}},
        "status": {"lastReconcileTime": "2020-01-01T00:00:00Z"}});
    let by_value = hook_only
        .run_hook(HookInput {
            hook_type: HookType::ShouldReconcile,
            deploy_item: Some(due.clone()),
            target: None,
        })
        .await
        .unwrap()
        .expect("due: an opinion");
    assert!(!by_value.abort_reconcile, "due: forces a reconcile");
    let due_text = due.to_string();
    let by_text = hook_only
        .run_hook_encoded(EncodedHookInput {
            hook_type: HookType::ShouldReconcile,
            deploy_item: Some(&due_text),
            target: None,
        })
        .await
        .unwrap()
        .expect("due: an opinion");
    assert_eq!(by_text.abort_reconcile, by_value.abort_reconcile);
    // A hook-only component is never a deployer of the registry.
    let registry = PluginRegistry::with_hooks(
        vec![mock as Arc<dyn DeployerPlugin>],
        vec![
            hook_only as Arc<dyn HookPlugin>,
            both as Arc<dyn HookPlugin>,
        ],
    )
    .unwrap();
    assert!(registry.hook("continuous-reconcile").is_some());
    assert_eq!(
        registry.deploy_item_types(),
        vec!["landscaper.gardener.cloud/mock"]
    );
}

/// Capabilities are linked by grant: a component that exports only hooks gets `log` and
/// `clock`; one that imports Kubernetes anyway is refused at load, naming the import — it
/// never gets as far as a call.
#[tokio::test]
async fn a_hook_only_component_that_imports_kubernetes_is_refused_at_load() {
    let rt = PluginRuntime::new(shared_cache(RuntimeConfig::default())).unwrap();
    let bytes = std::fs::read(component("refused-plugins", "test-greedy-hook")).unwrap();
    let err = rt
        .load_bytes("test-greedy-hook.wasm", &bytes)
        .await
        .expect_err("a hook may not import Kubernetes");
    let message = format!("{err:#}");
    assert!(
        message.contains("wasm-deployer:plugin/kubernetes"),
        "names the import: {message}"
    );
    assert!(
        message.contains("granted log and clock"),
        "says what hooks get: {message}"
    );
    // The same import in a deployer is granted (the mock and test-hooks link it).
    let deployer = std::fs::read(component("test-plugins", "test-hooks")).unwrap();
    assert!(rt.load_bytes("test-hooks.wasm", &deployer).await.is_ok());
}
