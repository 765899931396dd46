//! DELETE: finalizers, preconditions, propagation (foreground, background, orphan),
//! ownerReference garbage collection, and DELETE on a collection.
//!
//! Namespace termination lives here too, as Kubernetes' namespace controller does it (delete
//! the contents, show the conditions while content remains, finalize when empty): removing an
//! object may finish its namespace, and finishing a namespace removes objects.
//!
//! Owns: [`Inner::delete`], [`Inner::delete_collection`], removal and the namespace lifecycle
//! after DELETE. Must not touch: admission (that is `admission`) or the write paths.

use super::admission::{finalizers, meta, normalize_meta, server_defaults, uid_precondition};
use super::options::{DeleteOpts, Deleted};
use crate::registry::{NAMESPACE_KEY, ResourceType};
use crate::selectors::Selector;
use crate::status::ApiError;
use crate::store::{Inner, Obj, now, rv_of, uid_of};
use serde_json::{Value, json};
use std::sync::Arc;

impl Inner {
    /// DELETE one object.
    pub fn delete(
        &mut self,
        rt: &Arc<ResourceType>,
        ns: &str,
        name: &str,
        d: &DeleteOpts,
    ) -> Result<Deleted, ApiError> {
        let old = self.get(rt, ns, name)?;
        uid_precondition(rt, name, d.uid.as_deref(), &old)?;
        if let Some(rv) = d.resource_version.as_deref().filter(|s| !s.is_empty())
            && rv.parse::<u64>().ok() != Some(rv_of(&old))
        {
            return Err(ApiError::conflict(
                &rt.group,
                &rt.plural,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    rv_of(&old)
                ),
            ));
        }
        let is_ns = rt.key() == NAMESPACE_KEY;
        if is_ns && ["default", "kube-system", "kube-public"].contains(&name) {
            return Err(ApiError::new(
                403,
                "Forbidden",
                format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted"),
            )
            .with_details(json!({"name": name, "kind": "namespaces"})));
        }
        let fins = finalizers(&old);
        if d.dry_run {
            return Ok(if fins.is_empty() && !is_ns {
                Deleted::Gone(old)
            } else {
                Deleted::Terminating(old)
            });
        }
        if d.propagation.as_deref() == Some("Orphan") {
            self.orphan_dependents(uid_of(&old).to_string());
        }
        if old.pointer("/metadata/deletionTimestamp").is_some() {
            return Ok(Deleted::Terminating(old));
        }
        if fins.is_empty() && !is_ns {
            return Ok(Deleted::Gone(self.remove(rt, ns, name)));
        }
        let mut n = (*old).clone();
        n["metadata"]["deletionTimestamp"] = json!(now());
        n["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        server_defaults(rt, &mut n, Some(&old));
        let obj = self.commit(rt, ns, name, Some(n));
        if is_ns {
            // As a cluster shows it: the DELETE answers 200 with the namespace
            // in phase Terminating; its content is deleted, then (once empty)
            // spec.finalizers is emptied and the namespace removed.
            self.delete_namespace_contents(name);
            if self.lookup(NAMESPACE_KEY, "", name).is_some() && !self.namespace_is_empty(name) {
                self.namespace_conditions(name);
            }
            self.maybe_finish_namespace(name);
            return Ok(Deleted::Terminating(obj));
        }
        Ok(Deleted::Terminating(obj))
    }

