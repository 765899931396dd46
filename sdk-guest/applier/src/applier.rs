//! Applying the manifests (contract 6.3, 6.4): `List` expansion, classification by
//! discovery (CRDs, then cluster-scoped objects such as Namespaces, then namespaced objects),
//! policies, update strategies, and the managed list.
//!
//! Owns: one apply pass over the configuration. Unlike Landscaper (contract 11.11), a failed
//! pass never drops entries: the managed list it returns is the objects applied in this pass
//! plus every previously managed object not yet re-applied, so nothing that exists is left
//! unrecorded.
//! Must not touch: readiness, exports, deletion (see those modules).

use crate::Options;
use crate::checkpoints::{
    APPLY as CP_APPLY, PROCESS as CP_PROCESS, PROCESS_MANAGED as CP_PROCESS_MANAGED,
};
use crate::spec::{
    ManagedResource, Manifest, ObjectReference, PendingPatch, Policy, Spec, UpdateStrategy,
    check_object,
};
use crate::strategies::{
    copy_required_fields, merge_keep, merge_overwrite, set_annotations, set_labels,
};
use sdk_guest::{Ctx, DeployerError, PatchType, codes};
use serde_json::Value;

/// A manifest after `List` expansion, with where it came from.
#[derive(Debug, Clone)]
pub struct Entry {
    /// `spec.config.manifests[i]` or `spec.config.manifests[i].manifest.items[j]`.
    pub origin: String,
    /// The entry (policy, annotations, patches) with a single object.
    pub manifest: Manifest,
}

impl Entry {
    fn describe(&self) -> String {
        let m = &self.manifest.manifest;
        let s = |p: &str| m.pointer(p).and_then(Value::as_str).unwrap_or("");
        let ns = s("/metadata/namespace");
        let name = if ns.is_empty() {
            s("/metadata/name").to_string()
        } else {
            format!("{ns}/{}", s("/metadata/name"))
        };
        format!(
            "{} ({} {} {name})",
            self.origin,
            s("/apiVersion"),
            s("/kind")
        )
    }

