//! Writes that validating admission webhooks may have to admit. A write no webhook's rules
//! name runs as it always did, in one step under the store lock. One that some webhook's rules
//! name runs in three (the reasons are in `crate::webhooks`): a dry run under the lock, which
//! gives the object to be stored and the calls to make; the calls, unlocked; and under the lock
//! again, the commit of exactly that object if the stored one is still the one the dry run
//! started from — else the write starts over, as kube-apiserver retries an update whose
//! compare-and-swap lost.
//!
//! Owns: [`Admission`]. Must not touch: what a write does (`ops`) or what webhooks are told
//! and how they are called (`webhooks`).

use super::context::Ctx;
use crate::ops::{DeleteOpts, Deleted, WriteOpts};
use crate::rbac::UserInfo;
use crate::selectors::Selector;
use crate::status::ApiError;
use crate::store::{Inner, Obj, rv_of};
use crate::webhooks::{self, Attributes, Hook, Operation, Review};
use serde_json::{Value, json};
use std::sync::Arc;

/// How many times a write whose object someone else wrote while its webhooks were being called
/// starts over before it gives up with 409 Conflict.
const MAX_ATTEMPTS: usize = 10;

/// A write request, as admission sees it.
pub(super) struct Admission<'a> {
    pub(super) c: &'a Ctx<'a>,
    pub(super) user: &'a UserInfo,
    /// `""`, `status` or `finalize`.
    pub(super) sub: &'a str,
}

/// What a PUT or PATCH answers: (object, changed, created — by an apply).
pub(super) type Updated = (Obj, bool, bool);

