//! A tiny in-memory cluster for unit tests: get/create/update/delete/list (label selectors
//! `a=b,c!=d,e`), server-side apply as "create or replace, keeping status", discovery
//! (everything namespaced except a few cluster-scoped kinds), a settable clock and injectable
//! failures.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sdk_guest::{DeployerError, KubeOp, LogLevel, NativeHost, ObjectRef, ResourceInfo};
use serde_json::{Value, json};

/// (group, kind, namespace, name)
type Key = (String, String, String, String);

fn group(api_version: &str) -> String {
    api_version
        .rsplit_once('/')
        .map(|(g, _)| g.to_string())
        .unwrap_or_default()
}

/// Kinds the fake serves as cluster-scoped.
pub const CLUSTER_SCOPED: [&str; 4] = [
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
];

pub struct FakeCluster {
    objects: Mutex<BTreeMap<Key, Value>>,
    now: AtomicU64,
    rv: AtomicU64,
    remaining: Mutex<Option<Duration>>,
    /// (verb, object name, reason)
    failures: Mutex<Vec<(String, String, String)>>,
    /// Kinds discovery does not know.
    unknown_kinds: Mutex<Vec<String>>,
    ops: Mutex<Vec<String>>,
}

impl FakeCluster {
    pub fn new() -> FakeCluster {
        FakeCluster {
            objects: Mutex::new(BTreeMap::new()),
            now: AtomicU64::new(1_767_225_600_000),
            rv: AtomicU64::new(1),
            remaining: Mutex::new(None),
            failures: Mutex::new(Vec::new()),
            unknown_kinds: Mutex::new(Vec::new()),
            ops: Mutex::new(Vec::new()),
        }
    }

    fn key(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Key {
        let ns = if CLUSTER_SCOPED.contains(&kind) {
            ""
        } else {
            namespace.unwrap_or("")
        };
        (group(api_version), kind.into(), ns.into(), name.into())
    }

    fn key_of(o: &Value) -> Key {
        Self::key(
            o["apiVersion"].as_str().unwrap_or(""),
            o["kind"].as_str().unwrap_or(""),
            o.pointer("/metadata/namespace").and_then(Value::as_str),
            o.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or(""),
        )
    }

    /// Advances the clock.
    pub fn advance(&self, d: Duration) {
        self.now.fetch_add(d.as_millis() as u64, Ordering::SeqCst);
    }

    /// What `remaining()` answers.
    pub fn set_remaining(&self, d: Option<Duration>) {
        *self.remaining.lock().unwrap() = d;
    }

    /// Makes `verb` (create, update, patch, delete) of objects called `name` fail with `reason`.
    pub fn fail(&self, verb: &str, name: &str, reason: &str) {
        self.failures
            .lock()
            .unwrap()
            .push((verb.into(), name.into(), reason.into()));
    }

    /// Injected failures end.
    pub fn clear_failures(&self) {
        self.failures.lock().unwrap().clear();
        self.unknown_kinds.lock().unwrap().clear();
    }

    /// Discovery does not know `kind`.
    pub fn unknown_kind(&self, kind: &str) {
        self.unknown_kinds.lock().unwrap().push(kind.into());
    }

    /// One object.
    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        self.objects
            .lock()
            .unwrap()
            .get(&Self::key(api_version, kind, namespace, name))
            .cloned()
    }

    /// Puts an object as is (a foreign object, a status).
    pub fn put(&self, o: Value) {
        self.objects.lock().unwrap().insert(Self::key_of(&o), o);
    }

    /// Changes an object in place.
    pub fn edit(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        f: impl FnOnce(&mut Value),
    ) {
        let mut objects = self.objects.lock().unwrap();
        let o = objects
            .get_mut(&Self::key(api_version, kind, namespace, name))
            .unwrap_or_else(|| panic!("no {kind} {name}"));
        f(o);
    }

    /// `namespace/name` (or `name`) of every object of `kind`.
    pub fn names(&self, kind: &str) -> Vec<String> {
        self.objects
            .lock()
            .unwrap()
            .keys()
            .filter(|k| k.1 == kind)
            .map(|k| {
                if k.2.is_empty() {
                    k.3.clone()
                } else {
                    format!("{}/{}", k.2, k.3)
                }
            })
            .collect()
    }

    /// The operations done so far (`verb Kind name`), in order.
    pub fn ops(&self) -> Vec<String> {
        self.ops.lock().unwrap().clone()
    }

    fn record(&self, verb: &str, kind: &str, name: &str) -> Result<(), DeployerError> {
        self.ops
            .lock()
            .unwrap()
            .push(format!("{verb} {kind} {name}"));
        if let Some((_, _, reason)) = self
            .failures
            .lock()
            .unwrap()
            .iter()
            .find(|(v, n, _)| v == verb && n == name)
        {
            return Err(DeployerError::retryable(
                reason.clone(),
                format!("{kind} {name:?} is invalid: injected failure"),
            ));
        }
        Ok(())
    }

    fn next_rv(&self) -> String {
        (self.rv.fetch_add(1, Ordering::SeqCst) + 1).to_string()
    }
}

fn matches(selector: Option<&str>, labels: &Value) -> bool {
    let Some(sel) = selector else { return true };
    sel.split(',').filter(|s| !s.is_empty()).all(|term| {
        if let Some((k, v)) = term.split_once("!=") {
            labels[k.trim()].as_str() != Some(v.trim())
        } else if let Some((k, v)) = term.split_once('=') {
            labels[k.trim()].as_str() == Some(v.trim().trim_start_matches('='))
        } else {
            labels.get(term.trim()).is_some()
        }
    })
}