    fn object_ref(&self) -> sdk_guest::ObjectRef {
        let m = &self.manifest.manifest;
        let s = |p: &str| {
            m.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let ns = s("/metadata/namespace");
        sdk_guest::ObjectRef {
            api_version: s("/apiVersion"),
            kind: s("/kind"),
            namespace: (!ns.is_empty()).then_some(ns),
            name: s("/metadata/name"),
        }
    }
}

/// Expands `List` manifests: every item becomes an entry inheriting policy and the
/// annotate/patch fields; `items: []` yields nothing.
pub fn expand(manifests: &[Manifest], opts: &Options) -> Result<Vec<Entry>, DeployerError> {
    let mut out = Vec::new();
    for (i, m) in manifests.iter().enumerate() {
        let origin = format!("spec.config.manifests[{i}]");
        match m.manifest.get("items") {
            Some(Value::Array(items)) => {
                for (j, item) in items.iter().enumerate() {
                    let origin = format!("{origin}.manifest.items[{j}]");
                    check_object(item).map_err(|e| {
                        DeployerError::configuration(
                            "ValidateProviderConfiguration",
                            format!("{origin}: {e}"),
                        )
                        .with_operation(opts.config_operation)
                    })?;
                    out.push(Entry {
                        origin,
                        manifest: Manifest {
                            manifest: item.clone(),
                            ..m.clone()
                        },
                    });
                }
            }
            Some(other) => {
                return Err(DeployerError::configuration(
                    "ValidateProviderConfiguration",
                    format!("{origin}.manifest.items: must be a list, got {other}"),
                )
                .with_operation(opts.config_operation));
            }
            None => out.push(Entry {
                origin,
                manifest: m.clone(),
            }),
        }
    }
    Ok(out)
}

/// Apply order: 0 = CRDs, 1 = cluster-scoped, 2 = namespaced.
fn classify(ctx: &Ctx, entries: &[Entry]) -> Result<Vec<u8>, DeployerError> {
    // CRDs of this configuration: (group, kind) → namespaced.
    let mut crds = Vec::new();
    for e in entries {
        ctx.checkpoint(CP_PROCESS_MANAGED)?;
        let m = &e.manifest.manifest;
        if m.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition") {
            let s = |p: &str| {
                m.pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            crds.push((
                s("/spec/group"),
                s("/spec/names/kind"),
                s("/spec/scope") == "Namespaced",
            ));
        }
    }
    let mut groups = Vec::new();
    for e in entries {
        ctx.checkpoint(CP_PROCESS)?;
        let r = e.object_ref();
        if r.kind == "CustomResourceDefinition" {
            groups.push(0);
            continue;
        }
        let namespaced = match ctx.kube_discover(&r.api_version, &r.kind) {
            Ok(Some(info)) => Some(info.namespaced),
            Ok(None) => None,
            // Refused credentials, or a Target that gives no usable kubeconfig (v0.99's
            // `kubeconfig.secretRef`, v1.x's `oidcConfig`, a malformed kubeconfig): retrying
            // would not change them, so the job ends with the host's code.
            Err(err)
                if err.has_code(codes::UNAUTHORIZED)
                    || err.has_code(codes::CONFIGURATION_PROBLEM) =>
            {
                let code = if err.has_code(codes::UNAUTHORIZED) {
                    codes::UNAUTHORIZED
                } else {
                    codes::CONFIGURATION_PROBLEM
                };
                return Err(DeployerError::new(
                    &[code],
                    "GetApiResourceList",
                    format!("{}: {}", e.describe(), err.message),
                )
                .with_operation("GetApiResource"));
            }
            Err(err) if crate::wait::cut_off(&err) => return Err(err),
            Err(err) => {
                return Err(DeployerError::retryable(
                    "GetApiResourceList",
                    format!("{}: discovery failed: {}", e.describe(), err.message),
                )
                .with_operation("GetApiResource"));
            }
        };
        let group = r.api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
        let namespaced = namespaced.or_else(|| {
            crds.iter()
                .find(|(g, k, _)| g == group && *k == r.kind)
                .map(|(_, _, n)| *n)
        });
        match namespaced {
            Some(true) => groups.push(2),
            Some(false) => groups.push(1),
            None => {
                // Retried: a CRD installed later may serve it (contract 6.3 step 2).
                return Err(DeployerError::retryable(
                    "GetApiResource",
                    format!(
                        "{}: unknown kind: the target cluster does not serve kind {:?} in {:?}",
                        e.describe(),
                        r.kind,
                        r.api_version
                    ),
                )
                .with_operation("GetApiResource"));
            }
        }
    }
    Ok(groups)
}

/// Result of one applied entry.
struct Applied {
    managed: ManagedResource,
    patch: Option<PendingPatch>,
}

fn managed_entry(m: &Manifest, obj: &Value) -> ManagedResource {
    ManagedResource {
        policy: m.policy,
        annotate_before_delete: m.annotate_before_delete.clone(),
        patch_before_delete: m.patch_before_delete.clone(),
        resource: ObjectReference::of(obj),
        target_name: None,
    }
}

fn pending(m: &Manifest, obj: &Value) -> Option<PendingPatch> {
    m.patch_after_deployment.as_ref().map(|p| PendingPatch {
        resource: ObjectReference::of(obj),
        patch: p.clone(),
    })
}

/// Whether `r` is among the objects the item managed after its last apply. Those are read
/// before they are written; any other object is most likely new.
fn known_object(known: &[ManagedResource], r: &sdk_guest::ObjectRef) -> bool {
    let this = ObjectReference {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        name: r.name.clone(),
        namespace: r.namespace.clone().unwrap_or_default(),
        ..Default::default()
    };
    // By group, kind, namespace and name (not uid, not cluster): a false match only costs the
    // read the object would have had anyway. A manifest without a namespace lands in the
    // cluster's default one, which `managedResources` records: any namespace matches it.
    known.iter().any(|k| {
        let k = ObjectReference {
            uid: String::new(),
            namespace: if r.namespace.is_none() {
                String::new()
            } else {
                k.resource.namespace.clone()
            },
            ..k.resource.clone()
        };
        k.same(&this)
    })
}

/// Applies one entry (contract 6.4). `Ok(None)`: nothing to record (ignore, or a fallback
/// object owned by someone else). Errors carry the Kubernetes error's codes.
///
/// An object not in `known` (the item's managed resources) is created straight away, one
/// request instead of a read and a create. If the create fails, the object is read and handled
/// as below: it may exist after all (`AlreadyExists`, or a refusal that admission or RBAC gives
/// before the existence check — a quota, a terminating namespace, a role allowing only
/// get/update), and if it does not, the create's error stands. Landscaper's manifest deployer
/// always reads first; the outcome is the same, as a create never changes an existing object.
/// Server-side apply (`patch`) keeps its read: it writes whether the object exists or not, and
/// the policies need to know.
fn apply_one(
    ctx: &Ctx,
    item_name: &str,
    strategy: &Result<UpdateStrategy, String>,
    e: &Entry,
    opts: &Options,
    known: &[ManagedResource],
) -> Result<Option<Applied>, DeployerError> {
    let m = &e.manifest;
    if m.policy == Policy::Ignore {
        return Ok(None);
    }
    let one = OneObject::new(ctx, item_name, e, opts);
    let server_side_apply = *strategy == Ok(UpdateStrategy::Patch);
    let mut refused = None;
    if !server_side_apply && !known_object(known, &one.r) {
        match ctx.kube_create(&one.to_create()) {
            Ok(object) => return Ok(Some(one.applied(&object))),
            Err(err) if crate::wait::cut_off(&err) => return Err(err),
            Err(err) => refused = Some(err),
        }
    }
    let live = ctx.kube_get(&one.r).map_err(|err| one.wrap("get", err))?;
    let Some(live) = live else {
        if let Some(err) = refused {
            return Err(one.wrap("create", err));
        }
        let object = one.create(server_side_apply)?;
        return Ok(Some(one.applied(&object)));
    };
    if m.policy == Policy::Fallback && !one.owned(&live) {
        ctx.info(&format!(
            "{}: exists and is not owned by this DeployItem (label {}); policy fallback leaves it alone",
            e.describe(),
            opts.owner_label
        ));
        return Ok(None);
    }
    if m.policy == Policy::Immutable {
        return Ok(Some(Applied {
            managed: managed_entry(m, &live),
            patch: None,
        }));
    }
    let strategy = strategy.clone().map_err(|msg| {
        one.wrap(
            "update",
            DeployerError::configuration("UpdateStrategy", msg),
        )
    })?;
    let updated = one.update(strategy, &live)?;
    Ok(Some(one.applied(&updated)))
}

/// The object of one entry being applied: where it is, how its errors read, what it
/// becomes when created or updated.
struct OneObject<'a> {
    ctx: &'a Ctx<'a>,
    m: &'a Manifest,
    r: sdk_guest::ObjectRef,
    /// `namespace/name` (or `name`) for error messages.
    at: String,
    item_name: &'a str,
    opts: &'a Options,
}

