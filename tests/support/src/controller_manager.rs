//! Stand-ins for two of kube-controller-manager's controllers, for a test cluster that has no
//! controller-manager (the real kube-apiserver of `../shared/tools/real-apiserver`; the embedded
//! server has both of its own: `embedded_apiserver::tokens`, and namespace finalization).
//!
//! [`ServiceAccountTokens`], the ServiceAccount token controller: it fills every legacy token Secret
//! (`type: kubernetes.io/service-account-token`, annotation `kubernetes.io/service-account.name`)
//! that has no `data.token` yet with `token`, `namespace`, `ca.crt` (when given) and the
//! annotation `kubernetes.io/service-account.uid`.
//!
//! The token is a TokenRequest token for the ServiceAccount, bound to the Secret
//! (`boundObjectRef`), valid for a year (or what the server caps it to), for the audience
//! `https://kubernetes.default.svc`: it authenticates as the ServiceAccount and dies with the
//! Secret (or the ServiceAccount), as a legacy token does. The write is a merge patch with the
//! Secret's resourceVersion as precondition, so a token someone else wrote meanwhile is kept.
//!
//! Secrets come from a watch on all namespaces; a Secret whose ServiceAccount does not exist
//! yet, or whose filling failed (logged with `eprintln!`), is tried again every second until it
//! is filled or gone. Never panics; runs until the [`ServiceAccountTokens`] is dropped.
//!
//! [`NamespaceFinalizer`], the namespace controller's last step: a namespace being deleted is
//! finalized (its `kubernetes` finalizer removed) once it holds no ConfigMap, Secret, Pod or
//! ServiceAccount but the cluster's own (`kube-root-ca.crt`, `default` and its token), so that a
//! deployer that deletes a Namespace and waits for it to go sees it go, as on a cluster.
//!
//! Owns: those Secrets' token data while it is missing, and those Namespaces' finalizers. Must not
//! touch: any other Secret, a Secret that already has a token, ServiceAccounts.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, ServiceAccount};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

const TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
const SA_NAME: &str = "kubernetes.io/service-account.name";
const SA_UID: &str = "kubernetes.io/service-account.uid";
/// What the token is for: kube-apiserver's default `--api-audiences`.
const AUDIENCE: &str = "https://kubernetes.default.svc";
/// A year: a legacy token does not expire; the server may cap it.
const EXPIRATION_SECONDS: i64 = 365 * 24 * 3600;
/// How often Secrets still waiting for their token are tried again.
const RETRY: Duration = Duration::from_secs(1);

/// The controller, running on a Tokio task until dropped.
pub struct ServiceAccountTokens {
    task: tokio::task::JoinHandle<()>,
}

impl ServiceAccountTokens {
    /// Starts filling the cluster's legacy token Secrets through `client` (it needs to watch
    /// and patch Secrets, get ServiceAccounts and create their tokens: an admin client);
    /// `ca_pem` is the cluster's CA, written as `ca.crt`. Needs a Tokio runtime.
    pub fn start(client: Client, ca_pem: Option<String>) -> Self {
        let task = tokio::spawn(run(client, ca_pem));
        Self { task }
    }
}

impl Drop for ServiceAccountTokens {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// (namespace, name) of a Secret.
type Key = (String, String);

async fn run(client: Client, ca_pem: Option<String>) {
    let all: Api<Secret> = Api::all(client.clone());
    let mut events = watcher(all, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    let mut waiting: BTreeSet<Key> = BTreeSet::new();
    let mut retry = tokio::time::interval(RETRY);
    retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(secret)) => {
                    let key = key_of(&secret);
                    if settle(&client, &secret, ca_pem.as_deref()).await {
                        waiting.remove(&key);
                    } else {
                        waiting.insert(key);
                    }
                }
                Some(Err(e)) => eprintln!("service-account token controller: watching Secrets: {e}"),
                None => return,
            },
            _ = retry.tick(), if !waiting.is_empty() => {
                for key in std::mem::take(&mut waiting) {
                    if !retry_one(&client, &key, ca_pem.as_deref()).await {
                        waiting.insert(key);
                    }
                }
            }
        }
    }
}

fn key_of(secret: &Secret) -> Key {
    (
        secret.metadata.namespace.clone().unwrap_or_default(),
        secret.metadata.name.clone().unwrap_or_default(),
    )
}

/// The current Secret `key` (gone: nothing left to do), settled.
async fn retry_one(client: &Client, key: &Key, ca_pem: Option<&str>) -> bool {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &key.0);
    match secrets.get_opt(&key.1).await {
        Ok(Some(secret)) => settle(client, &secret, ca_pem).await,
        Ok(None) => true,
        Err(e) => {
            eprintln!(
                "service-account token controller: getting Secret {}/{}: {e}",
                key.0, key.1
            );
            false
        }
    }
}

