//! The API server's state and what it does without a network: the store, options, counters,
//! audit log, fault injection, tokens and RBAC decisions, installing objects.
//!
//! Owns: [`ApiServer`] and its [`Options`]. Must not touch: HTTP (routes and serving stand on
//! this: `http.rs`).

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::faults::{self, FaultConfig};
use crate::status::ApiError;
use crate::{auth, ops, persist, rbac, registry, store, tokens, webhooks};

/// Server options. `Default`: in memory, no faults.
#[derive(Debug, Clone)]
pub struct Options {
    /// Persist every object here (see [`persist`]); `None` = memory only.
    pub data_dir: Option<PathBuf>,
    pub faults: FaultConfig,
    /// Number of events kept for watch-from-resourceVersion (older → 410 Expired).
    pub watch_history: usize,
    /// Period of BOOKMARK events on watches with `allowWatchBookmarks=true`.
    pub bookmark_interval: Duration,
    /// Dev mode only: play kubelet and workload controllers so Pods become
    /// Running/Ready and Deployments, StatefulSets, DaemonSets, ReplicaSets
    /// and Jobs get the status readiness checks look for (see [`simulate`]).
    /// Off by default (contract tests see no status they did not write).
    pub simulate_workloads: bool,
    /// Authenticate every HTTP request and authorize it with RBAC, as a kube-apiserver with
    /// `--authorization-mode=RBAC` does (see `docs/apiserver.md`, *Authentication and RBAC*).
    /// Off by default: any token (or none) may do anything.
    pub rbac: bool,
    /// [`run_standalone`] serves HTTPS with a CA and serving certificate generated at start
    /// (see [`tls`]) and writes the CA into the kubeconfig and `ca.crt` beside it. kubectl sends
    /// bearer tokens only over TLS, so this is what makes [`Options::rbac`] usable from kubectl.
    /// Off by default (plain HTTP). In-process users serve HTTPS with [`ApiServer::serve_tls`].
    pub tls: bool,
    /// The administrator's bearer token (`system:admin`, `system:masters`) instead of the
    /// well-known [`auth::ADMIN_TOKEN`], which is then refused. `None` by default.
    pub admin_token: Option<String>,
    /// Finalize an emptied terminating namespace this long after it was deleted, from a
    /// background task, as kube-controller-manager's namespace controller does on a cluster:
    /// until then the namespace stays `Terminating`, and a repeated DELETE answers 200 as
    /// kube-apiserver does. `None` (default): within the request that empties it. Dev mode
    /// sets 1 s. Needs a Tokio runtime when the server is created (without one: at once).
    pub namespace_finalize_delay: Option<Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            data_dir: None,
            faults: FaultConfig::default(),
            watch_history: 10_000,
            bookmark_interval: Duration::from_secs(10),
            simulate_workloads: false,
            rbac: false,
            tls: false,
            admin_token: None,
            namespace_finalize_delay: None,
        }
    }
}

/// Request counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stats {
    /// resource (e.g. `configmaps`, `deployitems.landscaper.gardener.cloud/status`) → verb → count.
    pub requests: BTreeMap<String, BTreeMap<String, u64>>,
    /// verb (get/list/watch/create/update/patch/delete/deletecollection) → count.
    pub by_verb: BTreeMap<String, u64>,
    pub total_requests: u64,
    /// Committed object changes (each bumps the resourceVersion; no-op writes are not counted).
    pub writes: u64,
}

impl Stats {
    pub fn count(&self, verb: &str, resource: &str) -> u64 {
        self.requests
            .get(resource)
            .and_then(|m| m.get(verb))
            .copied()
            .unwrap_or(0)
    }
    pub fn verb(&self, verb: &str) -> u64 {
        self.by_verb.get(verb).copied().unwrap_or(0)
    }
}

/// One successful write request (recorded when auditing is on).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// create / update / patch / delete / deletecollection.
    pub verb: String,
    /// Qualified resource, e.g. `configmaps` or `deployitems.landscaper.gardener.cloud`.
    pub resource: String,
    pub namespace: String,
    pub name: String,
    pub subresource: Option<String>,
    pub user_agent: Option<String>,
    pub field_manager: Option<String>,
    /// The object's resourceVersion after the request.
    pub resource_version: String,
    /// False for no-op writes (nothing changed, rv unchanged).
    pub changed: bool,
}

pub(crate) struct Shared {
    pub(crate) store: store::Store,
    pub(crate) faults: RwLock<FaultConfig>,
    pub(crate) dice: faults::Dice,
    stats: Mutex<Stats>,
    pub(crate) audit_on: AtomicBool,
    pub(crate) audit: Mutex<Vec<AuditEntry>>,
    pub(crate) tokens: auth::Tokens,
    /// The compiled ValidatingWebhookConfigurations (see [`webhooks`]).
    pub(crate) webhooks: webhooks::Webhooks,
    pub(crate) opts: Options,
}

