//! Helpers shared by the host's benchmark binaries (`host/benches/`): sizes from the
//! environment, process figures from /proc, `deployer-host run` as a child, the tables'
//! section in `docs/benchmarks.md`, the soaks' RSS/fds plot, and the 30-object chart.
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
    status_kib(pid, "VmRSS")
}

/// A size field of `/proc/<pid>/status` in KiB (0 when absent): `VmRSS`, or its parts
/// `RssAnon` (the process's own memory) and `RssFile` (pages of mapped files, its executable's
/// included, which the kernel may drop and read again at any time).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
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

/// A small SVG line chart of a host's RSS (MiB, blue) and open fds (orange) over time, from
/// `(seconds, rss_mib, fds)` points; `what` ends the caption (e.g. "104300 jobs").
pub fn rss_fds_svg(points: &[(f64, f64, f64)], what: &str) -> String {
    let (w, h, pad) = (640.0, 240.0, 40.0);
    let t_max = points.last().map(|p| p.0).unwrap_or(1.0).max(1.0);
    let rss_max = points.iter().map(|p| p.1).fold(1.0, f64::max) * 1.25;
    let fd_max = points.iter().map(|p| p.2).fold(1.0, f64::max) * 1.25;
    let line = |value: fn(&(f64, f64, f64)) -> f64, max: f64| {
        points
            .iter()
            .map(|p| {
                let x = pad + p.0 / t_max * (w - 2.0 * pad);
                let y = h - pad - value(p) / max * (h - 2.0 * pad);
                format!("{x:.1},{y:.1}")
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">
<rect width="100%" height="100%" fill="white"/>
<line x1="{pad}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="black"/><line x1="{pad}" y1="{pad}" x2="{pad}" y2="{y0}" stroke="black"/>
<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="{rss}"/>
<polyline fill="none" stroke="#ff7f0e" stroke-width="2" points="{fds}"/>
<text x="{pad}" y="20">RSS (blue, 0–{rss_max:.0} MiB) and open fds (orange, 0–{fd_max:.0}) of deployer-host run over {t_max:.0} s, {what}</text>
<text x="{x1}" y="{yl}" text-anchor="end">time</text>
</svg>
"##,
        y0 = h - pad,
        x1 = w - pad,
        yl = h - pad + 15.0,
        rss = line(|p| p.1, rss_max),
        fds = line(|p| p.2, fd_max),
    )
}
