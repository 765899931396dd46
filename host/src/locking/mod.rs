//! Locking for scale-out: one SyncObject per (controller prefix, DeployItem UID), so no job is
//! processed by two replicas at once, and no job is stuck when a replica dies.
//!
//! Owns the SyncObject protocol exactly as Landscaper's `Locker` (contract section 5): take by
//! create/update with optimistic locking, owner = the replica's pod name, unlock by clearing the
//! owner (never by deleting), take over from owners whose pod no longer exists ([`PodCache`]),
//! and delete SyncObjects whose object UID is gone ([`cleaner`]). It does not decide
//! responsibility and never touches DeployItems.

pub mod cleaner;
mod pods;
mod syncobject;

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
}

impl Locker {
    /// `host_client` is the cluster where replicas' pods run (the same as `client` unless fenced).
    pub fn new(client: Client, host_client: Client, config: LockConfig) -> Self {
        let pods = PodCache::new(host_client, &config.pod_namespace, config.pod_cache_timeout);
        Self {
            client,
            config,
            pods,
        }
    }

    pub fn config(&self) -> &LockConfig {
        &self.config
    }

    /// The SyncObject name for an object UID.
    pub fn lock_name(&self, uid: &str) -> String {
        format!("{}-{}", self.config.prefix, uid)
    }

    /// Tries to lock the DeployItem `name` (with `uid`) in `namespace`.
    pub async fn lock(
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
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(LockOutcome::NotLocked),
                Err(e) => Err(e),
            };
        };
        if &existing.spec.pod_name == me {
            return Ok(LockOutcome::Locked(Lock {
                object: Box::new(existing),
            }));
        }
        if self.owner_alive(&existing.spec.pod_name).await? {
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
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(LockOutcome::NotLocked),
            Err(e) => Err(e),
        }
    }

    /// Releases a lock by clearing its owner. Errors are only logged: a lock left behind is
    /// taken over once this pod is gone.
    pub async fn unlock(&self, lock: Lock) {
        let mut object = *lock.object;
        let namespace = object.metadata.namespace.clone().unwrap_or_default();
        let name = object.metadata.name.clone().unwrap_or_default();
        object.spec.pod_name = String::new();
        object.spec.last_update_time = now();
        let api: Api<SyncObject> = Api::namespaced(self.client.clone(), &namespace);
        match api.replace(&name, &PostParams::default(), &object).await {
            Ok(_) => {}
            // A server that refuses the empty owner as invalid (the Debian-built 1.20 test
            // server refuses every empty string in a custom resource): an absent SyncObject is
            // unlocked too, to Landscaper's locking and ours, so delete ours if it is unchanged.
            Err(kube::Error::Api(s)) if s.code == 422 => {
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: object.metadata.uid.clone(),
                        resource_version: object.metadata.resource_version.clone(),
                    }),
                    ..DeleteParams::default()
                };
                if let Err(e) = api.delete(&name, &params).await {
                    tracing::debug!(lock = %name, error = %crate::apierrors::render_error(&e), "unlock by delete failed");
                }
            }
            Err(e) => {
                tracing::debug!(lock = %name, error = %crate::apierrors::render_error(&e), "unlock failed")
            }
        }
    }

    async fn owner_alive(&self, pod: &str) -> Result<bool, kube::Error> {
        match pod {
            "" => Ok(false),
            NO_POD_NAME => Ok(true),
            pod => self.pods.exists(pod).await,
        }
    }
}
