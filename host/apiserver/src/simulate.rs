//! Dev-mode workload simulator (`Options::simulate_workloads`, off by
//! default): plays kubelet and the workload controllers just enough for
//! readiness checks, so manifests and charts reach `Succeeded` without a
//! cluster. After every create or main-resource write of a Pod, Deployment,
//! StatefulSet, DaemonSet, ReplicaSet or Job, the store immediately commits a
//! second write (a MODIFIED event, as a controller would) with the status
//! that workload reaches once everything is up:
//!
//! * **Pod**: `phase: Running`, conditions Initialized/Ready/ContainersReady/
//!   PodScheduled `True`, `containerStatuses[]` ready, started and running,
//!   `podIP`/`hostIP`, `startTime`.
//! * **Deployment**: `observedGeneration`, `replicas`/`updatedReplicas`/
//!   `readyReplicas`/`availableReplicas` = `spec.replicas`, conditions
//!   `Available` (MinimumReplicasAvailable) and `Progressing`
//!   (NewReplicaSetAvailable).
//! * **StatefulSet**: `observedGeneration`, `replicas`/`readyReplicas`/
//!   `currentReplicas`/`updatedReplicas`/`availableReplicas`,
//!   `currentRevision` == `updateRevision`.
//! * **DaemonSet** (one simulated node): `desiredNumberScheduled`,
//!   `currentNumberScheduled`, `numberReady`, `updatedNumberScheduled`,
//!   `numberAvailable` = 1, `numberMisscheduled: 0`.
//! * **ReplicaSet**: `replicas`/`fullyLabeledReplicas`/`readyReplicas`/
//!   `availableReplicas`, `observedGeneration`.
//! * **Job**: `succeeded` = completions, `Complete` condition, start and
//!   completion times.
//!
//! Pods with `restartPolicy: Never` are left alone: they run to an end only a
//! real kubelet knows (the container deployer's pods; `deployer-host dev
//! --run-pods` runs those as processes).
//!
//! No Pods or ReplicaSets are created; counts use zero-omitted fields, as the
//! real controllers write them. Objects being deleted are left alone.

use crate::registry::ResourceType;
use crate::store::{Inner, now};
use serde_json::{Value, json};
use std::sync::Arc;

fn int(v: Option<&Value>, d: i64) -> i64 {
    v.and_then(Value::as_i64).unwrap_or(d)
}

/// Count fields, omitting zeros (as the Go structs' `omitempty` does).
fn counts(pairs: &[(&str, i64)]) -> serde_json::Map<String, Value> {
    pairs
        .iter()
        .filter(|(_, n)| *n != 0)
        .map(|(k, n)| (k.to_string(), json!(n)))
        .collect()
}

/// A stable short hash (revision names).
fn short_hash(v: &Value) -> String {
    let s = v.to_string();
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..10)
        .map(|i| ALPHA[((h >> (i * 6)) % ALPHA.len() as u64) as usize] as char)
        .collect()
}

/// Keep `lastTransitionTime`/`lastUpdateTime` of unchanged conditions, so a re-simulation is a no-op.
fn keep_times(conds: &mut [Value], old: Option<&Value>) {
    let Some(olds) = old
        .and_then(|o| o.get("conditions"))
        .and_then(Value::as_array)
    else {
        return;
    };
    for c in conds.iter_mut() {
        if let Some(o) = olds
            .iter()
            .find(|o| o["type"] == c["type"] && o["status"] == c["status"])
        {
            for k in ["lastTransitionTime", "lastUpdateTime", "lastProbeTime"] {
                if let Some(t) = o.get(k) {
                    c[k] = t.clone();
                }
            }
        }
    }
}

fn keep(old: Option<&Value>, k: &str, t: &str) -> Value {
    old.and_then(|o| o.get(k))
        .cloned()
        .unwrap_or_else(|| json!(t))
}

/// The status the simulated kubelet/controller writes for `obj`, or `None` for other kinds.
pub fn desired_status(rt: &ResourceType, obj: &Value) -> Option<Value> {
    let old = obj.get("status");
    let generation = int(obj.pointer("/metadata/generation"), 1);
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let t = now();
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    let replicas = int(spec.get("replicas"), 1);
    let mut st = match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Pod") if spec.get("restartPolicy") == Some(&json!("Never")) => return None,
        ("", "Pod") => pod_status(old, &spec, name, &t),
        ("apps", "Deployment") => deployment_status(old, &spec, name, &t, replicas, generation),
        ("apps", "StatefulSet") => {
            let rev = format!("{name}-{}", short_hash(&spec["template"]));
            let mut s = counts(&[
                ("currentReplicas", replicas),
                ("updatedReplicas", replicas),
                ("readyReplicas", replicas),
                ("availableReplicas", replicas),
            ]);
            s.insert("replicas".into(), json!(replicas));
            s.insert("observedGeneration".into(), json!(generation));
            s.insert("currentRevision".into(), json!(rev));
            s.insert("updateRevision".into(), json!(rev));
            s.insert("collisionCount".into(), json!(0));
            Value::Object(s)
        }
        ("apps", "DaemonSet") => json!({
            "currentNumberScheduled": 1, "desiredNumberScheduled": 1, "numberAvailable": 1,
            "numberMisscheduled": 0, "numberReady": 1, "observedGeneration": generation,
            "updatedNumberScheduled": 1,
        }),
        ("apps", "ReplicaSet") => {
            let mut s = counts(&[
                ("fullyLabeledReplicas", replicas),
                ("readyReplicas", replicas),
                ("availableReplicas", replicas),
            ]);
            s.insert("replicas".into(), json!(replicas));
            s.insert("observedGeneration".into(), json!(generation));
            Value::Object(s)
        }
        ("batch", "Job") => return job_status(old, &spec, &t),
        _ => return None,
    };
    if let Some(q) = old
        .and_then(|o| o.get("qosClass"))
        .filter(|_| rt.kind == "Pod")
    {
        st["qosClass"] = q.clone();
    }
    Some(st)
}