impl<'a> OneObject<'a> {
    fn new(ctx: &'a Ctx<'a>, item_name: &'a str, e: &'a Entry, opts: &'a Options) -> Self {
        let r = e.object_ref();
        let at = r
            .namespace
            .as_ref()
            .map(|ns| format!("{ns}/{}", r.name))
            .unwrap_or_else(|| r.name.clone());
        OneObject {
            ctx,
            m: &e.manifest,
            r,
            at,
            item_name,
            opts,
        }
    }

    fn wrap(&self, what: &str, err: DeployerError) -> DeployerError {
        DeployerError {
            message: format!("unable to {what} resource {}: {}", self.at, err.message),
            ..err
        }
    }

    fn labels(&self) -> [(&str, &str); 1] {
        [(self.opts.owner_label, self.item_name)]
    }

    /// The manifest as created: the ownership label, `annotateBeforeCreate`.
    fn to_create(&self) -> Value {
        let mut desired = self.m.manifest.clone();
        set_labels(&mut desired, &self.labels());
        if let Some(a) = &self.m.annotate_before_create {
            set_annotations(&mut desired, a);
        }
        desired
    }

    fn applied(&self, object: &Value) -> Applied {
        Applied {
            managed: managed_entry(self.m, object),
            patch: pending(self.m, object),
        }
    }

