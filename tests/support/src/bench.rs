//! Helpers shared by the host's benchmark binaries (`host/benches/`): sizes from the
//! environment, process figures from /proc, `deployer-host run` as a child, the tables'
//! section in `docs/benchmarks.md`, and the 30-object chart.
//!
//! Owns: what two or more benchmarks measure or write the same way. Must not touch: a
//! benchmark's own rows and tables (they stay in its file).

use std::path::Path;

use crate::workspace;

/// A size from the environment, or `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The benchmarks' runtime: two worker threads (the machine's cores), every driver on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// An embedded API server with Landscaper's CRDs and the `default` Context in `default`: the
/// Landscaper cluster of the benchmarks that run `deployer-host run` against one.
pub fn landscaper_server() -> embedded_apiserver::ApiServer {
    let server = embedded_apiserver::ApiServer::new(Default::default()).expect("server");
    for crd in deployer_host::crds::landscaper() {
        server
            .install_object(serde_json::to_value(crd).unwrap())
            .expect("CRD");
    }
    server
        .install_yaml_documents(
            "apiVersion: landscaper.gardener.cloud/v1alpha1\nkind: Context\nmetadata: {name: default, namespace: default}\n",
        )
        .expect("context");
    server
}

/// Resident set size of a process in KiB (from /proc).
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Open file descriptors of a process (from /proc).
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// A child process killed (and reaped) when dropped.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `deployer-host run` (the binary `host_binary`, the bench's `CARGO_BIN_EXE_deployer-host`)
/// against `kubeconfig` with the built plugins, quiet.
pub fn spawn_host(host_binary: &Path, kubeconfig: &Path) -> KillOnDrop {
    let mut command = std::process::Command::new(host_binary);
    command
        .args(["run", "--kubeconfig"])
        .arg(kubeconfig)
        .arg("--plugins")
        .arg(workspace().join("target/plugins"));
    // `BENCH_HOST_EVENTS=errors|none`: the host's `events:` setting (default `all`, two
    // Kubernetes Events per job); `BENCH_HOST_ITEM_CACHE=full`: its `itemCache:`.
    let mut settings = String::new();
    if let Ok(events) = std::env::var("BENCH_HOST_EVENTS") {
        settings.push_str(&format!("events: {events}\n"));
    }
    if let Ok(item_cache) = std::env::var("BENCH_HOST_ITEM_CACHE") {
        settings.push_str(&format!("itemCache: {item_cache}\n"));
    }
    if !settings.is_empty() {
        let config = kubeconfig.with_extension("host-config.yaml");
        std::fs::write(&config, settings).expect("host config");
        command.arg("--config").arg(config);
    }
    let host = command
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("deployer-host run");
    KillOnDrop(host)
}

/// Replaces the part of `docs/benchmarks.md` between `<!-- {marker}:start -->` and
/// `<!-- {marker}:end -->` with `table` (or appends the section under `heading` if absent).
pub fn write_docs_section(marker: &str, heading: &str, table: &str) {
    write_section("docs/benchmarks.md", marker, heading, table)
}

/// [`write_docs_section`] for another document of the repository (`doc`, e.g.
/// `docs/reliability.md`).
pub fn write_section(doc: &str, marker: &str, heading: &str, table: &str) {
    let path = workspace().join(doc);
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    let (start, end) = (
        format!("<!-- {marker}:start -->"),
        format!("<!-- {marker}:end -->"),
    );
    let body = format!("{start}\n{table}{end}");
    let updated = match (doc.find(&start), doc.find(&end)) {
        (Some(a), Some(b)) => format!("{}{}{}", &doc[..a], body, &doc[b + end.len()..]),
        _ => format!("{doc}\n{heading}{body}\n"),
    };
    std::fs::write(&path, updated).unwrap();
    eprintln!("updated {}", path.display());
}

/// A chart of 30 objects (10 ConfigMaps, 10 Services, 10 Deployments) as the base64 of its
/// `.tgz`: what a helm item's `chart.archive.raw` holds.
pub fn thirty_object_chart() -> String {
    use base64::Engine as _;
    use std::io::Write as _;
    let mut tar = tar::Builder::new(Vec::new());
    let mut add = |path: &str, text: &str| {
        let mut h = tar::Header::new_gnu();
        h.set_size(text.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        tar.append_data(&mut h, format!("thirty/{path}"), text.as_bytes())
            .unwrap();
    };
    add(
        "Chart.yaml",
        "apiVersion: v2\nname: thirty\nversion: 1.0.0\n",
    );
    add("values.yaml", "count: 10\nimage: nginx:1.27\n");
    add(
        "templates/objects.yaml",
        r#"{{- range $i := until (int .Values.count) }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ $.Release.Name }}-cm-{{ $i }}
data:
  index: {{ $i | quote }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $.Release.Name }}-svc-{{ $i }}
spec:
  selector: {app: {{ $.Release.Name }}-{{ $i }}}
  ports: [{port: 80}]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $.Release.Name }}-deploy-{{ $i }}
spec:
  replicas: 1
  selector: {matchLabels: {app: {{ $.Release.Name }}-{{ $i }}}}
  template:
    metadata: {labels: {app: {{ $.Release.Name }}-{{ $i }}}}
    spec:
      containers: [{name: c, image: {{ $.Values.image }}}]
{{- end }}
"#,
    );
    let tar = tar.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&tar).unwrap();
    base64::engine::general_purpose::STANDARD.encode(gz.finish().unwrap())
}
