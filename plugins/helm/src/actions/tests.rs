use super::fake::FakeCluster;
use super::*;
use std::time::Duration;

use crate::release::{Info, Release, Status, Storage};
use helm_engine::Chart;
use sdk_guest::{Ctx, codes};
use serde_json::Value;
use serde_json::json;

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\ndata:\n  v: {{ .Values.v | default \"1\" | quote }}\n";
const EXTRA: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\ndata: {}\n";
const KEEP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\n  annotations:\n    helm.sh/resource-policy: keep\ndata: {}\n";
const DEPLOY: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: c\n        image: nginx\n";

fn chart(templates: &[(&str, &str)]) -> Chart {
    chart_with(templates, &[])
}

fn chart_with(templates: &[(&str, &str)], files: &[(&str, &str)]) -> Chart {
    let mut all = vec![(
        "Chart.yaml".to_string(),
        b"apiVersion: v2\nname: t\nversion: 0.1.0\n".to_vec(),
    )];
    for (n, c) in templates {
        all.push((format!("templates/{n}"), c.as_bytes().to_vec()));
    }
    for (n, c) in files {
        all.push((n.to_string(), c.as_bytes().to_vec()));
    }
    Chart::load_files(all).unwrap()
}

fn req<'a>(chart: &'a Chart, values: &'a Value) -> Request<'a> {
    Request {
        release_name: "rel",
        namespace: "ns",
        chart,
        values,
        install: Flags::default(),
        upgrade: Flags::default(),
    }
}

fn done(o: Outcome<Box<Release>>) -> Box<Release> {
    match o {
        Outcome::Done(r) => r,
        Outcome::Pending { message, .. } => panic!("pending: {message}"),
    }
}

fn pending<T: std::fmt::Debug>(o: Outcome<T>) -> String {
    match o {
        Outcome::Pending { message, .. } => message,
        Outcome::Done(r) => panic!("done: {r:?}"),
    }
}

fn history(ctx: &Ctx) -> Vec<(i64, Status, String)> {
    Storage::new("ns")
        .history(ctx, "rel")
        .unwrap()
        .into_iter()
        .map(|r| (r.version, r.info.status, r.info.description))
        .collect()
}

fn cm(cluster: &FakeCluster, name: &str) -> Option<Value> {
    cluster.get("v1", "ConfigMap", Some("ns"), name)
}

fn install(ctx: &Ctx, chart: &Chart, values: &Value) -> Box<Release> {
    let mut state = ActionState::default();
    let r = done(install_or_upgrade(ctx, &req(chart, values), &mut state).unwrap());
    assert!(state.is_idle());
    r
}

#[test]
fn install_creates_a_deployed_release_and_owned_objects() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    let c = chart(&[("cm.yaml", CM)]);
    let values = json!({"v": "a"});
    let rel = install(&ctx, &c, &values);
    assert_eq!(rel.version, 1);
    assert_eq!(rel.info.status, Status::Deployed);
    assert_eq!(rel.info.description, "Install complete");
    assert_eq!(rel.config, values);
    assert!(rel.manifest.contains("# Source: t/templates/cm.yaml"));
    assert_eq!(rel.apply_method, "", "written as Helm 3 writes it");
    let o = cm(&cluster, "rel-cm").unwrap();
    assert_eq!(o["data"]["v"], "a");
    assert_eq!(o["metadata"]["labels"][MANAGED_BY_LABEL], "Helm");
    assert_eq!(o["metadata"]["annotations"][RELEASE_NAME_ANNOTATION], "rel");
    assert_eq!(
        o["metadata"]["annotations"][RELEASE_NAMESPACE_ANNOTATION],
        "ns"
    );
    let secret = cluster
        .get("v1", "Secret", Some("ns"), "sh.helm.release.v1.rel.v1")
        .unwrap();
    assert_eq!(secret["type"], "helm.sh/release.v1");
    assert_eq!(secret["metadata"]["labels"]["status"], "deployed");
    assert_eq!(secret["metadata"]["labels"]["owner"], "helm");
    assert_eq!(
        history(&ctx),
        [(1, Status::Deployed, "Install complete".into())]
    );
    // The stored chart is Helm's chart JSON.
    assert_eq!(rel.chart["metadata"]["name"], "t");
}

#[test]
fn upgrade_supersedes_deletes_removed_objects_and_keeps_policy_keep() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    let v1 = chart(&[("cm.yaml", CM), ("extra.yaml", EXTRA), ("keep.yaml", KEEP)]);
    install(&ctx, &v1, &json!({}));
    assert!(cm(&cluster, "extra").is_some() && cm(&cluster, "kept").is_some());
    let v2 = chart(&[("cm.yaml", CM)]);
    let values = json!({"v": "2"});
    let mut state = ActionState::default();
    let rel = done(install_or_upgrade(&ctx, &req(&v2, &values), &mut state).unwrap());
    assert_eq!(rel.version, 2);
    assert_eq!(rel.info.description, "Upgrade complete");
    assert_eq!(
        history(&ctx),
        [
            (1, Status::Superseded, "Install complete".into()),
            (2, Status::Deployed, "Upgrade complete".into())
        ]
    );
    assert_eq!(cm(&cluster, "rel-cm").unwrap()["data"]["v"], "2");
    assert!(
        cm(&cluster, "extra").is_none(),
        "removed from the chart: deleted"
    );
    assert!(cm(&cluster, "kept").is_some(), "resource-policy keep");
    // An upgrade without values reuses the previous ones (Helm).
    let rel = done(install_or_upgrade(&ctx, &req(&v2, &json!({})), &mut state).unwrap());
    assert_eq!(rel.config, values);
    assert_eq!(cm(&cluster, "rel-cm").unwrap()["data"]["v"], "2");
}

