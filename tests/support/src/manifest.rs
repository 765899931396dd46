//! Helpers shared by the manifest deployer stories: DeployItems from the Landscaper testdata
//! (retargeted to the harness' `default` Target), spec updates, job waits, object access.

use std::time::Duration;

use deployer_host::landscaper::DeployItem;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

use crate::Harness;

pub const TYPE: &str = "landscaper.gardener.cloud/kubernetes-manifest";
pub const V1ALPHA2: &str = "manifest.deployer.landscaper.gardener.cloud/v1alpha2";
pub const OWNER_LABEL: &str = "manifest.deployer.landscaper.gardener.cloud/deployitem";

/// A DeployItem YAML from `shared/landscaper/testdata/deployer/manifest/test/testdata/`, put
/// into namespace `default` with the harness' `default` Target (as Landscaper's test utils do).
pub fn testdata_item(file: &str, name: &str) -> Value {
    let path = crate::workspace()
        .join("../shared/landscaper/testdata/deployer/manifest/test/testdata")
        .join(file);
    let yaml = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut item: Value = serde_yaml::from_str(&yaml).expect("testdata YAML");
    item["metadata"] = json!({"name": name, "namespace": "default"});
    item["spec"]["target"] = json!({"name": "default", "namespace": "default"});
    item
}

/// A manifest DeployItem with `config` (apiVersion/kind added if missing).
pub fn item(name: &str, mut config: Value) -> Value {
    if config.get("apiVersion").is_none() {
        config["apiVersion"] = json!(V1ALPHA2);
        config["kind"] = json!("ProviderConfiguration");
    }
    json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": TYPE, "target": {"name": "default", "namespace": "default"}, "config": config}
    })
}

/// A manifest DeployItem like [`item`], whose Target is `target` (in `default`).
pub fn item_on(name: &str, target: &str, config: Value) -> Value {
    let mut i = item(name, config);
    i["spec"]["target"] = json!({"name": target, "namespace": "default"});
    i
}

/// Creates a `kubernetes-cluster` Target `name` in `default` with `spec` (`config` or `secretRef`).
pub async fn create_target(h: &Harness, name: &str, mut spec: Value) {
    spec["type"] = json!("landscaper.gardener.cloud/kubernetes-cluster");
    put(
        h,
        json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
               "metadata": {"name": name, "namespace": "default"}, "spec": spec}),
    )
    .await;
}

/// Creates a Secret in `default` with `string_data`.
pub async fn create_secret(h: &Harness, name: &str, string_data: Value) {
    put(
        h,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": name, "namespace": "default"}, "stringData": string_data}),
    )
    .await;
}

pub async fn create(h: &Harness, item: &Value) -> DeployItem {
    h.create_item(&item.to_string()).await
}

/// Replaces `spec.config` (the simulated Landscaper then issues a new jobID).
pub async fn set_config(h: &Harness, name: &str, config: &Value) -> String {
    let before = h.items("default").get(name).await.unwrap().status().job_id;
    // One atomic replace: two patches (clear, then set) would let Landscaper start a job on the
    // item without configuration in between.
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/spec/config", "value": config}
    ]))
    .unwrap();
    h.items("default")
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .unwrap();
    before
}

/// Waits until a job other than `old_job` has finished.
pub async fn wait_next_job(h: &Harness, name: &str, old_job: &str) -> DeployItem {
    h.wait_for("default", name, Duration::from_secs(30), |i| {
        let s = i.status();
        !s.job_id.is_empty() && s.job_id != old_job && s.job_id == s.job_id_finished
    })
    .await
}

/// Waits for the first job and returns the item.
pub async fn wait_done(h: &Harness, name: &str) -> DeployItem {
    h.wait_for("default", name, Duration::from_secs(30), |i| {
        let s = i.status();
        !s.job_id.is_empty() && s.job_id == s.job_id_finished
    })
    .await
}

/// The message of the item's `ManifestDeployer` condition (what the plugin waits for).
pub fn waiting_for(item: &DeployItem) -> String {
    item.status()
        .conditions
        .iter()
        .find(|c| c.type_ == "ManifestDeployer")
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

/// Waits until the unfinished job of `name` waits for something whose description contains
/// `needle`.
pub async fn wait_waiting_for(h: &Harness, name: &str, needle: &str) -> DeployItem {
    h.wait_for("default", name, Duration::from_secs(20), |i| {
        let s = i.status();
        s.job_id != s.job_id_finished && waiting_for(i).contains(needle)
    })
    .await
}

/// The exports of a finished item (the `config` of its export Secret).
pub async fn export_config(h: &Harness, item: &DeployItem) -> Value {
    let export = item.status().export_ref.expect("status.exportRef");
    let secret = get(h, "v1", "Secret", Some("default"), &export.name)
        .await
        .expect("export Secret");
    serde_json::from_str(&base64_decode(secret["data"]["config"].as_str().unwrap())).unwrap()
}

pub fn managed(item: &DeployItem) -> Vec<Value> {
    item.status()
        .provider_status
        .and_then(|p| p.get("managedResources").cloned())
        .and_then(|m| m.as_array().cloned())
        .unwrap_or_default()
}

pub fn managed_names(item: &DeployItem) -> Vec<String> {
    managed(item)
        .iter()
        .map(|m| m["resource"]["name"].as_str().unwrap_or("").to_string())
        .collect()
}

pub fn api(client: &Client, api_version: &str, kind: &str, ns: Option<&str>) -> Api<DynamicObject> {
    let (g, v) = api_version.split_once('/').unwrap_or(("", api_version));
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(g, v, kind));
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

/// The object as JSON, or None.
pub async fn get(
    h: &Harness,
    api_version: &str,
    kind: &str,
    ns: Option<&str>,
    name: &str,
) -> Option<Value> {
    get_on(&h.client, api_version, kind, ns, name).await
}

/// The object on the cluster of `client` as JSON, or None.
pub async fn get_on(
    client: &Client,
    api_version: &str,
    kind: &str,
    ns: Option<&str>,
    name: &str,
) -> Option<Value> {
    api(client, api_version, kind, ns)
        .get_opt(name)
        .await
        .unwrap()
        .map(|o| serde_json::to_value(o).unwrap())
}

pub async fn configmap(h: &Harness, name: &str) -> Option<Value> {
    get(h, "v1", "ConfigMap", Some("default"), name).await
}

pub async fn secret_value(h: &Harness, name: &str, key: &str) -> Option<String> {
    use base64_decode as b64;
    let s = get(h, "v1", "Secret", Some("default"), name).await?;
    s["data"][key].as_str().map(b64)
}

/// Minimal base64 decoding for Secret data in assertions.
pub fn base64_decode(s: &str) -> String {
    let table = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' => 62,
            _ => 63,
        }
    };
    let bytes: Vec<u8> = s.bytes().filter(|c| *c != b'=').collect();
    let mut out = Vec::new();
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= table(*c) << (18 - 6 * i);
        }
        for i in 0..chunk.len().saturating_sub(1) {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    String::from_utf8(out).unwrap()
}

