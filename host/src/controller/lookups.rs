//! Targets and Contexts as every job reads them: from a watch-fed cache, as controller-runtime's
//! cached client serves them to Landscaper's Go deployers, with a GET whenever the cache does not
//! hold the object (not seen yet, the kind cannot be listed, the watch has not started).
//!
//! Two GETs of every job become none: on a fast API server they were a third of a mock job's
//! requests. A cached object may lag the API server by the watch's delay, as in Landscaper.
//!
//! Owns: the two reflectors (started and stopped with the controller) and the read-through.
//! Must not touch: what a Target or Context means (`reconcile::admit`, `reconcile::invoke`).

use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use crate::apierrors::{self, Lookup};
use crate::landscaper::{Context as LandscaperContext, Target};

/// The watch-fed reads of the kinds every job needs besides its item.
pub struct Lookups {
    pub targets: Cached<Target>,
    pub contexts: Cached<LandscaperContext>,
}

impl Lookups {
    pub fn new(client: Client) -> Self {
        Lookups {
            targets: Cached::new(client.clone(), "targets"),
            contexts: Cached::new(client, "contexts"),
        }
    }

    /// Starts filling both caches from watches of `namespace` (all namespaces: `None`). The
    /// caches serve until the returned guard is dropped; after that every read is a GET.
    pub fn watch(self: &Arc<Self>, namespace: Option<&str>) -> Watching {
        let lookups = self.clone();
        let ns = namespace.map(str::to_string);
        let targets = tokio::spawn(async move {
            tokio::join!(
                lookups.targets.fill(ns.as_deref()),
                lookups.contexts.fill(ns.as_deref())
            );
        });
        Watching {
            lookups: self.clone(),
            task: targets,
        }
    }
}

/// The caches' watches; dropping it stops them and empties the caches.
pub struct Watching {
    lookups: Arc<Lookups>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Watching {
    fn drop(&mut self) {
        self.task.abort();
        self.lookups.targets.clear();
        self.lookups.contexts.clear();
    }
}

/// What a [`Cached`] calls for each object its watch sees deleted.
type OnDelete<K> = Box<dyn Fn(&K) + Send + Sync>;

/// Reads of one namespaced kind: the cache when it holds the object, else a GET.
pub struct Cached<K: Resource<DynamicType = (), Scope = NamespaceResourceScope> + 'static> {
    client: Client,
    /// The resource's plural, for logs.
    plural: &'static str,
    store: RwLock<Option<Store<K>>>,
    /// The watch has listed every object once (reset when the caches stop).
    synced: AtomicBool,
    /// Reads the cache answered.
    pub hits: AtomicU64,
    /// Reads that went to the API server.
    pub gets: AtomicU64,
    /// Told of every object the watch sees deleted (e.g. a Target's cluster client is released).
    deleted: std::sync::OnceLock<OnDelete<K>>,
}

impl<K> Cached<K>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    fn new(client: Client, plural: &'static str) -> Self {
        Cached {
            client,
            plural,
            store: RwLock::new(None),
            synced: AtomicBool::new(false),
            hits: AtomicU64::new(0),
            gets: AtomicU64::new(0),
            deleted: std::sync::OnceLock::new(),
        }
    }

    /// Calls `f` with every object the watch sees deleted (set once; later calls are ignored).
    pub fn on_delete(&self, f: impl Fn(&K) + Send + Sync + 'static) {
        let _ = self.deleted.set(Box::new(f));
    }

    /// The object `namespace/name`: from the cache, else read from the API server.
    pub async fn get(&self, namespace: &str, name: &str) -> Result<Lookup<K>, kube::Error> {
        if let Some(object) = self.cached(namespace, name) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(Lookup::Found(object));
        }
        self.gets.fetch_add(1, Ordering::Relaxed);
        let api: Api<K> = Api::namespaced(self.client.clone(), namespace);
        apierrors::get(&api, name).await
    }

    /// Whether the cache has listed every object once: from then on it answers reads.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Relaxed)
    }

    /// The resourceVersion of `namespace/name` in the cache, if it holds the object.
    pub fn cached_version(&self, namespace: &str, name: &str) -> Option<String> {
        self.cached(namespace, name)?
            .meta()
            .resource_version
            .clone()
    }

    fn cached(&self, namespace: &str, name: &str) -> Option<K> {
        // A failing watch may hold objects that are gone (with their kind): GETs until it
        // has listed again.
        if !self.is_synced() {
            return None;
        }
        let store = self.store.read().ok()?.clone()?;
        let object = store.get(&ObjectRef::new(name).within(namespace))?;
        Some(K::clone(&object))
    }

    fn clear(&self) {
        self.synced.store(false, Ordering::Relaxed);
        if let Ok(mut store) = self.store.write() {
            *store = None;
        }
    }

    /// Runs the watch that fills the cache, forever (retrying with kube's default backoff:
    /// a kind that is not served yet, or RBAC granted later, starts the cache then).
    async fn fill(&self, namespace: Option<&str>) {
        let (store, writer) = reflector::store();
        if let Ok(mut slot) = self.store.write() {
            *slot = Some(store);
        }
        let api: Api<K> = match namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        let events = watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer);
        futures::pin_mut!(events);
        let mut failing = false;
        while let Some(event) = events.next().await {
            match &event {
                Ok(watcher::Event::InitDone) => self.synced.store(true, Ordering::Relaxed),
                Ok(watcher::Event::Delete(object)) => {
                    if let Some(deleted) = self.deleted.get() {
                        deleted(object);
                    }
                }
                _ => {}
            }
            match event {
                Ok(_) if failing => {
                    failing = false;
                    tracing::info!(
                        kind = self.plural,
                        "watch works again: reads served from the cache"
                    );
                }
                Ok(_) => {}
                Err(e) if !failing => {
                    failing = true;
                    self.synced.store(false, Ordering::Relaxed);
                    tracing::warn!(
                        kind = self.plural,
                        error = %e,
                        "cannot watch {}: each job reads them with a GET until it can (the host needs list and watch on them)",
                        self.plural
                    );
                }
                Err(e) => {
                    self.synced.store(false, Ordering::Relaxed);
                    tracing::debug!(kind = self.plural, error = %e, "watch still failing");
                }
            }
        }
    }
}