#[test]
fn an_install_failure_marks_the_release_failed() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    cluster.fail("patch", "rel-cm", "Invalid");
    let c = chart(&[("cm.yaml", CM)]);
    let mut state = ActionState::default();
    let e = install_or_upgrade(&ctx, &req(&c, &json!({})), &mut state).unwrap_err();
    assert!(state.is_idle());
    assert!(e.message.contains("injected failure"), "{}", e.message);
    assert_eq!(e.operation, "InstallHelmRelease");
    assert!(
        !e.is_unrecoverable(),
        "a failed release is retried, as Landscaper retries it: {e:?}"
    );
    let h = history(&ctx);
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].1, Status::Failed);
    assert!(
        h[0].2
            .starts_with("Release \"rel\" failed: failed to apply ConfigMap \"rel-cm\""),
        "{}",
        h[0].2
    );
}

#[test]
fn a_retried_install_adds_a_revision_per_attempt_and_the_history_stays_capped() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    cluster.unknown_kind("Widget");
    let widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n";
    let c = chart(&[("cm.yaml", CM), ("widget.yaml", widget)]);
    let values = json!({});
    let mut r = req(&c, &values);
    r.install.max_history = 3;
    let mut state = ActionState::default();
    // A kind the cluster does not serve yet: nothing is recorded (Helm fails while building
    // the objects), and the error is retried.
    let e = install_or_upgrade(&ctx, &r, &mut state).unwrap_err();
    assert!(!e.is_unrecoverable(), "{e:?}");
    assert!(
        e.message.contains("no matches for kind \"Widget\"")
            && e.message.contains("ensure CRDs are installed first"),
        "{}",
        e.message
    );
    assert!(history(&ctx).is_empty());
    // An apply that keeps failing: one failed revision per attempt, at most `max_history`.
    cluster.clear_failures();
    cluster.fail("patch", "rel-cm", "Invalid");
    for _ in 0..5 {
        let e = install_or_upgrade(&ctx, &r, &mut state).unwrap_err();
        assert!(!e.is_unrecoverable(), "{e:?}");
        assert!(state.is_idle());
    }
    let h = history(&ctx);
    assert_eq!(h.len(), 3, "{h:?}");
    assert!(h.iter().all(|r| r.1 == Status::Failed), "{h:?}");
    assert_eq!(h.last().unwrap().0, 5);
    // Once the cause is gone, the next attempt installs.
    cluster.clear_failures();
    let rel = done(install_or_upgrade(&ctx, &r, &mut state).unwrap());
    assert_eq!((rel.version, rel.info.status), (6, Status::Deployed));
    assert!(history(&ctx).len() <= 3);
}

