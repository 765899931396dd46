//! Locking for scale-out: one SyncObject per (controller prefix, DeployItem UID), so no job is
//! processed by two replicas at once, and no job is stuck when a replica dies.
//!
//! Owns the SyncObject protocol exactly as Landscaper's `Locker` (contract section 5): take by
//! create/update with optimistic locking, owner = the replica's pod name, unlock by clearing the
//! owner (never by deleting, while the item exists), take over from owners whose pod no longer
//! exists ([`PodCache`]), and delete SyncObjects whose object UID is gone: at once when this
//! replica's deletion job removed the item, and periodically for what others left ([`cleaner`]). It does not decide
//! responsibility and never touches DeployItems.

pub mod cleaner;
mod pods;
mod syncobject;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kube::Client;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};

pub use pods::PodCache;
pub use syncobject::{SyncObject, SyncObjectSpec};

use crate::clock::now;

/// The pod name Landscaper uses when `MY_POD_NAME` is unset; such an owner is never taken over.
pub const NO_POD_NAME: &str = "nopodname";
pub const NO_POD_NAMESPACE: &str = "nopodnamespace";

/// Locking configuration of one host replica.
#[derive(Clone, Debug)]
pub struct LockConfig {
    /// Controller identifier: SyncObjects are named `<prefix>-<object uid>`.
    pub prefix: String,
    /// This replica's pod name (`MY_POD_NAME`).
    pub pod_name: String,
    /// The namespace of this replica's pod (`MY_POD_NAMESPACE`), where owner pods are looked up.
    pub pod_namespace: String,
    /// How long a not-acquired lock waits before the item is tried again (Landscaper: 1 min).
    pub retry_after: Duration,
    /// How long the pod list is trusted (Landscaper: 1 min).
    pub pod_cache_timeout: Duration,
}

impl LockConfig {
    /// Pod name and namespace from the downward API, as Landscaper reads them.
    pub fn from_env(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_string(),
            pod_name: std::env::var("MY_POD_NAME").unwrap_or_else(|_| NO_POD_NAME.into()),
            pod_namespace: std::env::var("MY_POD_NAMESPACE")
                .unwrap_or_else(|_| NO_POD_NAMESPACE.into()),
            retry_after: Duration::from_secs(60),
            pod_cache_timeout: Duration::from_secs(60),
        }
    }
}

/// A held lock; give it back with [`Locker::unlock`].
#[derive(Debug)]
pub struct Lock {
    object: Box<SyncObject>,
}

/// Result of a lock attempt.
#[derive(Debug)]
pub enum LockOutcome {
    Locked(Lock),
    /// Another live replica holds the lock (or won a race).
    NotLocked,
}

/// Takes and releases SyncObject locks for one replica.
pub struct Locker {
    /// The cluster holding DeployItems and SyncObjects.
    client: Client,
    config: LockConfig,
    pods: PodCache,
    unlock_failures: AtomicU64,
    conflicts: AtomicU64,
    /// The SyncObjects this replica holds now: taken and not (yet) released. An item whose lock
    /// is here stays this replica's to finish or release, whoever the split by Leases names.
    held: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// How long [`Locker::unlock`] retries transient failures.
pub const UNLOCK_PATIENCE: Duration = Duration::from_secs(30);

/// What became of a lock given back ([`Locker::unlock`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Released {
    /// Its owner is cleared.
    Unlocked,
    /// The SyncObject is deleted: its item is gone, or the server refused an empty owner.
    Deleted,
    /// Nothing was left to release: the SyncObject is gone or another replica's now.
    NotOurs,
    /// Not released (a warning was logged; [`Locker::unlock_failures`] counts it).
    Failed,
}

impl Locker {
    /// `host_client` is the cluster where replicas' pods run (the same as `client` unless fenced).
    pub fn new(client: Client, host_client: Client, config: LockConfig) -> Self {
        let pods = PodCache::new(host_client, &config.pod_namespace, config.pod_cache_timeout);
        Self {
            client,
            config,
            pods,
            unlock_failures: AtomicU64::new(0),
            conflicts: AtomicU64::new(0),
            held: Default::default(),
        }
    }

    pub fn config(&self) -> &LockConfig {
        &self.config
    }

