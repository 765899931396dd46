//! Deletion (contract 6.6): the policy filter, `annotateBeforeDelete` / `patchBeforeDelete`,
//! and deletion groups processed strictly in order, one non-blocking step at a time.
//!
//! Owns: deciding which managed objects to delete and issuing the deletes. A step deletes
//! the first unfinished group; a group still present ends the step with "call again" and
//! the remaining objects stay in `managedResources`.
//! Deviations from Landscaper (contract 11.10): custom groups accept the kind forms users
//! write (`ConfigMap`, `configmap`, `configmaps`, and the apiVersion or just its group), and
//! objects that match no configured group are deleted last by the default groups instead of
//! being left behind.
//! Must not touch: applying.

use crate::Options;
use crate::checkpoints::DELETE as CP_DELETE;
use crate::cluster::Cluster;
use crate::spec::{DeletionGroup, ManagedResource, ObjectReference, Policy, ResourceType};
use crate::strategies::{deep_merge, set_annotations};
use crate::wait::ends_wait;
use sdk_guest::{Ctx, DeployerError};
use serde_json::Value;

/// Drops what must not be deleted (`ignore`, `keep`, `fallback` objects that are gone or not
/// owned by `item_name`) and applies `annotateBeforeDelete`/`patchBeforeDelete` to the rest
/// (objects already gone are dropped).
pub fn prepare(
    ctx: &Ctx,
    item_name: &str,
    resources: &[ManagedResource],
    opts: &Options,
) -> Result<Vec<ManagedResource>, DeployerError> {
    let mut out = Vec::new();
    for m in resources {
        if matches!(m.policy, Policy::Ignore | Policy::Keep) {
            continue;
        }
        // Objects a group found on a secondary Target carry no policy or annotations.
        let needs_live = m.target_name.is_none()
            && (m.policy == Policy::Fallback
                || m.annotate_before_delete.is_some()
                || m.patch_before_delete.is_some());
        if !needs_live {
            out.push(m.clone());
            continue;
        }
        let r = m.resource.to_ref();
        let Some(mut live) = ctx.kube_get(&r)? else {
            continue;
        };
        if m.policy == Policy::Fallback
            && live
                .pointer("/metadata/labels")
                .and_then(|l| l.get(opts.owner_label))
                .and_then(Value::as_str)
                != Some(item_name)
        {
            continue;
        }
        let deleting = live.pointer("/metadata/deletionTimestamp").is_some();
        if !deleting && (m.annotate_before_delete.is_some() || m.patch_before_delete.is_some()) {
            if let Some(a) = &m.annotate_before_delete {
                set_annotations(&mut live, a);
            }
            if let Some(p) = &m.patch_before_delete {
                deep_merge(&mut live, p);
            }
            match ctx.kube_update(&live) {
                Ok(_) => {}
                Err(e) if e.reason == "NotFound" => continue,
                Err(e) => {
                    return Err(DeployerError {
                        message: format!(
                            "unable to annotate/patch {} {} before deletion: {}",
                            m.resource.kind,
                            m.resource.display(),
                            e.message
                        ),
                        ..e
                    });
                }
            }
        }
        out.push(m.clone());
    }
    Ok(out)
}

/// The error of a deletion group whose objects are still there at the progressing timeout.
pub fn group_timeout() -> DeployerError {
    let e = DeployerError::progressing_timeout(CP_DELETE);
    DeployerError {
        message: format!("timeout during processing deletiongroup: {}", e.message),
        ..e
    }
}

/// Where an uninstall stands after one pass of [`uninstall`].
#[derive(Debug)]
pub enum Uninstall {
    /// Every managed object is gone.
    Done,
    /// Objects are still being deleted: persist `remaining` as the managed list and call
    /// again; `message` says which; `timeout` is the error once the progressing timeout has
    /// come.
    Waiting {
        remaining: Vec<ManagedResource>,
        message: String,
        timeout: DeployerError,
    },
}