/// Creates or replaces an object through the API.
pub async fn put(h: &Harness, obj: Value) -> Value {
    let written = put_on(&h.client, obj).await;
    seen_by_host(h, &written).await;
    written
}

/// A story that changes a Target or a Context goes on once the host's watch-fed cache holds
/// the change (jobs read those caches; a job started a moment earlier would see the old
/// object, as Landscaper's informer-backed reads would). Other kinds: at once.
async fn seen_by_host(h: &Harness, written: &Value) {
    let (Some(ns), Some(name), Some(rv)) = (
        written["metadata"]["namespace"].as_str(),
        written["metadata"]["name"].as_str(),
        written["metadata"]["resourceVersion"].as_str(),
    ) else {
        return;
    };
    let lookups = &h.deployer.lookups;
    type Probe<'a> = Box<dyn Fn() -> Option<Option<String>> + 'a>;
    // Some(cached resourceVersion) while the cache is synced; None when it is not.
    let probe: Probe = match (written["apiVersion"].as_str(), written["kind"].as_str()) {
        (Some("landscaper.gardener.cloud/v1alpha1"), Some("Context")) => Box::new(|| {
            lookups
                .contexts
                .is_synced()
                .then(|| lookups.contexts.cached_version(ns, name))
        }),
        (Some("landscaper.gardener.cloud/v1alpha1"), Some("Target")) => Box::new(|| {
            lookups
                .targets
                .is_synced()
                .then(|| lookups.targets.cached_version(ns, name))
        }),
        _ => return,
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    // Not synced: jobs GET the object, so they see the change anyway.
    while probe().is_some_and(|cached| cached.as_deref() != Some(rv)) {
        assert!(
            std::time::Instant::now() < deadline,
            "the host's cache never saw {ns}/{name} at resourceVersion {rv}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Creates or replaces an object on the cluster of `client`.
pub async fn put_on(client: &Client, obj: Value) -> Value {
    let api_version = obj["apiVersion"].as_str().unwrap().to_string();
    let kind = obj["kind"].as_str().unwrap().to_string();
    let ns = obj["metadata"]["namespace"].as_str().map(str::to_string);
    let name = obj["metadata"]["name"].as_str().unwrap().to_string();
    let a = api(client, &api_version, &kind, ns.as_deref());
    let pp = PatchParams::apply("test").force();
    let o: DynamicObject = serde_json::from_value(obj).unwrap();
    serde_json::to_value(a.patch(&name, &pp, &Patch::Apply(&o)).await.unwrap()).unwrap()
}

/// Merge-patches an object.
pub async fn merge(
    h: &Harness,
    api_version: &str,
    kind: &str,
    ns: Option<&str>,
    name: &str,
    patch: Value,
) {
    let written = api(&h.client, api_version, kind, ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    seen_by_host(h, &serde_json::to_value(written).unwrap()).await;
}

pub fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default"}, "data": data})
}

pub async fn delete_item(h: &Harness, name: &str) {
    h.items("default")
        .delete(name, &Default::default())
        .await
        .unwrap();
}

/// The release Secrets of `release` in `namespace`: (revision, status) by revision.
pub async fn release_secrets(h: &Harness, namespace: &str, release: &str) -> Vec<(i64, String)> {
    let secrets = api(&h.client, "v1", "Secret", Some(namespace));
    let lp = kube::api::ListParams::default().labels(&format!("owner=helm,name={release}"));
    let mut out: Vec<(i64, String)> = secrets
        .list(&lp)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|s| {
            let v = serde_json::to_value(&s).unwrap();
            assert_eq!(v["type"], "helm.sh/release.v1");
            let labels = &v["metadata"]["labels"];
            assert_eq!(
                v["metadata"]["name"],
                format!(
                    "sh.helm.release.v1.{release}.v{}",
                    labels["version"].as_str().unwrap()
                )
            );
            (
                labels["version"].as_str().unwrap().parse().unwrap(),
                labels["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}