/// A running Pod: every container started and ready, all conditions true, times kept.
fn pod_status(old: Option<&Value>, spec: &Value, name: &str, t: &str) -> Value {
    let start = keep(old, "startTime", t);
    let statuses: Vec<Value> = spec
        .get("containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    let prev = old
                        .and_then(|o| o.get("containerStatuses"))
                        .and_then(Value::as_array)
                        .and_then(|a| a.iter().find(|p| p["name"] == c["name"]));
                    let started = prev
                        .and_then(|p| p.pointer("/state/running/startedAt"))
                        .cloned()
                        .unwrap_or_else(|| json!(t));
                    json!({
                        "name": c["name"], "image": c["image"],
                        "imageID": format!("docker.io/library/{}", c["image"].as_str().unwrap_or("")),
                        "containerID": format!("containerd://{}", short_hash(&json!([name, c["name"]]))),
                        "ready": true, "started": true, "restartCount": 0,
                        "state": {"running": {"startedAt": started}},
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let mut conds: Vec<Value> = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .iter()
    .map(|c| json!({"type": c, "status": "True", "lastProbeTime": null, "lastTransitionTime": t}))
    .collect();
    keep_times(&mut conds, old);
    let mut s = json!({
        "phase": "Running", "conditions": conds,
        "hostIP": "10.0.0.1", "hostIPs": [{"ip": "10.0.0.1"}],
        "podIP": keep(old, "podIP", "10.244.0.10"),
        "startTime": start, "containerStatuses": statuses,
    });
    s["podIPs"] = json!([{"ip": s["podIP"]}]);
    if let Some(q) = old.and_then(|o| o.get("qosClass")) {
        s["qosClass"] = q.clone();
    }
    s
}

/// A Deployment whose replicas are all updated and available.
fn deployment_status(
    old: Option<&Value>,
    spec: &Value,
    name: &str,
    t: &str,
    replicas: i64,
    generation: i64,
) -> Value {
    let mut conds = vec![
        json!({"type": "Available", "status": "True", "lastUpdateTime": t, "lastTransitionTime": t,
               "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."}),
        json!({"type": "Progressing", "status": "True", "lastUpdateTime": t, "lastTransitionTime": t,
               "reason": "NewReplicaSetAvailable",
               "message": format!("ReplicaSet \"{name}-{}\" has successfully progressed.", short_hash(&spec["template"]))}),
    ];
    keep_times(&mut conds, old);
    let mut s = counts(&[
        ("replicas", replicas),
        ("updatedReplicas", replicas),
        ("readyReplicas", replicas),
        ("availableReplicas", replicas),
    ]);
    s.insert("observedGeneration".into(), json!(generation));
    s.insert("conditions".into(), json!(conds));
    Value::Object(s)
}

/// A Job that has completed (`None` while suspended).
fn job_status(old: Option<&Value>, spec: &Value, t: &str) -> Option<Value> {
    if spec.get("suspend").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    let completions = int(spec.get("completions"), 1);
    let start = keep(old, "startTime", t);
    let done = keep(old, "completionTime", t);
    let mut conds = vec![
        json!({"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": t, "lastTransitionTime": t}),
        json!({"type": "Complete", "status": "True", "lastProbeTime": t, "lastTransitionTime": t}),
    ];
    keep_times(&mut conds, old);
    Some(json!({
        "startTime": start, "completionTime": done, "succeeded": completions,
        "ready": 0, "terminating": 0, "conditions": conds,
        "uncountedTerminatedPods": {},
    }))
}

impl Inner {
    /// After a committed create / main-resource write: write the simulated status (if on and it differs).
    pub(crate) fn simulate_after(&mut self, rt: &Arc<ResourceType>, ns: &str, name: &str) {
        if !self.simulate || rt.crd {
            return;
        }
        let Some(cur) = self.lookup(&rt.key(), ns, name).cloned() else {
            return;
        };
        if cur.pointer("/metadata/deletionTimestamp").is_some() {
            return;
        }
        let Some(st) = desired_status(rt, &cur) else {
            return;
        };
        if cur.get("status") == Some(&st) {
            return;
        }
        let mut next = (*cur).clone();
        next["status"] = st;
        self.commit(rt, ns, name, Some(next));
    }
}
