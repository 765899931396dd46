//! Plugin delivery: wasm plugins declared by `WasmPlugin` objects, from ConfigMaps and OCI
//! registries, verified before they are compiled, swapped in while the host serves, and
//! refused — with the last good version serving on — when a new version is bad.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use deployer_host::config::HostConfig;
use deployer_host::landscaper::Phase;
use deployer_host::oci;
use deployer_host::plugin_sources::catalog::{Catalog, PluginStatus};
use deployer_host::plugin_sources::{declarations, trust};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};
use test_support::{Harness, Options};

const MOCK_TYPE: &str = "landscaper.gardener.cloud/mock";

/// The mock component, and a second version of it: the same code with a custom section
/// appended (a valid component with another digest).
fn mock_versions() -> (Vec<u8>, Vec<u8>) {
    let v1 = std::fs::read(test_support::plugins_dir().join("mock.wasm")).unwrap();
    let mut v2 = v1.clone();
    let name = b"wasm-deployer-test-version";
    let payload = b"2";
    v2.push(0); // custom section id
    v2.push((1 + name.len() + payload.len()) as u8);
    v2.push(name.len() as u8);
    v2.extend_from_slice(name);
    v2.extend_from_slice(payload);
    (v1, v2)
}

/// A harness whose only mock comes from plugin delivery (the plugin directory is empty).
async fn harness() -> (Harness, Arc<Catalog>, tempfile::TempDir) {
    harness_with(|_, _| {}).await
}

/// [`harness`], with the configuration and the (empty) plugin directory adjusted first.
async fn harness_with(
    adjust: impl FnOnce(&mut HostConfig, &std::path::Path),
) -> (Harness, Arc<Catalog>, tempfile::TempDir) {
    let empty = tempfile::tempdir().unwrap();
    let mut config = HostConfig {
        requeue_interval: Some("200ms".into()),
        ..HostConfig::default()
    };
    config.plugins.dir = Some(empty.path().to_path_buf());
    config.plugins.cache_dir = Some(test_support::plugins_dir().join("../plugin-cache"));
    config.plugins.namespace = Some("default".into());
    config.plugins.poll_interval = Some("200ms".into());
    adjust(&mut config, empty.path());
    let h = Harness::start_with(Options {
        config: config.clone(),
        ..Options::default()
    })
    .await;
    let (catalog, _task) = deployer_host::plugins::start_delivery(
        &config,
        h.client.clone(),
        h.deployer.plugins.clone(),
        h.deployer.hooks.clone(),
    )
    .unwrap();
    (h, catalog, empty)
}

fn plugins(h: &Harness) -> Api<DynamicObject> {
    Api::namespaced_with(h.client.clone(), "default", &declarations::resource())
}

async fn declare(h: &Harness, name: &str, spec: Value) {
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "wasm-deployer.dev/v1alpha1", "kind": "WasmPlugin",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec,
    }))
    .unwrap();
    plugins(h)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
}