    /// Remove an object now (no finalizer check), then collect its dependents
    /// (ownerReference GC, background) and finish a terminating namespace.
    pub(super) fn remove(&mut self, rt: &Arc<ResourceType>, ns: &str, name: &str) -> Obj {
        if self.lookup(&rt.key(), ns, name).is_none() {
            return Arc::new(json!({"metadata": {"name": name, "namespace": ns}}));
        }
        let gone = self.commit(rt, ns, name, None);
        let uid = uid_of(&gone).to_string();
        if let Some(deps) = self.dependents.remove(&uid) {
            let mut deps: Vec<_> = deps.into_iter().collect();
            deps.sort();
            for (res, dns, dname) in deps {
                let Some(drt) = self.registry.by_key(&res).cloned() else {
                    continue;
                };
                let Some(dep) = self.lookup(&res, &dns, &dname).cloned() else {
                    continue;
                };
                let other_owner_alive = dep
                    .pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .is_some_and(|refs| {
                        refs.iter()
                            .filter_map(|r| r.get("uid").and_then(Value::as_str))
                            .any(|u| u != uid && self.uids.contains_key(u))
                    });
                if !other_owner_alive {
                    let _ = self.delete(&drt, &dns, &dname, &DeleteOpts::default());
                }
            }
        }
        if !ns.is_empty() {
            self.maybe_finish_namespace(ns);
        }
        gone
    }

