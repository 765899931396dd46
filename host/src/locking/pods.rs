//! Does a replica's pod still exist? A per-process cache of the pod names in the replicas'
//! namespace, refreshed by a metadata LIST when older than its timeout, with a direct GET for
//! names it has not seen (contract section 5.4).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams};
use tokio::sync::Mutex;

pub struct PodCache {
    api: Api<Pod>,
    timeout: Duration,
    state: Mutex<Option<(Instant, HashSet<String>)>>,
}

impl PodCache {
    pub fn new(client: Client, namespace: &str, timeout: Duration) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            timeout,
            state: Mutex::new(None),
        }
    }

    /// True if the pod exists. A pod deleted after the last refresh is still reported as
    /// existing until the cache is older than the timeout — as in Landscaper.
    pub async fn exists(&self, pod: &str) -> Result<bool, kube::Error> {
        let mut state = self.state.lock().await;
        let fresh = state
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < self.timeout);
        if !fresh {
            let list = self.api.list_metadata(&ListParams::default()).await?;
            let names = list
                .items
                .into_iter()
                .filter_map(|p| p.metadata.name)
                .collect::<HashSet<_>>();
            let exists = names.contains(pod);
            *state = Some((Instant::now(), names));
            return Ok(exists);
        }
        let (_, names) = state.as_mut().expect("fresh cache");
        if names.contains(pod) {
            return Ok(true);
        }
        match self.api.get_metadata_opt(pod).await? {
            Some(_) => {
                names.insert(pod.to_string());
                Ok(true)
            }
            None => Ok(false),
        }
    }
}
