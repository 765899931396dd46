//! Readiness (contract 6.5): the default check per kind over `managedResources`, and custom
//! checks (`resourceSelector`, `labelSelector`, requirements with every operator).
//!
//! Owns: one evaluation round. Waiting is the caller's business: "not ready" becomes
//! "call again after D", never a sleep.
//! Must not touch: the status.

use crate::Options;
use crate::checkpoints::DURING_READINESS as CP_DURING_READINESS;
use crate::cluster::Cluster;
use crate::jsonpath::JsonPath;
use crate::spec::{CustomCheck, ManagedResource, Policy, Requirement};
use crate::wait::{Pending, ends_wait};
use sdk_guest::{Ctx, DeployerError, ObjectRef, codes};
use serde_json::Value;

/// Result of one round: `Ok(())` ready, `Err(pending)` not (yet) ready.
pub type Round = Result<(), Pending>;

/// Maps a progressing-timeout error of a readiness checkpoint onto Landscaper's readiness
/// timeout (operation `WaitForObjectsReady`, codes `ERR_TIMEOUT`, `ERR_FOR_INFO_ONLY`).
pub fn timeout(e: DeployerError) -> DeployerError {
    e.with_operation("WaitForObjectsReady")
        .with_code(codes::FOR_INFO_ONLY)
}

/// Default check over every managed object that is not `ignore`d.
///
/// `written`: the objects the apply pass of this invocation has just created, updated or
/// patched (its `applied`, which also holds the `immutable` objects it read), or `&[]`. Those
/// of a kind without a readiness rule ([`has_rule`]) are not read: a GET of an object we just
/// wrote, of a kind that is ready once it exists, costs a round trip and proves nothing. Every
/// other object is read, as Landscaper does.
pub fn default_check(
    ctx: &Ctx,
    managed: &[ManagedResource],
    written: &[ManagedResource],
    opts: &Options,
) -> Result<Round, DeployerError> {
    ctx.checkpoint(opts.default_readiness_checkpoint)
        .map_err(timeout)?;
    // Objects a deletion group found on a secondary Target are not the item's objects.
    for m in managed
        .iter()
        .filter(|m| m.policy != Policy::Ignore && m.target_name.is_none())
    {
        let r = &m.resource;
        let checkpoint = format!(
            "{CP_DURING_READINESS} - resource {}/{} of type {}",
            r.namespace, r.name, r.kind
        );
        ctx.checkpoint(&checkpoint).map_err(timeout)?;
        if !has_rule(r.group(), &r.kind) && written.iter().any(|w| w.same(m)) {
            continue;
        }
        let not_ready = |why: String| Ok(Err(Pending::new(checkpoint.clone(), why)));
        let obj = match ctx.kube_get(&r.to_ref()) {
            Ok(Some(o)) => o,
            Ok(None) => return not_ready(format!("{} {} does not exist", r.kind, r.display())),
            Err(e) if ends_wait(&e) => return Err(e),
            Err(e) => return not_ready(format!("{} {}: {}", r.kind, r.display(), e.message)),
        };
        if let Err(why) = object_ready(&obj) {
            return not_ready(format!("{} {} is not ready: {why}", r.kind, r.display()));
        }
    }
    Ok(Ok(()))
}

fn int(v: &Value, p: &str) -> Option<i64> {
    v.pointer(p).and_then(Value::as_i64)
}

fn generation_current(o: &Value) -> Result<(), String> {
    let observed = int(o, "/status/observedGeneration").unwrap_or(0);
    let generation = int(o, "/metadata/generation").unwrap_or(0);
    if observed < generation {
        return Err(format!(
            "observed generation {observed} is older than generation {generation}"
        ));
    }
    Ok(())
}

/// Whether the default check has a rule for objects of this kind (`group` is `""` for core);
/// an object of any other kind is ready once it exists. [`object_ready`] answers "ready" for
/// every kind this does not name, so a rule added there without a line here never runs.
pub fn has_rule(group: &str, kind: &str) -> bool {
    matches!(
        (group, kind),
        ("", "Pod" | "ReplicationController")
            | (
                "apps",
                "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet"
            )
    )
}