/// The API server. Cheap to clone (an `Arc` inside).
#[derive(Clone)]
pub struct ApiServer {
    pub(crate) shared: Arc<Shared>,
    /// Set on the copy that serves HTTP: closes its watch streams on shutdown.
    pub(crate) stop: Option<tokio::sync::watch::Receiver<bool>>,
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServer").finish_non_exhaustive()
    }
}

const BOOT_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

impl ApiServer {
    /// Create a server; loads `data_dir` if given (a torn or corrupt log is an error naming file and offset).
    pub fn new(opts: Options) -> anyhow::Result<Self> {
        let store = store::Store::new(opts.watch_history);
        {
            let mut g = store.lock();
            if let Some(dir) = &opts.data_dir {
                // Before the load: it indexes the tokens the key signed.
                g.service_account_tokens
                    .set_key(tokens::load_or_create_key(dir)?);
                let recs = persist::load(dir)?;
                g.load(recs);
                g.snapshot_to(dir)?;
            }
            g.simulate = opts.simulate_workloads;
            // The delay needs the background task below, and so a runtime.
            g.namespace_finalize_delay = opts
                .namespace_finalize_delay
                .filter(|_| tokio::runtime::Handle::try_current().is_ok());
            g.schedule_terminating_namespaces();
            let ns_rt = g
                .registry
                .by_key(registry::NAMESPACE_KEY)
                .cloned()
                .context("namespaces are registered")?;
            for ns in BOOT_NAMESPACES {
                if !g.namespace_exists(ns) {
                    g.create(
                        &ns_rt,
                        "v1",
                        "",
                        json!({"metadata": {"name": ns}}),
                        &ops::WriteOpts::default(),
                    )
                    .map_err(|e| anyhow::anyhow!("creating namespace {ns}: {e}"))?;
                }
            }
        }
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(42);
        let finalize_delay = store.lock().namespace_finalize_delay;
        let shared = Arc::new(Shared {
            store,
            faults: RwLock::new(opts.faults.clone()),
            dice: faults::Dice::new(seed),
            stats: Mutex::new(Stats::default()),
            audit_on: AtomicBool::new(false),
            audit: Mutex::new(Vec::new()),
            tokens: auth::Tokens::with_admin(opts.admin_token.clone()),
            webhooks: webhooks::Webhooks::default(),
            opts,
        });
        if let Some(delay) = finalize_delay {
            // The namespace controller: finalizes what is due, until the server is dropped.
            let weak = Arc::downgrade(&shared);
            let tick = (delay / 4).clamp(Duration::from_millis(10), Duration::from_millis(250));
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(tick).await;
                    let Some(shared) = weak.upgrade() else { break };
                    shared
                        .store
                        .lock()
                        .finalize_due_namespaces(std::time::Instant::now());
                }
            });
        }
        Ok(ApiServer { shared, stop: None }).and_then(|server| {
            if server.shared.opts.rbac {
                server.bootstrap_rbac()?;
            }
            Ok(server)
        })
    }

    /// Creates the bootstrap roles and bindings a fresh RBAC cluster has (those missing).
    fn bootstrap_rbac(&self) -> anyhow::Result<()> {
        for obj in rbac::bootstrap_objects() {
            let key = match obj["kind"].as_str() {
                Some("ClusterRole") => "rbac.authorization.k8s.io/clusterroles",
                _ => "rbac.authorization.k8s.io/clusterrolebindings",
            };
            let name = obj["metadata"]["name"].as_str().unwrap_or("");
            if self.shared.store.lock().lookup(key, "", name).is_none() {
                self.install_object(obj)?;
            }
        }
        Ok(())
    }

    /// Whether requests are authenticated and authorized ([`Options::rbac`]).
    pub fn rbac_enabled(&self) -> bool {
        self.shared.opts.rbac
    }

    /// The administrator's bearer token ([`Options::admin_token`], else [`auth::ADMIN_TOKEN`]).
    pub fn admin_token(&self) -> &str {
        self.shared.tokens.admin_token()
    }

    /// Registers a bearer token for a client identity (used when [`Options::rbac`] is on):
    /// requests with `Authorization: Bearer <token>` act as `user` with `groups` (plus
    /// `system:authenticated`, as every authenticated user has).
    pub fn add_token(&self, token: &str, user: &str, groups: &[&str]) {
        let mut u = rbac::UserInfo::new(user, groups);
        if !u.in_group(rbac::ALL_AUTHENTICATED) {
            u.groups.push(rbac::ALL_AUTHENTICATED.into());
        }
        self.shared.tokens.add(token, u);
    }

    /// The user a bearer token stands for (the admin token, registered tokens, live
    /// ServiceAccount tokens: TokenRequest's and legacy token Secrets' ([`tokens`])), if any.
    pub fn user_for_token(&self, token: &str) -> Option<rbac::UserInfo> {
        self.shared
            .tokens
            .user(token, |sa| {
                self.service_account_uid(sa.namespace, sa.name).as_deref() == Some(sa.uid)
            })
            .or_else(|| self.shared.store.lock().service_account_token_user(token))
    }

    /// The CA written into legacy ServiceAccount token Secrets as `ca.crt` ([`tokens`]): the
    /// one HTTPS is served with.
    pub(crate) fn set_service_account_ca(&self, ca_pem: &str) {
        self.shared.store.lock().service_account_tokens.ca_pem = Some(ca_pem.to_string());
    }

    /// Mints a ServiceAccount token (as `POST .../serviceaccounts/{name}/token` does) valid
    /// for `ttl`; `None` if the ServiceAccount does not exist.
    pub fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
        ttl: Duration,
    ) -> Option<String> {
        let uid = self.service_account_uid(namespace, name)?;
        Some(self.shared.tokens.mint(namespace, name, &uid, ttl).0)
    }

    pub(crate) fn service_account_uid(&self, ns: &str, name: &str) -> Option<String> {
        self.shared
            .store
            .lock()
            .lookup("/serviceaccounts", ns, name)
            .map(|o| store::uid_of(o).to_string())
    }

    /// A snapshot of the RBAC objects deciding requests in `namespace`.
    pub(crate) fn policy(&self, namespace: &str) -> rbac::Policy {
        let g = self.shared.store.lock();
        let all = |key: &str, ns: Option<&str>| -> Vec<Value> {
            g.objects_of(key, ns)
                .iter()
                .map(|o| (**o).clone())
                .collect()
        };
        let mut p = rbac::Policy {
            cluster_role_bindings: all("rbac.authorization.k8s.io/clusterrolebindings", None),
            ..Default::default()
        };
        for r in all("rbac.authorization.k8s.io/clusterroles", None) {
            let name = r["metadata"]["name"].as_str().unwrap_or("").to_string();
            p.cluster_roles.insert(name, r);
        }
        if !namespace.is_empty() {
            p.role_bindings = all("rbac.authorization.k8s.io/rolebindings", Some(namespace));
            for r in all("rbac.authorization.k8s.io/roles", Some(namespace)) {
                let name = r["metadata"]["name"].as_str().unwrap_or("").to_string();
                p.roles.insert((namespace.to_string(), name), r);
            }
        }
        p
    }

    /// The RBAC decision for `a` (everything is allowed with [`Options::rbac`] off).
    pub fn decide(&self, a: &rbac::Attributes) -> rbac::Decision {
        if !self.shared.opts.rbac {
            return rbac::Decision {
                allowed: true,
                reason: String::new(),
            };
        }
        self.policy(&a.namespace).authorize(a)
    }

    /// The rules that apply to `user` in `namespace` (all of them with [`Options::rbac`] off).
    pub fn rules_for(
        &self,
        user: &rbac::UserInfo,
        namespace: &str,
    ) -> (Vec<rbac::PolicyRule>, Vec<String>) {
        if !self.shared.opts.rbac {
            let all = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
            return (
                vec![
                    rbac::PolicyRule {
                        verbs: all(&["*"]),
                        api_groups: all(&["*"]),
                        resources: all(&["*"]),
                        ..Default::default()
                    },
                    rbac::PolicyRule {
                        verbs: all(&["*"]),
                        non_resource_urls: all(&["*"]),
                        ..Default::default()
                    },
                ],
                vec![],
            );
        }
        self.policy(namespace).rules_for(user, namespace)
    }

    /// Request counters since start (or the last [`reset_stats`](Self::reset_stats)).
    pub fn stats(&self) -> Stats {
        let mut s = self
            .shared
            .stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        s.writes = self.shared.store.lock().commits;
        s
    }

    pub fn reset_stats(&self) {
        *self.shared.stats.lock().unwrap_or_else(|e| e.into_inner()) = Stats::default();
    }

    pub(crate) fn count(&self, verb: &str, resource: &str) {
        let mut s = self.shared.stats.lock().unwrap_or_else(|e| e.into_inner());
        *s.requests
            .entry(resource.to_string())
            .or_default()
            .entry(verb.to_string())
            .or_default() += 1;
        *s.by_verb.entry(verb.to_string()).or_default() += 1;
        s.total_requests += 1;
    }

    /// Turn recording of successful write requests on or off.
    pub fn enable_audit(&self, on: bool) {
        self.shared.audit_on.store(on, Ordering::Relaxed);
    }

    pub fn audit_log(&self) -> Vec<AuditEntry> {
        self.shared
            .audit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replace the fault-injection configuration at runtime.
    pub fn set_faults(&self, faults: FaultConfig) {
        *self
            .shared
            .faults
            .write()
            .unwrap_or_else(|e| e.into_inner()) = faults;
    }

    /// The injected delay for a request on `resource` (qualified name), if any.
    pub(crate) fn injected_delay(&self, resource: &str) -> Option<Duration> {
        let f = self.shared.faults.read().unwrap_or_else(|e| e.into_inner());
        (!f.response_delay.is_zero()
            && (f.delayed_resources.is_empty()
                || f.delayed_resources.iter().any(|r| r == resource)))
        .then_some(f.response_delay)
    }

    /// The fault a request (not a watch) gets before it is handled: 503, if rolled.
    pub(crate) fn injected_unavailable(&self) -> Option<ApiError> {
        let p = self
            .shared
            .faults
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .unavailable_probability;
        self.shared.dice.roll(p).then(|| {
            ApiError::unavailable(
                "injected fault: the server is currently unable to handle the request",
            )
        })
    }

    /// The answer a handled request gets instead of its own: 504, if rolled.
    pub(crate) fn injected_timeout(&self) -> Option<ApiError> {
        let p = self
            .shared
            .faults
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .timeout_probability;
        self.shared.dice.roll(p).then(|| {
            ApiError::timeout(
                "injected fault: the server was unable to return a response in the time allotted, but may still be processing the request",
            )
        })
    }

    pub(crate) fn injected_write_fault(
        &self,
        rt: &registry::ResourceType,
        name: &str,
    ) -> Option<ApiError> {
        let f = self
            .shared
            .faults
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if self.shared.dice.roll(f.write_conflict_probability) {
            return Some(ApiError::modified(&rt.group, &rt.plural, name));
        }
        if self.shared.dice.roll(f.write_error_probability) {
            return Some(ApiError::internal("injected fault: internal error"));
        }
        None
    }

    /// Switch the workload simulator ([`Options::simulate_workloads`]) on or off at runtime.
    pub fn set_simulate_workloads(&self, on: bool) {
        self.shared.store.lock().simulate = on;
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.store.lock().rv
    }

    /// Persist everything (compact snapshot + fsync). A no-op without `data_dir`.
    pub async fn flush(&self) -> anyhow::Result<()> {
        let Some(dir) = self.shared.opts.data_dir.clone() else {
            return Ok(());
        };
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut g = me.shared.store.lock();
            g.snapshot_to(&dir)?;
            g.sync_log().context("fsync of the store log")
        })
        .await
        .context("flush task")?
    }

    /// Create (or replace, if they exist) the objects of a multi-document
    /// YAML stream, server-side, without HTTP. `kind: List` documents are
    /// expanded; namespaced objects without a namespace go to `default`.
    pub fn install_yaml_documents(&self, yaml: &str) -> anyhow::Result<()> {
        let mut objs = Vec::new();
        for doc in serde_yaml::Deserializer::from_str(yaml) {
            let v = Value::deserialize(doc).context("parsing YAML document")?;
            if v.is_null() {
                continue;
            }
            if v.get("kind").and_then(Value::as_str) == Some("List") {
                objs.extend(
                    v.get("items")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                );
            } else {
                objs.push(v);
            }
        }
        for obj in objs {
            self.install_object(obj)?;
        }
        Ok(())
    }

    /// Create or replace one object (server-side, no HTTP).
    pub fn install_object(&self, mut obj: Value) -> anyhow::Result<Value> {
        let av = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let kind = obj
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut g = self.shared.store.lock();
        let rt = g
            .registry
            .by_api_version_kind(&av, &kind)
            .cloned()
            .with_context(|| format!("no resource for apiVersion {av:?} kind {kind:?}"))?;
        let (_, version) = registry::split_api_version(&av);
        let version = version.to_string();
        let ns = if rt.namespaced {
            obj.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or("default")
                .to_string()
        } else {
            String::new()
        };
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let o = ops::WriteOpts {
            field_manager: Some("embedded-apiserver".into()),
            ..Default::default()
        };
        if !name.is_empty() && g.lookup(&rt.key(), &ns, &name).is_some() {
            if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("resourceVersion");
            }
            let (r, _) = g
                .update(&rt, &version, &ns, &name, obj, false, &o)
                .map_err(|e| anyhow::anyhow!("replacing {kind} {name}: {e}"))?;
            return Ok((*r).clone());
        }
        let r = g
            .create(&rt, &version, &ns, obj, &o)
            .map_err(|e| anyhow::anyhow!("creating {kind} {name}: {e}"))?;
        Ok((*r).clone())
    }
}