    /// The SyncObject name for an object UID.
    pub fn lock_name(&self, uid: &str) -> String {
        format!("{}-{}", self.config.prefix, uid)
    }

    /// Tries to lock the DeployItem `name` (with `uid`) in `namespace`; a lock another
    /// controller holds counts as a conflict ([`Self::conflicts`]).
    pub async fn lock(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Result<LockOutcome, kube::Error> {
        let outcome = match self.try_lock(namespace, name, uid).await {
            Ok(outcome) => outcome,
            Err(e) => {
                // The write may have applied all the same (a 504 after the SyncObject was
                // written): the lock may be ours now, and no other replica takes it while this
                // pod lives. So this replica counts it as held and tries the item again itself
                // (with the split by Leases it may not be its item); the next attempt settles it.
                if crate::apierrors::transient(&e) {
                    self.held_locks().insert(self.lock_name(uid));
                }
                return Err(e);
            }
        };
        match &outcome {
            LockOutcome::NotLocked => {
                self.conflicts.fetch_add(1, Ordering::Relaxed);
                self.held_locks().remove(&self.lock_name(uid));
            }
            LockOutcome::Locked(_) => {
                self.held_locks().insert(self.lock_name(uid));
            }
        }
        Ok(outcome)
    }

    /// Whether this replica holds the lock of the item with `uid` (taken, not yet released:
    /// a release that failed keeps it here, so the item is tried again by this replica).
    pub fn holds(&self, uid: &str) -> bool {
        self.held_locks().contains(&self.lock_name(uid))
    }

    fn held_locks(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Releases the locks this pod's previous run left behind. A container restart keeps the
    /// pod name, and the new process holds no lock: with the split by Leases such an item may
    /// now be another replica's, which would wait on this (living) pod for ever. Never for
    /// `nopodname`, which many processes share. Returns how many were released.
    pub async fn release_left_over(&self, namespace: Option<&str>) -> Result<usize, kube::Error> {
        if self.config.pod_name == NO_POD_NAME {
            return Ok(0);
        }
        let api: Api<SyncObject> = match namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        let mut released = 0;
        for object in api.list(&kube::api::ListParams::default()).await?.items {
            if object.spec.prefix != self.config.prefix
                || object.spec.pod_name != self.config.pod_name
                || self
                    .held_locks()
                    .contains(object.metadata.name.as_deref().unwrap_or_default())
            {
                continue;
            }
            let lock = Lock {
                object: Box::new(object),
            };
            if matches!(
                self.unlock(lock, false).await,
                Released::Unlocked | Released::Deleted
            ) {
                released += 1;
            }
        }
        if released > 0 {
            tracing::info!(
                locks = released,
                "released the locks this pod's previous run left"
            );
        }
        Ok(released)
    }

    async fn try_lock(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Result<LockOutcome, kube::Error> {
        let api: Api<SyncObject> = Api::namespaced(self.client.clone(), namespace);
        let lock_name = self.lock_name(uid);
        let me = &self.config.pod_name;
        let Some(existing) = api.get_opt(&lock_name).await? else {
            let object = SyncObject::new(
                namespace,
                &lock_name,
                SyncObjectSpec {
                    pod_name: me.clone(),
                    kind: "DeployItem".into(),
                    name: name.into(),
                    last_update_time: now(),
                    prefix: self.config.prefix.clone(),
                },
            );
            return match api.create(&PostParams::default(), &object).await {
                Ok(object) => Ok(LockOutcome::Locked(Lock {
                    object: Box::new(object),
                })),
                Err(kube::Error::Api(e)) if e.code == 409 => self.refused(&api, &lock_name).await,
                Err(e) => Err(e),
            };
        };
        let existing = match self.mine(Box::new(existing)) {
            Ok(lock) => return Ok(LockOutcome::Locked(lock)),
            Err(other) => other,
        };
        if self.owner_alive(&existing.spec.pod_name).await? {
            tracing::debug!(lock = %lock_name, holder = %existing.spec.pod_name, "held by a live replica");
            return Ok(LockOutcome::NotLocked);
        }
        if !existing.spec.pod_name.is_empty() {
            tracing::info!(lock = %lock_name, dead_owner = %existing.spec.pod_name, "taking over lock of a pod that no longer exists");
        }
        let mut taken = existing;
        taken.spec.pod_name = me.clone();
        taken.spec.last_update_time = now();
        match api
            .replace(&lock_name, &PostParams::default(), &taken)
            .await
        {
            Ok(object) => Ok(LockOutcome::Locked(Lock {
                object: Box::new(object),
            })),
            Err(kube::Error::Api(e)) if e.code == 409 => self.refused(&api, &lock_name).await,
            Err(e) => Err(e),
        }
    }

    /// A write of the lock answered 409: another replica was first — or this one was. A write
    /// that timed out after it applied (504) is sent again by the client (kube retries 503 and
    /// 504, writes too), and the second attempt finds the first one's lock: AlreadyExists, or a
    /// Conflict on its resourceVersion. So read who holds it before giving up on it.
    async fn refused(
        &self,
        api: &Api<SyncObject>,
        lock_name: &str,
    ) -> Result<LockOutcome, kube::Error> {
        match api
            .get_opt(lock_name)
            .await?
            .map(|o| self.mine(Box::new(o)))
        {
            Some(Ok(lock)) => {
                tracing::debug!(lock = %lock_name, "lock: taken by an attempt that timed out and was sent again");
                Ok(LockOutcome::Locked(lock))
            }
            _ => Ok(LockOutcome::NotLocked),
        }
    }

    /// The SyncObject as this replica's lock when it names this pod; otherwise given back.
    fn mine(&self, object: Box<SyncObject>) -> Result<Lock, Box<SyncObject>> {
        if object.spec.pod_name == self.config.pod_name {
            Ok(Lock { object })
        } else {
            Err(object)
        }
    }

    /// Gives a lock back: clears its owner, or — when `item_deleted` says the item was being
    /// deleted and it is indeed gone now (by UID, as [`cleaner`] decides) — deletes the
    /// SyncObject, so no lock outlives its item until the next cleanup.
    ///
    /// A transient failure (a conflict on a stale copy, 5xx, a timeout that may have applied, a
    /// dropped connection) is retried with backoff for up to [`UNLOCK_PATIENCE`], re-reading the
    /// SyncObject each time: the release is done once it is unlocked, gone, or another replica's.
    /// The retries run before the reconcile ends, so this replica cannot take the same lock
    /// again meanwhile. What still fails is a warning naming the lock and counts in
    /// [`Locker::unlock_failures`]; the lock is then left to the take-over of a dead owner's lock
    /// and to the cleanup.
    pub async fn unlock(&self, lock: Lock, item_deleted: bool) -> Released {
        let lock_name = lock.object.metadata.name.clone().unwrap_or_default();
        let released = self.release(lock, item_deleted).await;
        if released != Released::Failed {
            self.held_locks().remove(&lock_name);
        }
        released
    }

    /// [`Locker::unlock`] without the bookkeeping of held locks.
    async fn release(&self, lock: Lock, item_deleted: bool) -> Released {
        let mut object = *lock.object;
        let namespace = object.metadata.namespace.clone().unwrap_or_default();
        let name = object.metadata.name.clone().unwrap_or_default();
        let api: Api<SyncObject> = Api::namespaced(self.client.clone(), &namespace);
        let deadline = tokio::time::Instant::now() + UNLOCK_PATIENCE;
        let mut delay = Duration::from_millis(50);
        loop {
            let error = match self.release_once(&api, &mut object, item_deleted).await {
                Ok(released) => return released,
                Err(e) => e,
            };
            let rendered = crate::apierrors::render_error(&error);
            if !crate::apierrors::transient(&error)
                || tokio::time::Instant::now() + delay > deadline
            {
                self.unlock_failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(lock = %format!("{namespace}/{name}"), error = %rendered, "could not release the lock; it stays until its owner pod is gone or the SyncObject cleanup removes it");
                return Released::Failed;
            }
            tracing::debug!(lock = %name, error = %rendered, retry_in = ?delay, "unlock failed; retrying");
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(2));
            // The copy may be stale (409), or the write may have applied before the error
            // (a 504 after applying): read what the server has now.
            match api.get_opt(&name).await {
                Ok(None) => return Released::NotOurs,
                Ok(Some(fresh)) if fresh.metadata.uid != object.metadata.uid => {
                    return Released::NotOurs;
                }
                Ok(Some(fresh)) => match fresh.spec.pod_name.as_str() {
                    // An earlier attempt applied (a 504 after the write).
                    "" if !item_deleted => return Released::Unlocked,
                    owner if !owner.is_empty() && owner != self.config.pod_name => {
                        return Released::NotOurs;
                    }
                    _ => object = fresh,
                },
                Err(_) => {} // try again with the copy we have
            }
        }
    }

    /// One attempt of [`Locker::unlock`].
    async fn release_once(
        &self,
        api: &Api<SyncObject>,
        object: &mut SyncObject,
        item_deleted: bool,
    ) -> Result<Released, kube::Error> {
        let name = object.metadata.name.clone().unwrap_or_default();
        if item_deleted && cleaner::item_is_gone(&self.client, &self.config.prefix, object).await? {
            return self.delete(api, object, false).await;
        }
        let mut cleared = object.clone();
        cleared.spec.pod_name = String::new();
        cleared.spec.last_update_time = now();
        match api.replace(&name, &PostParams::default(), &cleared).await {
            Ok(_) => Ok(Released::Unlocked),
            // A server that refuses the empty owner as invalid (the Debian-built 1.20 test
            // server refuses every empty string in a custom resource): an absent SyncObject is
            // unlocked too, to Landscaper's locking and ours, so delete ours if it is unchanged.
            Err(kube::Error::Api(s)) if s.code == 422 => self.delete(api, object, true).await,
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(Released::NotOurs),
            Err(e) => Err(e),
        }
    }

    /// Deletes this very SyncObject (its UID; with `unchanged`, also its resourceVersion).
    async fn delete(
        &self,
        api: &Api<SyncObject>,
        object: &SyncObject,
        unchanged: bool,
    ) -> Result<Released, kube::Error> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: object.metadata.uid.clone(),
                resource_version: unchanged
                    .then(|| object.metadata.resource_version.clone())
                    .flatten(),
            }),
            ..DeleteParams::default()
        };
        let name = object.metadata.name.clone().unwrap_or_default();
        match api.delete(&name, &params).await {
            Ok(_) => Ok(Released::Deleted),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(Released::NotOurs),
            Err(e) => Err(e),
        }
    }

    /// Locks this replica could not release (after retries): each is a warning in the log.
    pub fn unlock_failures(&self) -> u64 {
        self.unlock_failures.load(Ordering::Relaxed)
    }

    /// Lock attempts refused because another controller held the item.
    pub fn conflicts(&self) -> u64 {
        self.conflicts.load(Ordering::Relaxed)
    }

    async fn owner_alive(&self, pod: &str) -> Result<bool, kube::Error> {
        match pod {
            "" => Ok(false),
            NO_POD_NAME => Ok(true),
            pod => self.pods.exists(pod).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use embedded_apiserver::{ApiServer, FaultConfig};
    use kube::api::ListParams;

    fn server() -> ApiServer {
        let server = ApiServer::new(Default::default()).unwrap();
        for crd in crate::crds::landscaper() {
            server
                .install_object(serde_json::to_value(crd).unwrap())
                .unwrap();
        }
        server
    }

    fn locker(server: &ApiServer) -> Locker {
        let mut config = LockConfig::from_env("test");
        config.pod_name = "replica-a".into();
        Locker::new(server.client(), server.client(), config)
    }

    /// (SyncObject, owner) of every held lock in `default`.
    async fn held_locks(server: &ApiServer) -> Vec<(String, String)> {
        let all: Api<SyncObject> = Api::namespaced(server.client(), "default");
        all.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|o| !o.spec.pod_name.is_empty())
            .map(|o| (o.metadata.name.unwrap_or_default(), o.spec.pod_name))
            .collect()
    }

    async fn locked(locker: &Locker, name: &str, uid: &str) -> Lock {
        match locker.lock("default", name, uid).await.unwrap() {
            LockOutcome::Locked(lock) => lock,
            LockOutcome::NotLocked => panic!("{name} not locked"),
        }
    }

    #[tokio::test]
    async fn a_lock_whose_taking_timed_out_counts_as_held_until_an_attempt_settles_it() {
        let server = server();
        let locker = locker(&server);
        // Given a server that answers half the requests 504 (a write after applying it),
        // when a lock's taking fails after its SyncObject was written (it now names this pod),
        let mut settled = false;
        for i in 0..200 {
            let (name, uid) = (format!("item-t{i}"), format!("uid-t{i}"));
            server.set_faults(FaultConfig {
                timeout_probability: 0.5,
                ..Default::default()
            });
            let attempt = locker.lock("default", &name, &uid).await;
            server.set_faults(Default::default());
            let lock = match attempt {
                Ok(LockOutcome::Locked(lock)) => lock,
                Ok(LockOutcome::NotLocked) => panic!("nobody else locks {name}"),
                Err(_) if held_locks(&server).await.is_empty() => {
                    // Failed before the write: counted as held until the next attempt too.
                    assert!(locker.holds(&uid));
                    locked(&locker, &name, &uid).await
                }
                Err(_) => {
                    // then this replica counts it as held (so it comes back to the item itself),
                    assert!(locker.holds(&uid));
                    // and the next attempt finds it its own.
                    settled = true;
                    locked(&locker, &name, &uid).await
                }
            };
            locker.unlock(lock, false).await;
            assert!(!locker.holds(&uid));
            assert!(held_locks(&server).await.is_empty());
            if settled {
                break;
            }
        }
        assert!(
            settled,
            "no taking of a lock timed out after its write in 200 tries"
        );

        // Given another replica holding a lock, an attempt that timed out before it got there
        // counts as held until the next attempt is refused.
        let in_default = |pod: &str| {
            let mut config = LockConfig::from_env("test");
            config.pod_name = pod.into();
            config.pod_namespace = "default".into();
            Locker::new(server.client(), server.client(), config)
        };
        let (locker, other) = (in_default("replica-a"), in_default("replica-b"));
        let pods: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(server.client(), &other.config.pod_namespace);
        let pod: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "replica-b"}, "spec": {"containers": [{"name": "host", "image": "host"}]}}))
                .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        let _theirs = locked(&other, "item-u", "uid-u").await;
        server.set_faults(FaultConfig {
            timeout_probability: 1.0,
            ..Default::default()
        });
        assert!(locker.lock("default", "item-u", "uid-u").await.is_err());
        server.set_faults(Default::default());
        assert!(locker.holds("uid-u"));
        assert!(matches!(
            locker.lock("default", "item-u", "uid-u").await.unwrap(),
            LockOutcome::NotLocked
        ));
        assert!(!locker.holds("uid-u"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn given_writes_that_time_out_after_applying_and_a_client_that_sends_them_again_then_every_lock_taken_is_known_as_ours()
     {
        // Given the server on loopback answering 30 % of requests 504 after handling them, and
        // a client as the host builds it (kube sends a 503/504'd request again, writes too),
        let server = server();
        let serving = server.serve_on_loopback().await.unwrap();
        let kubeconfig = serde_yaml::from_str(&ApiServer::kubeconfig_yaml(&serving.url)).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        let client = Client::try_from(config).unwrap();
        let mut config = LockConfig::from_env("test");
        config.pod_name = "replica-a".into();
        let locker = Locker::new(client.clone(), client, config);
        server.set_faults(FaultConfig {
            timeout_probability: 0.3,
            ..Default::default()
        });
        // when 100 items' locks are taken (an attempt that errs tried again, as a requeue does),
        for i in 0..100 {
            let (name, uid) = (format!("item-r{i}"), format!("uid-r{i}"));
            let lock = loop {
                match locker.lock("default", &name, &uid).await {
                    Ok(LockOutcome::Locked(lock)) => break lock,
                    // then none is refused: no other replica holds any of them,
                    Ok(LockOutcome::NotLocked) => panic!("{name}: refused its own lock"),
                    Err(_) => continue,
                }
            };
            assert!(locker.holds(&uid));
            while locker
                .unlock(
                    Lock {
                        object: lock.object.clone(),
                    },
                    false,
                )
                .await
                == Released::Failed
            {}
        }
        // and every one is given back.
        server.set_faults(FaultConfig::default());
        assert!(held_locks(&server).await.is_empty());
    }

    #[tokio::test]
    async fn a_lock_is_held_from_its_taking_until_its_release() {
        let server = server();
        let locker = locker(&server);
        assert!(!locker.holds("uid-1"));
        let lock = locked(&locker, "item-1", "uid-1").await;
        assert!(locker.holds("uid-1"));
        assert!(!locker.holds("uid-2"));
        assert_eq!(locker.unlock(lock, false).await, Released::Unlocked);
        assert!(!locker.holds("uid-1"));
    }

    #[tokio::test]
    async fn given_locks_of_this_pods_previous_run_when_it_starts_again_then_they_are_released_and_no_others()
     {
        let server = server();
        // Given locks replica-a's previous process took and never released, and one of another pod,
        let previous = locker(&server);
        for i in 0..3 {
            let _left = locked(&previous, &format!("item-{i}"), &format!("uid-{i}")).await;
        }
        let mut other = LockConfig::from_env("test");
        other.pod_name = "replica-b".into();
        let other = Locker::new(server.client(), server.client(), other);
        let _theirs = locked(&other, "item-b", "uid-b").await;
        // when replica-a starts again (same pod name, a new process),
        let restarted = locker(&server);
        assert_eq!(restarted.release_left_over(None).await.unwrap(), 3);
        // then its old locks are free and replica-b's is untouched.
        assert_eq!(
            held_locks(&server).await,
            [("test-uid-b".to_string(), "replica-b".to_string())]
        );
        // Processes without a pod name share `nopodname`: theirs are never released so.
        let mut anonymous = LockConfig::from_env("test");
        anonymous.pod_name = NO_POD_NAME.into();
        let anonymous = Locker::new(server.client(), server.client(), anonymous);
        let _held = locked(&anonymous, "item-n", "uid-n").await;
        let again = Locker::new(server.client(), server.client(), anonymous.config.clone());
        assert_eq!(again.release_left_over(None).await.unwrap(), 0);
    }

    #[tokio::test]
    async fn given_conflicts_errors_and_timeouts_when_locks_are_released_then_every_one_ends_unlocked()
     {
        let server = server();
        let locker = locker(&server);
        let mut locks = Vec::new();
        for i in 0..40 {
            locks.push(locked(&locker, &format!("item-{i}"), &format!("uid-{i}")).await);
        }
        server.set_faults(FaultConfig {
            write_conflict_probability: 0.2,
            write_error_probability: 0.1,
            unavailable_probability: 0.1,
            timeout_probability: 0.1,
            ..Default::default()
        });
        for lock in locks {
            let released = locker.unlock(lock, false).await;
            assert_eq!(released, Released::Unlocked);
        }
        server.set_faults(FaultConfig::default());
        let held = held_locks(&server).await;
        assert!(held.is_empty(), "still held: {held:?}");
        assert_eq!(locker.unlock_failures(), 0);
    }

    #[tokio::test]
    async fn given_a_finished_deletion_when_the_item_is_gone_then_its_lock_is_deleted_and_when_it_stays_then_unlocked()
     {
        let server = server();
        let locker = locker(&server);
        let items: Api<crate::landscaper::DeployItem> = Api::namespaced(server.client(), "default");
        let locks: Api<SyncObject> = Api::namespaced(server.client(), "default");
        for (name, other_finalizer) in [("gone", false), ("kept", true)] {
            let mut item: crate::landscaper::DeployItem =
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"type": "landscaper.gardener.cloud/mock"}
                }))
                .unwrap();
            if other_finalizer {
                item.metadata.finalizers = Some(vec!["example.com/someone-else".into()]);
            }
            let item = items.create(&PostParams::default(), &item).await.unwrap();
            let uid = item.metadata.uid.clone().unwrap();
            let lock = locked(&locker, name, &uid).await;
            items.delete(name, &Default::default()).await.unwrap();
            let released = locker.unlock(lock, true).await;
            let left = locks.get_opt(&locker.lock_name(&uid)).await.unwrap();
            if other_finalizer {
                assert_eq!(released, Released::Unlocked);
                assert_eq!(left.map(|o| o.spec.pod_name), Some(String::new()));
            } else {
                assert_eq!(released, Released::Deleted);
                assert!(left.is_none(), "the lock of a gone item stays");
            }
        }
    }
}