/// The per-kind rule of the default check (contract 6.5); other kinds are ready.
pub fn object_ready(o: &Value) -> Result<(), String> {
    let kind = o.get("kind").and_then(Value::as_str).unwrap_or("");
    let group = o
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|a| a.rsplit_once('/').map(|(g, _)| g))
        .unwrap_or("");
    if !has_rule(group, kind) {
        return Ok(());
    }
    match (group, kind) {
        ("", "Pod") => {
            let ready = o
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"));
            match ready {
                Some(c) if c["reason"] == "PodCompleted" || c["status"] == "True" => Ok(()),
                Some(_) => Err("condition Ready is not True".into()),
                None => Err("no Ready condition".into()),
            }
        }
        ("apps", "Deployment") => {
            generation_current(o)?;
            let r = int(o, "/spec/replicas").unwrap_or(0);
            for f in ["replicas", "updatedReplicas", "availableReplicas"] {
                let v = int(o, &format!("/status/{f}")).unwrap_or(0);
                if v != r {
                    return Err(format!("{f} is {v}, want {r}"));
                }
            }
            Ok(())
        }
        ("apps", "StatefulSet") => {
            generation_current(o)?;
            let r = int(o, "/spec/replicas").unwrap_or(1);
            // Kubernetes < 1.22 has no status.availableReplicas for StatefulSets. Without it,
            // and without spec.minReadySeconds (which 1.22 brought with it), a ready replica is
            // an available one: count readyReplicas instead.
            let available = if o.pointer("/status/availableReplicas").is_none()
                && int(o, "/spec/minReadySeconds").unwrap_or(0) == 0
            {
                "readyReplicas"
            } else {
                "availableReplicas"
            };
            for f in ["updatedReplicas", available] {
                let v = int(o, &format!("/status/{f}")).unwrap_or(0);
                if v < r {
                    return Err(format!("{f} is {v}, want {r}"));
                }
            }
            Ok(())
        }
        ("apps", "DaemonSet") => {
            generation_current(o)?;
            let desired = int(o, "/status/desiredNumberScheduled").unwrap_or(0);
            let current = int(o, "/status/currentNumberScheduled").unwrap_or(0);
            let mut max_unavailable = 0;
            if desired > 0
                && o.pointer("/spec/updateStrategy/type")
                    .and_then(Value::as_str)
                    == Some("RollingUpdate")
            {
                match o.pointer("/spec/updateStrategy/rollingUpdate/maxUnavailable") {
                    Some(Value::Number(n)) => max_unavailable = n.as_i64().unwrap_or(0),
                    Some(Value::String(s)) if s.ends_with('%') => {
                        let pct: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
                        max_unavailable = desired * pct / 100;
                    }
                    Some(Value::String(s)) => max_unavailable = s.parse().unwrap_or(0),
                    _ => {}
                }
            }
            if current < desired - max_unavailable {
                return Err(format!(
                    "{current} of {desired} pods scheduled (maxUnavailable {max_unavailable})"
                ));
            }
            Ok(())
        }
        ("apps", "ReplicaSet") | ("", "ReplicationController") => {
            generation_current(o)?;
            if let Some(c) = o
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|cs| cs.iter().find(|c| c["type"] == "ReplicaFailure"))
                && c["status"] != "False"
            {
                return Err(format!(
                    "ReplicaFailure: {}",
                    c["message"].as_str().unwrap_or("")
                ));
            }
            let r = int(o, "/spec/replicas").unwrap_or(1);
            let ready = int(o, "/status/readyReplicas").unwrap_or(0);
            if ready < r {
                return Err(format!("{ready} of {r} replicas ready"));
            }
            Ok(())
        }
        _ => Ok(()), // not reached: `has_rule` names the kinds above
    }
}

