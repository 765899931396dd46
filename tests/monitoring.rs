//! The dashboard and alerts the chart ships (`metrics.grafanaDashboard`,
//! `metrics.prometheusRule`; docs/operations.md), checked with real Prometheus tools (Debian's
//! `prometheus` package: `promtool` and `prometheus`; `.ci/run` installs it):
//!
//! - every metric a dashboard query or an alert names is one the host serves on `/metrics`;
//! - `promtool check rules` accepts `files/alerts.yaml`, and `promtool test rules` with the
//!   committed `files/alerts_test.yaml` shows each alert firing on the series that should raise
//!   it and quiet on the ones beside it;
//! - a story: a `deployer-host run` process, scraped every second by a real Prometheus that also
//!   evaluates the alerts, serves succeeding and failing items, a plugin's HTTP request, a
//!   plugin delivered from a ConfigMap and a broken one, an item on a dead Target cluster, and
//!   is restarted once. Then every query of the dashboard returns data, and the alerts those
//!   events should raise are firing (or pending, where they wait `for:` minutes) while the
//!   others stay quiet;
//! - the chart renders both objects with the files' contents when switched on (real Helm, and
//!   our own engine byte for byte), and neither by default.
//!
//! Where `promtool`, `prometheus` or real Helm are missing, a test prints one SKIP line (and
//! fails with `CI=true`). `MONITORING_DUMP_DIR=dir` makes the story also write every panel's
//! series (Prometheus range queries) to `dir/panels.json`, `MONITORING_STORY_SECS` makes its
//! traffic last longer: docs/operations.md's picture is drawn from them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use deployer_host::landscaper::{DeployItem, Target};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};
use test_support::real_helm::{ok, run as helm};
use test_support::{http_status, mock_item, skip_on_real};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn chart() -> PathBuf {
    repo().join("charts/wasm-deployer")
}

fn chart_file(name: &str) -> PathBuf {
    chart().join("files").join(name)
}

/// `name` on `PATH`; `None` (one SKIP line, a failure with `CI=true`) when missing.
fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{name} missing (CI=true): .ci/run installs Debian's prometheus"
        );
        eprintln!("SKIP: {name} not installed (Debian: apt-get install prometheus)");
    }
    found
}

fn dashboard() -> Value {
    serde_json::from_str(&std::fs::read_to_string(chart_file("dashboard.json")).unwrap())
        .expect("dashboard.json is JSON")
}

/// (panel title, legend, expr) of every query of every panel.
fn dashboard_queries() -> Vec<(String, String, String)> {
    let d = dashboard();
    let mut out = Vec::new();
    for panel in d["panels"].as_array().expect("panels") {
        let title = panel["title"].as_str().unwrap().to_string();
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no query");
        for t in targets {
            out.push((
                title.clone(),
                t["legendFormat"].as_str().unwrap_or_default().to_string(),
                t["expr"].as_str().expect("expr").to_string(),
            ));
        }
    }
    out
}

/// The metric of each templating variable's `label_values(metric, label)`.
fn template_metrics() -> Vec<String> {
    dashboard()["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["definition"].as_str())
        .filter_map(|q| q.strip_prefix("label_values("))
        .map(|rest| rest.split(',').next().unwrap().trim().to_string())
        .collect()
}

fn alert_rules() -> Vec<Value> {
    let rules: Value =
        serde_yaml::from_str(&std::fs::read_to_string(chart_file("alerts.yaml")).unwrap())
            .expect("alerts.yaml is YAML");
    rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().clone())
        .collect()
}

/// A dashboard query as Prometheus runs it: Grafana's variables given values.
fn as_prometheus_query(expr: &str) -> String {
    expr.replace("$__rate_interval", "15s")
        .replace("$namespace", ".*")
}