#[test]
fn an_atomic_install_failure_uninstalls_the_release() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    cluster.fail("patch", "web", "Invalid");
    let c = chart(&[("cm.yaml", CM), ("deploy.yaml", DEPLOY)]);
    let values = json!({});
    let mut r = req(&c, &values);
    r.install.atomic = true;
    let mut state = ActionState::default();
    let e = install_or_upgrade(&ctx, &r, &mut state).unwrap_err();
    assert!(state.is_idle());
    assert!(
        e.message
            .starts_with("release rel failed, and has been uninstalled due to atomic being set: failed to apply Deployment"),
        "{}",
        e.message
    );
    assert!(
        cm(&cluster, "rel-cm").is_none(),
        "created before the failure, then uninstalled"
    );
    assert!(history(&ctx).is_empty());
    assert!(cluster.names("Secret").is_empty());
}

#[test]
fn an_atomic_upgrade_failure_rolls_back() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    install(&ctx, &chart(&[("cm.yaml", CM)]), &json!({"v": "1"}));
    let c2 = chart(&[("cm.yaml", CM), ("deploy.yaml", DEPLOY)]);
    let values = json!({"v": "2"});
    let mut r = req(&c2, &values);
    r.upgrade.atomic = true;
    r.upgrade.timeout = Some(Duration::from_secs(60));
    let mut state = ActionState::default();
    let msg = pending(install_or_upgrade(&ctx, &r, &mut state).unwrap());
    assert!(msg.contains("Deployment ns/web is not ready"), "{msg}");
    assert!(!state.is_idle());
    // The state survives a JSON round trip (the caller keeps it in the providerStatus).
    let mut state: ActionState =
        serde_json::from_value(serde_json::to_value(&state).unwrap()).unwrap();
    assert_eq!(
        pending(install_or_upgrade(&ctx, &r, &mut state).unwrap()),
        msg
    );
    cluster.advance(Duration::from_secs(61));
    let e = install_or_upgrade(&ctx, &r, &mut state).unwrap_err();
    assert!(state.is_idle());
    assert!(
        e.message.starts_with(
            "release rel failed, and has been rolled back due to atomic being set: timed out waiting for the condition: Deployment ns/web is not ready"
        ),
        "{}",
        e.message
    );
    let h = history(&ctx);
    assert_eq!(h[0], (1, Status::Superseded, "Install complete".into()));
    assert_eq!(h[1].1, Status::Failed);
    assert!(
        h[1].2.starts_with("Upgrade \"rel\" failed: timed out"),
        "{}",
        h[1].2
    );
    assert_eq!(h[2], (3, Status::Deployed, "Rollback to 1".into()));
    assert!(
        cluster
            .get("apps/v1", "Deployment", Some("ns"), "web")
            .is_none()
    );
    assert_eq!(cm(&cluster, "rel-cm").unwrap()["data"]["v"], "1");
    let v3 = Storage::new("ns").get(&ctx, "rel", 3).unwrap().unwrap();
    assert_eq!(v3.info.extra["rollback_revision"], 1);
}

fn hook(name: &str, events: &str, weight: i64, policy: Option<&str>) -> String {
    let mut s = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  annotations:\n    helm.sh/hook: {events}\n    helm.sh/hook-weight: \"{weight}\"\n"
    );
    if let Some(p) = policy {
        s.push_str(&format!("    helm.sh/hook-delete-policy: {p}\n"));
    }
    s
}

