//! Day two of a Helm release (with `helm_day_two.rs`): what a chart reads from the cluster it is installed on. Helm
//! (and Landscaper's helm deployer, in release mode and in template mode) serves `lookup` from
//! the target cluster and fills `.Capabilities` from its `/version` and discovery; charts rely
//! on both — bitnami's `common.secrets.passwords.manage` keeps a generated password across
//! upgrades by looking up its Secret, and charts pick `autoscaling/v2` or `policy/v1` only when
//! the cluster serves them. Every story runs real Go Helm (PyPI `helm-python-sdk`) on the same
//! API server as the oracle. Runs on both backends (the embedded server reports v1.33 and serves
//! `autoscaling/v2` and `policy/v1`; the real kube-apiserver 1.20 serves `autoscaling/v2beta2`
//! and `policy/v1beta1` only).

use std::path::{Path, PathBuf};
use std::time::Duration;

use deployer_host::config::HostConfig;
use deployer_host::landscaper::{DeployItem, Phase};
use manifest::{create, get, put, set_config, wait_done, wait_next_job};
use serde_json::{Value, json};
use test_support::chart_repo::package;
use test_support::manifest;
use test_support::real_helm::RealHelm;
use test_support::{Harness, Options};

const TYPE: &str = "landscaper.gardener.cloud/helm";
const API_VERSION: &str = "helm.deployer.landscaper.gardener.cloud/v1alpha1";

async fn harness() -> Harness {
    Harness::start_with(Options {
        config: HostConfig {
            requeue_interval: Some("200ms".into()),
            ..HostConfig::default()
        },
        ..Options::default()
    })
    .await
}

/// A helm DeployItem on the harness' `default` Target installing release `release` of the chart
/// in `dir` (as an inline archive); `helm_deployment: false` is Landscaper's template mode.
fn item(
    name: &str,
    release: &str,
    dir: &Path,
    namespace: &str,
    values: Value,
    helm_deployment: bool,
) -> Value {
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::STANDARD.encode(package(dir, "0.1.0"));
    json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": TYPE, "target": {"name": "default", "namespace": "default"},
                 "timeout": "120s",
                 "config": {
                     "apiVersion": API_VERSION, "kind": "ProviderConfiguration",
                     "name": release, "namespace": namespace, "createNamespace": true,
                     "helmDeployment": helm_deployment,
                     "chart": {"archive": {"raw": raw}},
                     "values": values,
                     "readinessChecks": {"disableDefault": true},
                 }}
    })
}

fn assert_succeeded(item: &DeployItem) {
    let s = item.status();
    assert_eq!(s.phase, Phase::Succeeded, "{:?}", s.last_error);
}

/// Starts a new job of item `name` with `config` and waits until it has finished.
async fn reconfigure(h: &Harness, name: &str, item: &Value) -> DeployItem {
    let old = set_config(h, name, &item["spec"]["config"]).await;
    let done = wait_next_job(h, name, &old).await;
    assert_succeeded(&done);
    done
}

/// `op` (install / upgrade) of `dir` as release `name` in `namespace` by real Helm: what Helm
/// answered; `None`: Helm is not installed.
async fn helm_answer(
    helm: &RealHelm,
    op: &str,
    dir: &Path,
    name: &str,
    namespace: &str,
    values: Value,
) -> Option<Value> {
    helm.run(
        json!({"op": op, "chart": dir, "name": name, "namespace": namespace, "values": values}),
    )
    .await
}

/// [`helm_answer`], asserting Helm did not refuse; false: Helm is not installed.
async fn helm_run(
    helm: &RealHelm,
    op: &str,
    dir: &Path,
    name: &str,
    namespace: &str,
    values: Value,
) -> bool {
    helm.ok(json!({"op": op, "chart": dir, "name": name, "namespace": namespace, "values": values}))
        .await
        .is_some()
}

async fn secret_value(h: &Harness, namespace: &str, name: &str, key: &str) -> String {
    let s = get(h, "v1", "Secret", Some(namespace), name)
        .await
        .unwrap_or_else(|| panic!("Secret {namespace}/{name}"));
    s["data"][key].as_str().unwrap_or_default().to_string()
}

fn postgresql() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/charts/bitnami/postgresql")
}