/// The metric names a PromQL expression selects: identifiers outside label matchers, ranges and
/// strings that are neither functions, aggregations, keywords, label lists nor variables.
fn metric_names(expr: &str) -> BTreeSet<String> {
    const KEYWORDS: [&str; 11] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "offset",
        "bool",
        "and",
        "or",
        "unless",
    ];
    let c: Vec<char> = expr.chars().collect();
    let next_non_space = |mut j: usize| {
        while j < c.len() && c[j].is_whitespace() {
            j += 1;
        }
        j
    };
    let skip_past = |mut j: usize, close: char| {
        while j < c.len() && c[j] != close {
            j += if c[j] == '\\' { 2 } else { 1 };
        }
        j + 1
    };
    let word_at = |j: usize| {
        let mut k = j;
        while k < c.len() && (c[k].is_alphanumeric() || c[k] == '_' || c[k] == ':') {
            k += 1;
        }
        (c[j..k].iter().collect::<String>(), k)
    };
    let mut names = BTreeSet::new();
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            q @ ('"' | '\'' | '`') => i = skip_past(i + 1, q),
            '{' => i = skip_past(i + 1, '}'),
            '[' => i = skip_past(i + 1, ']'),
            '$' => i = word_at(i + 1).1,
            ch if ch.is_ascii_digit() || ch == '.' => i = word_at(i + 1).1.max(i + 1),
            ch if ch.is_alphabetic() || ch == '_' || ch == ':' => {
                let (word, end) = word_at(i);
                let j = next_non_space(end);
                let follows = word_at(j).0;
                if [
                    "by",
                    "without",
                    "on",
                    "ignoring",
                    "group_left",
                    "group_right",
                ]
                .contains(&word.as_str())
                {
                    // A label list, if any: `by (le, plugin)`.
                    i = if c.get(j) == Some(&'(') {
                        skip_past(j + 1, ')')
                    } else {
                        end
                    };
                    continue;
                }
                let function = c.get(j) == Some(&'(') || follows == "by" || follows == "without";
                if !function && !KEYWORDS.contains(&word.as_str()) {
                    names.insert(word);
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    names
}

/// The sample names a `/metrics` text declares: every `# TYPE` family, a histogram's as its
/// `_bucket`, `_sum` and `_count` series.
fn exported_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            let (name, kind) = (parts.next().unwrap(), parts.next().unwrap_or_default());
            if kind == "histogram" || kind == "summary" {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            } else {
                names.insert(name.to_string());
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            names.insert(line[..end].to_string());
        }
    }
    names
}

#[test]
fn metric_names_are_read_from_promql_as_prometheus_would() {
    let got = |e: &str| metric_names(e).into_iter().collect::<Vec<_>>();
    assert_eq!(
        got(
            r#"histogram_quantile(0.95, sum by (le, plugin) (rate(a_bucket{namespace=~"$namespace", x="b c"}[$__rate_interval])))"#
        ),
        ["a_bucket"]
    );
    assert_eq!(
        got(
            "sum by (namespace, pod) (increase(x_total[15m])) > 0\nunless\nsum(y) without (le) >= 2"
        ),
        ["x_total", "y"]
    );
    assert_eq!(
        got("max(a) bool == on (pod) group_left (z) b offset 5m or 1e3 + c:rule"),
        ["a", "b", "c:rule"]
    );
}

/// `promtool check rules` accepts the alert file the chart ships, and every alert carries what a
/// person on call needs: a severity, a summary, a description and a runbook section that exists.
#[test]
fn given_the_alert_file_then_promtool_accepts_it_and_every_alert_has_its_texts_and_runbook() {
    skip_on_real!("no API server involved");
    let runbook = std::fs::read_to_string(repo().join("docs/operations.md")).unwrap();
    let anchors: BTreeSet<String> = runbook
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .map(|h| h.trim().to_lowercase())
        .collect();
    let rules = alert_rules();
    assert!(rules.len() >= 6, "{rules:?}");
    for rule in &rules {
        let name = rule["alert"].as_str().expect("alerting rules only");
        assert!(
            ["warning", "critical"].contains(&rule["labels"]["severity"].as_str().unwrap_or("")),
            "{name}: severity"
        );
        for key in ["summary", "description"] {
            assert!(
                rule["annotations"][key]
                    .as_str()
                    .is_some_and(|s| s.len() > 20),
                "{name}: {key}"
            );
        }
        let url = rule["annotations"]["runbook_url"].as_str().unwrap();
        let anchor = url.split_once("docs/operations.md#").expect(url).1;
        assert_eq!(anchor, name.to_lowercase(), "{name}: runbook_url {url}");
        assert!(
            anchors.contains(anchor),
            "{name}: docs/operations.md has no section `### {name}`"
        );
    }
    let Some(promtool) = tool("promtool") else {
        return;
    };
    let out = Command::new(&promtool)
        .args(["check", "rules"])
        .arg(chart_file("alerts.yaml"))
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "promtool check rules: {text}");
    assert!(
        text.contains(&format!("SUCCESS: {} rules found", rules.len())),
        "{text}"
    );
}