#[test]
fn hooks_run_by_weight_and_name_with_their_delete_policies() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    let hooks = [
        hook("h-b", "pre-install", 1, None),
        hook("h-a", "pre-install,pre-upgrade", 1, None),
        hook("h-c", "pre-install", -5, Some("hook-succeeded")),
        hook(
            "h-post",
            "post-install",
            0,
            Some("hook-succeeded,hook-failed"),
        ),
    ];
    let c = chart(&[
        ("cm.yaml", CM),
        ("hb.yaml", &hooks[0]),
        ("ha.yaml", &hooks[1]),
        ("hc.yaml", &hooks[2]),
        ("hp.yaml", &hooks[3]),
    ]);
    let rel = install(&ctx, &c, &json!({}));
    let ops: Vec<String> = cluster
        .ops()
        .into_iter()
        .filter(|o| o.contains("ConfigMap"))
        .collect();
    assert_eq!(
        ops,
        [
            "create ConfigMap h-c",
            "delete ConfigMap h-a", // before-hook-creation (nothing there)
            "create ConfigMap h-a",
            "delete ConfigMap h-b",
            "create ConfigMap h-b",
            "delete ConfigMap h-c", // hook-succeeded, after all pre-install hooks
            "patch ConfigMap rel-cm",
            "create ConfigMap h-post",
            "delete ConfigMap h-post",
        ]
    );
    assert!(cm(&cluster, "h-a").is_some() && cm(&cluster, "h-b").is_some());
    assert!(cm(&cluster, "h-c").is_none() && cm(&cluster, "h-post").is_none());
    // Hooks carry no ownership metadata.
    assert!(cm(&cluster, "h-a").unwrap()["metadata"]["labels"].is_null());
    for h in &rel.hooks {
        assert_eq!(h.last_run.phase, "Succeeded", "{}", h.name);
        assert!(!h.last_run.started_at.is_empty() && !h.last_run.completed_at.is_empty());
    }
    let a = rel.hooks.iter().find(|h| h.name == "h-a").unwrap();
    assert_eq!(
        a.delete_policies,
        ["before-hook-creation"],
        "Helm 3's default, recorded"
    );
    // The stored record has the runs too.
    let stored = Storage::new("ns").get(&ctx, "rel", 1).unwrap().unwrap();
    assert_eq!(stored.hooks, rel.hooks);

    // On upgrade, only pre-upgrade hooks run; before-hook-creation deletes the old one.
    let before = cluster.ops().len();
    let mut state = ActionState::default();
    done(install_or_upgrade(&ctx, &req(&c, &json!({})), &mut state).unwrap());
    let ops: Vec<String> = cluster.ops()[before..]
        .iter()
        .filter(|o| o.contains("ConfigMap h-"))
        .cloned()
        .collect();
    assert_eq!(ops, ["delete ConfigMap h-a", "create ConfigMap h-a"]);
}

const JOB: &str = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{ .Release.Name }}-job\n  annotations:\n    helm.sh/hook: pre-install\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: busybox\n";

#[test]
fn a_job_hook_is_pending_until_it_completes() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    let c = chart(&[("cm.yaml", CM), ("job.yaml", JOB)]);
    let values = json!({});
    let mut state = ActionState::default();
    let msg = pending(install_or_upgrade(&ctx, &req(&c, &values), &mut state).unwrap());
    assert_eq!(msg, "waiting for hook Job ns/rel-job to complete");
    assert!(
        cm(&cluster, "rel-cm").is_none(),
        "resources wait for pre-install hooks"
    );
    let stored = Storage::new("ns").get(&ctx, "rel", 1).unwrap().unwrap();
    assert_eq!(stored.info.status, Status::PendingInstall);
    assert_eq!(stored.hooks[0].last_run.phase, "Unknown");
    assert!(matches!(
        &state.running.as_ref().unwrap().stage,
        Stage::Hooks { event, next: 0, running: true } if event == "pre-install"
    ));
    // Still running: still pending, the Job is not created twice.
    pending(install_or_upgrade(&ctx, &req(&c, &values), &mut state).unwrap());
    assert_eq!(
        cluster
            .ops()
            .iter()
            .filter(|o| *o == "create Job rel-job")
            .count(),
        1
    );
    cluster.edit("batch/v1", "Job", Some("ns"), "rel-job", |j| {
        j["status"] =
            json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]});
    });
    let rel = done(install_or_upgrade(&ctx, &req(&c, &values), &mut state).unwrap());
    assert_eq!(rel.hooks[0].last_run.phase, "Succeeded");
    assert!(cm(&cluster, "rel-cm").is_some());
}

