//! Plugin delivery: how long from a ConfigMap update, and from an OCI push, until the new plugin
//! version serves — cold (the component was never compiled on this host) and warm (the
//! compiled-artifact cache already holds it: a second replica, or a restart).
//!
//! `cargo xtask build-plugins && cargo bench -p deployer-host --bench delivery`
//! (the OCI rows need Debian's `docker-registry`; `BENCH_ROUNDS`, default 5).
//! Each version is the mock component with a different custom section: same code, new digest.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use deployer_host::config::HostConfig;
use deployer_host::dev::DevEnvironment;
use deployer_host::hooks::{HookSet, LiveHooks};
use deployer_host::oci;
use deployer_host::plugins::LivePlugins;
use embedded_apiserver::ApiServer;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, PostParams};
use plugin_runtime::PluginRegistry;
use serde_json::json;

use test_support::bench::env_usize;
use test_support::workspace;

const MOCK_TYPE: &str = "landscaper.gardener.cloud/mock";

fn variant(base: &[u8], k: u32) -> Vec<u8> {
    let mut v = base.to_vec();
    let name = b"bench-version";
    let payload = k.to_le_bytes();
    v.push(0);
    v.push((1 + name.len() + payload.len()) as u8);
    v.push(name.len() as u8);
    v.extend_from_slice(name);
    v.extend_from_slice(&payload);
    v
}

fn sha(bytes: &[u8]) -> String {
    deployer_host::plugin_sources::trust::digest_of(bytes)[7..19].to_string()
}

struct Host {
    _server: ApiServer,
    client: kube::Client,
    live: Arc<LivePlugins>,
    _task: tokio::task::JoinHandle<()>,
}

async fn host(cache: &Path) -> Host {
    let server = ApiServer::new(Default::default()).unwrap();
    let env = DevEnvironment::bootstrap(server.clone(), "http://127.0.0.1:1")
        .await
        .unwrap();
    let live = Arc::new(LivePlugins::new(Arc::new(
        PluginRegistry::new(vec![]).unwrap(),
    )));
    let hooks = Arc::new(LiveHooks::new(HookSet::default()));
    let mut config = HostConfig::default();
    config.plugins.cache_dir = Some(cache.to_path_buf());
    config.plugins.namespace = Some("default".into());
    config.plugins.poll_interval = Some("50ms".into());
    let (_catalog, task) =
        deployer_host::plugins::start_delivery(&config, env.client.clone(), live.clone(), hooks)
            .unwrap();
    Host {
        _server: server,
        client: env.client,
        live,
        _task: task,
    }
}

async fn serving(h: &Host, bytes: &[u8]) {
    let want = sha(bytes);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !h
        .live
        .for_type(MOCK_TYPE)
        .is_some_and(|p| p.origin().contains(&want))
    {
        assert!(Instant::now() < deadline, "version {want} never served");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn declare(h: &Host, spec: serde_json::Value) {
    let api: Api<DynamicObject> = Api::namespaced_with(
        h.client.clone(),
        "default",
        &deployer_host::plugin_sources::declarations::resource(),
    );
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "wasm-deployer.dev/v1alpha1", "kind": "WasmPlugin",
        "metadata": {"name": "mock"}, "spec": spec}))
    .unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

async fn put_configmap(h: &Host, bytes: &[u8]) {
    let api: Api<ConfigMap> = Api::namespaced(h.client.clone(), "default");
    let mut cm = match api.get_opt("mock-plugin").await.unwrap() {
        Some(cm) => cm,
        None => serde_json::from_value(json!({"metadata": {"name": "mock-plugin"}})).unwrap(),
    };
    cm.binary_data = Some([("mock.wasm".to_string(), ByteString(bytes.to_vec()))].into());
    if cm.metadata.resource_version.is_some() {
        api.replace("mock-plugin", &PostParams::default(), &cm)
            .await
            .unwrap();
    } else {
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
}

fn stats(mut ms: Vec<f64>) -> String {
    ms.sort_by(|a, b| a.total_cmp(b));
    format!(
        "{:.1} | {:.1} | {:.1}",
        ms[ms.len() / 2],
        ms[0],
        ms[ms.len() - 1]
    )
}

/// Rounds of "update the source to version k, wait until it serves", on a host with `cache`.
async fn configmap_rounds(cache: &Path, base: &[u8], versions: &[u32]) -> Vec<f64> {
    let h = host(cache).await;
    put_configmap(&h, &variant(base, 0)).await;
    declare(
        &h,
        json!({"source": {"configMap": {"name": "mock-plugin"}}}),
    )
    .await;
    serving(&h, &variant(base, 0)).await;
    let mut out = Vec::new();
    for &k in versions {
        let bytes = variant(base, k);
        let t = Instant::now();
        put_configmap(&h, &bytes).await;
        serving(&h, &bytes).await;
        out.push(t.elapsed().as_secs_f64() * 1e3);
    }
    out
}

async fn oci_rounds(
    cache: &Path,
    base: &[u8],
    versions: &[u32],
    registry: &str,
    push_first: bool,
) -> Vec<f64> {
    let h = host(cache).await;
    let options = oci::RegistryOptions {
        plain_http: vec![registry.to_string()],
        ..Default::default()
    };
    let tag = format!("{registry}/bench/mock:latest");
    oci::push(&tag, &variant(base, 0), "mock", &options)
        .await
        .unwrap();
    declare(
        &h,
        json!({"source": {"oci": {"reference": tag, "plainHttp": true}}}),
    )
    .await;
    serving(&h, &variant(base, 0)).await;
    let mut out = Vec::new();
    for &k in versions {
        let bytes = variant(base, k);
        let t = Instant::now();
        if push_first {
            oci::push(&tag, &bytes, "mock", &options).await.unwrap();
        }
        serving(&h, &bytes).await;
        out.push(t.elapsed().as_secs_f64() * 1e3);
    }
    out
}

#[tokio::main]
async fn main() {
    let base = std::fs::read(workspace().join("target/plugins/mock.wasm"))
        .expect("run `cargo xtask build-plugins` first");
    let rounds = env_usize("BENCH_ROUNDS", 5) as u32;
    let dir = tempfile::tempdir().unwrap();
    let cold: Vec<u32> = (1..=rounds).collect();
    let cache = dir.path().join("cache");
    println!(
        "mock component: {} KB; {rounds} rounds per row; plugins.pollInterval 50ms\n",
        base.len() / 1000
    );
    println!("| source change → new version serving | compiled | median ms | min ms | max ms |");
    println!("|---|---|---|---|---|");
    let c = configmap_rounds(&cache, &base, &cold).await;
    println!("| ConfigMap update | cold (compile) | {} |", stats(c));
    // A second host with the same artifact cache: the versions compiled above deserialize.
    let w = configmap_rounds(&cache, &base, &cold).await;
    println!(
        "| ConfigMap update | warm (artifact cache) | {} |",
        stats(w)
    );
    match test_support::registry::start_registry() {
        Some(registry) => {
            let addr = registry.addr.clone();
            let oci_cache = dir.path().join("oci-cache");
            let oci_versions: Vec<u32> = (100..100 + rounds).collect();
            let c = oci_rounds(&oci_cache, &base, &oci_versions, &addr, true).await;
            println!("| OCI push (same tag) | cold (compile) | {} |", stats(c));
            let w = oci_rounds(&oci_cache, &base, &oci_versions, &addr, true).await;
            println!(
                "| OCI push (same tag) | warm (artifact cache) | {} |",
                stats(w)
            );
        }
        None => println!("| OCI push | - | docker-registry not installed | | |"),
    }
}