    fn orphan_dependents(&mut self, uid: String) {
        let Some(deps) = self.dependents.get(&uid).cloned() else {
            return;
        };
        for (res, dns, dname) in deps {
            let (Some(drt), Some(dep)) = (
                self.registry.by_key(&res).cloned(),
                self.lookup(&res, &dns, &dname).cloned(),
            ) else {
                continue;
            };
            let mut n = (*dep).clone();
            if let Some(refs) = n
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            {
                refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(&uid));
            }
            if normalize_meta(&mut n).is_ok() {
                self.commit(&drt, &dns, &dname, Some(n));
            }
        }
    }

    /// DELETE on a collection: every matching object, as if deleted one by one.
    pub fn delete_collection(
        &mut self,
        rt: &Arc<ResourceType>,
        ns: Option<&str>,
        sel: &Selector,
        d: &DeleteOpts,
    ) -> Result<Vec<Obj>, ApiError> {
        let (items, _) = self.list(rt, ns, sel, None, None);
        let mut out = Vec::new();
        for it in items {
            let m = meta(&it);
            let ins = m
                .and_then(|m| m.get("namespace"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let iname = m
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            match self.delete(rt, &ins, &iname, d)? {
                Deleted::Gone(o) | Deleted::Terminating(o) => out.push(o),
            }
        }
        Ok(out)
    }
}

impl Inner {
    fn delete_namespace_contents(&mut self, ns: &str) {
        let mut items = Vec::new();
        for (res, m) in &self.objects {
            if let Some(n) = m.get(ns) {
                items.extend(n.keys().map(|name| (res.clone(), name.clone())));
            }
        }
        for (res, name) in items {
            if let Some(rt) = self.registry.by_key(&res).cloned() {
                let _ = self.delete(&rt, ns, &name, &DeleteOpts::default());
            }
        }
    }

    fn maybe_finish_namespace(&mut self, ns: &str) {
        if let Some(delay) = self.namespace_finalize_delay {
            // Later, from the namespace controller's task (finalize_due_namespaces).
            if self
                .lookup(NAMESPACE_KEY, "", ns)
                .is_some_and(|n| n.pointer("/metadata/deletionTimestamp").is_some())
            {
                self.namespaces_due
                    .entry(ns.to_string())
                    .or_insert_with(|| std::time::Instant::now() + delay);
            }
            return;
        }
        self.finish_namespace(ns);
    }

    /// Hands every terminating namespace to the namespace controller (a server loaded from
    /// disk may hold some).
    pub(crate) fn schedule_terminating_namespaces(&mut self) {
        let terminating: Vec<String> = self
            .objects_of(NAMESPACE_KEY, None)
            .iter()
            .filter(|n| n.pointer("/metadata/deletionTimestamp").is_some())
            .filter_map(|n| n.pointer("/metadata/name").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        for ns in terminating {
            self.maybe_finish_namespace(&ns);
        }
    }

    /// The namespace controller's pass: finalizes and removes every terminating namespace whose
    /// time has come and which is empty (one that is not is looked at again when its last
    /// object goes).
    pub(crate) fn finalize_due_namespaces(&mut self, now: std::time::Instant) {
        let due: Vec<String> = self
            .namespaces_due
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(ns, _)| ns.clone())
            .collect();
        for ns in due {
            self.namespaces_due.remove(&ns);
            self.finish_namespace(&ns);
        }
    }

    fn finish_namespace(&mut self, ns: &str) {
        let Some(n) = self.lookup(NAMESPACE_KEY, "", ns) else {
            return;
        };
        if n.pointer("/metadata/deletionTimestamp").is_some()
            && finalizers(n).is_empty()
            && self.namespace_is_empty(ns)
            && let Some(rt) = self.registry.by_key(NAMESPACE_KEY).cloned()
        {
            // The namespace controller's `/finalize` (spec.finalizers emptied), then removal.
            if n.pointer("/spec/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty())
            {
                let mut fin = (**n).clone();
                fin["spec"]["finalizers"] = json!([]);
                if let Some(st) = fin.get_mut("status").and_then(Value::as_object_mut) {
                    st.remove("conditions");
                }
                self.commit(&rt, "", ns, Some(fin));
            }
            self.remove(&rt, "", ns);
        }
    }

    /// The conditions a terminating namespace shows while content remains.
    fn namespace_conditions(&mut self, ns: &str) {
        let Some(n) = self.lookup(NAMESPACE_KEY, "", ns).cloned() else {
            return;
        };
        let mut counts: Vec<(String, usize)> = Vec::new();
        let mut fins: std::collections::BTreeMap<String, usize> = Default::default();
        for (res, m) in &self.objects {
            if let Some(objs) = m.get(ns)
                && !objs.is_empty()
            {
                let plural = res
                    .split_once('/')
                    .map(|(g, p)| {
                        if g.is_empty() {
                            p.to_string()
                        } else {
                            format!("{p}.{g}")
                        }
                    })
                    .unwrap_or_default();
                counts.push((plural, objs.len()));
                for o in objs.values() {
                    for f in finalizers(o) {
                        *fins.entry(f).or_default() += 1;
                    }
                }
            }
        }
        counts.sort();
        let t = now();
        let cond = |ty: &str, status: &str, reason: &str, msg: String| json!({"type": ty, "status": status, "lastTransitionTime": t, "reason": reason, "message": msg});
        let mut conds = vec![
            cond(
                "NamespaceDeletionDiscoveryFailure",
                "False",
                "ResourcesDiscovered",
                "All resources successfully discovered".into(),
            ),
            cond(
                "NamespaceDeletionGroupVersionParsingFailure",
                "False",
                "ParsedGroupVersions",
                "All legacy kube types successfully parsed".into(),
            ),
            cond(
                "NamespaceDeletionContentFailure",
                "False",
                "ContentDeleted",
                "All content successfully deleted, may be waiting on finalization".into(),
            ),
        ];
        if counts.is_empty() {
            conds.push(cond(
                "NamespaceContentRemaining",
                "False",
                "ContentRemoved",
                "All content successfully removed".into(),
            ));
        } else {
            let list = counts
                .iter()
                .map(|(r, c)| format!("{r} has {c} resource instances"))
                .collect::<Vec<_>>()
                .join(", ");
            conds.push(cond(
                "NamespaceContentRemaining",
                "True",
                "SomeResourcesRemain",
                format!("Some resources are remaining: {list}"),
            ));
        }
        if fins.is_empty() {
            conds.push(cond(
                "NamespaceFinalizersRemaining",
                "False",
                "ContentHasNoFinalizers",
                "All content-preserving finalizers finished".into(),
            ));
        } else {
            let list = fins
                .iter()
                .map(|(f, c)| format!("{f} in {c} resource instances"))
                .collect::<Vec<_>>()
                .join(", ");
            conds.push(cond(
                "NamespaceFinalizersRemaining",
                "True",
                "SomeFinalizersRemain",
                format!("Some content in the namespace has finalizers remaining: {list}"),
            ));
        }
        let mut next = (*n).clone();
        next["status"]["conditions"] = json!(conds);
        if let Some(rt) = self.registry.by_key(NAMESPACE_KEY).cloned() {
            self.commit(&rt, "", ns, Some(next));
        }
    }
}