#[test]
fn a_failed_job_hook_fails_the_install() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    let c = chart(&[("cm.yaml", CM), ("job.yaml", JOB)]);
    let values = json!({});
    let mut state = ActionState::default();
    pending(install_or_upgrade(&ctx, &req(&c, &values), &mut state).unwrap());
    cluster.edit("batch/v1", "Job", Some("ns"), "rel-job", |j| {
        j["status"] = json!({"failed": 1, "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]});
    });
    let e = install_or_upgrade(&ctx, &req(&c, &values), &mut state).unwrap_err();
    assert_eq!(
        e.message,
        "failed pre-install: job rel-job failed: BackoffLimitExceeded"
    );
    let stored = Storage::new("ns").get(&ctx, "rel", 1).unwrap().unwrap();
    assert_eq!(stored.info.status, Status::Failed);
    assert_eq!(stored.hooks[0].last_run.phase, "Failed");
    assert!(cm(&cluster, "rel-cm").is_none());
    // The next attempt installs again (revision 2) and is not blocked.
    let msg = pending(install_or_upgrade(&ctx, &req(&c, &values), &mut state).unwrap());
    assert!(msg.contains("rel-job"), "{msg}");
    assert_eq!(state.running.as_ref().unwrap().revision, 2);
    assert_eq!(state.running.as_ref().unwrap().action, Action::Install);
}

#[test]
fn history_is_capped_at_max_history() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    let c = chart(&[("cm.yaml", CM)]);
    for i in 0..13 {
        let values = json!({"v": i.to_string()});
        let mut state = ActionState::default();
        done(install_or_upgrade(&ctx, &req(&c, &values), &mut state).unwrap());
    }
    let h = history(&ctx);
    assert_eq!(h.len(), 10);
    assert_eq!(h.first().unwrap().0, 4);
    assert_eq!(
        h.last().unwrap(),
        &(13, Status::Deployed, "Upgrade complete".into())
    );
    assert_eq!(h.iter().filter(|r| r.1 == Status::Deployed).count(), 1);
}

#[test]
fn uninstall_removes_objects_and_every_record() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    let c = chart(&[
        ("cm.yaml", CM),
        ("keep.yaml", KEEP),
        ("deploy.yaml", DEPLOY),
        ("pre.yaml", &hook("pre-del", "pre-delete", 0, None)),
    ]);
    install(&ctx, &c, &json!({}));
    let mut state = ActionState::default();
    done(install_or_upgrade(&ctx, &req(&c, &json!({"v": "2"})), &mut state).unwrap());
    assert_eq!(history(&ctx).len(), 2);
    let before = cluster.ops().len();
    let out = uninstall(&ctx, "rel", "ns", true, &mut state).unwrap();
    let Outcome::Done(Some(rel)) = out else {
        panic!("{out:?}")
    };
    assert_eq!(rel.info.status, Status::Uninstalled);
    assert_eq!(rel.info.description, "Uninstallation complete");
    assert!(state.is_idle());
    assert!(cm(&cluster, "rel-cm").is_none());
    assert!(
        cluster
            .get("apps/v1", "Deployment", Some("ns"), "web")
            .is_none()
    );
    assert!(cm(&cluster, "kept").is_some());
    assert!(cm(&cluster, "pre-del").is_some(), "the pre-delete hook ran");
    assert!(cluster.names("Secret").is_empty());
    // UninstallOrder: the Deployment before the ConfigMap.
    let deletes: Vec<String> = cluster.ops()[before..]
        .iter()
        .filter(|o| o.starts_with("delete ") && !o.contains("Secret") && !o.contains("pre-del"))
        .cloned()
        .collect();
    assert_eq!(
        deletes,
        ["delete Deployment web", "delete ConfigMap rel-cm"]
    );
    assert_eq!(
        uninstall(&ctx, "rel", "ns", false, &mut state).unwrap(),
        Outcome::Done(None)
    );
}