impl Admission<'_> {
    fn attrs<'b>(&'b self, ns: &'b str, name: &'b str, dry_run: bool) -> Attributes<'b> {
        Attributes {
            rt: &self.c.out_rt,
            version: self.c.out_version,
            subresource: self.sub,
            namespace: if self.c.out_rt.namespaced { ns } else { "" },
            name,
            user: self.user,
            dry_run,
        }
    }

    /// The configured webhooks when some rule names this write for one of `ops`; `None` (one
    /// step) otherwise, and always for writes of webhook configurations.
    fn hooks(&self, g: &Inner, a: &Attributes<'_>, ops: &[Operation]) -> Option<Arc<[Arc<Hook>]>> {
        if webhooks::is_webhook_configuration(a.rt) {
            return None;
        }
        let hooks = self.c.api.shared.webhooks.configured(g)?;
        webhooks::any_rule_matches(&hooks, a, ops).then_some(hooks)
    }

    /// POST.
    pub(super) async fn create(&self, body: Value, o: &WriteOpts) -> Result<Obj, ApiError> {
        let c = self.c;
        let dry = WriteOpts {
            dry_run: true,
            ..o.clone()
        };
        // The name is known once the create has run (generateName).
        let probe = self.attrs(c.ns, "", o.dry_run);
        let (cand, object, calls) = {
            let mut g = c.api.shared.store.lock();
            let Some(hooks) = self.hooks(&g, &probe, &[Operation::Create]) else {
                return g.create(&c.rt, c.version, c.ns, body, o);
            };
            let cand = g.create(&c.rt, c.version, c.ns, body, &dry)?;
            let object = c.present(&cand);
            let a = self.attrs(c.ns, name_of(&cand), o.dry_run);
            let calls = webhooks::plan(&hooks, &g, &a, Operation::Create, Some(&object), None);
            if calls.is_empty() {
                return commit_create(&mut g, c, o, cand);
            }
            (cand, object, calls)
        };
        let a = self.attrs(c.ns, name_of(&cand), o.dry_run);
        let review = Review {
            attrs: &a,
            op: Operation::Create,
            object: Some(&object),
            old: None,
            options: options("CreateOptions", o),
        };
        webhooks::validate(&calls, &review).await?;
        commit_create(&mut c.api.shared.store.lock(), c, o, cand)
    }

    /// PUT or PATCH (`may_create`: an apply, which creates a missing object): `run` does the
    /// write under the lock with the options it is given; its `bool` asks it to keep the
    /// request body for another attempt (a dry run before webhooks are called).
    pub(super) async fn update(
        &self,
        name: &str,
        status: bool,
        options_kind: &str,
        may_create: bool,
        o: &WriteOpts,
        mut run: impl FnMut(&mut Inner, &WriteOpts, bool) -> Result<Updated, ApiError>,
    ) -> Result<Updated, ApiError> {
        let c = self.c;
        let ops: &[Operation] = match may_create {
            true => &[Operation::Update, Operation::Create],
            false => &[Operation::Update],
        };
        let dry = WriteOpts {
            dry_run: true,
            ..o.clone()
        };
        let a = self.attrs(c.ns, name, o.dry_run);
        for _ in 0..MAX_ATTEMPTS {
            let (old, (cand, changed, created), op, object, old_object, calls) = {
                let mut g = c.api.shared.store.lock();
                let Some(hooks) = self.hooks(&g, &a, ops) else {
                    return run(&mut g, o, false);
                };
                let old = g.lookup(&c.rt.key(), c.ns, name).cloned();
                let (cand, changed, created) = run(&mut g, &dry, true)?;
                let op = if created {
                    Operation::Create
                } else {
                    Operation::Update
                };
                let object = c.present(&cand);
                let old_object = old.as_ref().filter(|_| !created).map(|o| c.present(o));
                let calls = webhooks::plan(&hooks, &g, &a, op, Some(&object), old_object.as_ref());
                if calls.is_empty() {
                    return run(&mut g, o, false);
                }
                (old, (cand, changed, created), op, object, old_object, calls)
            };
            let review = Review {
                attrs: &a,
                op,
                object: Some(&object),
                old: old_object.as_ref(),
                options: options(options_kind, o),
            };
            webhooks::validate(&calls, &review).await?;
            if o.dry_run || !changed {
                return Ok((cand, changed, created));
            }
            let mut g = c.api.shared.store.lock();
            if created {
                return commit_create(&mut g, c, o, cand).map(|obj| (obj, true, true));
            }
            let now = g.lookup(&c.rt.key(), c.ns, name).map(|o| rv_of(o));
            if now.is_none() || now != old.as_deref().map(rv_of) {
                continue; // written (or deleted) meanwhile: start over
            }
            let new = Arc::unwrap_or_clone(cand);
            return Ok((
                g.commit_updated(&c.rt, c.ns, name, new, status),
                true,
                false,
            ));
        }
        Err(ApiError::modified(&c.rt.group, &c.rt.plural, name))
    }

    /// DELETE of one object (`ns`: its namespace; a collection's items have their own).
    pub(super) async fn delete(
        &self,
        ns: &str,
        name: &str,
        d: &DeleteOpts,
    ) -> Result<Deleted, ApiError> {
        let c = self.c;
        let dry = DeleteOpts {
            dry_run: true,
            ..d.clone()
        };
        let a = self.attrs(ns, name, d.dry_run);
        for _ in 0..MAX_ATTEMPTS {
            let (outcome, old, old_object, calls) = {
                let mut g = c.api.shared.store.lock();
                let Some(hooks) = self.hooks(&g, &a, &[Operation::Delete]) else {
                    return g.delete(&c.rt, ns, name, d);
                };
                let outcome = g.delete(&c.rt, ns, name, &dry)?;
                let Some(old) = g.lookup(&c.rt.key(), ns, name).cloned() else {
                    return g.delete(&c.rt, ns, name, d);
                };
                let old_object = c.present(&old);
                let calls =
                    webhooks::plan(&hooks, &g, &a, Operation::Delete, None, Some(&old_object));
                if calls.is_empty() {
                    return g.delete(&c.rt, ns, name, d);
                }
                (outcome, old, old_object, calls)
            };
            let review = Review {
                attrs: &a,
                op: Operation::Delete,
                object: None,
                old: Some(&old_object),
                options: delete_options(d),
            };
            webhooks::validate(&calls, &review).await?;
            if d.dry_run {
                return Ok(outcome);
            }
            let mut g = c.api.shared.store.lock();
            if g.lookup(&c.rt.key(), ns, name).map(|o| rv_of(o)) != Some(rv_of(&old)) {
                continue; // written (or deleted) meanwhile: start over
            }
            return g.delete(&c.rt, ns, name, d);
        }
        Err(ApiError::modified(&c.rt.group, &c.rt.plural, name))
    }

    /// DELETE of a collection: with webhooks, item by item (each admitted as a DELETE of its
    /// own, as kube-apiserver does); an item gone meanwhile is skipped. Answers the deleted
    /// items and the resourceVersion after.
    pub(super) async fn delete_collection(
        &self,
        ns: Option<&str>,
        sel: &Selector,
        d: &DeleteOpts,
    ) -> Result<(Vec<Obj>, u64), ApiError> {
        let c = self.c;
        let items = {
            let mut g = c.api.shared.store.lock();
            let a = self.attrs(ns.unwrap_or(""), "", d.dry_run);
            if self.hooks(&g, &a, &[Operation::Delete]).is_none() {
                let items = g.delete_collection(&c.rt, ns, sel, d)?;
                return Ok((items, g.rv));
            }
            g.list(&c.rt, ns, sel, None, None).0
        };
        let mut out = Vec::new();
        for it in items {
            let text = |p: &str| it.pointer(p).and_then(Value::as_str).unwrap_or("");
            let (ins, iname) = (text("/metadata/namespace"), text("/metadata/name"));
            match self.delete(ins, iname, d).await {
                Ok(Deleted::Gone(o) | Deleted::Terminating(o)) => out.push(o),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok((out, c.api.shared.store.lock().rv))
    }
}

fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The last step of an admitted create: nothing for a dry run, else the commit.
fn commit_create(g: &mut Inner, c: &Ctx<'_>, o: &WriteOpts, cand: Obj) -> Result<Obj, ApiError> {
    if o.dry_run {
        return Ok(cand);
    }
    let name = name_of(&cand).to_string();
    g.commit_created(&c.rt, c.ns, &name, Arc::unwrap_or_clone(cand))
}

/// The `options` of an AdmissionReview for a create, update or patch.
fn options(kind: &str, o: &WriteOpts) -> Value {
    let mut v = json!({"kind": kind, "apiVersion": "meta.k8s.io/v1"});
    if o.dry_run {
        v["dryRun"] = json!(["All"]);
    }
    if let Some(m) = o.field_manager.as_deref().filter(|m| !m.is_empty()) {
        v["fieldManager"] = json!(m);
    }
    if kind == "PatchOptions" && o.force {
        v["force"] = json!(true);
    }
    v
}

/// The `options` of an AdmissionReview for a delete.
fn delete_options(d: &DeleteOpts) -> Value {
    let mut v = json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"});
    if d.dry_run {
        v["dryRun"] = json!(["All"]);
    }
    if let Some(p) = &d.propagation {
        v["propagationPolicy"] = json!(p);
    }
    let mut pre = serde_json::Map::new();
    if let Some(u) = d.uid.as_deref().filter(|s| !s.is_empty()) {
        pre.insert("uid".into(), json!(u));
    }
    if let Some(rv) = d.resource_version.as_deref().filter(|s| !s.is_empty()) {
        pre.insert("resourceVersion".into(), json!(rv));
    }
    if !pre.is_empty() {
        v["preconditions"] = Value::Object(pre);
    }
    v
}
