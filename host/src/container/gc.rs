//! Garbage collection of the container deployer's host objects (contract section 9.9): objects
//! of DeployItems that no longer exist, and finished pods beyond the newest `keep_pods` of an
//! item. Runs at start-up and then on an interval.
//!
//! Owns: deleting host objects that no step will ever look at again. Must not touch: running
//! pods, objects of other deployers (selected by the item labels and this host's identity), or
//! objects whose item still exists (apart from old finished pods).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ListParams};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::objects::{HostObjects, delete_opt};
use super::pod::{
    ANNOTATION_ITEM, LABEL_DEPLOYER_ID, LABEL_ITEM_NAME, LABEL_ITEM_NAMESPACE, POD_FINALIZER,
};
use super::status::is_active;
use crate::landscaper::DeployItem;

/// What one collection removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Collected {
    pub pods: usize,
    pub secrets: usize,
    pub rbac: usize,
}

pub struct GarbageCollector {
    pub(super) host: HostObjects,
    pub(super) landscaper: Client,
    pub(super) keep_pods: usize,
    pub(super) keep_pod: bool,
}

/// `(namespace, name)` of the DeployItem an object belongs to.
fn owner_item<K: Resource>(obj: &K) -> Option<(String, String)> {
    if let Some(full) = obj
        .meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_ITEM))
        && let Some((ns, name)) = full.split_once('/')
    {
        return Some((ns.to_string(), name.to_string()));
    }
    let labels = obj.meta().labels.as_ref()?;
    Some((
        labels.get(LABEL_ITEM_NAMESPACE)?.clone(),
        labels.get(LABEL_ITEM_NAME)?.clone(),
    ))
}

impl GarbageCollector {
    /// Collects now, then every `interval`, until `stop` resolves.
    pub async fn run(self, interval: Duration, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        loop {
            match self.collect().await {
                Ok(c) if c != Collected::default() => {
                    tracing::info!(?c, "container deployer: garbage collected")
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %crate::apierrors::render_chain(&e), "container deployer: garbage collection failed")
                }
            }
            tokio::select! {
                _ = &mut stop => return,
                _ = tokio::time::sleep(interval) => {}
            }
        }
    }

    fn selector(&self) -> String {
        let mut s = format!("{LABEL_ITEM_NAME},{LABEL_ITEM_NAMESPACE}");
        if !self.host.identity.is_empty() {
            s.push_str(&format!(
                ",{LABEL_DEPLOYER_ID}={}",
                super::pod::label_value(&self.host.identity)
            ));
        }
        s
    }

    async fn list<K>(&self) -> kube::Result<Vec<K>>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
        <K as Resource>::DynamicType: Default,
    {
        let api: Api<K> = Api::namespaced(self.host.client.clone(), &self.host.namespace);
        Ok(api
            .list(&ListParams::default().labels(&self.selector()))
            .await?
            .items)
    }

    /// Which of `items` are gone from the Landscaper cluster (a failed lookup keeps an item).
    async fn gone(&self, items: BTreeSet<(String, String)>) -> BTreeSet<(String, String)> {
        let mut gone = BTreeSet::new();
        for (ns, name) in items {
            let api: Api<DeployItem> = Api::namespaced(self.landscaper.clone(), &ns);
            if let Ok(None) = api.get_opt(&name).await {
                gone.insert((ns, name));
            }
        }
        gone
    }

    /// One collection.
    pub async fn collect(&self) -> anyhow::Result<Collected> {
        let pods: Vec<Pod> = self.list().await?;
        let secrets: Vec<Secret> = self.list().await?;
        let accounts: Vec<ServiceAccount> = self.list().await?;
        let roles: Vec<Role> = self.list().await?;
        let bindings: Vec<RoleBinding> = self.list().await?;
        let items: BTreeSet<_> = pods
            .iter()
            .filter_map(owner_item)
            .chain(secrets.iter().filter_map(owner_item))
            .chain(accounts.iter().filter_map(owner_item))
            .chain(roles.iter().filter_map(owner_item))
            .chain(bindings.iter().filter_map(owner_item))
            .collect();
        let gone = self.gone(items).await;
        let is_gone = |o: &Option<(String, String)>| o.as_ref().is_some_and(|k| gone.contains(k));
        let mut collected = Collected::default();

        // Pods: never a running one; all of a gone item; else beyond the newest `keep_pods`.
        let mut finished: BTreeMap<(String, String), Vec<&Pod>> = BTreeMap::new();
        for pod in pods.iter().filter(|p| !is_active(p)) {
            let owner = owner_item(pod);
            let ours = pod.finalizers().iter().any(|f| f == POD_FINALIZER);
            if is_gone(&owner) || !ours {
                if !self.keep_pod {
                    self.host.release_pod(pod, false).await?;
                    collected.pods += 1;
                }
            } else if let Some(owner) = owner {
                finished.entry(owner).or_default().push(pod);
            }
        }
        if !self.keep_pod {
            for mut list in finished.into_values() {
                list.sort_by_key(|p| std::cmp::Reverse(p.creation_timestamp().map(|t| t.0)));
                for pod in list.into_iter().skip(self.keep_pods) {
                    self.host.release_pod(pod, false).await?;
                    collected.pods += 1;
                }
            }
        }

        let ns = &self.host.namespace;
        let client = &self.host.client;
        for s in secrets.iter().filter(|s| is_gone(&owner_item(*s))) {
            collected.secrets += delete_opt(
                &Api::<Secret>::namespaced(client.clone(), ns),
                &s.name_any(),
            )
            .await? as usize;
        }
        for a in accounts.iter().filter(|a| is_gone(&owner_item(*a))) {
            collected.rbac += delete_opt(
                &Api::<ServiceAccount>::namespaced(client.clone(), ns),
                &a.name_any(),
            )
            .await? as usize;
        }
        for r in roles.iter().filter(|r| is_gone(&owner_item(*r))) {
            collected.rbac +=
                delete_opt(&Api::<Role>::namespaced(client.clone(), ns), &r.name_any()).await?
                    as usize;
        }
        for b in bindings.iter().filter(|b| is_gone(&owner_item(*b))) {
            collected.rbac += delete_opt(
                &Api::<RoleBinding>::namespaced(client.clone(), ns),
                &b.name_any(),
            )
            .await? as usize;
        }
        Ok(collected)
    }
}