async fn status_when(
    h: &Harness,
    name: &str,
    pred: impl Fn(&PluginStatus) -> bool,
) -> PluginStatus {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let obj = plugins(h).get(name).await.unwrap();
        let status: Option<PluginStatus> = serde_json::from_value(obj.data["status"].clone()).ok();
        if let Some(s) = &status
            && pred(s)
        {
            return s.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name}: status {status:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn put_configmap(h: &Harness, name: &str, data: BTreeMap<String, Vec<u8>>) {
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    let binary: BTreeMap<String, ByteString> =
        data.into_iter().map(|(k, v)| (k, ByteString(v))).collect();
    match api.get_opt(name).await.unwrap() {
        None => {
            let mut cm: ConfigMap =
                serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
            cm.binary_data = Some(binary);
            api.create(&PostParams::default(), &cm).await.unwrap();
        }
        Some(mut cm) => {
            cm.binary_data = Some(binary);
            api.replace(name, &PostParams::default(), &cm)
                .await
                .unwrap();
        }
    }
}

/// `bytes` as the mock plugin: ConfigMap `mock-plugin` (key `mock.wasm`), declared by the
/// WasmPlugin `mock`; returns its status once Ready.
async fn deliver_mock(h: &Harness, bytes: Vec<u8>) -> PluginStatus {
    put_configmap(
        h,
        "mock-plugin",
        BTreeMap::from([("mock.wasm".into(), bytes)]),
    )
    .await;
    declare(
        h,
        "mock",
        json!({"source": {"configMap": {"name": "mock-plugin"}}}),
    )
    .await;
    status_when(h, "mock", |s| s.is_ready()).await
}

/// A signing key and its public key as PEM (`cosign.pub`).
fn key_pair() -> (p256::ecdsa::SigningKey, String) {
    use p256::pkcs8::EncodePublicKey;
    let key = p256::ecdsa::SigningKey::random(&mut p256::elliptic_curve::rand_core::OsRng);
    let public = key
        .verifying_key()
        .to_public_key_pem(p256::pkcs8::LineEnding::LF)
        .unwrap();
    (key, public)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

async fn mock_succeeds(h: &Harness, name: &str) {
    h.create_item(&test_support::mock_item(name)).await;
    let item = h.wait_finished("default", name).await;
    assert_eq!(item.status().phase, Phase::Succeeded, "{name}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_plugin_in_a_configmap_then_it_serves_and_new_versions_swap_in_while_bad_ones_are_refused()
 {
    let (h, catalog, _dir) = harness().await;
    let (v1, v2) = mock_versions();
    assert!(h.deployer.plugins.for_type(MOCK_TYPE).is_none());
    let ready = deliver_mock(&h, gzip(&v1)).await;
    assert_eq!(ready.digest, trust::digest_of(&v1), "gzip was unpacked");
    assert_eq!(ready.plugin_name, "mock");
    assert_eq!(ready.types, vec![MOCK_TYPE.to_string()]);
    assert_eq!(ready.wit_version, sdk_guest::WIT_VERSION);
    mock_succeeds(&h, "first").await;

    // A broken new version: refused, and v1 keeps serving.
    put_configmap(
        &h,
        "mock-plugin",
        BTreeMap::from([("mock.wasm".into(), b"not wasm".to_vec())]),
    )
    .await;
    let refused = status_when(&h, "mock", |s| !s.last_error.is_empty()).await;
    let compiled = refused
        .condition(deployer_host::plugin_sources::catalog::Stage::Compiled)
        .unwrap();
    assert_eq!(
        (compiled.status.as_str(), compiled.reason.as_str()),
        ("False", "NotWasm")
    );
    assert_eq!(
        refused.digest,
        trust::digest_of(&v1),
        "the last good version is still reported"
    );
    mock_succeeds(&h, "during-bad-version").await;
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(h.client.clone(), "default");
    let refusal = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|e| e.reason.as_deref() == Some("PluginRefused"))
        .expect("a Warning Event on the WasmPlugin");
    assert_eq!(refusal.type_.as_deref(), Some("Warning"));
    assert_eq!(
        refusal.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("mock")
    );
    assert!(refusal.note.unwrap_or_default().contains("not WebAssembly"));
    // A core module instead of a component.
    put_configmap(
        &h,
        "mock-plugin",
        BTreeMap::from([("mock.wasm".into(), b"\0asm\x01\0\0\0".to_vec())]),
    )
    .await;
    let core = status_when(&h, "mock", |s| {
        s.last_error.contains("core WebAssembly module")
    })
    .await;
    assert!(core.is_ready(), "v1 serves on: {core:#?}");
    assert!(!core.is_up_to_date());

    // A good new version: swapped in.
    put_configmap(
        &h,
        "mock-plugin",
        BTreeMap::from([("mock.wasm".into(), v2.clone())]),
    )
    .await;
    let swapped = status_when(&h, "mock", |s| {
        s.is_ready() && s.digest == trust::digest_of(&v2)
    })
    .await;
    assert!(swapped.last_error.is_empty());
    let serving = catalog.serving().await;
    assert_eq!(
        serving,
        vec![("mock".into(), "0.1.0".into(), trust::digest_of(&v2))]
    );
    let origin = h.deployer.plugins.for_type(MOCK_TYPE).unwrap().origin();
    assert!(origin.contains(&trust::digest_of(&v2)[7..]), "{origin}");
    mock_succeeds(&h, "after-swap").await;
    let metrics = deployer_host::metrics::render_delivery(&catalog).await;
    assert!(
        metrics.contains("wasm_deployer_plugin_load_total{result=\"loaded\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "wasm_deployer_plugin_info{{name=\"mock\",version=\"0.1.0\",digest=\"{}\"}} 1",
            trust::digest_of(&v2)
        )),
        "{metrics}"
    );

    // Removed: the type is no longer served; its items are left alone.
    plugins(&h)
        .delete("mock", &DeleteParams::default())
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while h.deployer.plugins.for_type(MOCK_TYPE).is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "still serving after removal"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    h.create_item(&test_support::mock_item("orphan")).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let orphan = h.items("default").get("orphan").await.unwrap();
    assert_eq!(
        orphan.status().phase,
        Phase::Empty,
        "no deployer touched it: {:?}",
        orphan.status
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_pins_keys_and_type_clashes_then_each_bad_plugin_is_refused_with_its_reason() {
    let (h, _catalog, _dir) = harness().await;
    let (v1, _) = mock_versions();
    let (key, public) = key_pair();
    put_configmap(
        &h,
        "plain",
        BTreeMap::from([("mock.wasm".into(), v1.clone())]),
    )
    .await;
    put_configmap(
        &h,
        "signed",
        BTreeMap::from([
            ("mock.wasm".into(), v1.clone()),
            (
                "mock.wasm.sig".into(),
                trust::sign_blob(&v1, &key).into_bytes(),
            ),
        ]),
    )
    .await;
    let wrong_pin = format!("sha256:{}", "0".repeat(64));
    declare(
        &h,
        "pinned-wrong",
        json!({"source": {"configMap": {"name": "plain"}}, "digest": wrong_pin}),
    )
    .await;
    declare(
        &h,
        "unsigned",
        json!({"source": {"configMap": {"name": "plain"}}, "verification": {"publicKey": public}}),
    )
    .await;
    declare(
        &h,
        "signed",
        json!({"source": {"configMap": {"name": "signed"}}, "verification": {"publicKey": public},
        "digest": trust::digest_of(&v1)}),
    )
    .await;

    let s = status_when(&h, "pinned-wrong", |s| !s.last_error.is_empty()).await;
    assert!(s.last_error.contains("digest mismatch"), "{}", s.last_error);
    let s = status_when(&h, "unsigned", |s| !s.last_error.is_empty()).await;
    assert_eq!(
        s.condition(deployer_host::plugin_sources::catalog::Stage::Verified)
            .unwrap()
            .reason,
        "Unsigned"
    );
    let s = status_when(&h, "signed", |s| s.is_ready()).await;
    assert_eq!(s.digest, trust::digest_of(&v1));
    mock_succeeds(&h, "from-signed").await;

    // The same type from a second declaration: refused, the first keeps it.
    declare(
        &h,
        "second-mock",
        json!({"source": {"configMap": {"name": "plain"}}}),
    )
    .await;
    let clash = status_when(&h, "second-mock", |s| !s.last_error.is_empty()).await;
    assert_eq!(
        clash
            .condition(deployer_host::plugin_sources::catalog::Stage::Ready)
            .unwrap()
            .reason,
        "TypeConflict"
    );
    assert!(
        clash.last_error.contains("\"mock\""),
        "{}",
        clash.last_error
    );
    assert!(
        status_when(&h, "signed", |s| s.is_ready())
            .await
            .last_error
            .is_empty()
    );
    // A ConfigMap that does not exist.
    declare(
        &h,
        "missing",
        json!({"source": {"configMap": {"name": "nope"}}}),
    )
    .await;
    let s = status_when(&h, "missing", |s| !s.last_error.is_empty()).await;
    assert!(s.last_error.contains("not found"), "{}", s.last_error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_plugin_in_an_oci_registry_then_signed_versions_serve_and_a_moved_tag_swaps_in() {
    let Some(registry) = test_support::registry::start_registry() else {
        return;
    };
    let (h, _catalog, _dir) = harness().await;
    let (v1, v2) = mock_versions();
    let options = oci::RegistryOptions {
        plain_http: vec![registry.addr.clone()],
        ..Default::default()
    };
    let (key, public) = key_pair();
    let (other, _) = key_pair();
    let stable = format!("{}/plugins/mock:stable", registry.addr);
    let d1 = oci::push(&stable, &v1, "mock", &options).await.unwrap();
    oci::push_signature(&stable, &d1, &key, &options)
        .await
        .unwrap();
    // What we pushed comes back whole, in the CNCF layout.
    let pulled = oci::pull(&stable, &options).await.unwrap();
    assert_eq!(pulled.bytes, v1);
    assert_eq!(pulled.manifest_digest, d1);
    // By digest, and in the legacy (Kubewarden/Spin) layout.
    let by_digest = format!("{}/plugins/mock@{d1}", registry.addr);
    assert_eq!(oci::pull(&by_digest, &options).await.unwrap().bytes, v1);
    assert_eq!(oci::resolve(&by_digest, &options).await.unwrap(), d1);
    let legacy = format!("{}/plugins/legacy:1", registry.addr);
    oci::push_as(&legacy, &v1, "mock", oci::LEGACY_WASM_LAYER, &options)
        .await
        .unwrap();
    assert_eq!(oci::pull(&legacy, &options).await.unwrap().bytes, v1);
    // The CLI pushes (and signs) the same way.
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("cosign.key");
    std::fs::write(&key_file, {
        use p256::pkcs8::EncodePrivateKey;
        key.to_pkcs8_pem(p256::pkcs8::LineEnding::LF)
            .unwrap()
            .to_string()
    })
    .unwrap();
    let cli_ref = format!("{}/plugins/cli:1", registry.addr);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_deployer-host"))
        .args(["plugin", "push"])
        .arg(test_support::plugins_dir().join("mock.wasm"))
        .arg(&cli_ref)
        .arg("--plain-http")
        .arg("--key")
        .arg(&key_file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cli_digest = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let sigs = oci::signatures(&cli_ref, &cli_digest, &options)
        .await
        .unwrap();
    assert_eq!(sigs.len(), 1);
    trust::verify_payload(
        &sigs[0].0,
        &sigs[0].1,
        &cli_digest,
        &trust::public_keys(&public).unwrap(),
    )
    .unwrap();
    assert_eq!(oci::pull(&cli_ref, &options).await.unwrap().bytes, v1);
    let unsigned = format!("{}/plugins/unsigned:1", registry.addr);
    oci::push(&unsigned, &v1, "mock", &options).await.unwrap();
    let badly = format!("{}/plugins/badly-signed:1", registry.addr);
    let db = oci::push(&badly, &v1, "mock", &options).await.unwrap();
    oci::push_signature(&badly, &db, &other, &options)
        .await
        .unwrap();

    let verify = json!({"publicKey": public});
    declare(&h, "mock", json!({"source": {"oci": {"reference": stable, "plainHttp": true}}, "verification": verify})).await;
    declare(&h, "unsigned", json!({"source": {"oci": {"reference": unsigned, "plainHttp": true}}, "verification": verify})).await;
    declare(
        &h,
        "badly-signed",
        json!({"source": {"oci": {"reference": badly, "plainHttp": true}}, "verification": verify}),
    )
    .await;
    declare(
        &h,
        "https-only",
        json!({"source": {"oci": {"reference": stable}}}),
    )
    .await;

    let ready = status_when(&h, "mock", |s| s.is_ready()).await;
    assert_eq!(ready.digest, trust::digest_of(&v1));
    mock_succeeds(&h, "from-oci").await;
    let s = status_when(&h, "unsigned", |s| !s.last_error.is_empty()).await;
    assert!(
        s.last_error.contains("has no signature"),
        "{}",
        s.last_error
    );
    let s = status_when(&h, "badly-signed", |s| !s.last_error.is_empty()).await;
    assert!(
        s.last_error.contains("no signature verifies"),
        "{}",
        s.last_error
    );
    let s = status_when(&h, "https-only", |s| !s.last_error.is_empty()).await;
    assert_eq!(
        s.condition(deployer_host::plugin_sources::catalog::Stage::Fetched)
            .unwrap()
            .status,
        "False"
    );

    // The tag moves to a signed v2: the next poll swaps it in.
    let d2 = oci::push(&stable, &v2, "mock", &options).await.unwrap();
    assert_ne!(d1, d2);
    oci::push_signature(&stable, &d2, &key, &options)
        .await
        .unwrap();
    status_when(&h, "mock", |s| {
        s.is_ready() && s.digest == trust::digest_of(&v2)
    })
    .await;
    mock_succeeds(&h, "after-tag-move").await;
    // An unsigned v3 on the tag: refused, v2 serves on.
    let (_, mut v3) = mock_versions();
    v3.push(0);
    v3.extend_from_slice(&[2, 1, b'x']);
    oci::push(&stable, &v3, "mock", &options).await.unwrap();
    let s = status_when(&h, "mock", |s| !s.last_error.is_empty()).await;
    assert_eq!(s.digest, trust::digest_of(&v2));
    mock_succeeds(&h, "during-unsigned-tag").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_500_items_in_flight_when_a_new_version_rolls_out_then_no_item_fails_and_new_jobs_use_it()
 {
    let (h, catalog, _dir) = harness().await;
    let (v1, v2) = mock_versions();
    deliver_mock(&h, v1).await;
    let old = catalog.serving_plugins().await.remove(0);

    for i in 0..500 {
        h.create_item(&test_support::mock_item(&format!("load-{i}")))
            .await;
        if i == 150 {
            // The rollout, while the first items are being worked on.
            put_configmap(
                &h,
                "mock-plugin",
                BTreeMap::from([("mock.wasm".into(), v2.clone())]),
            )
            .await;
        }
    }
    status_when(&h, "mock", |s| {
        s.is_ready() && s.digest == trust::digest_of(&v2)
    })
    .await;
    let new = catalog.serving_plugins().await.remove(0);
    assert_eq!(format!("sha256:{}", new.sha256()), trust::digest_of(&v2));
    for i in 0..500 {
        let item = h.wait_finished("default", &format!("load-{i}")).await;
        assert_eq!(
            item.status().phase,
            Phase::Succeeded,
            "load-{i}: {:?}",
            item.status().last_error
        );
    }
    assert!(old.calls() > 0, "the first version served some of the jobs");
    let old_calls = old.calls();
    let new_calls = new.calls();
    for i in 0..20 {
        mock_succeeds(&h, &format!("after-{i}")).await;
    }
    assert_eq!(old.calls(), old_calls, "no new job goes to the old version");
    assert!(new.calls() >= new_calls + 20, "new jobs use the new digest");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_configmaps_labelled_for_plugins_then_every_key_loads_and_a_bad_one_is_refused_alone()
{
    let (h, catalog, _dir) = harness_with(|config, dir| {
        // A broken file in the plugin directory does not keep the host from starting.
        std::fs::write(dir.join("broken.wasm"), b"garbage").unwrap();
        config.plugins.config_map_selector = Some("wasm-deployer.dev/plugins=true".into());
    })
    .await;
    let (v1, _) = mock_versions();
    let greedy =
        std::fs::read(test_support::plugins_dir().join("../refused-plugins/test-greedy-hook.wasm"))
            .unwrap();
    let continuous =
        std::fs::read(test_support::plugins_dir().join("continuous-reconcile.wasm")).unwrap();
    put_configmap(
        &h,
        "bundle",
        BTreeMap::from([
            ("mock.wasm".into(), gzip(&v1)),
            ("continuous-reconcile.wasm".into(), continuous),
            ("greedy.wasm".into(), greedy),
        ]),
    )
    .await;
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    let label = json!({"metadata": {"labels": {"wasm-deployer.dev/plugins": "true"}}});
    api.patch(
        "bundle",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&label),
    )
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let greedy_status = loop {
        if let Some(s) = catalog.status("configmap/bundle/greedy.wasm").await
            && !s.last_error.is_empty()
        {
            break s;
        }
        assert!(tokio::time::Instant::now() < deadline, "greedy not refused");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        greedy_status
            .last_error
            .contains("wasm-deployer:plugin/kubernetes"),
        "names the import the host does not grant: {}",
        greedy_status.last_error
    );
    while catalog.serving().await.len() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            catalog.serving().await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let names: Vec<String> = catalog
        .serving()
        .await
        .into_iter()
        .map(|(n, ..)| n)
        .collect();
    assert_eq!(
        names,
        vec!["continuous-reconcile".to_string(), "mock".to_string()]
    );
    assert!(
        h.deployer
            .plugins
            .current()
            .hook("continuous-reconcile")
            .is_some()
    );
    mock_succeeds(&h, "from-bundle").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_hook_plugin_declared_with_its_wiring_then_its_hooks_run_for_the_named_types() {
    let (h, _catalog, _dir) = harness().await;
    let (v1, _) = mock_versions();
    let continuous =
        std::fs::read(test_support::plugins_dir().join("continuous-reconcile.wasm")).unwrap();
    deliver_mock(&h, v1).await;
    put_configmap(
        &h,
        "hook-plugin",
        BTreeMap::from([("hook.wasm".into(), continuous)]),
    )
    .await;
    declare(
        &h,
        "continuous",
        json!({"source": {"configMap": {"name": "hook-plugin"}},
        "hooks": [{"deployItemTypes": [MOCK_TYPE], "hookTypes": ["ShouldReconcile"]}]}),
    )
    .await;
    let s = status_when(&h, "continuous", |s| s.is_ready()).await;
    assert_eq!(s.hook_types, vec!["ShouldReconcile".to_string()]);
    let hooks = &h.deployer.hooks;
    assert!(hooks.has(Some(MOCK_TYPE), sdk_guest::HookType::ShouldReconcile));
    assert!(!hooks.has(Some("other/type"), sdk_guest::HookType::ShouldReconcile));
    let before = h
        .deployer
        .stats
        .hook_stages
        .load(std::sync::atomic::Ordering::Relaxed);
    mock_succeeds(&h, "hooked").await;
    assert!(
        h.deployer
            .stats
            .hook_stages
            .load(std::sync::atomic::Ordering::Relaxed)
            > before,
        "the delivered hook ran for the mock item"
    );
    // Rewired to a hook type the plugin does not declare: refused, naming it; the old wiring
    // serves on.
    let rewire = json!({"spec": {"hooks": [{"hookTypes": ["End"]}]}});
    plugins(&h)
        .patch(
            "continuous",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&rewire),
        )
        .await
        .unwrap();
    let bad = status_when(&h, "continuous", |s| !s.last_error.is_empty()).await;
    assert_eq!(bad.up_to_date().unwrap().reason, "HookWiring");
    assert!(bad.is_ready(), "the old wiring serves on: {bad:#?}");
    assert!(bad.last_error.contains("End"), "{}", bad.last_error);
    assert!(hooks.has(Some(MOCK_TYPE), sdk_guest::HookType::ShouldReconcile));
}

/// `kubectl get wasmplugins` as the server answers it (a Table from the CRD's printer
/// columns): name -> column -> cell.
async fn wasmplugin_table(h: &Harness) -> BTreeMap<String, BTreeMap<String, String>> {
    test_support::get_table(
        &h.client,
        "/apis/wasm-deployer.dev/v1alpha1/namespaces/default/wasmplugins",
    )
    .await
    .1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_serving_plugin_when_its_newest_version_is_refused_then_it_reads_ready_and_not_up_to_date()
 {
    let (h, catalog, _dir) = harness().await;
    let (v1, v2) = mock_versions();
    // Given the mock plugin serving v1: Ready and up to date, for the generation declared.
    let serving = deliver_mock(&h, v1.clone()).await;
    assert_eq!(serving.observed_generation, Some(1));
    let ready_since = serving
        .condition(deployer_host::plugin_sources::catalog::Stage::Ready)
        .unwrap()
        .last_transition_time
        .clone();
    assert!(!ready_since.is_empty());
    let row = &wasmplugin_table(&h).await["mock"];
    assert_eq!(
        (
            row["Ready"].as_str(),
            row["Up-to-date"].as_str(),
            row["Plugin"].as_str()
        ),
        ("True", "True", "mock"),
        "{row:?}"
    );

    // When a new version is refused (not WebAssembly), then the plugin still serves — Ready
    // stays True — and UpToDate says the newest version was refused, and why.
    put_configmap(
        &h,
        "mock-plugin",
        BTreeMap::from([("mock.wasm".into(), b"not wasm".to_vec())]),
    )
    .await;
    let refused = status_when(&h, "mock", |s| !s.is_up_to_date()).await;
    assert!(refused.is_ready(), "{refused:#?}");
    let ready = refused
        .condition(deployer_host::plugin_sources::catalog::Stage::Ready)
        .unwrap();
    assert_eq!(ready.reason, "LastGoodVersionServing");
    assert!(
        ready.message.contains(&trust::digest_of(&v1)),
        "{}",
        ready.message
    );
    assert_eq!(
        ready.last_transition_time, ready_since,
        "Ready never changed"
    );
    assert_eq!(
        refused.digest,
        trust::digest_of(&v1),
        "digest names what serves"
    );
    let up_to_date = refused.up_to_date().unwrap();
    assert_eq!(up_to_date.reason, "NotWasm");
    assert!(
        up_to_date.message.contains("not WebAssembly"),
        "{}",
        up_to_date.message
    );
    let row = &wasmplugin_table(&h).await["mock"];
    assert_eq!(
        (
            row["Ready"].as_str(),
            row["Up-to-date"].as_str(),
            row["Reason"].as_str()
        ),
        ("True", "False", "NotWasm"),
        "{row:?}"
    );
    // The old version still runs items.
    assert_eq!(
        catalog
            .serving()
            .await
            .into_iter()
            .map(|(_, _, digest)| digest)
            .collect::<Vec<_>>(),
        vec![trust::digest_of(&v1)]
    );
    mock_succeeds(&h, "served-by-the-last-good-version").await;

    // When a good version arrives, then it serves and the plugin is up to date again.
    put_configmap(
        &h,
        "mock-plugin",
        BTreeMap::from([("mock.wasm".into(), v2.clone())]),
    )
    .await;
    let swapped = status_when(&h, "mock", |s| {
        s.is_up_to_date() && s.digest == trust::digest_of(&v2)
    })
    .await;
    assert!(swapped.is_ready() && swapped.last_error.is_empty());
    let row = &wasmplugin_table(&h).await["mock"];
    assert_eq!(
        (row["Ready"].as_str(), row["Up-to-date"].as_str()),
        ("True", "True"),
        "{row:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_namespace_busy_with_configmaps_then_only_plugin_configmaps_wake_the_host() {
    // No poll to hide behind: only watches wake a pass.
    let (h, catalog, _dir) = harness_with(|config, _| {
        config.plugins.poll_interval = Some("1h".into());
        config.plugins.config_map_selector = Some("wasm-deployer.dev/plugins=true".into());
    })
    .await;
    let (v1, v2) = mock_versions();
    deliver_mock(&h, v1.clone()).await;
    let plugin_passes = || {
        h.server.as_ref().map(|s| {
            let stats = s.stats();
            stats.count("list", "wasmplugins.wasm-deployer.dev")
        })
    };
    // Given a settled host, when a deployer writes ConfigMaps that hold no plugin into its
    // namespace,
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = plugin_passes();
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    for i in 0..20 {
        let cm: ConfigMap = serde_json::from_value(
            json!({"metadata": {"name": format!("app-{i}")}, "data": {"k": "v"}}),
        )
        .unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    // then the host does not look at its plugins again (on the embedded server, which counts),
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(plugin_passes(), before, "unrelated ConfigMaps woke a pass");
    // and a ConfigMap that does hold a plugin still wakes it at once: the declared one,
    put_configmap(
        &h,
        "mock-plugin",
        BTreeMap::from([("mock.wasm".into(), v2.clone())]),
    )
    .await;
    let swapped = status_when(&h, "mock", |s| s.digest == trust::digest_of(&v2)).await;
    assert!(swapped.is_ready());
    // and one the selector matches.
    let mut labelled: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "labelled", "labels": {"wasm-deployer.dev/plugins": "true"}},
    }))
    .unwrap();
    labelled.binary_data = Some(BTreeMap::from([(
        "second-mock.wasm".to_string(),
        ByteString(v1.clone()),
    )]));
    api.create(&PostParams::default(), &labelled).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !catalog
        .names()
        .await
        .contains(&"configmap/labelled/second-mock.wasm".to_string())
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the labelled ConfigMap's plugin was not picked up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
