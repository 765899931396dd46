//! The declared plugins and the loop that keeps the catalog in step with them: `WasmPlugin`
//! objects in the host's namespace (their status written back) and the static
//! `plugins.sources` of the configuration. It looks again when a `WasmPlugin` changes, when a
//! ConfigMap of the namespace that holds plugins changes (one a declaration names, or one the
//! selector matches: other ConfigMaps of a busy namespace wake nothing), and every poll interval
//! (OCI tags move without telling anyone).
//!
//! Owns: reading declarations and writing `WasmPlugin` status and Events. Must not touch: the
//! catalog's decisions.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{
    Api, ApiResource, DynamicObject, ListParams, PartialObjectMeta, Patch, PatchParams, PostParams,
};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::json;

use super::catalog::{Catalog, PluginStatus};
use super::{GROUP, PluginSpec, VERSION};
use crate::apierrors;

/// The `WasmPlugin` resource.
pub fn resource() -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: VERSION.into(),
        api_version: format!("{GROUP}/{VERSION}"),
        kind: "WasmPlugin".into(),
        plural: "wasmplugins".into(),
    }
}

/// Where declarations come from.
pub struct Declarations {
    pub client: Client,
    pub namespace: String,
    /// `plugins.sources` of the configuration, by name.
    pub static_specs: BTreeMap<String, PluginSpec>,
    /// Watch `WasmPlugin` objects (off: only the static list).
    pub watch_objects: bool,
    /// Every `binaryData` key of the ConfigMaps matching this selector is a plugin.
    pub config_map_selector: Option<String>,
    pub poll_interval: Duration,
}