#[test]
fn an_existing_foreign_object_is_refused_unless_taken_over() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    cluster.put(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "rel-cm", "namespace": "ns", "labels": {MANAGED_BY_LABEL: "kubectl"}},
    }));
    let c = chart(&[("cm.yaml", CM)]);
    let values = json!({});
    let mut state = ActionState::default();
    let e = install_or_upgrade(&ctx, &req(&c, &values), &mut state).unwrap_err();
    assert_eq!(
        e.message,
        "rendered manifests contain a resource that already exists. Unable to continue with install: ConfigMap \"rel-cm\" in namespace \"ns\" exists and cannot be imported into the current release: invalid ownership metadata; label validation error: key \"app.kubernetes.io/managed-by\" must equal \"Helm\": current value is \"kubectl\"; annotation validation error: missing key \"meta.helm.sh/release-name\": must be set to \"rel\"; annotation validation error: missing key \"meta.helm.sh/release-namespace\": must be set to \"ns\""
    );
    assert!(e.has_code(codes::FOR_INFO_ONLY));
    assert!(cluster.names("Secret").is_empty(), "no release record");
    let mut r = req(&c, &values);
    r.install.take_ownership = true;
    done(install_or_upgrade(&ctx, &r, &mut state).unwrap());
    let o = cm(&cluster, "rel-cm").unwrap();
    assert_eq!(o["metadata"]["labels"][MANAGED_BY_LABEL], "Helm");
    assert_eq!(o["metadata"]["annotations"][RELEASE_NAME_ANNOTATION], "rel");
}

#[test]
fn a_pending_release_of_someone_else_is_refused_once_then_unblocked() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    let c = chart(&[("cm.yaml", CM)]);
    install(&ctx, &c, &json!({}));
    let st = Storage::new("ns");
    let mut other = st.get(&ctx, "rel", 1).unwrap().unwrap();
    other.version = 2;
    other.set_status(Status::PendingUpgrade, "Preparing upgrade");
    st.create(&ctx, &other).unwrap();
    let values = json!({"v": "3"});
    let mut state = ActionState::default();
    let e = install_or_upgrade(&ctx, &req(&c, &values), &mut state).unwrap_err();
    assert_eq!(e.message, ERR_PENDING);
    assert!(!e.is_unrecoverable());
    assert!(
        st.get(&ctx, "rel", 2).unwrap().is_none(),
        "Landscaper deletes the pending record"
    );
    let rel = done(install_or_upgrade(&ctx, &req(&c, &values), &mut state).unwrap());
    assert_eq!(rel.version, 2);
    assert_eq!(rel.info.status, Status::Deployed);
}

#[test]
fn a_release_in_another_namespace_is_refused() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    let elsewhere = Release {
        name: "rel".into(),
        namespace: "elsewhere".into(),
        version: 1,
        info: Info {
            status: Status::Deployed,
            ..Default::default()
        },
        ..Default::default()
    };
    Storage::new("elsewhere").create(&ctx, &elsewhere).unwrap();
    let c = chart(&[("cm.yaml", CM)]);
    let mut state = ActionState::default();
    let e = install_or_upgrade(&ctx, &req(&c, &json!({})), &mut state).unwrap_err();
    assert!(e.has_code(codes::CONFIGURATION_PROBLEM));
    assert!(
        e.message
            .starts_with("release \"rel\" not found in namespace \"ns\"")
            && e.message.contains("\"elsewhere\""),
        "{}",
        e.message
    );
}

#[test]
fn a_wait_timeout_fails_the_release() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    // Without --timeout, the deadline is the item's remaining progressing time.
    cluster.set_remaining(Some(Duration::from_secs(120)));
    let c = chart(&[("deploy.yaml", DEPLOY)]);
    let values = json!({});
    let mut r = req(&c, &values);
    r.install.wait = true;
    let mut state = ActionState::default();
    pending(install_or_upgrade(&ctx, &r, &mut state).unwrap());
    cluster.advance(Duration::from_secs(60));
    pending(install_or_upgrade(&ctx, &r, &mut state).unwrap());
    // Ready now: done.
    cluster.edit("apps/v1", "Deployment", Some("ns"), "web", |d| {
        d["status"] = json!({"replicas": 1, "updatedReplicas": 1, "availableReplicas": 1});
    });
    done(install_or_upgrade(&ctx, &r, &mut state).unwrap());

    // An upgrade that never gets ready fails at the deadline.
    let c2 = chart(&[("deploy.yaml", &DEPLOY.replace("replicas: 1", "replicas: 2"))]);
    let mut r = req(&c2, &values);
    r.upgrade.wait = true;
    r.upgrade.timeout = Some(Duration::from_secs(30));
    let msg = pending(install_or_upgrade(&ctx, &r, &mut state).unwrap());
    assert!(msg.contains("replicas is 1, want 2"), "{msg}");
    cluster.advance(Duration::from_secs(31));
    let e = install_or_upgrade(&ctx, &r, &mut state).unwrap_err();
    assert!(
        e.message.starts_with("timed out waiting for the condition"),
        "{}",
        e.message
    );
    assert_eq!(e.operation, "UpgradeHelmRelease");
    let h = history(&ctx);
    assert_eq!(h[1].1, Status::Failed);
    assert_eq!(
        h[0].1,
        Status::Deployed,
        "the failed upgrade does not supersede"
    );
}