/// PostgreSQL, standalone, no volume; no PodDisruptionBudget, which this chart always writes as
/// `policy/v1` (kube-apiserver 1.20 serves `policy/v1beta1` only). Its `postgres-password` is
/// `common.secrets.lookup` of its own Secret, else `randAlphaNum 10`.
fn postgresql_values(revision: &str) -> Value {
    json!({"architecture": "standalone",
           "primary": {"persistence": {"enabled": false}, "pdb": {"create": false}},
           "commonLabels": {"revision": revision}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_bitnami_postgresql_with_a_generated_password_when_installed_and_upgraded_twice_then_the_password_never_changes_as_with_real_helm()
 {
    let h = harness().await;
    let helm = RealHelm::for_harness(&h).await;
    let chart = postgresql();

    // Real Helm first, the oracle: install, upgrade, upgrade. Not on kube-apiserver 1.20:
    // Helm 4 (helm-python-sdk) installs with server-side apply, which 1.20 refuses for this
    // chart's Services ("associative list with keys has an element that omits key field
    // \"protocol\""); the `facts` story below has real Helm as the oracle for lookup there.
    if test_support::backend() == test_support::Backend::Embedded {
        let mut oracle = Vec::new();
        for (i, rev) in ["1", "2", "3"].iter().enumerate() {
            let op = if i == 0 { "install" } else { "upgrade" };
            if !helm_run(&helm, op, &chart, "db", "oracle", postgresql_values(rev)).await {
                return;
            }
            oracle.push(secret_value(&h, "oracle", "db-postgresql", "postgres-password").await);
        }
        assert!(!oracle[0].is_empty());
        assert!(
            oracle.iter().all(|p| *p == oracle[0]),
            "real Helm keeps the password: {oracle:?}"
        );
    } else {
        eprintln!(
            "SKIP the real-Helm half on the real API server (Helm 4 server-side apply vs 1.20)"
        );
    }

    // The same with a DeployItem in each mode.
    for (mode, release_mode) in [("release", true), ("template", false)] {
        let name = format!("db-{mode}");
        let ns = format!("ours-{mode}");
        // A release name is one per cluster for the helm deployer, so each has its own.
        let secret = format!("{name}-postgresql");
        let secret = secret.as_str();
        create(
            &h,
            &item(
                &name,
                &name,
                &chart,
                &ns,
                postgresql_values("1"),
                release_mode,
            ),
        )
        .await;
        assert_succeeded(&wait_done(&h, &name).await);
        let first = secret_value(&h, &ns, secret, "postgres-password").await;
        assert!(!first.is_empty());
        for rev in ["2", "3"] {
            let next = item(
                &name,
                &name,
                &chart,
                &ns,
                postgresql_values(rev),
                release_mode,
            );
            reconfigure(&h, &name, &next).await;
            let labels = get(&h, "v1", "Secret", Some(&ns), secret).await.unwrap();
            assert_eq!(
                labels["metadata"]["labels"]["revision"], rev,
                "{mode}: upgraded"
            );
            assert_eq!(
                secret_value(&h, &ns, secret, "postgres-password").await,
                first,
                "{mode} mode: the password Secret never changes, as with real Helm"
            );
        }
    }
}

/// A chart that reports what it read from the cluster in a ConfigMap, and emits objects gated on
/// what the cluster serves.
fn facts_chart() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("facts");
    std::fs::create_dir_all(root.join("templates")).unwrap();
    std::fs::write(
        root.join("Chart.yaml"),
        "apiVersion: v2\nname: facts\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(root.join("values.yaml"), "round: \"1\"\n").unwrap();
    let facts = r#"{{- $probe := lookup "v1" "ConfigMap" .Release.Namespace "probe" }}
{{- $list := lookup "v1" "ConfigMap" .Release.Namespace "" }}
{{- $ns := lookup "v1" "Namespace" "" .Release.Namespace }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-facts
data:
  round: {{ .Values.round | quote }}
  probe: {{ $probe.data.value | quote }}
  probeLabels: {{ $probe.metadata.labels | toJson | quote }}
  missing: {{ lookup "v1" "ConfigMap" .Release.Namespace "not-there" | toJson | quote }}
  wrongScope: {{ lookup "v1" "ConfigMap" "" "probe" | toJson | quote }}
  listKind: {{ $list.kind | quote }}
  listApiVersion: {{ $list.apiVersion | quote }}
  listNames: {{ range $list.items }}{{ if not (hasPrefix $.Release.Name .metadata.name) }}{{ .metadata.name }},{{ end }}{{ end }}
  namespace: {{ $ns.metadata.name | quote }}
  kubeVersion: {{ .Capabilities.KubeVersion.Version | quote }}
  kubeMajor: {{ .Capabilities.KubeVersion.Major | quote }}
  kubeMinor: {{ .Capabilities.KubeVersion.Minor | quote }}
  atLeast121: {{ semverCompare ">=1.21-0" .Capabilities.KubeVersion.Version | quote }}
  widgets: {{ .Capabilities.APIVersions.Has "facts.example.com/v1" | quote }}
  widgetKind: {{ .Capabilities.APIVersions.Has "facts.example.com/v1/Widget" | quote }}
  hpa: {{ include "facts.hpa" . | quote }}
  pdb: {{ include "facts.pdb" . | quote }}
"#;
    std::fs::write(root.join("templates/facts.yaml"), facts).unwrap();
    let helpers = r#"{{- define "facts.hpa" -}}
{{- if .Capabilities.APIVersions.Has "autoscaling/v2" -}}autoscaling/v2{{- else -}}autoscaling/v2beta2{{- end -}}
{{- end -}}
{{- define "facts.pdb" -}}
{{- if .Capabilities.APIVersions.Has "policy/v1/PodDisruptionBudget" -}}policy/v1{{- else -}}policy/v1beta1{{- end -}}
{{- end -}}
"#;
    std::fs::write(root.join("templates/_helpers.tpl"), helpers).unwrap();
    let gated = r#"apiVersion: {{ include "facts.hpa" . }}
kind: HorizontalPodAutoscaler
metadata:
  name: {{ .Release.Name }}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: {{ .Release.Name }}}
  minReplicas: 1
  maxReplicas: 3
---
apiVersion: {{ include "facts.pdb" . }}
kind: PodDisruptionBudget
metadata:
  name: {{ .Release.Name }}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: {{ .Release.Name }}}}
{{- if .Capabilities.APIVersions.Has "facts.example.com/v1" }}
---
apiVersion: facts.example.com/v1
kind: Widget
metadata:
  name: {{ .Release.Name }}
spec:
  size: 3
{{- end }}
"#;
    std::fs::write(root.join("templates/gated.yaml"), gated).unwrap();
    dir
}

