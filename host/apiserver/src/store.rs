//! The object store: every object as `serde_json::Value`, indexed by
//! (resource, namespace, name); one global strictly increasing
//! resourceVersion; every write goes through [`Inner::commit`] under one
//! lock, which assigns the rv, keeps the uid / ownerReference / token indexes, appends
//! to the persistence log, registers CRDs, records the event in a bounded
//! history ring (for watch-from-rv and 410 Expired) and broadcasts it.

use crate::persist::{self, Log, Record, RecordRef};
use crate::registry::{self, CRD_KEY, Registry, ResourceType};
use crate::schema::CrdSchemas;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tokio::sync::broadcast;

pub type Obj = Arc<Value>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed change.
#[derive(Debug)]
pub struct Event {
    pub rv: u64,
    pub res: Arc<str>,
    pub ns: String,
    pub etype: EventType,
    pub object: Obj,
    pub prev: Option<Obj>,
    json: OnceLock<String>,
    meta_json: OnceLock<String>,
}

impl Event {
    /// The object serialised once, shared by all watchers.
    pub fn object_json(&self) -> &str {
        self.json
            .get_or_init(|| serde_json::to_string(&*self.object).unwrap_or_default())
    }
    /// The object as `PartialObjectMetadata`, serialised once.
    pub fn meta_json(&self) -> &str {
        self.meta_json.get_or_init(|| {
            serde_json::to_string(&partial_metadata(&self.object)).unwrap_or_default()
        })
    }
}

/// `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":…}`.
pub fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    })
}

pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