/// The ServiceAccount a Secret waits for a token of, if it is a legacy token Secret without one
/// that is not being deleted.
fn waits_for(secret: &Secret) -> Option<&str> {
    let filled = secret
        .data
        .as_ref()
        .and_then(|d| d.get("token"))
        .is_some_and(|t| !t.0.is_empty());
    if secret.type_.as_deref() != Some(TOKEN_TYPE)
        || filled
        || secret.metadata.deletion_timestamp.is_some()
    {
        return None;
    }
    secret
        .metadata
        .annotations
        .as_ref()?
        .get(SA_NAME)
        .map(String::as_str)
        .filter(|s| !s.is_empty())
}

/// Fills `secret` if it waits for a token; whether nothing is left to do for it (filled, not
/// one to fill, or filled by someone else meanwhile). Failures are logged.
async fn settle(client: &Client, secret: &Secret, ca_pem: Option<&str>) -> bool {
    let Some(sa) = waits_for(secret) else {
        return true;
    };
    match fill(client, secret, sa, ca_pem).await {
        Ok(done) => done,
        Err(e) => {
            let (ns, name) = key_of(secret);
            eprintln!("service-account token controller: Secret {ns}/{name}: {e:#}");
            false
        }
    }
}

/// A token for ServiceAccount `sa` bound to `secret`, patched into it. `Ok(false)`: the
/// ServiceAccount does not exist (yet), or the Secret changed meanwhile — try again.
async fn fill(
    client: &Client,
    secret: &Secret,
    sa: &str,
    ca_pem: Option<&str>,
) -> anyhow::Result<bool> {
    let (namespace, name) = key_of(secret);
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
    let Some(account) = sas.get_opt(sa).await? else {
        return Ok(false);
    };
    let request = json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {
            "audiences": [AUDIENCE],
            "expirationSeconds": EXPIRATION_SECONDS,
            "boundObjectRef": {"kind": "Secret", "apiVersion": "v1", "name": name,
                               "uid": secret.metadata.uid},
        },
    });
    let answer: Value = match sas
        .create_subresource("token", sa, &PostParams::default(), &request)
        .await
    {
        Ok(answer) => answer,
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(false),
        Err(e) => return Err(anyhow::Error::new(e).context("TokenRequest")),
    };
    let token = answer["status"]["token"]
        .as_str()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| anyhow::anyhow!("the TokenRequest answered no token: {answer}"))?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut data = BTreeMap::from([
        ("token".to_string(), b64(token)),
        ("namespace".to_string(), b64(&namespace)),
    ]);
    if let Some(ca) = ca_pem {
        data.insert("ca.crt".into(), b64(ca));
    }
    let patch = json!({
        "metadata": {
            "resourceVersion": secret.metadata.resource_version,
            "annotations": {SA_UID: account.metadata.uid},
        },
        "data": data,
    });
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    match secrets
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(true),
        // Changed or gone meanwhile: the next event (or retry) looks again.
        Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => Ok(false),
        Err(e) => Err(anyhow::Error::new(e).context("patching the token in")),
    }
}

/// The namespace controller's last step, running until dropped.
pub struct NamespaceFinalizer {
    task: tokio::task::JoinHandle<()>,
}

impl NamespaceFinalizer {
    /// Finalizes emptied terminating namespaces (polled every 200 ms) through `admin`.
    pub fn start(admin: Client) -> Self {
        let task = tokio::spawn(async move {
            loop {
                if let Err(e) = finalize_emptied(&admin).await {
                    eprintln!("namespace finalizer: {e:#}");
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        Self { task }
    }
}

impl Drop for NamespaceFinalizer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn finalize_emptied(admin: &Client) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    for ns in namespaces.list(&ListParams::default()).await?.items {
        if ns.metadata.deletion_timestamp.is_none() {
            continue;
        }
        let name = ns.metadata.name.clone().unwrap_or_default();
        let lp = ListParams::default();
        let config_maps = Api::<ConfigMap>::namespaced(admin.clone(), &name)
            .list(&lp)
            .await?;
        let secrets = Api::<Secret>::namespaced(admin.clone(), &name)
            .list(&lp)
            .await?;
        let pods = Api::<Pod>::namespaced(admin.clone(), &name)
            .list(&lp)
            .await?;
        let accounts = Api::<ServiceAccount>::namespaced(admin.clone(), &name)
            .list(&lp)
            .await?;
        let held = config_maps
            .items
            .iter()
            .any(|c| c.metadata.name.as_deref() != Some("kube-root-ca.crt"))
            || secrets.items.iter().any(|s| {
                !(s.type_.as_deref() == Some(TOKEN_TYPE)
                    && s.metadata.annotations.as_ref().and_then(|a| a.get(SA_NAME))
                        == Some(&"default".to_string()))
            })
            || !pods.items.is_empty()
            || accounts
                .items
                .iter()
                .any(|a| a.metadata.name.as_deref() != Some("default"));
        if held {
            continue;
        }
        let mut finalized = ns.clone();
        if let Some(spec) = finalized.spec.as_mut() {
            spec.finalizers = Some(Vec::new());
        }
        namespaces
            .replace_subresource("finalize", &name, &PostParams::default(), &finalized)
            .await?;
    }
    Ok(())
}