/// Numbers compare as floats (Landscaper normalises through a JSON round trip).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Evaluates one requirement on one object.
pub fn requirement_holds(obj: &Value, req: &Requirement) -> Result<(), String> {
    let path = JsonPath::parse(&req.json_path)?;
    let found = path.eval(obj);
    let op = req.operator.as_str();
    if found.is_empty() {
        return if op == "!" {
            Ok(())
        } else {
            Err(format!("{} not found", req.json_path))
        };
    }
    match op {
        "!" => return Err(format!("{} exists", req.json_path)),
        "exists" => return Ok(()),
        _ => {}
    }
    let values: Vec<&Value> = req.values.iter().filter_map(|v| v.get("value")).collect();
    for f in found {
        let ok = match op {
            "=" | "==" | "in" => values.iter().any(|v| json_eq(f, v)),
            "!=" => values.first().is_none_or(|v| !json_eq(f, v)),
            "notin" => !values.iter().any(|v| json_eq(f, v)),
            other => return Err(format!("unknown operator {other:?}")),
        };
        if !ok {
            return Err(format!(
                "{} is {f}, which does not satisfy {op} {}",
                req.json_path,
                values
                    .iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    Ok(())
}

/// The default check (unless `checks.disable_default`) and then the custom checks, as every
/// deployer that applies manifests runs them: `Ok(Err(pending))` while something is not ready.
/// `written`: see [`default_check`].
pub fn check_all(
    ctx: &Ctx,
    checks: &crate::spec::ReadinessChecks,
    managed: &[ManagedResource],
    written: &[ManagedResource],
    opts: &Options,
) -> Result<Round, DeployerError> {
    if !checks.disable_default {
        let round = default_check(ctx, managed, written, opts)?;
        if round.is_err() {
            return Ok(round);
        }
    }
    custom_checks(ctx, &checks.custom, opts)
}

/// Custom checks, in order.
pub fn custom_checks(
    ctx: &Ctx,
    checks: &[CustomCheck],
    opts: &Options,
) -> Result<Round, DeployerError> {
    if checks.iter().all(|c| c.disabled) {
        return Ok(Ok(()));
    }
    ctx.checkpoint(opts.custom_readiness_checkpoint)
        .map_err(timeout)?;
    for c in checks.iter().filter(|c| !c.disabled) {
        ctx.checkpoint(CP_DURING_READINESS).map_err(timeout)?;
        let cluster = Cluster::of(c.target_name.as_deref());
        let on = cluster.suffix();
        let not_ready = |why: String| {
            Ok(Err(Pending::new(
                CP_DURING_READINESS,
                format!("check {:?}: {why}", c.name),
            )))
        };
        let mut objects = Vec::new();
        for r in &c.resource_selector {
            let object = ObjectRef {
                api_version: r.api_version.clone(),
                kind: r.kind.clone(),
                namespace: (!r.namespace.is_empty()).then(|| r.namespace.clone()),
                name: r.name.clone(),
            };
            match cluster.get(ctx, &object) {
                Ok(Some(o)) => objects.push(o),
                Ok(None) => return not_ready(format!("{} {} does not exist{on}", r.kind, r.name)),
                Err(e) if ends_wait(&e) => return Err(e),
                Err(e) => return not_ready(e.message),
            }
        }
        if let Some(ls) = &c.label_selector {
            let selector = ls
                .match_labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            match cluster.list(ctx, &ls.api_version, &ls.kind, None, Some(&selector)) {
                Ok(items) if items.is_empty() => {
                    return not_ready(format!("no {} matches {selector}{on}", ls.kind));
                }
                Ok(items) => objects.extend(items),
                Err(e) if ends_wait(&e) => return Err(e),
                Err(e) => return not_ready(e.message),
            }
        }
        for o in &objects {
            for req in &c.requirements {
                if let Err(why) = requirement_holds(o, req) {
                    let r = crate::spec::ObjectReference::of(o);
                    return not_ready(format!("{} {}{on}: {why}", r.kind, r.display()));
                }
            }
        }
    }
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::ObjectReference;
    use crate::test_host::{KubeOnly, OPTS};
    use sdk_guest::KubeOp;
    use serde_json::json;
    use std::sync::Mutex;

    /// A cluster in which every object exists and is ready; records the GETs.
    #[derive(Default)]
    struct Cluster {
        gets: Mutex<Vec<String>>,
    }

    impl Cluster {
        fn kube(&self, op: KubeOp) -> Result<Option<String>, DeployerError> {
            let KubeOp::Get(r) = op else {
                panic!("only GETs expected, got {op:?}");
            };
            self.gets.lock().unwrap().push(r.kind.clone());
            let ready = json!({"apiVersion": r.api_version, "kind": r.kind,
                "metadata": {"name": r.name, "generation": 1},
                "spec": {"replicas": 1}, "status": {"observedGeneration": 1, "replicas": 1,
                "updatedReplicas": 1, "availableReplicas": 1}});
            Ok(Some(ready.to_string()))
        }
    }

    fn managed(api_version: &str, kind: &str) -> ManagedResource {
        ManagedResource {
            resource: ObjectReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: "x".into(),
                namespace: "default".into(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// GETs of one default check over `managed` after writing `written`.
    fn gets(managed: &[ManagedResource], written: &[ManagedResource]) -> Vec<String> {
        let cluster = Cluster::default();
        let host = KubeOnly(|op| cluster.kube(op));
        let round = default_check(&Ctx::native(&host), managed, written, &OPTS).unwrap();
        assert!(round.is_ok(), "{round:?}");
        cluster.gets.into_inner().unwrap()
    }

    #[test]
    fn objects_just_written_are_read_only_if_their_kind_has_a_readiness_rule() {
        let cm = managed("v1", "ConfigMap");
        let deploy = managed("apps/v1", "Deployment");
        let both = [cm.clone(), deploy.clone()];
        assert_eq!(
            gets(&both, &both),
            ["Deployment"],
            "written ConfigMap: no GET"
        );
        assert_eq!(
            gets(&both, &[]),
            ["ConfigMap", "Deployment"],
            "nothing written"
        );
        assert_eq!(
            gets(&both, std::slice::from_ref(&deploy)),
            ["ConfigMap", "Deployment"],
            "a ConfigMap not written in this invocation is read"
        );
        // The same name in another namespace is another object.
        let mut elsewhere = cm.clone();
        elsewhere.resource.namespace = "other".into();
        assert_eq!(gets(std::slice::from_ref(&cm), &[elsewhere]), ["ConfigMap"]);
    }

    #[test]
    fn every_kind_with_a_rule_fails_a_bare_object_and_no_other_kind_does() {
        let bare = |api_version: &str, kind: &str| json!({"apiVersion": api_version, "kind": kind, "metadata": {"generation": 1}});
        for (api_version, kind) in [
            ("v1", "Pod"),
            ("v1", "ReplicationController"),
            ("apps/v1", "Deployment"),
            ("apps/v1", "StatefulSet"),
            ("apps/v1", "DaemonSet"),
            ("apps/v1", "ReplicaSet"),
        ] {
            let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
            assert!(has_rule(group, kind), "{kind}");
            assert!(object_ready(&bare(api_version, kind)).is_err(), "{kind}");
        }
        for (api_version, kind) in [
            ("v1", "ConfigMap"),
            ("v1", "Secret"),
            ("v1", "Service"),
            ("v1", "Namespace"),
            ("batch/v1", "Job"),
            ("extensions/v1beta1", "Deployment"),
        ] {
            let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
            assert!(!has_rule(group, kind), "{kind}");
            assert!(object_ready(&bare(api_version, kind)).is_ok(), "{kind}");
        }
    }

    fn req(path: &str, op: &str, values: Value) -> Requirement {
        Requirement {
            json_path: path.into(),
            operator: op.into(),
            values: values.as_array().unwrap().clone(),
        }
    }

    #[test]
    fn every_operator_of_a_custom_check() {
        let o = json!({"data": {"key": "val", "n": 1}, "spec": {"nested": {"a": [1, 2]}}});
        let ok = |r: Requirement| requirement_holds(&o, &r).is_ok();
        assert!(ok(req(".data.key", "=", json!([{"value": "val"}]))));
        assert!(ok(req("data.key", "==", json!([{"value": "val"}]))));
        assert!(!ok(req(".data.key", "=", json!([{"value": "other"}]))));
        assert!(ok(req(".data.n", "=", json!([{"value": 1.0}]))));
        assert!(ok(req(".data.key", "!=", json!([{"value": "other"}]))));
        assert!(!ok(req(".data.key", "!=", json!([{"value": "val"}]))));
        assert!(ok(req(
            ".data.key",
            "in",
            json!([{"value": "a"}, {"value": "val"}])
        )));
        assert!(!ok(req(
            ".data.key",
            "notin",
            json!([{"value": "a"}, {"value": "val"}])
        )));
        assert!(ok(req(".data.key", "notin", json!([{"value": "a"}]))));
        assert!(ok(req(".data.key", "exists", json!([]))));
        assert!(!ok(req(".data.missing", "exists", json!([]))));
        assert!(ok(req(".data.missing", "!", json!([]))));
        assert!(!ok(req(".data.key", "!", json!([]))));
        assert!(ok(req(
            ".spec.nested",
            "=",
            json!([{"value": {"a": [1, 2]}}])
        )));
    }

    #[test]
    fn default_readiness_per_kind() {
        let pod = |status: &str, reason: &str| {
            json!({"apiVersion": "v1", "kind": "Pod",
            "status": {"conditions": [{"type": "Ready", "status": status, "reason": reason}]}})
        };
        assert!(object_ready(&pod("True", "")).is_ok());
        assert!(object_ready(&pod("False", "PodCompleted")).is_ok());
        assert!(object_ready(&pod("False", "")).is_err());
        assert!(object_ready(&json!({"apiVersion": "v1", "kind": "Pod"})).is_err());

        let deploy = |spec: i64, r: i64, u: i64, a: i64, og: i64| {
            json!({"apiVersion": "apps/v1",
            "kind": "Deployment", "metadata": {"generation": 2}, "spec": {"replicas": spec},
            "status": {"observedGeneration": og, "replicas": r, "updatedReplicas": u, "availableReplicas": a}})
        };
        assert!(object_ready(&deploy(2, 2, 2, 2, 2)).is_ok());
        assert!(object_ready(&deploy(2, 2, 2, 1, 2)).is_err());
        assert!(object_ready(&deploy(2, 2, 2, 2, 1)).is_err());
        assert!(
            object_ready(&deploy(2, 3, 2, 2, 2)).is_err(),
            "surplus replicas"
        );

        let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {},
            "status": {"updatedReplicas": 1, "availableReplicas": 1}});
        assert!(object_ready(&sts).is_ok(), "nil replicas means 1");
        let sts0 =
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {}, "status": {}});
        assert!(object_ready(&sts0).is_err());
        // A server before 1.22 reports no availableReplicas: readyReplicas count.
        let old = |ready: i64| {
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {"replicas": 2},
                "status": {"updatedReplicas": 2, "readyReplicas": ready}})
        };
        assert!(object_ready(&old(2)).is_ok());
        assert_eq!(
            object_ready(&old(1)).unwrap_err(),
            "readyReplicas is 1, want 2"
        );
        // With minReadySeconds, only availableReplicas count (0 is omitted from the status).
        let mut slow = old(2);
        slow["spec"]["minReadySeconds"] = json!(10);
        assert_eq!(
            object_ready(&slow).unwrap_err(),
            "availableReplicas is 0, want 2"
        );

        let ds = |desired: i64, current: i64, mu: Value| {
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": mu}}},
            "status": {"desiredNumberScheduled": desired, "currentNumberScheduled": current}})
        };
        assert!(object_ready(&ds(4, 4, json!(0))).is_ok());
        assert!(object_ready(&ds(4, 3, json!(1))).is_ok());
        assert!(object_ready(&ds(4, 3, json!("25%"))).is_ok());
        assert!(object_ready(&ds(4, 2, json!("25%"))).is_err());

        let rs = |ready: i64, failure: &str| {
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "spec": {"replicas": 2}, "status": {"readyReplicas": ready,
            "conditions": [{"type": "ReplicaFailure", "status": failure}]}})
        };
        assert!(object_ready(&rs(2, "False")).is_ok());
        assert!(object_ready(&rs(2, "True")).is_err());
        assert!(object_ready(&rs(1, "False")).is_err());
        let rc = json!({"apiVersion": "v1", "kind": "ReplicationController", "spec": {}, "status": {"readyReplicas": 1}});
        assert!(object_ready(&rc).is_ok());

        assert!(object_ready(&json!({"apiVersion": "v1", "kind": "ConfigMap"})).is_ok());
    }
}