#[test]
fn template_and_schema_errors_are_configuration_problems() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    let c = chart(&[("bad.yaml", "{{ fail \"boom\" }}")]);
    let mut state = ActionState::default();
    let e = install_or_upgrade(&ctx, &req(&c, &json!({})), &mut state).unwrap_err();
    assert!(e.has_code(codes::CONFIGURATION_PROBLEM), "{e}");
    assert!(e.message.contains("boom"), "{}", e.message);
    let c = chart_with(
        &[("cm.yaml", CM)],
        &[(
            "values.schema.json",
            r#"{"type": "object", "properties": {"v": {"type": "integer"}}}"#,
        )],
    );
    let e = install_or_upgrade(&ctx, &req(&c, &json!({"v": "x"})), &mut state).unwrap_err();
    assert!(e.has_code(codes::CONFIGURATION_PROBLEM), "{e}");
    assert!(cluster.names("Secret").is_empty());
    let values = json!({"v": "x"});
    let mut r = req(&c, &values);
    r.install.skip_schema_validation = true;
    done(install_or_upgrade(&ctx, &r, &mut state).unwrap());
}

#[test]
fn crds_and_the_namespace_are_created_on_install() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n";
    let cr = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n";
    let c = chart_with(&[("cr.yaml", cr)], &[("crds/widget.yaml", crd)]);
    let values = json!({});
    let mut r = req(&c, &values);
    r.install.create_namespace = true;
    let mut state = ActionState::default();
    let rel = done(install_or_upgrade(&ctx, &r, &mut state).unwrap());
    assert!(
        !rel.manifest.contains("CustomResourceDefinition"),
        "CRDs are not part of the release"
    );
    let crd = cluster
        .get(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            None,
            "widgets.example.com",
        )
        .unwrap();
    assert!(
        crd["metadata"]["labels"].is_null(),
        "CRDs are not owned by the release"
    );
    assert_eq!(
        cluster.get("v1", "Namespace", None, "ns").unwrap()["metadata"]["labels"]["name"],
        "ns"
    );
    assert!(
        cluster
            .get("example.com/v1", "Widget", Some("ns"), "w")
            .is_some()
    );
}

#[test]
fn kinds_the_cluster_does_not_serve_fail_before_any_record() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    cluster.unknown_kind("Widget");
    let c = chart(&[(
        "cr.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n",
    )]);
    let mut state = ActionState::default();
    let e = install_or_upgrade(&ctx, &req(&c, &json!({})), &mut state).unwrap_err();
    assert!(
        e.message
            .contains("no matches for kind \"Widget\" in version \"example.com/v1\""),
        "{}",
        e.message
    );
    assert!(cluster.names("Secret").is_empty());
}

#[test]
fn rollback_redeploys_an_earlier_revision() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    let c1 = chart(&[("cm.yaml", CM), ("extra.yaml", EXTRA)]);
    install(&ctx, &c1, &json!({"v": "1"}));
    let c2 = chart(&[("cm.yaml", CM)]);
    let mut state = ActionState::default();
    done(install_or_upgrade(&ctx, &req(&c2, &json!({"v": "2"})), &mut state).unwrap());
    assert!(cm(&cluster, "extra").is_none());
    let rel = done(rollback(&ctx, "rel", "ns", 0, &Flags::default(), &mut state).unwrap());
    assert_eq!(rel.version, 3);
    assert_eq!(rel.info.description, "Rollback to 1");
    assert_eq!(rel.config, json!({"v": "1"}));
    assert_eq!(
        history(&ctx).iter().map(|h| h.1).collect::<Vec<_>>(),
        [Status::Superseded, Status::Superseded, Status::Deployed]
    );
    assert!(cm(&cluster, "extra").is_some());
    assert_eq!(cm(&cluster, "rel-cm").unwrap()["data"]["v"], "1");
}

