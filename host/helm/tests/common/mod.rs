//! Shared corpus definition and oracle runner (used by `tests/corpus.rs` and `benches/render.rs`).
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Aggregate object pass rate the corpus test asserts (what really passes today).
pub const CORPUS_MIN_RATE: f64 = 0.99;

/// A corpus chart with values that make its output repeatable.
pub struct Case {
    pub id: &'static str,
    /// path relative to the repository root
    pub chart: &'static str,
    /// values (JSON, also valid YAML)
    pub values: &'static str,
}

pub const CASES: &[Case] = &[
    Case {
        id: "nginx",
        chart: "../shared/charts/bitnami/nginx",
        values: r#"{"tls":{"enabled":false}}"#,
    },
    Case {
        id: "postgresql",
        chart: "../shared/charts/bitnami/postgresql",
        values: r#"{"auth":{"postgresPassword":"pgpass","password":"userpass","replicationPassword":"replpass"},"tls":{"enabled":false}}"#,
    },
    Case {
        id: "redis",
        chart: "../shared/charts/bitnami/redis",
        values: r#"{"auth":{"password":"redispass"},"tls":{"enabled":false}}"#,
    },
    Case {
        id: "mariadb",
        chart: "../shared/charts/bitnami/mariadb",
        values: r#"{"auth":{"rootPassword":"rootpass","password":"userpass","replicationPassword":"replpass"},"tls":{"enabled":false}}"#,
    },
    Case {
        id: "memcached",
        chart: "../shared/charts/bitnami/memcached",
        values: r#"{"auth":{"password":"mcpass"}}"#,
    },
    Case {
        id: "wordpress",
        chart: "../shared/charts/bitnami/wordpress",
        values: r#"{"wordpressPassword":"wppass","mariadb":{"enabled":false},"memcached":{"enabled":false},"externalDatabase":{"password":"dbpass"}}"#,
    },
    Case {
        id: "argo-cd",
        chart: "../shared/charts/bitnami/argo-cd",
        values: r#"{"config":{"secret":{"argocdServerAdminPassword":"adminpass"}},"redis":{"auth":{"password":"redispass"}},"server":{"ingress":{"tls":false}}}"#,
    },
    Case {
        id: "cert-manager",
        chart: "../shared/charts/bitnami/cert-manager",
        values: r#"{}"#,
    },
    Case {
        id: "kube-prometheus",
        chart: "../shared/charts/bitnami/kube-prometheus",
        values: r#"{}"#,
    },
    Case {
        id: "ingress-nginx",
        chart: "../shared/charts/ingress-nginx",
        values: r#"{}"#,
    },
    // Public charts in `../shared/charts/corpus/` (each NOTICE names its source and commit).
    Case {
        id: "node-exporter",
        chart: "../shared/charts/corpus/prometheus-node-exporter",
        values: r#"{"commonLabels":{"foo":"bar","baz":"{{ include \"prometheus-node-exporter.fullname\" . }}"},"podLabels":{"baz":"{{ .Chart.AppVersion }}"},"networkPolicy":{"enabled":true,"ingress":[{"ports":[{"port":9100}]}]},"prometheus":{"monitor":{"enabled":true}},"kubeRBACProxy":{"enabled":true},"verticalPodAutoscaler":{"enabled":true}}"#,
    },
    Case {
        id: "kube-state-metrics",
        chart: "../shared/charts/corpus/kube-state-metrics",
        values: r#"{"selfMonitor":{"enabled":true},"prometheus":{"monitor":{"enabled":true,"additionalLabels":{"release":"prometheus"},"http":{"interval":"30s","honorLabels":true,"relabelings":[{"sourceLabels":["__meta_kubernetes_pod_node_name"],"targetLabel":"node"}]}}},"customResourceState":{"enabled":true,"config":{"spec":{"resources":[{"groupVersionKind":{"group":"apiextensions.k8s.io","version":"v1","kind":"CustomResourceDefinition"},"metricNamePrefix":"ksm_ci_crd","metrics":[{"name":"info","help":"Info metric.","each":{"type":"Info","info":{"labelsFromPath":{"name":["metadata","name"]}}}}]}]}}},"networkPolicy":{"enabled":true},"podDisruptionBudget":{"minAvailable":1},"kubeRBACProxy":{"enabled":true}}"#,
    },
    Case {
        id: "pushgateway",
        chart: "../shared/charts/corpus/prometheus-pushgateway",
        values: r#"{"runAsStatefulSet":true,"persistentVolume":{"enabled":true,"size":"1Gi"},"persistentVolumeLabels":{"foo":"bar"},"podLabels":{"foo":"bar"},"serviceMonitor":{"enabled":true},"ingress":{"enabled":true,"hosts":["pushgateway.example.com"]},"route":{"main":{"enabled":true,"hostnames":["an.example.com"],"parentRefs":[{"name":"contour"}]}},"networkPolicy":{"allowAll":true},"podDisruptionBudget":{"maxUnavailable":1},"extraManifests":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"pushgateway-extra"},"data":{"name":"{{ include \"prometheus-pushgateway.fullname\" . }}"}}]}"#,
    },
    Case {
        id: "blackbox-exporter",
        chart: "../shared/charts/corpus/prometheus-blackbox-exporter",
        values: r#"{"myDomain":"tpl.com","configReloader":{"enabled":true},"ingress":{"enabled":true},"networkPolicy":{"enabled":true},"podDisruptionBudget":{"maxUnavailable":1},"serviceMonitor":{"enabled":true,"targets":[{"name":"example-tpl","url":"http://example.{{ .Values.myDomain }}/healthz"},{"name":"example-non-tpl","url":"http://example.non-tpl.com/healthz"}]},"prometheusRule":{"enabled":true,"rules":[{"alert":"BlackboxProbeFailed","expr":"probe_success == 0","for":"5m"}]},"extraEnv":[{"name":"NO_PROXY","value":"localhost"}]}"#,
    },
    Case {
        id: "alertmanager",
        chart: "../shared/charts/corpus/alertmanager",
        values: r#"{"configmapReload":{"enabled":true},"ingress":{"enabled":true,"labels":{"foo":"bar"}},"serviceMonitor":{"enabled":true,"additionalLabels":{"release":"prometheus"}},"podDisruptionBudget":{"maxUnavailable":1},"servicePerReplica":{"enabled":true},"replicaCount":2,"route":{"main":{"enabled":true,"hostnames":["an.example.com"],"parentRefs":[{"name":"contour"}]}}}"#,
    },
    Case {
        id: "metrics-server",
        chart: "../shared/charts/corpus/metrics-server",
        values: r#"{"args":["--kubelet-insecure-tls"],"apiService":{"insecureSkipTLSVerify":false},"tls":{"type":"cert-manager"},"metrics":{"enabled":true},"serviceMonitor":{"enabled":true},"podDisruptionBudget":{"enabled":true,"minAvailable":1},"addonResizer":{"enabled":true}}"#,
    },
    Case {
        id: "node-exporter-tls",
        chart: "../shared/charts/corpus/prometheus-node-exporter",
        // upstream ci/: kube-rbac-proxy-tlssecret-values.yaml, service-labels-values.yaml, serviceport-values.yaml (extraManifests: a small string manifest instead of the test certificate)
        values: r#"{"fullnameOverride":"prometheus-node-exporter","kubeRBACProxy":{"enabled":true,"tls":{"enabled":true,"tlsClientAuth":true}},"tlsSecret":{"enabled":true,"caItem":"client-ca.crt","secretName":"{{ include \"prometheus-node-exporter.fullname\" . }}-tls","volumeName":"{{ include \"prometheus-node-exporter.fullname\" . }}-tls"},"extraManifests":["apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: '{{ include \"prometheus-node-exporter.fullname\" . }}-extra'\ndata:\n  app: {{ .Chart.AppVersion | quote }}\n"],"service":{"servicePort":80}}"#,
    },
    Case {
        id: "ksm-crs-only",
        chart: "../shared/charts/corpus/kube-state-metrics",
        // upstream ci/: 02-custom-resource-state-only-values.yaml
        values: r#"{"collectors":[],"extraArgs":["--custom-resource-state-only=true"],"customResourceState":{"enabled":true,"config":{"spec":{"resources":[{"groupVersionKind":{"group":"apiextensions.k8s.io","version":"v1","kind":"CustomResourceDefinition"},"metricNamePrefix":"ksm_ci_crd","metrics":[{"name":"info","help":"Info metric for CustomResourceDefinition objects.","each":{"type":"Info","info":{"labelsFromPath":{"name":["metadata","name"]}}}}]}]}}}}"#,
    },
    Case {
        id: "pushgateway-deploy",
        chart: "../shared/charts/corpus/prometheus-pushgateway",
        // upstream ci/: persistence-values.yaml, extramanifests-values.yaml, lifecycle-values.yaml, httproute-values.yaml, automount-sa-token-values.yaml
        values: r#"{"persistentVolume":{"enabled":true,"size":"1Gi"},"persistentVolumeLabels":{"foo":"bar","baz":"qux"},"extraManifests":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"foo":"bar"},"name":"pushgateway-extra-cm-first"},"data":{"FOO":"bar"}},{"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"baz":"qux"},"name":"pushgateway-extra-cm-second"},"data":{"pushgateway.txt":"{{ include \"prometheus-pushgateway.fullname\" . }}"},"immutable":true}],"lifecycle":{"preStop":{"exec":{"command":["/bin/sh","-c","sleep 10"]}}},"route":{"main":{"enabled":true,"labels":{"foo":"bar","baz":"qux"},"hostnames":["an.example.com"],"parentRefs":[{"name":"contour"}],"filters":[{"type":"RequestHeaderModifier","requestHeaderModifier":{"set":[{"name":"my-header-name","value":"my-new-header-value"}]}}],"additionalRules":[{"filters":[{"type":"RequestHeaderModifier","requestHeaderModifier":{"remove":["x-request-id"]}}]}]}},"automountServiceAccountToken":false}"#,
    },
    Case {
        id: "blackbox-daemonset",
        chart: "../shared/charts/corpus/prometheus-blackbox-exporter",
        // upstream ci/: daemonset-values.yml, secret-values.yaml, hostAliases.yml, httproute-values.yml
        values: r#"{"kind":"DaemonSet","secretConfig":true,"hostAliases":[{"ip":"192.168.1.1","hostNames":["test.example.com","another.example.net"]},{"ip":"192.168.1.2","hostNames":["test2.example.com","another2.example.net"]}],"route":{"main":{"enabled":true,"hostnames":["an.example.com"],"parentRefs":[{"name":"contour"}],"filters":[{"type":"RequestHeaderModifier","requestHeaderModifier":{"set":[{"name":"my-header-name","value":"my-new-header-value"}]}}],"additionalRules":[{"filters":[{"type":"RequestHeaderModifier","requestHeaderModifier":{"remove":["x-request-id"]}}]}]}}}"#,
    },
    Case {
        id: "alertmanager-routes",
        chart: "../shared/charts/corpus/alertmanager",
        // upstream ci/: 05-ingress-and-gateway-routes-values.yaml, config-reload-values.yaml
        values: r#"{"route":{"http":{"enabled":true,"apiVersion":"gateway.networking.k8s.io/v1","parentRefs":[{"name":"gateway-1","namespace":"gateway-1","sectionName":"http"}],"hostnames":["alertmanager.example.com"],"matches":[{"path":{"type":"PathPrefix","value":"/"}}],"httpsRedirect":true},"https":{"enabled":true,"apiVersion":"gateway.networking.k8s.io/v1","parentRefs":[{"name":"gateway-1","namespace":"gateway-1","sectionName":"https"}],"hostnames":["alertmanager.example.com"],"matches":[{"path":{"type":"PathPrefix","value":"/"}}]}},"configmapReload":{"enabled":true,"extraArgs":{"listen-address":":8080"},"livenessProbe":{"httpGet":{"path":"/healthz","port":8080,"scheme":"HTTP"}},"readinessProbe":{"httpGet":{"path":"/healthz","port":8080,"scheme":"HTTP"}}}}"#,
    },
    Case {
        id: "metrics-server-secret",
        chart: "../shared/charts/corpus/metrics-server",
        // upstream ci/: tls-existingSecret-values.yaml
        values: r#"{"args":["--kubelet-insecure-tls"],"tls":{"type":"existingSecret","existingSecret":{"name":"metrics-server-existing"}}}"#,
    },
    Case {
        id: "grafana",
        chart: "../shared/charts/corpus/grafana",
        values: r#"{"adminPassword":"adminpass"}"#,
    },
    Case {
        id: "grafana-features",
        chart: "../shared/charts/corpus/grafana",
        // upstream ci/: with-nondefault-values.yaml, with-dashboard-values.yaml, with-persistence.yaml,
        // with-extraconfigmapmounts-values.yaml, plus a fixed admin password and the ServiceMonitor
        values: r#"{"global":{"environment":"prod"},"ingress":{"enabled":true,"hosts":["monitoring-{{ .Values.global.environment }}.example.com"]},"route":{"main":{"enabled":true,"labels":{"app":"monitoring-prometheus"},"hostnames":["*.example.com","{{ .Values.global.environment }}.example.com"],"filters":[{"type":"RequestHeaderModifier","requestHeaderModifier":{"set":[{"name":"my-header-name","value":"my-new-header-value"}]}}],"additionalRules":[{"filters":[{"type":"RequestHeaderModifier","requestHeaderModifier":{"set":[{"name":"my-header-name","value":"my-new-header-value"}]}}],"matches":[{"path":{"type":"PathPrefix","value":"/foo/"}}]}]}},"dashboards":{"my-provider":{"my-awesome-dashboard":{"gnetId":10000,"revision":1,"datasource":"Prometheus"}}},"dashboardProviders":{"dashboardproviders.yaml":{"apiVersion":1,"providers":[{"name":"my-provider","orgId":1,"folder":"","type":"file","updateIntervalSeconds":10,"disableDeletion":true,"editable":true,"options":{"path":"/var/lib/grafana/dashboards/my-provider"}}]}},"persistence":{"type":"pvc","enabled":true},"extraConfigmapMounts":[{"name":"{{ include \"grafana.fullname\" . }}","configMap":"{{ include \"grafana.fullname\" . }}","mountPath":"/var/lib/grafana/dashboards/test-dashboard.json","subPath":"grafana.ini","readOnly":true}],"adminPassword":"adminpass","serviceMonitor":{"enabled":true}}"#,
    },
];