fn not_found(kind: &str, name: &str) -> DeployerError {
    DeployerError::retryable("NotFound", format!("{kind} {name:?} not found"))
}

impl NativeHost for FakeCluster {
    fn log(&self, _level: LogLevel, _message: &str) {}

    fn now_unix_millis(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }

    fn checkpoint(&self, _name: &str) -> Result<(), DeployerError> {
        Ok(())
    }

    fn remaining(&self) -> Option<Duration> {
        *self.remaining.lock().unwrap()
    }

    fn kube(&self, op: KubeOp) -> Result<Option<String>, DeployerError> {
        match op {
            KubeOp::Get(r) => Ok(self
                .get(&r.api_version, &r.kind, r.namespace.as_deref(), &r.name)
                .map(|o| o.to_string())),
            KubeOp::Create { object_json } => self.create(parse(&object_json)),
            KubeOp::Update { object_json } => self.update(parse(&object_json)),
            KubeOp::Delete(r) => self.delete(&r),
            KubeOp::List {
                api_version,
                kind,
                namespace,
                label_selector,
            } => Ok(Some(self.list(
                &api_version,
                &kind,
                namespace.as_deref(),
                label_selector.as_deref(),
            ))),
            KubeOp::Patch {
                target, patch_json, ..
            } => self.apply(&target, parse(&patch_json)),
            KubeOp::ServerVersion => Ok(Some(
                json!({"major": "1", "minor": "30", "gitVersion": "v1.30.0-fake"}).to_string(),
            )),
            KubeOp::ApiVersions => Ok(Some(self.api_versions())),
            KubeOp::Discover { api_version, kind } => Ok(self.discover(api_version, kind)),
        }
    }
}

fn parse(s: &str) -> Value {
    serde_json::from_str::<Value>(s).expect("JSON")
}

/// The operations behind [`NativeHost::kube`], one per verb.
impl FakeCluster {
    fn create(&self, mut o: Value) -> Result<Option<String>, DeployerError> {
        let k = Self::key_of(&o);
        self.record("create", &k.1, &k.3)?;
        let mut objects = self.objects.lock().unwrap();
        if objects.contains_key(&k) {
            return Err(DeployerError::retryable(
                "AlreadyExists",
                format!("{} {:?} already exists", k.1, k.3),
            ));
        }
        o["metadata"]["resourceVersion"] = json!(self.next_rv());
        objects.insert(k, o.clone());
        Ok(Some(o.to_string()))
    }

    fn update(&self, mut o: Value) -> Result<Option<String>, DeployerError> {
        let k = Self::key_of(&o);
        self.record("update", &k.1, &k.3)?;
        let mut objects = self.objects.lock().unwrap();
        let Some(old) = objects.get(&k) else {
            return Err(not_found(&k.1, &k.3));
        };
        let want = o.pointer("/metadata/resourceVersion").cloned();
        if want.is_some() && want.as_ref() != old.pointer("/metadata/resourceVersion") {
            return Err(DeployerError::retryable(
                "Conflict",
                "the object has been modified",
            ));
        }
        o["metadata"]["resourceVersion"] = json!(self.next_rv());
        objects.insert(k, o.clone());
        Ok(Some(o.to_string()))
    }

    fn delete(&self, r: &ObjectRef) -> Result<Option<String>, DeployerError> {
        self.record("delete", &r.kind, &r.name)?;
        Ok(self
            .objects
            .lock()
            .unwrap()
            .remove(&Self::key(
                &r.api_version,
                &r.kind,
                r.namespace.as_deref(),
                &r.name,
            ))
            .map(|_| "{}".to_string()))
    }

    fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> String {
        let g = group(api_version);
        let items: Vec<Value> = self
            .objects
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, o)| {
                k.0 == g
                    && k.1 == kind
                    && namespace.is_none_or(|n| n == k.2)
                    && matches(label_selector, &o["metadata"]["labels"])
            })
            .map(|(_, o)| o.clone())
            .collect();
        json!({"items": items}).to_string()
    }

    /// Server-side apply as "create or replace, keeping status".
    fn apply(&self, target: &ObjectRef, mut o: Value) -> Result<Option<String>, DeployerError> {
        self.record("patch", &target.kind, &target.name)?;
        let k = Self::key(
            &target.api_version,
            &target.kind,
            target.namespace.as_deref(),
            &target.name,
        );
        let mut objects = self.objects.lock().unwrap();
        if let Some(status) = objects.get(&k).and_then(|old| old.get("status")) {
            o["status"] = status.clone();
        }
        o["metadata"]["resourceVersion"] = json!(self.next_rv());
        objects.insert(k, o.clone());
        Ok(Some(o.to_string()))
    }

    /// The built-in groups plus whatever the fake holds.
    fn api_versions(&self) -> String {
        let mut set: std::collections::BTreeSet<String> = [
            "v1",
            "v1/ConfigMap",
            "v1/Secret",
            "apps/v1",
            "apps/v1/Deployment",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        for o in self.objects.lock().unwrap().values() {
            let av = o["apiVersion"].as_str().unwrap_or("").to_string();
            set.insert(format!("{av}/{}", o["kind"].as_str().unwrap_or("")));
            set.insert(av);
        }
        serde_json::to_string(&set).unwrap()
    }

    fn discover(&self, api_version: String, kind: String) -> Option<String> {
        if self.unknown_kinds.lock().unwrap().contains(&kind) {
            return None;
        }
        let info = ResourceInfo {
            api_version,
            plural: format!("{}s", kind.to_lowercase()),
            namespaced: !CLUSTER_SCOPED.contains(&kind.as_str()),
            kind,
        };
        Some(serde_json::to_string(&info).unwrap())
    }
}