/// One uninstall pass (contract 6.6): the managed objects [`prepare`]d (policies,
/// before-delete annotations and patches) and deleted by `groups` ([`delete_in_groups`]).
/// Errors: operation `delete`, reason `DeleteWithUninstall`, "failed deleting managed
/// resources: …".
pub fn uninstall(
    ctx: &Ctx,
    item_name: &str,
    managed: &[ManagedResource],
    groups: &[DeletionGroup],
    opts: &Options,
) -> Result<Uninstall, DeployerError> {
    let fail = |e: DeployerError| DeployerError {
        operation: "delete".into(),
        reason: "DeleteWithUninstall".into(),
        message: format!("failed deleting managed resources: {}", e.message),
        ..e
    };
    let to_delete = prepare(ctx, item_name, managed, opts).map_err(fail)?;
    let remaining = delete_in_groups(ctx, to_delete, groups).map_err(fail)?;
    if remaining.is_empty() {
        return Ok(Uninstall::Done);
    }
    let left: Vec<String> = remaining
        .iter()
        .map(|m| {
            format!(
                "{} {}{}",
                m.resource.kind,
                m.resource.display(),
                m.cluster().suffix()
            )
        })
        .collect();
    Ok(Uninstall::Waiting {
        remaining,
        message: format!("waiting for deletion of {}", left.join(", ")),
        timeout: fail(group_timeout()),
    })
}

fn default_groups() -> Vec<DeletionGroup> {
    ["namespaced-resources", "cluster-scoped-resources", "crds"]
        .into_iter()
        .map(|t| DeletionGroup {
            predefined_resource_group: Some(crate::spec::PredefinedGroup {
                type_: t.into(),
                force_delete: false,
            }),
            custom_resource_group: None,
        })
        .collect()
}

fn plural_forms(kind: &str) -> Vec<String> {
    let k = kind.to_ascii_lowercase();
    let mut v = vec![k.clone(), format!("{k}s"), format!("{k}es")];
    if let Some(stem) = k.strip_suffix('y') {
        v.push(format!("{stem}ies"));
    }
    v
}

/// Whether a custom resource type names this object's kind (any form) and apiVersion (or group).
fn type_matches(ctx: &Ctx, cluster: Cluster, t: &ResourceType, r: &ObjectReference) -> bool {
    let api_ok = t.api_version == r.api_version
        || (!t.api_version.contains('/') && t.api_version == r.group() && !r.group().is_empty());
    if !api_ok {
        return false;
    }
    let want = t.kind.to_ascii_lowercase();
    if t.kind == r.kind || plural_forms(&r.kind).contains(&want) {
        return true;
    }
    // Discovery is only offered on the item's Target.
    cluster == Cluster::Item
        && matches!(ctx.kube_discover(&r.api_version, &r.kind), Ok(Some(info)) if info.plural == want)
}

/// Whether `m` belongs to group `g`. Objects on the item's Target never match a group with
/// `targetName`; objects a group found on a secondary Target only match a custom group of
/// that Target.
fn group_matches(ctx: &Ctx, g: &DeletionGroup, m: &ManagedResource) -> bool {
    let group_target = g
        .custom_resource_group
        .as_ref()
        .and_then(|c| c.target_name.as_deref());
    if Cluster::of(group_target) != m.cluster() {
        return false;
    }
    let r = &m.resource;
    if let Some(p) = &g.predefined_resource_group {
        let crd = r.kind == "CustomResourceDefinition";
        return match p.type_.as_str() {
            "namespaced-resources" => !crd && !r.namespace.is_empty(),
            "cluster-scoped-resources" => !crd && r.namespace.is_empty(),
            "crds" => crd,
            _ => false,
        };
    }
    if let Some(c) = &g.custom_resource_group {
        return c.resources.iter().any(|t| {
            type_matches(ctx, m.cluster(), t, r)
                && (t.namespaces.is_empty() || t.namespaces.contains(&r.namespace))
                && (t.names.is_empty() || t.names.contains(&r.name))
        });
    }
    false
}

fn force_delete(g: &DeletionGroup) -> bool {
    g.predefined_resource_group
        .as_ref()
        .map(|p| p.force_delete)
        .or_else(|| g.custom_resource_group.as_ref().map(|c| c.force_delete))
        .unwrap_or(false)
}