    /// Whether the live object carries this DeployItem's ownership label.
    fn owned(&self, live: &Value) -> bool {
        live.pointer("/metadata/labels")
            .and_then(|l| l.get(self.opts.owner_label))
            .and_then(Value::as_str)
            == Some(self.item_name)
    }

    /// Creates the absent object (server-side apply under `patch`).
    fn create(&self, server_side_apply: bool) -> Result<Value, DeployerError> {
        let desired = self.to_create();
        if server_side_apply {
            self.ctx.kube_patch(
                &self.r,
                &desired,
                PatchType::Apply,
                Some(self.opts.field_manager),
                true,
            )
        } else {
            self.ctx.kube_create(&desired)
        }
        .map_err(|err| self.wrap("create", err))
    }

    /// Updates the existing object with the update strategy.
    fn update(&self, strategy: UpdateStrategy, live: &Value) -> Result<Value, DeployerError> {
        let mut desired = self.m.manifest.clone();
        let labels = self.labels();
        match strategy {
            UpdateStrategy::Update => {
                set_labels(&mut desired, &labels);
                copy_required_fields(&mut desired, live);
                self.ctx
                    .kube_update(&desired)
                    .map_err(|err| self.wrap("update", err))
            }
            UpdateStrategy::Patch => {
                set_labels(&mut desired, &labels);
                self.ctx
                    .kube_patch(
                        &self.r,
                        &desired,
                        PatchType::Apply,
                        Some(self.opts.field_manager),
                        true,
                    )
                    .map_err(|err| self.wrap("patch", err))
            }
            UpdateStrategy::Merge | UpdateStrategy::MergeOverwrite => {
                let mut merged = live.clone();
                if strategy == UpdateStrategy::Merge {
                    merge_keep(&mut merged, &desired);
                } else {
                    merge_overwrite(&mut merged, &desired);
                }
                set_labels(&mut merged, &labels);
                self.ctx
                    .kube_update(&merged)
                    .map_err(|err| self.wrap("update", err))
            }
        }
    }
}

/// Outcome of one apply pass.
pub struct Outcome {
    /// Objects applied in this pass, CRDs first, each group sorted.
    pub applied: Vec<ManagedResource>,
    /// Queued `patchAfterDeployment` actions.
    pub patches: Vec<PendingPatch>,
    /// The first failure (aggregated per group), if any.
    pub error: Option<DeployerError>,
}

/// Applies every manifest, group by group. Stops after the first group with a failure.
/// `known`: the objects the item managed after its last apply (its `managedResources`); any
/// other object is created without a read first (see [`apply_one`]).
pub fn apply(
    ctx: &Ctx,
    item_name: &str,
    config: &Spec,
    opts: &Options,
    known: &[ManagedResource],
) -> Result<Outcome, DeployerError> {
    let entries = expand(&config.manifests, opts)?;
    let groups = classify(ctx, &entries)?;
    let mut out = Outcome {
        applied: Vec::new(),
        patches: Vec::new(),
        error: None,
    };
    for group in 0..3u8 {
        let mut done = Vec::new();
        let mut errors: Vec<DeployerError> = Vec::new();
        for (e, _) in entries.iter().zip(&groups).filter(|(_, g)| **g == group) {
            if let Err(timeout) = ctx.checkpoint(CP_APPLY) {
                errors.push(timeout);
                break;
            }
            match apply_one(ctx, item_name, &config.update_strategy, e, opts, known) {
                Ok(Some(a)) => {
                    done.push(a.managed);
                    out.patches.extend(a.patch);
                }
                Ok(None) => {}
                Err(err) => errors.push(DeployerError {
                    message: format!("{}: {}", e.describe(), err.message),
                    ..err
                }),
            }
        }
        done.sort_by_key(|m| m.resource.sort_key());
        out.applied.extend(done);
        if !errors.is_empty() {
            out.error = Some(aggregate(errors));
            break;
        }
    }
    Ok(out)
}