const WIDGET_CRD: &str = r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "widgets.facts.example.com"},
  "spec": {"group": "facts.example.com", "scope": "Namespaced",
           "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
           "versions": [{"name": "v1", "served": true, "storage": true,
                         "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}"#;

async fn probe(h: &Harness, namespace: &str) {
    put(
        h,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
    )
    .await;
    put(
        h,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "probe", "namespace": namespace, "labels": {"team": "db"}},
                "data": {"value": "from-the-cluster"}}),
    )
    .await;
}

async fn facts(h: &Harness, namespace: &str, release: &str) -> Value {
    let cm = get(
        h,
        "v1",
        "ConfigMap",
        Some(namespace),
        &format!("{release}-facts"),
    )
    .await
    .unwrap_or_else(|| panic!("facts of {namespace}/{release}"));
    cm["data"].clone()
}

/// Whether `kind` `namespace/name` can be read at `api_version`.
async fn exists_at(
    h: &Harness,
    api_version: &str,
    kind: &str,
    namespace: &str,
    name: &str,
) -> bool {
    get(h, api_version, kind, Some(namespace), name)
        .await
        .is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_chart_reading_the_cluster_when_installed_by_items_and_by_real_helm_then_lookup_and_capabilities_render_alike_and_a_new_crd_opens_its_gate()
 {
    let h = harness().await;
    let helm = RealHelm::for_harness(&h).await;
    let dir = facts_chart();
    let chart = dir.path().join("facts");
    let server = h.client.apiserver_version().await.unwrap();
    let served = |gv: &str| {
        let gv = gv.to_string();
        let client = h.client.clone();
        async move {
            let (g, v) = gv.split_once('/').unwrap();
            client
                .list_api_group_resources(&format!("{g}/{v}"))
                .await
                .is_ok()
        }
    };
    let serves_hpa_v2 = served("autoscaling/v2").await;
    let serves_pdb_v1 = served("policy/v1").await;

    for ns in ["oracle", "ours-release", "ours-template"] {
        probe(&h, ns).await;
    }
    // Round 1: no Widget CRD yet.
    if !helm_run(
        &helm,
        "install",
        &chart,
        "facts",
        "oracle",
        json!({"round": "1"}),
    )
    .await
    {
        return;
    }
    create(
        &h,
        &item(
            "facts-r",
            "facts-r",
            &chart,
            "ours-release",
            json!({"round": "1"}),
            true,
        ),
    )
    .await;
    create(
        &h,
        &item(
            "facts-t",
            "facts-t",
            &chart,
            "ours-template",
            json!({"round": "1"}),
            false,
        ),
    )
    .await;
    assert_succeeded(&wait_done(&h, "facts-r").await);
    assert_succeeded(&wait_done(&h, "facts-t").await);

    let oracle = facts(&h, "oracle", "facts").await;
    assert_eq!(oracle["probe"], "from-the-cluster", "{oracle}");
    assert_eq!(oracle["kubeVersion"], server.git_version.as_str());
    assert_eq!(oracle["kubeMinor"], server.minor.as_str());
    assert_eq!(oracle["widgets"], "false");
    let expected_hpa = if serves_hpa_v2 {
        "autoscaling/v2"
    } else {
        "autoscaling/v2beta2"
    };
    let expected_pdb = if serves_pdb_v1 {
        "policy/v1"
    } else {
        "policy/v1beta1"
    };
    assert_eq!(oracle["hpa"], expected_hpa);
    assert_eq!(oracle["pdb"], expected_pdb);
    for (ns, release) in [("ours-release", "facts-r"), ("ours-template", "facts-t")] {
        let mut ours = facts(&h, ns, release).await;
        // The namespace's name differs by construction; everything else is what Helm read.
        assert_eq!(ours["namespace"], ns);
        ours["namespace"] = oracle["namespace"].clone();
        assert_eq!(ours, oracle, "{ns}: rendered as real Helm renders it");
        assert!(exists_at(&h, expected_hpa, "HorizontalPodAutoscaler", ns, release).await);
        assert!(exists_at(&h, expected_pdb, "PodDisruptionBudget", ns, release).await);
    }

    // Round 2: the Widget CRD appears; the next render of each sees the group and the Widget.
    put(&h, serde_json::from_str(WIDGET_CRD).unwrap()).await;
    for _ in 0..60 {
        if served("facts.example.com/v1").await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        helm_run(
            &helm,
            "upgrade",
            &chart,
            "facts",
            "oracle",
            json!({"round": "2"})
        )
        .await
    );
    reconfigure(
        &h,
        "facts-r",
        &item(
            "facts-r",
            "facts-r",
            &chart,
            "ours-release",
            json!({"round": "2"}),
            true,
        ),
    )
    .await;
    reconfigure(
        &h,
        "facts-t",
        &item(
            "facts-t",
            "facts-t",
            &chart,
            "ours-template",
            json!({"round": "2"}),
            false,
        ),
    )
    .await;
    let oracle = facts(&h, "oracle", "facts").await;
    assert_eq!(oracle["widgets"], "true", "{oracle}");
    assert_eq!(oracle["widgetKind"], "true", "{oracle}");
    assert!(
        get(
            &h,
            "facts.example.com/v1",
            "Widget",
            Some("oracle"),
            "facts"
        )
        .await
        .is_some()
    );
    for (ns, release) in [("ours-release", "facts-r"), ("ours-template", "facts-t")] {
        let mut ours = facts(&h, ns, release).await;
        ours["namespace"] = oracle["namespace"].clone();
        assert_eq!(ours, oracle, "{ns}: after the CRD, as real Helm");
        assert!(
            get(&h, "facts.example.com/v1", "Widget", Some(ns), release)
                .await
                .is_some(),
            "{ns}: the gated Widget is installed"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_lookup_of_a_kind_the_cluster_does_not_serve_when_reconciled_then_the_item_fails_with_real_helms_error()
 {
    let h = harness().await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("bad");
    std::fs::create_dir_all(root.join("templates")).unwrap();
    std::fs::write(
        root.join("Chart.yaml"),
        "apiVersion: v2\nname: bad\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(
        root.join("templates/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\ndata:\n  x: {{ lookup \"nothere.example.com/v1\" \"Thing\" \"\" \"x\" | toJson | quote }}\n",
    )
    .unwrap();
    const HELMS_ERROR: &str = "error calling lookup: unable to get apiresource from unstructured: nothere.example.com/v1, Kind=Thing: the server could not find the requested resource";
    let helm = RealHelm::for_harness(&h).await;
    if let Some(out) = helm_answer(&helm, "install", &root, "bad", "bad-oracle", json!({})).await {
        let e = out["error"].as_str().unwrap_or_default();
        assert!(e.contains(HELMS_ERROR), "real Helm: {e}");
    }
    for (name, release_mode) in [("bad-r", true), ("bad-t", false)] {
        create(&h, &item(name, name, &root, name, json!({}), release_mode)).await;
        let done = wait_done(&h, name).await;
        let s = done.status();
        assert_eq!(s.phase, Phase::Failed, "{name}");
        let e = s.last_error.clone().unwrap();
        assert!(e.message.contains(HELMS_ERROR), "{name}: {}", e.message);
    }
}