impl Declarations {
    fn api(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, &resource())
    }

    /// One pass: every declaration synced, removed ones forgotten, statuses written. Returns
    /// the ConfigMaps of the namespace the declarations read (`None`: the pass was cut short).
    pub async fn sync_all(&self, catalog: &Catalog) -> Option<BTreeSet<String>> {
        let mut declared: Vec<String> = Vec::new();
        let mut configmaps_read = BTreeSet::new();
        let mut reads = |spec: &PluginSpec| {
            if let Some(cm) = &spec.source.config_map
                && cm
                    .namespace
                    .as_deref()
                    .is_none_or(|ns| ns == self.namespace)
            {
                configmaps_read.insert(cm.name.clone());
            }
        };
        for (name, spec) in &self.static_specs {
            reads(spec);
            catalog.sync(name, spec, None).await;
            declared.push(name.clone());
        }
        if let Some(selector) = &self.config_map_selector {
            let configmaps: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
            match configmaps
                .list(&ListParams::default().labels(selector))
                .await
            {
                Ok(list) => {
                    for cm in list.items {
                        let cm_name = cm.metadata.name.clone().unwrap_or_default();
                        for key in cm.binary_data.unwrap_or_default().into_keys() {
                            if key.ends_with(".sig") {
                                continue;
                            }
                            let name = format!("configmap/{cm_name}/{key}");
                            let spec = PluginSpec {
                                source: super::SourceSpec {
                                    config_map: Some(super::ConfigMapSource {
                                        name: cm_name.clone(),
                                        namespace: None,
                                        key: Some(key),
                                    }),
                                    oci: None,
                                },
                                ..Default::default()
                            };
                            reads(&spec);
                            let status = catalog.sync(&name, &spec, None).await;
                            if !status.last_error.is_empty() {
                                tracing::warn!(plugin = %name, error = %status.last_error, "plugin from ConfigMap refused");
                            }
                            declared.push(name);
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %crate::apierrors::render_error(&e), "listing plugin ConfigMaps failed; keeping every plugin as it is");
                    return None;
                }
            }
        }
        if self.watch_objects {
            let objects = match self.api().list(&ListParams::default()).await {
                Ok(list) => list.items,
                // No WasmPlugin CRD installed: only the static list.
                Err(e) if apierrors::not_found(&e).is_some() => Vec::new(),
                Err(e) => {
                    tracing::warn!(error = %crate::apierrors::render_error(&e), "listing WasmPlugins failed; keeping every plugin as it is");
                    return None;
                }
            };
            for obj in objects {
                let name = obj.metadata.name.clone().unwrap_or_default();
                declared.push(name.clone());
                let generation = obj.metadata.generation;
                let status = match serde_json::from_value::<PluginSpec>(obj.data["spec"].clone()) {
                    Ok(spec) => {
                        reads(&spec);
                        catalog.sync(&name, &spec, generation).await
                    }
                    Err(e) => {
                        let mut s = catalog.status(&name).await.unwrap_or_default();
                        s.refuse_spec(format!("spec: {e}"));
                        // (observed, and refused)
                        s.observed_generation = generation;
                        s
                    }
                };
                self.write_status(&obj, &status).await;
            }
        }
        for name in catalog.names().await {
            if !declared.contains(&name) {
                catalog.remove(&name).await;
            }
        }
        Some(configmaps_read)
    }

    async fn write_status(&self, obj: &DynamicObject, status: &PluginStatus) {
        let current: Option<PluginStatus> = serde_json::from_value(obj.data["status"].clone()).ok();
        // A host that restarted keeps the transition times the object has.
        let mut status = status.clone();
        if let Some(current) = &current {
            status.keep_transition_times(current);
        }
        let status = &status;
        if current.as_ref() == Some(status) {
            return;
        }
        let name = obj.metadata.name.clone().unwrap_or_default();
        let patch = json!({"status": status});
        if let Err(e) = self
            .api()
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::warn!(plugin = %name, error = %crate::apierrors::render_error(&e), "writing the WasmPlugin status failed");
        }
        let was_error = current.map(|c| c.last_error).unwrap_or_default();
        if !status.last_error.is_empty() && status.last_error != was_error {
            self.event(obj, "PluginRefused", &status.last_error, "Warning")
                .await;
        } else if status.last_error.is_empty() && status.is_ready() {
            self.event(
                obj,
                "PluginReady",
                &format!(
                    "{} {} ({}) serves {:?}",
                    status.plugin_name, status.version, status.digest, status.types
                ),
                "Normal",
            )
            .await;
        }
    }

    async fn event(&self, obj: &DynamicObject, reason: &str, note: &str, type_: &str) {
        use k8s_openapi::api::events::v1::Event;
        let events: Api<Event> = Api::namespaced(self.client.clone(), &self.namespace);
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(jiff::Timestamp::now());
        let event: Result<Event, _> = serde_json::from_value(json!({
            // Named as client-go names Events (a generateName may not end in '.').
            "metadata": {"name": format!("{}.{:x}", obj.metadata.name.clone().unwrap_or_default(), uuid::Uuid::new_v4().as_u128() as u64), "namespace": self.namespace},
            "eventTime": now,
            "reportingController": "wasm-deployer.dev/plugin-delivery",
            "reportingInstance": std::env::var("MY_POD_NAME").unwrap_or_else(|_| "wasm-deployer".into()),
            "action": "LoadPlugin",
            "reason": reason,
            "type": type_,
            "note": note.chars().take(1000).collect::<String>(),
            "regarding": {"apiVersion": format!("{GROUP}/{VERSION}"), "kind": "WasmPlugin",
                "name": obj.metadata.name, "namespace": self.namespace, "uid": obj.metadata.uid},
        }));
        if let Ok(event) = event
            && let Err(e) = events.create(&PostParams::default(), &event).await
        {
            tracing::debug!(error = %crate::apierrors::render_error(&e), "recording a plugin Event failed");
        }
    }

    /// Runs until `stop` resolves.
    pub async fn run(self, catalog: Arc<Catalog>, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        let wake = Arc::new(tokio::sync::Notify::new());
        let mut watchers = Vec::new();
        if self.watch_objects {
            let w = wake.clone();
            // Backoff: without the CRD (or the rights) the watch fails, and must not spin.
            let stream = watcher(self.api(), watcher::Config::default()).default_backoff();
            watchers.push(tokio::spawn(async move {
                let mut stream = std::pin::pin!(stream);
                while stream.next().await.is_some() {
                    w.notify_one();
                }
            }));
        }
        // ConfigMaps by metadata only (plugins are megabytes of binaryData), and only those
        // that hold plugins wake a pass: the namespace may be one where deployers write
        // ConfigMaps all day.
        let read: Arc<Mutex<Option<BTreeSet<String>>>> = Arc::default();
        let holds_plugins = {
            let read = read.clone();
            let selector = self
                .config_map_selector
                .as_deref()
                .map(|s| embedded_apiserver::selectors::Selector::parse(Some(s), None).ok());
            move |cm: &PartialObjectMeta<ConfigMap>| {
                let named = read.lock().ok().is_none_or(|read| {
                    read.as_ref().is_none_or(|read| {
                        read.contains(cm.metadata.name.as_deref().unwrap_or_default())
                    })
                });
                // An unparsable selector fails the pass's list: every change is worth a look.
                named
                    || selector.as_ref().is_some_and(|s| {
                        s.as_ref().is_none_or(|s| {
                            s.matches(&json!({"metadata": {"labels": cm.metadata.labels}}))
                        })
                    })
            }
        };
        let w = wake.clone();
        let configmaps: Api<PartialObjectMeta<ConfigMap>> =
            Api::namespaced(self.client.clone(), &self.namespace);
        watchers.push(tokio::spawn(async move {
            let stream = watcher(configmaps, watcher::Config::default()).default_backoff();
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                let wakes = match &event {
                    Ok(watcher::Event::Apply(cm) | watcher::Event::Delete(cm)) => holds_plugins(cm),
                    // (re)listed: whatever changed while the watch was down
                    Ok(watcher::Event::InitDone) => true,
                    Ok(watcher::Event::Init | watcher::Event::InitApply(_)) | Err(_) => false,
                };
                if wakes {
                    w.notify_one();
                }
            }
        }));
        loop {
            let configmaps_read = self.sync_all(&catalog).await;
            if let Ok(mut read) = read.lock() {
                // (a pass cut short keeps the last complete pass' names)
                if configmaps_read.is_some() {
                    *read = configmaps_read;
                }
            }
            tokio::select! {
                _ = &mut stop => break,
                _ = wake.notified() => {}
                _ = tokio::time::sleep(self.poll_interval) => {}
            }
        }
        for w in watchers {
            w.abort();
        }
    }
}