#[test]
fn a_transient_error_is_retried_without_losing_the_action() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    cluster.fail("patch", "rel-cm", "ServiceUnavailable");
    let c = chart(&[("cm.yaml", CM)]);
    let values = json!({});
    let mut state = ActionState::default();
    let msg = pending(install_or_upgrade(&ctx, &req(&c, &values), &mut state).unwrap());
    assert!(
        msg.starts_with("retrying after error: failed to apply"),
        "{msg}"
    );
    assert_eq!(state.running.as_ref().unwrap().stage, Stage::Apply);
    let json = serde_json::to_value(&state).unwrap();
    assert_eq!(json["running"]["stage"], json!({"name": "apply"}));
    assert_eq!(json["running"]["action"], "install");
}

#[test]
fn an_abandoned_action_does_not_block_the_next_one() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    let c = chart(&[("cm.yaml", CM), ("job.yaml", JOB)]);
    let values = json!({});
    let mut state = ActionState::default();
    pending(install_or_upgrade(&ctx, &req(&c, &values), &mut state).unwrap());
    abandon(&ctx, &mut state, "a new job started").unwrap();
    assert!(state.is_idle());
    let h = history(&ctx);
    assert_eq!(h[0].1, Status::Failed);
    assert_eq!(
        h[0].2,
        "Release \"rel\" failed: abandoned: a new job started"
    );
    let c2 = chart(&[("cm.yaml", CM)]);
    let rel = done(install_or_upgrade(&ctx, &req(&c2, &values), &mut state).unwrap());
    assert_eq!((rel.version, rel.info.status), (2, Status::Deployed));
}

#[test]
fn ports_without_protocol_get_tcp_for_server_side_apply_on_old_servers() {
    let mut svc = json!({"kind": "Service", "spec": {"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]}});
    default_port_protocols(&mut svc);
    assert_eq!(svc["spec"]["ports"][0]["protocol"], "TCP");
    assert_eq!(svc["spec"]["ports"][1]["protocol"], "UDP");
    let mut deploy = json!({"kind": "Deployment", "spec": {"template": {"spec": {
        "containers": [{"name": "c", "ports": [{"containerPort": 80}]}],
        "initContainers": [{"name": "i"}]}}}});
    default_port_protocols(&mut deploy);
    assert_eq!(
        deploy["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"],
        "TCP"
    );
    let mut cron = json!({"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": {
        "containers": [{"name": "c", "ports": [{"containerPort": 8080}]}]}}}}}});
    default_port_protocols(&mut cron);
    assert_eq!(
        cron.pointer("/spec/jobTemplate/spec/template/spec/containers/0/ports/0/protocol"),
        Some(&json!("TCP"))
    );
    let mut cm = json!({"kind": "ConfigMap", "data": {"a": "b"}});
    default_port_protocols(&mut cm);
    assert_eq!(cm, json!({"kind": "ConfigMap", "data": {"a": "b"}}));
}

#[test]
fn documents_are_cut_as_kubernetes_yaml_reader_cuts_them() {
    let docs = yaml_documents("---\n# Source: a\nx: |\n  s\n\n---   # c\ny: 1\n---\n").unwrap();
    assert_eq!(docs, ["# Source: a\nx: |\n  s\n\n", "y: 1\n"]);
    assert!(yaml_documents("a: 1\n--- b: 2\n").is_err());
}

#[test]
fn a_script_that_ends_a_template_keeps_its_final_newline_as_helm_install_applies_it() {
    let cluster = FakeCluster::new();
    let ctx = Ctx::native(&cluster);
    // As bitnami's scripts ConfigMaps: the block scalar is followed by the template's `---`.
    let scripts = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: rel-scripts\ndata:\n  start.sh: |\n    #!/bin/sh\n    exec server\n---\n";
    let c = chart(&[("scripts.yaml", scripts)]);
    let mut state = ActionState::default();
    done(install_or_upgrade(&ctx, &req(&c, &json!({})), &mut state).unwrap());
    assert_eq!(
        cm(&cluster, "rel-scripts").unwrap()["data"]["start.sh"],
        "#!/bin/sh\nexec server\n"
    );
}