/// One error for a failed group: a timeout wins; otherwise operation `ApplyObjects`, reason
/// `ApplyNewObject`, all messages, and the unrecoverable codes of the causes.
fn aggregate(errors: Vec<DeployerError>) -> DeployerError {
    if let Some(t) = errors.iter().find(|e| e.has_code(codes::TIMEOUT)) {
        return t.clone();
    }
    let mut out = DeployerError::retryable(
        "ApplyNewObject",
        errors
            .iter()
            .map(|e| e.message.as_str())
            .collect::<Vec<_>>()
            .join("; "),
    )
    .with_operation("ApplyObjects");
    for e in &errors {
        for c in &e.codes {
            if codes::UNRECOVERABLE.contains(&c.as_str()) {
                out = out.with_code(c);
            }
        }
    }
    out
}

/// Previously managed entries that are not in `applied`.
pub fn not_in<'a>(
    old: &'a [ManagedResource],
    applied: &[ManagedResource],
) -> Vec<&'a ManagedResource> {
    old.iter()
        .filter(|o| !applied.iter().any(|n| n.same(o)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::ReadinessChecks;
    use crate::test_host::{KubeOnly, OPTS};
    use sdk_guest::{KubeOp, ResourceInfo};
    use serde_json::json;
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    /// ConfigMaps in memory, and the requests that reached them.
    #[derive(Default)]
    struct Cluster {
        objects: Mutex<BTreeMap<String, Value>>,
        requests: Mutex<Vec<String>>,
        /// Every create is refused with this (as admission or RBAC refuse before the
        /// existence check).
        refuse_creates: Option<DeployerError>,
    }

    impl Cluster {
        fn with(objects: &[Value]) -> Self {
            let c = Cluster::default();
            for o in objects {
                c.objects
                    .lock()
                    .unwrap()
                    .insert(o["metadata"]["name"].as_str().unwrap().into(), o.clone());
            }
            c
        }
        fn requests(&self) -> Vec<String> {
            self.requests.lock().unwrap().clone()
        }

        fn kube(&self, op: KubeOp) -> Result<Option<String>, DeployerError> {
            let mut objects = self.objects.lock().unwrap();
            let name_of = |json: &str| -> (Value, String) {
                let v: Value = serde_json::from_str(json).unwrap();
                let name = v["metadata"]["name"].as_str().unwrap().to_string();
                (v, name)
            };
            let (verb, out) = match op {
                KubeOp::Discover { api_version, kind } => {
                    let info = ResourceInfo {
                        api_version,
                        kind,
                        plural: "configmaps".into(),
                        namespaced: true,
                    };
                    return Ok(Some(serde_json::to_string(&info).unwrap()));
                }
                KubeOp::Get(r) => (
                    format!("get {}", r.name),
                    objects.get(&r.name).map(Value::to_string),
                ),
                KubeOp::Create { object_json } => {
                    let (v, name) = name_of(&object_json);
                    self.requests.lock().unwrap().push(format!("create {name}"));
                    if let Some(refusal) = &self.refuse_creates {
                        return Err(refusal.clone());
                    }
                    if objects.contains_key(&name) {
                        let mut e = DeployerError::retryable("AlreadyExists", "exists");
                        e.operation = "kubernetes".into();
                        return Err(e);
                    }
                    objects.insert(name, v.clone());
                    return Ok(Some(v.to_string()));
                }
                KubeOp::Update { object_json } => {
                    let (v, name) = name_of(&object_json);
                    objects.insert(name.clone(), v.clone());
                    (format!("update {name}"), Some(v.to_string()))
                }
                other => panic!("unexpected {other:?}"),
            };
            self.requests.lock().unwrap().push(verb);
            Ok(out)
        }
    }

    fn cm(name: &str, labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default", "labels": labels},
               "data": {"k": name}})
    }

    fn spec(names: &[&str], policy: Policy) -> Spec {
        Spec {
            update_strategy: Ok(UpdateStrategy::Update),
            readiness: ReadinessChecks::default(),
            manifests: names
                .iter()
                .map(|n| Manifest {
                    policy,
                    manifest: cm(n, json!({})),
                    ..Default::default()
                })
                .collect(),
            exports: Vec::new(),
            deletion_groups: Vec::new(),
            deletion_groups_during_update: Vec::new(),
        }
    }

    fn managed(name: &str) -> ManagedResource {
        ManagedResource {
            resource: ObjectReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: name.into(),
                namespace: "default".into(),
                uid: "some-uid".into(),
            },
            ..Default::default()
        }
    }

    fn apply_to(cluster: &Cluster, spec: &Spec, known: &[ManagedResource]) -> Outcome {
        let host = KubeOnly(|op| cluster.kube(op));
        let out = apply(&Ctx::native(&host), "item", spec, &OPTS, known).unwrap();
        assert!(out.error.is_none(), "{:?}", out.error);
        out
    }

    #[test]
    fn objects_the_item_did_not_manage_are_created_without_a_read() {
        let cluster = Cluster::default();
        let out = apply_to(&cluster, &spec(&["a", "b"], Policy::Manage), &[]);
        assert_eq!(cluster.requests(), ["create a", "create b"]);
        assert_eq!(out.applied.len(), 2);
        let a = &cluster.objects.lock().unwrap()["a"];
        assert_eq!(
            a["metadata"]["labels"]["test/item"], "item",
            "owner label set"
        );
    }

    #[test]
    fn objects_the_item_manages_are_read_then_updated() {
        let cluster = Cluster::with(&[cm("a", json!({"test/item": "item"}))]);
        apply_to(&cluster, &spec(&["a"], Policy::Manage), &[managed("a")]);
        assert_eq!(cluster.requests(), ["get a", "update a"]);
    }

    #[test]
    fn a_manifest_without_a_namespace_is_known_by_the_namespace_it_landed_in() {
        let cluster = Cluster::with(&[cm("a", json!({"test/item": "item"}))]);
        let mut spec = spec(&["a"], Policy::Manage);
        spec.manifests[0].manifest["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("namespace");
        apply_to(&cluster, &spec, &[managed("a")]);
        assert_eq!(cluster.requests(), ["get a", "update a"]);
    }

    #[test]
    fn a_refused_create_of_an_existing_object_is_read_and_the_policy_decides() {
        // RBAC allows get/update of this object only: the create is refused before the server
        // looks whether it exists. Immutable: the existing object is recorded, nothing written.
        let forbidden = DeployerError::new(&[codes::UNAUTHORIZED], "Forbidden", "create forbidden");
        let cluster = Cluster {
            refuse_creates: Some(forbidden.clone()),
            ..Cluster::with(&[cm("a", json!({}))])
        };
        let out = apply_to(&cluster, &spec(&["a"], Policy::Immutable), &[]);
        assert_eq!(cluster.requests(), ["create a", "get a"]);
        assert_eq!(out.applied.len(), 1);

        // The object does not exist: the create's refusal is the error.
        let cluster = Cluster {
            refuse_creates: Some(forbidden),
            ..Cluster::default()
        };
        let host = KubeOnly(|op| cluster.kube(op));
        let out = apply(
            &Ctx::native(&host),
            "item",
            &spec(&["a"], Policy::Manage),
            &OPTS,
            &[],
        )
        .unwrap();
        let err = out.error.expect("refused");
        assert!(err.has_code(codes::UNAUTHORIZED), "{err:?}");
        assert!(
            err.message.contains("unable to create resource default/a"),
            "{}",
            err.message
        );
        assert_eq!(cluster.requests(), ["create a", "get a"]);
    }

    #[test]
    fn an_object_that_exists_after_all_is_read_and_handled_by_its_policy() {
        // Someone else's object, unknown to the item: the create fails, then the read decides.
        let theirs = cm("a", json!({"test/item": "other-item"}));
        let cluster = Cluster::with(std::slice::from_ref(&theirs));
        let out = apply_to(&cluster, &spec(&["a"], Policy::Fallback), &[]);
        assert_eq!(cluster.requests(), ["create a", "get a"]);
        assert!(out.applied.is_empty(), "fallback leaves it alone");
        assert_eq!(cluster.objects.lock().unwrap()["a"], theirs, "unchanged");

        let cluster = Cluster::with(&[theirs]);
        apply_to(&cluster, &spec(&["a"], Policy::Manage), &[]);
        assert_eq!(cluster.requests(), ["create a", "get a", "update a"]);
        assert_eq!(
            cluster.objects.lock().unwrap()["a"]["metadata"]["labels"]["test/item"],
            "item",
            "manage takes it over"
        );
    }
}