/// `promtool test rules files/alerts_test.yaml`: each alert fires (labels, summary, description,
/// runbook as written) where it should and not where it should not, and every alert is tested.
#[test]
fn given_series_for_every_alert_then_promtool_test_rules_passes() {
    skip_on_real!("no API server involved");
    let tests = std::fs::read_to_string(chart_file("alerts_test.yaml")).unwrap();
    for rule in alert_rules() {
        let name = rule["alert"].as_str().unwrap();
        let fires = format!("alertname: {name}\n    exp_alerts:");
        assert!(
            tests.contains(&fires),
            "alerts_test.yaml never expects {name} to fire"
        );
        assert!(
            tests.matches(&format!("alertname: {name}\n")).count() > 1,
            "alerts_test.yaml never expects {name} to stay quiet"
        );
    }
    let Some(promtool) = tool("promtool") else {
        return;
    };
    let out = Command::new(&promtool)
        .args(["test", "rules", "alerts_test.yaml"])
        .current_dir(chart().join("files"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool test rules: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The chart, rendered by real Helm: both objects are there with the files' contents when
/// switched on (our own engine renders it byte for byte the same), none by default.
#[test]
fn given_the_chart_then_dashboard_and_rules_render_from_the_files_when_on_and_not_by_default() {
    skip_on_real!("renders only; no API server involved");
    let render = |values: Value| -> Option<Vec<Value>> {
        let out = ok(helm(
            json!({"op": "render", "chart": chart().display().to_string(),
            "name": "wd", "namespace": "ls-system", "values": values}),
        )?);
        let manifest = out["manifest"].as_str().unwrap().to_string();
        let loaded = helm_engine::Chart::load_dir(chart()).expect("chart loads");
        let mine = helm_engine::render(
            &loaded,
            &helm_engine::RenderOptions {
                release_name: "wd".into(),
                namespace: "ls-system".into(),
                values_files: vec![values.to_string()],
                split_mode: helm_engine::sort::SplitMode::Legacy,
                ..Default::default()
            },
        )
        .expect("our engine renders")
        .manifest();
        assert_eq!(mine, manifest, "our engine differs from Helm");
        Some(
            serde_yaml::Deserializer::from_str(&manifest)
                .filter_map(|d| {
                    let v: Value = serde::Deserialize::deserialize(d).ok()?;
                    (!v.is_null()).then_some(v)
                })
                .collect(),
        )
    };
    let Some(defaults) = render(json!({})) else {
        return;
    };
    assert!(
        !defaults.iter().any(|d| d["kind"] == "PrometheusRule"
            || d["metadata"]["labels"]["grafana_dashboard"].is_string()),
        "neither object by default"
    );

    let on = json!({"metrics": {
        "grafanaDashboard": {"enabled": true, "annotations": {"grafana_folder": "Landscaper"}},
        "prometheusRule": {"enabled": true, "labels": {"release": "prom"}}}});
    let docs = render(on).unwrap();
    let dashboards: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "ConfigMap" && d["metadata"]["labels"]["grafana_dashboard"] == "1")
        .collect();
    assert_eq!(dashboards.len(), 1, "one dashboard ConfigMap");
    let cm = dashboards[0];
    assert_eq!(cm["metadata"]["name"], "wd-wasm-deployer-dashboard");
    assert_eq!(cm["metadata"]["namespace"], "ls-system");
    assert_eq!(
        cm["metadata"]["annotations"]["grafana_folder"],
        "Landscaper"
    );
    let file = std::fs::read_to_string(chart_file("dashboard.json")).unwrap();
    assert_eq!(
        cm["data"]["wasm-deployer.json"].as_str().unwrap(),
        file.trim_end()
    );
    let rules: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "PrometheusRule")
        .collect();
    assert_eq!(rules.len(), 1, "one PrometheusRule");
    assert_eq!(rules[0]["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rules[0]["metadata"]["labels"]["release"], "prom");
    let alerts: Value =
        serde_yaml::from_str(&std::fs::read_to_string(chart_file("alerts.yaml")).unwrap()).unwrap();
    assert_eq!(
        rules[0]["spec"], alerts,
        "the rule groups as in alerts.yaml"
    );

    // The label the sidecar looks for, another namespace, another runbook home.
    let docs = render(json!({"metrics": {
        "grafanaDashboard": {"enabled": true, "label": "dashboards", "labelValue": "wasm",
                             "namespace": "monitoring"},
        "prometheusRule": {"enabled": true, "runbookBaseUrl": "https://wiki.example.com/ops"}}}))
    .unwrap();
    let cm = docs
        .iter()
        .find(|d| d["metadata"]["name"] == "wd-wasm-deployer-dashboard")
        .unwrap();
    assert_eq!(cm["metadata"]["labels"]["dashboards"], "wasm");
    assert_eq!(cm["metadata"]["namespace"], "monitoring");
    let rule = docs.iter().find(|d| d["kind"] == "PrometheusRule").unwrap();
    let url = &rule["spec"]["groups"][0]["rules"][0]["annotations"]["runbook_url"];
    assert_eq!(
        url,
        "https://wiki.example.com/ops#wasmdeployerjobsnotfinishing"
    );
    assert!(!rule.to_string().contains("example.invalid"));
}

// ---- the story ----------------------------------------------------------------------------

/// A plain HTTP GET (HTTP/1.0: the answer ends with the connection): status and body.
async fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.ok()?;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A path with `params` URL-encoded.
fn with_query(path: &str, params: &[(&str, &str)]) -> String {
    let url = reqwest::Url::parse_with_params(&format!("http://localhost{path}"), params).unwrap();
    format!("{}?{}", url.path(), url.query().unwrap_or_default())
}

/// Prometheus' answer to an HTTP API call (`data`), asserting `status: success`.
async fn prom_api(addr: &str, path_and_query: &str) -> Value {
    let (status, body) = http_get(addr, path_and_query)
        .await
        .unwrap_or_else(|| panic!("prometheus does not answer {path_and_query}"));
    let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert!(
        status == 200 && v["status"] == "success",
        "{path_and_query}: {body}"
    );
    v["data"].clone()
}

async fn instant(addr: &str, query: &str) -> Vec<Value> {
    let data = prom_api(addr, &with_query("/api/v1/query", &[("query", query)])).await;
    data["result"].as_array().cloned().unwrap_or_default()
}

/// Polls `query` until it returns a non-empty result (its series), or panics after `timeout`.
async fn until_data(addr: &str, query: &str, timeout: Duration) -> Vec<Value> {
    let deadline = Instant::now() + timeout;
    loop {
        let result = instant(addr, query).await;
        if !result.is_empty() {
            return result;
        }
        assert!(Instant::now() < deadline, "no data for {query}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A `deployer-host run` process serving `/metrics` on `metrics`.
struct Host {
    child: Child,
    log: PathBuf,
}

impl Host {
    fn start(dir: &Path, kubeconfig: &Path, config: &Path, metrics: &str, n: usize) -> Self {
        let log = dir.join(format!("host-{n}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_deployer-host"))
            .arg("run")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--config")
            .arg(config)
            .arg(format!("--metrics-listen={metrics}"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("deployer-host run");
        Self { child, log }
    }

    async fn ready(&self, metrics: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while http_status(metrics, "/readyz").await != Some(200) {
            assert!(
                Instant::now() < deadline,
                "host not ready: {}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `prometheus` process of the story's own configuration and storage.
struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn create<K>(api: &Api<K>, obj: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(obj).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

fn item(yaml: &str) -> Value {
    serde_yaml::from_str(yaml).unwrap()
}

/// Landscaper's side of the story's traffic: for `secs`, a new mock item every half second (every
/// fifth one failing), the oldest deleted once ten exist.
async fn traffic(items: Api<DeployItem>, secs: u64) {
    let end = Instant::now() + Duration::from_secs(secs);
    let mut n = 0;
    while Instant::now() < end {
        let name = format!("traffic-{n}");
        let mut yaml = mock_item(&name);
        if n % 5 == 4 {
            yaml = yaml.replace("phase: Succeeded", "phase: Failed");
        }
        create(&items, item(&yaml)).await;
        if n >= 10 {
            let _ = items
                .delete(&format!("traffic-{}", n - 10), &DeleteParams::default())
                .await;
        }
        n += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_host_scraped_by_prometheus_then_every_dashboard_query_has_data_and_the_alerts_that_should_fire_do()
 {
    skip_on_real!("the host process runs against the embedded server on loopback");
    let started = Instant::now();
    // Given the embedded API server on loopback, with Landscaper's CRDs, a Target and a Context,
    // and dev mode's Landscaper stand-in issuing jobs;
    let dir = tempfile::tempdir().unwrap();
    let server = embedded_apiserver::ApiServer::new(Default::default()).unwrap();
    let serving = server.serve_on_loopback().await.unwrap();
    let env = deployer_host::dev::DevEnvironment::bootstrap(server.clone(), &serving.url)
        .await
        .unwrap();
    let client = env.client.clone();
    let landscaper = tokio::spawn(deployer_host::dev::landscaper::run(client.clone()));
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        embedded_apiserver::ApiServer::kubeconfig_yaml(&serving.url),
    )
    .unwrap();

    // and a `deployer-host run` with the mock, manifest and test-http plugins, plugin delivery
    // from labelled ConfigMaps, HTTP allowed to a port where nothing listens, metrics on.
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    for (from, name) in [
        (test_support::plugins_dir(), "mock.wasm"),
        (test_support::plugins_dir(), "manifest.wasm"),
        (test_support::test_plugins_dir(), "test-http.wasm"),
    ] {
        std::fs::copy(from.join(name), plugins.join(name)).unwrap();
    }
    let dead_port = free_port();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "requeueInterval: 200ms\n\
             plugins: {{dir: {:?}, cacheDir: {:?}, namespace: default,\n  \
               configMapSelector: wasm-deployer.dev/plugins=true, pollInterval: 1s}}\n\
             http: {{allow: [\"http://127.0.0.1:{dead_port}/\"]}}\n",
            plugins,
            test_support::plugins_dir().join("../plugin-cache"),
        ),
    )
    .unwrap();
    let metrics = format!("127.0.0.1:{}", free_port());
    let mut host = Host::start(dir.path(), &kubeconfig, &config, &metrics, 0);
    host.ready(&metrics).await;

    // Every metric the dashboard and the alerts name is one the host serves.
    let (_, text) = http_get(&metrics, "/metrics").await.expect("/metrics");
    let exported = exported_names(&text);
    let mut named: BTreeMap<String, String> = BTreeMap::new();
    for (title, _, expr) in dashboard_queries() {
        for m in metric_names(&expr) {
            named.insert(m, format!("panel {title:?}"));
        }
    }
    for m in template_metrics() {
        named.insert(m, "a dashboard variable".into());
    }
    for rule in alert_rules() {
        for m in metric_names(rule["expr"].as_str().unwrap()) {
            named.insert(m, format!("alert {}", rule["alert"]));
        }
    }
    assert!(named.len() >= 10, "{named:?}");
    let unknown: Vec<_> = named
        .iter()
        .filter(|(m, _)| !exported.contains(*m))
        .collect();
    assert!(
        unknown.is_empty(),
        "not served on /metrics: {unknown:?}\nthe host serves: {exported:?}"
    );

    let Some(prometheus_bin) = tool("prometheus") else {
        return;
    };
    // When a real Prometheus scrapes it every second (as the chart's ServiceMonitor would, with
    // its namespace and pod labels) and evaluates the chart's alerts,
    let prom = format!("127.0.0.1:{}", free_port());
    let prom_config = dir.path().join("prometheus.yml");
    std::fs::write(
        &prom_config,
        format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
             rule_files: [{:?}]\n\
             scrape_configs:\n\
             - job_name: wasm-deployer\n  \
               static_configs:\n  \
               - targets: [{metrics:?}]\n    \
                 labels: {{namespace: monitoring-story, pod: wd-0}}\n",
            chart_file("alerts.yaml"),
        ),
    )
    .unwrap();
    let prom_log = dir.path().join("prometheus.log");
    let _prometheus = Prometheus(
        Command::new(prometheus_bin)
            .arg(format!("--config.file={}", prom_config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={prom}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&prom_log).unwrap())
            .spawn()
            .expect("prometheus"),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while http_status(&prom, "/-/ready").await != Some(200) {
        assert!(
            Instant::now() < deadline,
            "prometheus not ready: {}",
            std::fs::read_to_string(&prom_log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let story_start = jiff::Timestamp::now();
    until_data(
        &prom,
        "count_over_time(up[1m]) >= 3",
        Duration::from_secs(30),
    )
    .await;

    // and the host serves items that succeed and items that fail,
    let items: Api<DeployItem> = Api::namespaced(client.clone(), "default");
    let secs = std::env::var("MONITORING_STORY_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let traffic = tokio::spawn(traffic(items.clone(), secs));
    // an item whose plugin sends an HTTP request (to a port that refuses it),
    create(
        &items,
        json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
               "metadata": {"name": "http-call", "namespace": "default"},
               "spec": {"type": "test.wasm-deployer.dev/http",
                        "target": {"name": "default", "namespace": "default"},
                        "config": {"apiVersion": "test.wasm-deployer.dev/v1", "kind": "ProviderConfiguration",
                                   "requests": [{"url": format!("http://127.0.0.1:{dead_port}/ping")}]}}}),
    )
    .await;
    // an item on a Target whose cluster refuses connections,
    let targets: Api<Target> = Api::namespaced(client.clone(), "default");
    let dead_kubeconfig =
        embedded_apiserver::ApiServer::kubeconfig_yaml(&format!("http://127.0.0.1:{dead_port}"));
    create(
        &targets,
        json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
               "metadata": {"name": "dead", "namespace": "default"},
               "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster",
                        "config": {"kubeconfig": dead_kubeconfig}}}),
    )
    .await;
    create(
        &items,
        test_support::manifest::item_on(
            "on-dead-cluster",
            "dead",
            json!({"updateStrategy": "update", "manifests": [{"policy": "manage",
                   "manifest": test_support::manifest::cm("on-dead-cluster", json!({"k": "v"}))}]}),
        ),
    )
    .await;
    // a plugin delivered from a labelled ConfigMap, and one that is no WebAssembly at all,
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for (name, key, bytes) in [
        (
            "extra-plugin",
            "faulty.wasm",
            std::fs::read(test_support::test_plugins_dir().join("faulty.wasm")).unwrap(),
        ),
        ("broken-plugin", "broken.wasm", b"not a component".to_vec()),
    ] {
        let mut cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name,
            "labels": {"wasm-deployer.dev/plugins": "true"}}}))
        .unwrap();
        cm.binary_data = Some(BTreeMap::from([(key.to_string(), ByteString(bytes))]));
        maps.create(&PostParams::default(), &cm).await.unwrap();
    }
    let served = until_data(
        &prom,
        r#"wasm_deployer_target_clusters_unreachable > 0 and on() wasm_deployer_plugin_info{name="faulty"} and on() wasm_deployer_plugin_http_request_duration_seconds_count > 0"#,
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(served.len(), 1, "{served:?}");
    traffic.await.unwrap();
    // Then the jobs count by type and final phase, failed ones apart, each with its duration;
    // the items count by phase; the plugin calls that failed count by reason;
    for query in [
        r#"wasm_deployer_jobs_finished_total{type="landscaper.gardener.cloud/mock",phase="Succeeded"} > 0 and on() wasm_deployer_jobs_finished_total{type="landscaper.gardener.cloud/mock",phase="Failed"} > 0"#,
        r#"wasm_deployer_job_duration_seconds_count{type="landscaper.gardener.cloud/mock"} > 0"#,
        r#"wasm_deployer_items{type="landscaper.gardener.cloud/mock",phase="Failed"} > 0"#,
        r#"wasm_deployer_plugin_call_failures_total{type="landscaper.gardener.cloud/kubernetes-manifest"} > 0"#,
        "process_resident_memory_bytes > 1e6 and on() process_open_fds > 5",
    ] {
        let series = until_data(&prom, query, Duration::from_secs(30)).await;
        eprintln!("{query}: {series:?}");
    }
    // and every query of every dashboard panel returns data,
    for (title, _, expr) in dashboard_queries() {
        let series = until_data(&prom, &as_prometheus_query(&expr), Duration::from_secs(30)).await;
        eprintln!("{title}: {expr}: {} series", series.len());
    }
    for m in template_metrics() {
        let values = prom_api(
            &prom,
            &with_query("/api/v1/label/namespace/values", &[("match[]", &m)]),
        )
        .await;
        assert_eq!(
            values,
            json!(["monitoring-story"]),
            "label_values({m}, namespace)"
        );
    }

    // When the host restarts (a crash: SIGKILL), Prometheus sees its counters go back;
    drop(host);
    host = Host::start(dir.path(), &kubeconfig, &config, &metrics, 1);
    host.ready(&metrics).await;
    let restarted = until_data(
        &prom,
        "resets(wasm_deployer_reconciles_total[5m]) > 0",
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(restarted.len(), 1, "{restarted:?}");
    // then the alerts load and evaluate without errors, the plugin refused and the restart are
    // firing, the dead cluster is pending (it fires after 15 minutes), and nothing else fires.
    let deadline = Instant::now() + Duration::from_secs(30);
    let alerts = loop {
        let rules = prom_api(&prom, "/api/v1/rules").await;
        let rules: Vec<&Value> = rules["groups"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_array().unwrap())
            .collect();
        assert_eq!(rules.len(), alert_rules().len());
        for r in &rules {
            assert_eq!(r["health"], "ok", "{r}");
        }
        let alerts: BTreeMap<String, String> = instant(&prom, "ALERTS")
            .await
            .iter()
            .map(|a| {
                let m = &a["metric"];
                (
                    m["alertname"].as_str().unwrap().to_string(),
                    m["alertstate"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let want = |name: &str, state: &str| alerts.get(name).map(String::as_str) == Some(state);
        if want("WasmDeployerPluginLoadRefused", "firing")
            && want("WasmDeployerRestarting", "firing")
            && want("WasmDeployerTargetClusterUnreachable", "pending")
        {
            break alerts;
        }
        assert!(Instant::now() < deadline, "alerts: {alerts:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let firing: Vec<_> = alerts.iter().filter(|(_, s)| *s == "firing").collect();
    assert_eq!(firing.len(), 2, "{alerts:?}");

    if let Ok(out) = std::env::var("MONITORING_DUMP_DIR") {
        dump_panels(&prom, story_start, Path::new(&out)).await;
    }
    landscaper.abort();
    eprintln!("story: {:?}", started.elapsed());
}

/// Every panel's series over the story (range queries, one point a second) into
/// `out/panels.json`, for docs/operations.md's picture.
async fn dump_panels(prom: &str, start: jiff::Timestamp, out: &Path) {
    let end = jiff::Timestamp::now();
    let mut panels: Vec<Value> = Vec::new();
    for panel in dashboard()["panels"].as_array().unwrap() {
        let mut targets = Vec::new();
        for t in panel["targets"].as_array().unwrap() {
            let expr = as_prometheus_query(t["expr"].as_str().unwrap());
            let data = prom_api(
                prom,
                &with_query(
                    "/api/v1/query_range",
                    &[
                        ("query", &expr),
                        ("start", &start.as_second().to_string()),
                        ("end", &end.as_second().to_string()),
                        ("step", "1"),
                    ],
                ),
            )
            .await;
            targets.push(json!({"expr": expr, "legendFormat": t["legendFormat"],
                                "result": data["result"]}));
        }
        panels.push(json!({"title": panel["title"], "type": panel["type"],
                           "unit": panel["fieldConfig"]["defaults"]["unit"], "targets": targets}));
    }
    std::fs::create_dir_all(out).unwrap();
    std::fs::write(
        out.join("panels.json"),
        serde_json::to_string_pretty(&panels).unwrap(),
    )
    .unwrap();
}