/// Whether the case's chart is on disk: every chart lives in `../shared/charts`, beside the
/// repository, not in it. Missing: SKIP locally, a failure in CI (`CI=true`), where `../shared`
/// is always there.
pub fn available(case: &Case) -> bool {
    let path = repo_root().join(case.chart);
    if path.exists() {
        return true;
    }
    skip(format!("chart {} not found at {}", case.id, path.display()));
    false
}

/// The repository root: the workspace directory above the crate that includes this file
/// (helm-engine's tests and benches, and the host's helm benchmark).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("Cargo.lock").exists())
        .expect("a workspace root with Cargo.lock")
        .to_path_buf()
}

fn python() -> PathBuf {
    if let Ok(p) = std::env::var("HELM_ORACLE_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = repo_root().join("target/helm-venv/bin/python");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

fn fnv(s: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// Runs (or reads cached) oracle results for all cases; `None` means SKIP (reason printed).
pub fn oracle(repeat: usize) -> Option<serde_json::Value> {
    for c in CASES.iter().filter(|c| !available(c)) {
        skip(format!(
            "corpus chart {} not found at {}",
            c.id,
            repo_root().join(c.chart).display()
        ));
    }
    let jobs: Vec<serde_json::Value> = CASES
        .iter()
        .filter(|c| available(c))
        .map(|c| {
            serde_json::json!({
                "id": c.id,
                "chart": repo_root().join(c.chart).canonicalize().unwrap_or_else(|_| repo_root().join(c.chart)).display().to_string(),
                "name": "release-name",
                "namespace": "default",
                "values": serde_json::from_str::<serde_json::Value>(c.values).unwrap(),
                "repeat": repeat,
            })
        })
        .collect();
    run_oracle(&jobs, repeat == 1, "")
}

/// Runs the oracle on `jobs` (see `tests/oracle/render.py`); with `cache`, the result is kept
/// under `target/helm-oracle/`, keyed by the jobs and `fingerprint` (e.g. the charts' contents).
/// `None` means SKIP (reason printed).
pub fn run_oracle(
    jobs: &[serde_json::Value],
    cache: bool,
    fingerprint: &str,
) -> Option<serde_json::Value> {
    if jobs.is_empty() {
        return None;
    }
    let input = serde_json::to_string(&jobs).unwrap();
    let repeat = jobs[0]["repeat"].as_u64().unwrap_or(1);
    let cache_dir = repo_root().join("target/helm-oracle");
    let script = repo_root().join("host/helm/tests/oracle/render.py");
    // a changed oracle script invalidates what it rendered before
    let oracle = std::fs::read_to_string(&script).unwrap_or_default();
    let key = fnv(&format!("{input}{fingerprint}{oracle}"));
    let cache_file = cache_dir.join(format!("{key:016x}-r{repeat}.json"));
    if cache
        && let Ok(s) = std::fs::read_to_string(&cache_file)
        && let Ok(v) = serde_json::from_str::<serde_json::Value>(&s)
    {
        return Some(v);
    }
    let child = Command::new(python())
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        skip("python not available for the helm oracle");
        return None;
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .ok()?;
    let out = child.wait_with_output().ok()?;
    let v: serde_json::Value = match serde_json::from_slice(&out.stdout) {
        Ok(v) => v,
        Err(_) => {
            skip(format!(
                "helm oracle failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
            return None;
        }
    };
    if let Some(why) = v.get("unavailable") {
        skip(format!(
            "helm-python-sdk not installed ({why}); pip install helm-python-sdk==0.2.2"
        ));
        return None;
    }
    if cache {
        let _ = std::fs::create_dir_all(&cache_dir);
        let _ = std::fs::write(&cache_file, serde_json::to_string(&v).unwrap());
    }
    Some(v)
}

/// A chart found by scanning the corpus roots (rendered with its default values).
pub struct Found {
    /// `root/chart`, e.g. `shared/bitnami/redis` or `extra/airflow`
    pub id: String,
    pub dir: PathBuf,
}

/// The chart directories (a `Chart.yaml`, not a library chart) directly under `root`, sorted.
fn charts_in(root: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("Chart.yaml").is_file())
        .filter(|p| {
            helm_engine::Chart::load_dir(p)
                .map(|c| c.metadata.chart_type != "library")
                .unwrap_or(true)
        })
        .collect();
    out.sort();
    out
}

/// Every chart under the corpus roots: `../shared/charts/*`, `../shared/charts/bitnami/*`,
/// `../shared/charts/corpus/*`, and, when `HELM_CORPUS_EXTRA=<dir>` is set, every chart in `<dir>`
/// (e.g. a bitnami snapshot's `bitnami/`), copied to `target/helm-corpus-extra/` with its
/// dependencies vendored from its siblings.
pub fn discover() -> Vec<Found> {
    let root = repo_root();
    let mut out = Vec::new();
    for (label, dir) in [
        ("shared", root.join("../shared/charts")),
        ("shared/bitnami", root.join("../shared/charts/bitnami")),
        ("shared/corpus", root.join("../shared/charts/corpus")),
    ] {
        for p in charts_in(&dir) {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            let dir = p.canonicalize().unwrap_or(p);
            out.push(Found {
                id: format!("{label}/{name}"),
                dir,
            });
        }
    }
    if let Ok(extra) = std::env::var("HELM_CORPUS_EXTRA") {
        let src = PathBuf::from(extra);
        let dst = root.join("target/helm-corpus-extra");
        let _ = std::fs::remove_dir_all(&dst);
        for p in charts_in(&src) {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            let to = dst.join(&name);
            copy_dir(&p, &to).expect("copy an extra chart");
            vendor(&to, &src).expect("vendor an extra chart's dependencies");
            out.push(Found {
                id: format!("extra/{name}"),
                dir: to,
            });
        }
    }
    out
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let t = e.file_type()?;
        let target = to.join(e.file_name());
        if t.is_dir() {
            copy_dir(&e.path(), &target)?;
        } else {
            std::fs::copy(e.path(), &target)?;
        }
    }
    Ok(())
}

/// Puts every remote dependency of the chart at `dir` (and, recursively, theirs) into its
/// `charts/` from the sibling chart of the same name in `siblings` (bitnami's repository does
/// not vendor subcharts; `oci://registry-1.docker.io/bitnamicharts/<name>` is the sibling).
/// Dependencies already in `charts/` (or `file://` ones) are left alone.
fn vendor(dir: &Path, siblings: &Path) -> std::io::Result<()> {
    let Ok(chart) = helm_engine::Chart::load_dir(dir) else {
        return Ok(());
    };
    for d in &chart.metadata.dependencies {
        if d.repository.starts_with("file://") || d.repository.is_empty() {
            continue;
        }
        let target = dir.join("charts").join(&d.name);
        let from = siblings.join(&d.name);
        if target.exists() || !from.join("Chart.yaml").is_file() {
            continue;
        }
        copy_dir(&from, &target)?;
        vendor(&target, siblings)?;
    }
    Ok(())
}

/// A cheap content fingerprint of the files under `dirs` (paths and contents), for the cache.
pub fn fingerprint(dirs: &[&Path]) -> String {
    fn walk(d: &Path, h: &mut u64) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        let mut es: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        es.sort();
        for p in es {
            if p.is_dir() {
                walk(&p, h);
            } else if let Ok(b) = std::fs::read(&p) {
                for x in p.to_string_lossy().bytes().chain(b) {
                    *h ^= x as u64;
                    *h = h.wrapping_mul(0x100000001b3);
                }
            }
        }
    }
    let mut h: u64 = 0xcbf29ce484222325;
    for d in dirs {
        walk(d, &mut h);
    }
    format!("{h:016x}")
}

/// A missing tool: SKIP locally, a failure in CI (`CI=true`), where `.ci/run` installs it.
pub fn skip(reason: impl std::fmt::Display) {
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{reason} (CI=true: a missing tool is a failure, not a skip)");
    }
    println!("SKIP: {reason}");
}