/// Unmanaged objects a `deleteAllResources` group covers (on its `targetName` Target, if set).
fn all_of_group(ctx: &Ctx, g: &DeletionGroup) -> Result<Vec<ManagedResource>, DeployerError> {
    let mut out = Vec::new();
    let Some(c) = g
        .custom_resource_group
        .as_ref()
        .filter(|c| c.delete_all_resources)
    else {
        return Ok(out);
    };
    let target_name = c.target_name.clone().filter(|t| !t.is_empty());
    let cluster = Cluster::of(target_name.as_deref());
    for t in &c.resources {
        let namespaces: Vec<Option<&str>> = if t.namespaces.is_empty() {
            vec![None]
        } else {
            t.namespaces.iter().map(|n| Some(n.as_str())).collect()
        };
        for ns in namespaces {
            let listed = cluster
                .list(ctx, &t.api_version, &t.kind, ns, None)
                .map_err(|e| DeployerError {
                    message: format!(
                        "listing {} {}{} for deletion: {}",
                        t.api_version,
                        t.kind,
                        cluster.suffix(),
                        e.message
                    ),
                    ..e
                })?;
            for obj in listed {
                let r = ObjectReference::of(&obj);
                if t.names.is_empty() || t.names.contains(&r.name) {
                    out.push(ManagedResource {
                        resource: r,
                        target_name: target_name.clone(),
                        ..Default::default()
                    });
                }
            }
        }
    }
    Ok(out)
}

/// Deletes `resources` group by group. Returns the objects still present (empty: done).
pub fn delete_in_groups(
    ctx: &Ctx,
    resources: Vec<ManagedResource>,
    configured: &[DeletionGroup],
) -> Result<Vec<ManagedResource>, DeployerError> {
    let mut groups: Vec<DeletionGroup> = if configured.is_empty() {
        default_groups()
    } else {
        configured.to_vec()
    };
    // Objects that match no configured group are not left behind.
    groups.extend(default_groups());
    let mut assigned: Vec<Vec<ManagedResource>> = vec![Vec::new(); groups.len()];
    for m in resources {
        if let Some(i) = groups.iter().position(|g| group_matches(ctx, g, &m)) {
            assigned[i].push(m);
        }
    }
    for (i, g) in groups.iter().enumerate() {
        let mut members = std::mem::take(&mut assigned[i]);
        for extra in all_of_group(ctx, g)? {
            if !members.iter().any(|m| m.same(&extra)) {
                members.push(extra);
            }
        }
        let mut remaining = Vec::new();
        for m in members {
            ctx.checkpoint(CP_DELETE).map_err(|e| DeployerError {
                message: format!("timeout during processing deletiongroup: {}", e.message),
                ..e
            })?;
            if !delete_one(ctx, m.cluster(), &m.resource, force_delete(g))? {
                remaining.push(m);
            }
        }
        if !remaining.is_empty() {
            remaining.extend(assigned.into_iter().skip(i + 1).flatten());
            return Ok(remaining);
        }
    }
    Ok(Vec::new())
}

/// DELETE (and with `force` clear finalizers; never on a secondary Target, validation
/// rejects that); `true` once the object is gone.
fn delete_one(
    ctx: &Ctx,
    cluster: Cluster,
    r: &ObjectReference,
    force: bool,
) -> Result<bool, DeployerError> {
    let object = r.to_ref();
    let gone_on = |e: &DeployerError| e.reason == "NotFound" || e.reason == "GetApiResource";
    match cluster.delete(ctx, &object) {
        Ok(false) => return Ok(true),
        Ok(true) => {}
        Err(e) if gone_on(&e) => return Ok(true),
        Err(e) if ends_wait(&e) => return Err(e),
        Err(e) => {
            ctx.warn(&format!(
                "deleting {} {}{}: {}",
                r.kind,
                r.display(),
                cluster.suffix(),
                e.message
            ));
            return Ok(false);
        }
    }
    let live = match cluster.get(ctx, &object) {
        Ok(None) => return Ok(true),
        Ok(Some(live)) => live,
        Err(e) if gone_on(&e) => return Ok(true),
        Err(e) if ends_wait(&e) => return Err(e),
        Err(_) => return Ok(false),
    };
    if force
        && cluster == Cluster::Item
        && live
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty())
    {
        let mut cleared = live;
        cleared["metadata"]["finalizers"] = Value::Array(Vec::new());
        match ctx.kube_update(&cleared) {
            Err(e) if gone_on(&e) => return Ok(true),
            _ => {}
        }
        return Ok(matches!(ctx.kube_get(&object), Ok(None)));
    }
    Ok(false)
}
