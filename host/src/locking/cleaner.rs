//! Deletes SyncObjects whose DeployItem no longer exists — decided **by UID**: a SyncObject
//! `<prefix>-<uid>` is deleted when no item named `spec.name` exists, or when the item of that
//! name has another UID (it was deleted and re-created; its lock is a different SyncObject and
//! is never touched).

use std::time::Duration;

use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Preconditions};

use super::SyncObject;
use crate::landscaper::DeployItem;

/// One cleanup pass over the SyncObjects of `prefix` (in `namespace`, or all namespaces).
/// Returns the names of the deleted SyncObjects.
pub async fn cleanup_once(
    client: &Client,
    prefix: &str,
    namespace: Option<&str>,
) -> Result<Vec<String>, kube::Error> {
    let locks: Api<SyncObject> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut deleted = Vec::new();
    for lock in locks.list(&ListParams::default()).await?.items {
        if lock.spec.prefix != prefix || lock.spec.kind != "DeployItem" {
            continue;
        }
        let ns = lock.metadata.namespace.clone().unwrap_or_default();
        let lock_name = lock.metadata.name.clone().unwrap_or_default();
        let orphaned = match item_is_gone(client, prefix, &lock).await {
            Ok(gone) => gone,
            Err(e) => {
                tracing::debug!(lock = %lock_name, error = %crate::apierrors::render_error(&e), "cannot check lock owner object; keeping it");
                false
            }
        };
        if !orphaned {
            continue;
        }
        let api: Api<SyncObject> = Api::namespaced(client.clone(), &ns);
        // Only the SyncObject we looked at: never one re-created under the same name since.
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: lock.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(&lock_name, &params).await {
            Ok(_) => deleted.push(lock_name),
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    if !deleted.is_empty() {
        tracing::info!(count = deleted.len(), "deleted orphaned SyncObjects");
    }
    Ok(deleted)
}

/// Whether the DeployItem the SyncObject `lock` (of controller `prefix`) locks no longer
/// exists: no item of its name, or one with another UID (deleted and created again; that
/// object's lock is another SyncObject). The one rule for the cleanup and for unlocking.
pub async fn item_is_gone(
    client: &Client,
    prefix: &str,
    lock: &SyncObject,
) -> Result<bool, kube::Error> {
    let namespace = lock.metadata.namespace.clone().unwrap_or_default();
    let items: Api<DeployItem> = Api::namespaced(client.clone(), &namespace);
    Ok(match items.get_metadata_opt(&lock.spec.name).await? {
        None => true,
        Some(item) => {
            let uid = item.metadata.uid.unwrap_or_default();
            Some(format!("{prefix}-{uid}")) != lock.metadata.name
        }
    })
}

/// Runs [`cleanup_once`] every `interval` (first after `initial_delay`) until dropped.
pub async fn run(
    client: Client,
    prefix: String,
    namespace: Option<String>,
    initial_delay: Duration,
    interval: Duration,
) {
    tokio::time::sleep(initial_delay).await;
    loop {
        if let Err(e) = cleanup_once(&client, &prefix, namespace.as_deref()).await {
            tracing::warn!(error = %crate::apierrors::render_error(&e), "SyncObject cleanup failed");
        }
        tokio::time::sleep(interval).await;
    }
}
