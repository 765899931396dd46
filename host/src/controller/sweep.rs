//! The start-up sweep: beside the watch's first list, one paginated list of the full
//! DeployItems records every item whose job is finished in the [`FinishedCache`]. The watch itself is
//! metadata-only, so without the sweep the first reconcile of each idle item would read it
//! with a GET of its own: 100,000 items, 100,000 reads at every start. With it they cost
//! 100,000 / [`PAGE`] lists, and each item's first event finds it finished, unchanged. (A page
//! is read faster than the workers reconcile as many items, so the sweep runs ahead of them.)
//!
//! The sweep only decides what the admit stage would decide for the same resourceVersion
//! (`jobID == jobIDFinished`, no `test-reconcile`); admit still consults the cache only when
//! no hook may reopen a finished item. A failed list is logged and skipped: the items are then
//! read one by one, as without the sweep.
//!
//! Owns: the start-up list. Must not touch: items' status, locks, or any decision beyond
//! "finished at this resourceVersion".

use std::time::Instant;

use kube::Api;
use kube::api::ListParams;

use super::FinishedCache;
use crate::contract::{JobStep, next_step};
use crate::landscaper::DeployItem;

/// Items per list page (kubectl's chunk size): bounds the memory one page takes.
pub(super) const PAGE: u32 = 500;

/// What a sweep saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    pub items: usize,
    pub finished: usize,
    pub pages: usize,
}

/// Lists every DeployItem `api` sees, page by page, and records the finished ones.
pub async fn prime_finished(api: &Api<DeployItem>, cache: &FinishedCache) -> kube::Result<Swept> {
    let started = Instant::now();
    let mut swept = Swept::default();
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api.list(&params).await?;
        swept.pages += 1;
        for item in &page.items {
            swept.items += 1;
            if let (Some(uid), Some(rv)) = (&item.metadata.uid, &item.metadata.resource_version)
                && next_step(item, false) == JobStep::Finished
            {
                cache.insert(uid, rv);
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
            let created = api
                .create(&PostParams::default(), &item(&format!("i-{i}"), "", ""))
                .await
                .unwrap();
            let mut with_status = created.clone();
            with_status.status = item("x", job, done).status;
            api.replace_status(&format!("i-{i}"), &PostParams::default(), &with_status)
                .await
                .unwrap();
        }
        let pending = api
            .create(&PostParams::default(), &item("pending", "", ""))
            .await
            .unwrap();
        let mut p = pending.clone();
        p.status = item("x", "new", "old").status;
        let pending = api
            .replace_status("pending", &PostParams::default(), &p)
            .await
            .unwrap();

        let cache = FinishedCache::default();
        let swept = prime_finished(&api, &cache).await.unwrap();
        assert_eq!(swept.items, n + 1);
        assert_eq!(
            swept.finished, n,
            "finished and idle items, not the pending job"
        );
        assert_eq!(swept.pages, 2);
        assert_eq!(cache.len(), n);
        let uid = pending.metadata.uid.as_deref().unwrap();
        let rv = pending.metadata.resource_version.as_deref().unwrap();
        assert!(!cache.is_finished(uid, rv));
        let first = api.get("i-0").await.unwrap();
        assert!(cache.is_finished(
            first.metadata.uid.as_deref().unwrap(),
            first.metadata.resource_version.as_deref().unwrap()
        ));
    }
}
