//! The start-up sweep: beside the watch's first list, one paginated list of the DeployItems
//! (decoded only as far as uid, resourceVersion, annotations and the two jobIDs) settles every
//! item whose job is finished in the [`ItemMemory`]. The watch itself is metadata-only, so without the sweep the first reconcile of each idle item would read it
//! with a GET of its own: 100,000 items, 100,000 reads at every start. With it they cost
//! 100,000 / [`PAGE`] lists, and each item's first event finds it finished, unchanged. (A page
//! is read faster than the workers reconcile as many items, so the sweep runs ahead of them.)
//!
//! The sweep only decides what the admit stage would decide for the same resourceVersion
//! (`jobID == jobIDFinished`, no `test-reconcile`); admit still consults the memory only when
//! no hook may reopen a finished item. A failed list is logged and skipped: the items are then
//! read one by one, as without the sweep.
//!
//! Owns: the start-up list. Must not touch: items' status, locks, or any decision beyond
//! "finished at this resourceVersion".

use std::collections::BTreeMap;
use std::time::Instant;

use kube::Client;
use kube::Resource;
use kube::api::ListParams;
use serde::Deserialize;

use super::ItemMemory;
use crate::contract::{JobStep, next_step};
use crate::landscaper::{DeployItem, DeployItemStatus};

/// Items per list page (kubectl's chunk size): bounds the memory one page takes.
pub(super) const PAGE: u32 = 500;

/// What a sweep saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    pub items: usize,
    pub finished: usize,
    pub pages: usize,
}

/// One page of the list, as far as the sweep reads it. serde skips everything else (the spec,
/// managedFields) without building it: a page costs a fraction of a page of full items.
#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    metadata: PageMeta,
    #[serde(default)]
    items: Vec<SweptItem>,
}

#[derive(Default, Deserialize)]
struct PageMeta {
    #[serde(default, rename = "continue")]
    continue_: Option<String>,
}

#[derive(Deserialize)]
struct SweptItem {
    #[serde(default)]
    metadata: SweptMeta,
    #[serde(default)]
    status: Option<SweptStatus>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SweptMeta {
    uid: Option<String>,
    resource_version: Option<String>,
    /// `landscaper.gardener.cloud/operation: test-reconcile` reopens a finished job.
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct SweptStatus {
    #[serde(default, rename = "jobID")]
    job_id: String,
    #[serde(default, rename = "jobIDFinished")]
    job_id_finished: String,
}

impl SweptItem {
    /// The item's uid and resourceVersion if its job is finished, by the contract's own rule
    /// (on an item holding just the fields that rule reads).
    fn finished_version(self) -> Option<(String, String)> {
        let SweptMeta {
            uid,
            resource_version,
            annotations,
        } = self.metadata;
        let mut item = DeployItem::default();
        item.metadata.annotations = annotations;
        item.status = self.status.map(|s| DeployItemStatus {
            job_id: s.job_id,
            job_id_finished: s.job_id_finished,
            ..DeployItemStatus::default()
        });
        (next_step(&item, false) == JobStep::Finished).then_some((uid?, resource_version?))
    }
}

/// Lists every DeployItem in `namespace` (all namespaces: `None`), page by page, and records
/// the finished ones.
pub async fn prime_finished(
    client: &Client,
    namespace: Option<&str>,
    memory: &ItemMemory,
) -> kube::Result<Swept> {
    let started = Instant::now();
    let mut swept = Swept::default();
    let url = DeployItem::url_path(&(), namespace);
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let request = kube::core::Request::new(&url)
            .list(&params)
            .map_err(kube::Error::BuildRequest)?;
        let page: Page = client.request(request).await?;
        swept.pages += 1;
        for item in page.items {
            swept.items += 1;
            if let Some((uid, rv)) = item.finished_version() {
                memory.settle_version(&uid, &rv);
                swept.finished += 1;
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    tracing::info!(
        items = swept.items,
        finished = swept.finished,
        pages = swept.pages,
        elapsed = ?started.elapsed(),
        "start-up sweep: finished items recorded"
    );
    Ok(swept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use embedded_apiserver::ApiServer;
    use kube::Api;
    use kube::api::PostParams;

    fn item(name: &str, job: &str, finished: &str) -> DeployItem {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "landscaper.gardener.cloud/v1alpha1",
            "kind": "DeployItem",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"type": "landscaper.gardener.cloud/mock"},
            "status": {"jobID": job, "jobIDFinished": finished}
        }))
        .unwrap()
    }

    /// Creates `name` with `annotations`, then gives it a status with these jobIDs.
    async fn create(
        api: &Api<DeployItem>,
        name: &str,
        annotations: &[(&str, &str)],
        job: &str,
        finished: &str,
    ) -> DeployItem {
        let mut new = item(name, "", "");
        if !annotations.is_empty() {
            new.metadata.annotations = Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            );
        }
        let mut created = api.create(&PostParams::default(), &new).await.unwrap();
        created.status = item(name, job, finished).status;
        api.replace_status(name, &PostParams::default(), &created)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn records_only_finished_items_across_pages() {
        let server = ApiServer::new(Default::default()).unwrap();
        let env = crate::dev::DevEnvironment::bootstrap(server, "http://127.0.0.1:1")
            .await
            .unwrap();
        let api: Api<DeployItem> = Api::namespaced(env.client.clone(), "default");
        // More than a page: 2 pages of finished (and idle) items, plus one with a new job.
        let n = PAGE as usize + 20;
        for i in 0..n {
            let (job, done) = if i % 2 == 0 { ("a", "a") } else { ("", "") };
            create(&api, &format!("i-{i}"), &[], job, done).await;
        }
        let pending = create(&api, "pending", &[], "new", "old").await;
        // Finished, but `operation: test-reconcile` asks for a reconcile anyway.
        let tr = create(
            &api,
            "test-reconcile",
            &[("landscaper.gardener.cloud/operation", "test-reconcile")],
            "same",
            "same",
        )
        .await;

        let memory = ItemMemory::default();
        let swept = prime_finished(&env.client, Some("default"), &memory)
            .await
            .unwrap();
        assert_eq!(swept.items, n + 2);
        assert_eq!(
            swept.finished, n,
            "finished and idle items, not the pending job or the test-reconcile"
        );
        assert_eq!(swept.pages, 2);
        assert_eq!(memory.settled_len(), n);
        let uid = pending.metadata.uid.as_deref().unwrap();
        let rv = pending.metadata.resource_version.as_deref().unwrap();
        assert!(!memory.settled(uid, rv));
        assert!(!memory.settled(
            tr.metadata.uid.as_deref().unwrap(),
            tr.metadata.resource_version.as_deref().unwrap()
        ));
        let first = api.get("i-0").await.unwrap();
        assert!(memory.settled(
            first.metadata.uid.as_deref().unwrap(),
            first.metadata.resource_version.as_deref().unwrap()
        ));
    }
}