pub fn rv_of(obj: &Value) -> u64 {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

pub fn uid_of(obj: &Value) -> &str {
    obj.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn owner_uids(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

type ObjKey = (String, String, String);

/// The state behind the store lock.
pub struct Inner {
    pub rv: u64,
    pub registry: Arc<Registry>,
    pub(crate) objects: HashMap<String, BTreeMap<String, BTreeMap<String, Obj>>>,
    history: VecDeque<Arc<Event>>,
    history_cap: usize,
    /// Every event with rv > floor is in `history`.
    floor: u64,
    log: Option<Log>,
    pub(crate) uids: HashMap<String, ObjKey>,
    pub(crate) dependents: HashMap<String, HashSet<ObjKey>>,
    /// Number of committed changes.
    pub commits: u64,
    tx: broadcast::Sender<Arc<Event>>,
    /// Compiled CRD schemas by resource key (compiled once per CRD write, see [`crate::schema`]).
    pub(crate) schemas: HashMap<String, Arc<CrdSchemas>>,
    /// Play kubelet/controllers for workload status (see [`crate::simulate`]).
    pub(crate) simulate: bool,
    /// Set while [`Inner::aggregate_cluster_roles`] writes (its own writes do not recurse).
    aggregating: bool,
    /// [`crate::Options::namespace_finalize_delay`] (only with a runtime to run the task).
    pub(crate) namespace_finalize_delay: Option<std::time::Duration>,
    /// Terminating namespaces and when the namespace controller may finalize them.
    pub(crate) namespaces_due: BTreeMap<String, std::time::Instant>,
    /// The ServiceAccount token controller's key, CA and token index (see [`crate::tokens`]).
    pub(crate) service_account_tokens: crate::tokens::TokenController,
}

/// Resource key of ClusterRoles (their writes re-aggregate aggregated ClusterRoles).
const CLUSTER_ROLES_KEY: &str = "rbac.authorization.k8s.io/clusterroles";
/// Resource key of Secrets (their writes keep the ServiceAccount token index, [`crate::tokens`]).
const SECRETS_KEY: &str = "/secrets";

/// The store: a mutex around [`Inner`].
pub struct Store {
    inner: Mutex<Inner>,
}

impl Store {
    pub fn new(history_cap: usize) -> Self {
        let (tx, _) = broadcast::channel(16 * 1024);
        Store {
            inner: Mutex::new(Inner {
                rv: 0,
                registry: Arc::new(Registry::builtin()),
                objects: HashMap::new(),
                history: VecDeque::new(),
                history_cap: history_cap.max(1),
                floor: 0,
                log: None,
                uids: HashMap::new(),
                dependents: HashMap::new(),
                commits: 0,
                tx,
                schemas: HashMap::new(),
                simulate: false,
                aggregating: false,
                namespace_finalize_delay: None,
                namespaces_due: BTreeMap::new(),
                service_account_tokens: Default::default(),
            }),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Inner {
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.tx.subscribe()
    }

    pub fn lookup(&self, key: &str, ns: &str, name: &str) -> Option<&Obj> {
        self.objects.get(key)?.get(ns)?.get(name)
    }

    pub fn namespace_exists(&self, ns: &str) -> bool {
        self.lookup(registry::NAMESPACE_KEY, "", ns).is_some()
    }

    /// Events after `rv`, or `Err(oldest available rv)` if some were dropped from the ring.
    pub fn history_since(&self, rv: u64) -> Result<Vec<Arc<Event>>, u64> {
        if rv < self.floor {
            return Err(self.floor + 1);
        }
        let start = self.history.partition_point(|e| e.rv <= rv);
        Ok(self.history.iter().skip(start).cloned().collect())
    }

    /// All objects of a resource, optionally in one namespace, in (namespace, name) order.
    pub fn objects_of(&self, key: &str, ns: Option<&str>) -> Vec<Obj> {
        let Some(m) = self.objects.get(key) else {
            return vec![];
        };
        match ns {
            Some(ns) => m
                .get(ns)
                .map(|n| n.values().cloned().collect())
                .unwrap_or_default(),
            None => m.values().flat_map(|n| n.values().cloned()).collect(),
        }
    }

    pub fn namespace_is_empty(&self, ns: &str) -> bool {
        !self
            .objects
            .values()
            .any(|m| m.get(ns).is_some_and(|n| !n.is_empty()))
    }

    /// Commit a write: `Some(object)` creates or replaces, `None` deletes.
    /// Assigns the next resourceVersion and returns the stored (or deleted) object.
    pub fn commit(&mut self, rt: &ResourceType, ns: &str, name: &str, new: Option<Value>) -> Obj {
        self.rv += 1;
        let rv = self.rv;
        let key = rt.key();
        let prev = self.lookup(&key, ns, name).cloned();
        let set_rv = |v: &mut Value| {
            if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                m.insert("resourceVersion".into(), Value::String(rv.to_string()));
            }
        };
        let (etype, obj) = match new {
            Some(mut v) => {
                set_rv(&mut v);
                let o = Arc::new(v);
                self.objects
                    .entry(key.clone())
                    .or_default()
                    .entry(ns.to_string())
                    .or_default()
                    .insert(name.to_string(), o.clone());
                (
                    if prev.is_some() {
                        EventType::Modified
                    } else {
                        EventType::Added
                    },
                    o,
                )
            }
            None => {
                let mut v = prev
                    .as_deref()
                    .cloned()
                    .unwrap_or_else(|| json!({"metadata": {"name": name}}));
                set_rv(&mut v);
                if let Some(m) = self.objects.get_mut(&key)
                    && let Some(n) = m.get_mut(ns)
                {
                    n.remove(name);
                    if n.is_empty() {
                        m.remove(ns);
                    }
                }
                (EventType::Deleted, Arc::new(v))
            }
        };
        self.index(
            &key,
            ns,
            name,
            prev.as_deref(),
            (etype != EventType::Deleted).then_some(&*obj),
        );
        if let Some(log) = &mut self.log {
            let rec = RecordRef {
                rv,
                r: Some(&key),
                ns,
                n: name,
                o: (etype != EventType::Deleted).then_some(&*obj),
            };
            if let Err(e) = log.append(&rec) {
                tracing::error!(error = %e, dir = %log.dir().display(), "cannot append to the store log");
            }
        }
        self.commits += 1;
        let ev = Arc::new(Event {
            rv,
            res: Arc::from(key.as_str()),
            ns: ns.to_string(),
            etype,
            object: obj.clone(),
            prev,
            json: OnceLock::new(),
            meta_json: OnceLock::new(),
        });
        self.history.push_back(ev.clone());
        while self.history.len() > self.history_cap {
            if let Some(e) = self.history.pop_front() {
                self.floor = e.rv;
            }
        }
        let _ = self.tx.send(ev);
        if key == CRD_KEY {
            self.crd_changed(etype, &obj);
        }
        if key == CLUSTER_ROLES_KEY && !self.aggregating {
            self.aggregate_cluster_roles();
        }
        obj
    }

    /// Kubernetes' clusterrole-aggregation controller, in the request that changed a
    /// ClusterRole: every ClusterRole with an `aggregationRule` gets the rules of the
    /// ClusterRoles its selectors match ([`crate::rbac::aggregated_rules`]), written (MODIFIED,
    /// a new resourceVersion) only when they differ; repeated until nothing changes, so
    /// aggregates of aggregates (`admin` ⊇ `edit` ⊇ `view`) settle in the same request.
    pub(crate) fn aggregate_cluster_roles(&mut self) {
        let Some(rt) = self.registry.by_key(CLUSTER_ROLES_KEY).cloned() else {
            return;
        };
        self.aggregating = true;
        let all = self.objects_of(CLUSTER_ROLES_KEY, Some(""));
        let aggregated: Vec<String> = all
            .iter()
            .filter(|r| r.get("aggregationRule").is_some_and(|a| !a.is_null()))
            .map(|r| {
                r.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            })
            .collect();
        // A chain of n aggregates settles in n passes; the bound only stops a cycle.
        for _ in 0..=aggregated.len() {
            let mut changed = false;
            for name in &aggregated {
                let all = self.objects_of(CLUSTER_ROLES_KEY, Some(""));
                let Some(role) = self.lookup(CLUSTER_ROLES_KEY, "", name).cloned() else {
                    continue;
                };
                if let Some(rules) = crate::rbac::aggregated_rules(&role, all.iter().map(|r| &**r))
                {
                    let mut next = (*role).clone();
                    next["rules"] = Value::Array(rules);
                    self.commit(&rt, "", name, Some(next));
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        self.aggregating = false;
    }

    fn index(
        &mut self,
        key: &str,
        ns: &str,
        name: &str,
        prev: Option<&Value>,
        new: Option<&Value>,
    ) {
        if key == SECRETS_KEY {
            self.service_account_tokens.reindex(ns, name, prev, new);
        }
        let k: ObjKey = (key.to_string(), ns.to_string(), name.to_string());
        let old_owners = prev.map(owner_uids).unwrap_or_default();
        let new_owners = new.map(owner_uids).unwrap_or_default();
        if old_owners != new_owners {
            for o in &old_owners {
                if let Some(s) = self.dependents.get_mut(o) {
                    s.remove(&k);
                    if s.is_empty() {
                        self.dependents.remove(o);
                    }
                }
            }
            for o in new_owners {
                self.dependents.entry(o).or_default().insert(k.clone());
            }
        }
        match (prev, new) {
            (_, Some(n)) if prev.is_none() => {
                self.uids.insert(uid_of(n).to_string(), k);
            }
            (Some(p), None) => {
                self.uids.remove(uid_of(p));
            }
            _ => {}
        }
    }

    fn crd_changed(&mut self, etype: EventType, crd: &Value) {
        let Ok(rt) = registry::from_crd(crd) else {
            return;
        };
        let reg = Arc::make_mut(&mut self.registry);
        if etype == EventType::Deleted {
            reg.remove(&rt.key());
            self.schemas.remove(&rt.key());
            let items: Vec<(String, String)> = self
                .objects
                .get(&rt.key())
                .map(|m| {
                    m.iter()
                        .flat_map(|(ns, n)| n.keys().map(move |name| (ns.clone(), name.clone())))
                        .collect()
                })
                .unwrap_or_default();
            for (ns, name) in items {
                self.commit(&rt, &ns, &name, None);
            }
        } else {
            let schemas = CrdSchemas::compile(crd).unwrap_or_default();
            self.schemas.insert(rt.key(), Arc::new(schemas));
            reg.insert(rt);
        }
    }

    /// Load persisted records (no events, no log appends), then rebuild the CRD registry.
    pub fn load(&mut self, records: Vec<Record>) {
        for r in records {
            self.rv = self.rv.max(r.rv);
            let Some(key) = r.r else { continue };
            let prev = self.lookup(&key, &r.ns, &r.n).cloned();
            match r.o {
                Some(o) => {
                    self.index(&key, &r.ns, &r.n, prev.as_deref(), Some(&o));
                    self.objects
                        .entry(key)
                        .or_default()
                        .entry(r.ns)
                        .or_default()
                        .insert(r.n, Arc::new(o));
                }
                None => {
                    self.index(&key, &r.ns, &r.n, prev.as_deref(), None);
                    if let Some(m) = self.objects.get_mut(&key)
                        && let Some(n) = m.get_mut(&r.ns)
                    {
                        n.remove(&r.n);
                        if n.is_empty() {
                            m.remove(&r.ns);
                        }
                    }
                }
            }
        }
        let crds = self.objects_of(CRD_KEY, Some(""));
        let reg = Arc::make_mut(&mut self.registry);
        for c in crds {
            if let Ok(rt) = registry::from_crd(&c) {
                let schemas = CrdSchemas::compile(&c).unwrap_or_default();
                self.schemas.insert(rt.key(), Arc::new(schemas));
                reg.insert(rt);
            }
        }
        self.floor = self.rv;
        self.history.clear();
    }

    /// Rewrite the log as a compact snapshot (and keep appending to it).
    pub fn snapshot_to(&mut self, dir: &std::path::Path) -> anyhow::Result<()> {
        self.log = None;
        let rv = self.rv;
        let mut records: Vec<RecordRef<'_>> = Vec::new();
        for (key, m) in &self.objects {
            for (ns, n) in m {
                for (name, o) in n {
                    records.push(RecordRef {
                        rv: rv_of(o),
                        r: Some(key),
                        ns,
                        n: name,
                        o: Some(o),
                    });
                }
            }
        }
        records.sort_by_key(|r| r.rv);
        records.push(RecordRef {
            rv,
            r: None,
            ns: "",
            n: "",
            o: None,
        });
        let log = persist::write_snapshot(dir, records.into_iter())?;
        self.log = Some(log);
        Ok(())
    }

    pub fn sync_log(&mut self) -> std::io::Result<()> {
        match &mut self.log {
            Some(l) => l.sync(),
            None => Ok(()),
        }
    }

    pub fn has_log(&self) -> bool {
        self.log.is_some()
    }
}
