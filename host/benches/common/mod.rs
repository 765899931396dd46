//! Helpers shared by the host's benchmark binaries (`e2e`, `reliability`).

#![allow(dead_code)]

use std::path::PathBuf;

/// The workspace root (where `target/plugins` is).
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A size from the environment, or `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
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

/// `deployer-host run` against `kubeconfig` with the built plugins, quiet.
pub fn spawn_host(kubeconfig: &std::path::Path) -> KillOnDrop {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_deployer-host"));
    command
        .args(["run", "--kubeconfig"])
        .arg(kubeconfig)
        .arg("--plugins")
        .arg(workspace().join("target/plugins"));
    // `BENCH_HOST_EVENTS=errors|none`: the host's `events:` setting (default `all`, two
    // Kubernetes Events per job).
    if let Ok(events) = std::env::var("BENCH_HOST_EVENTS") {
        let config = kubeconfig.with_extension("host-config.yaml");
        std::fs::write(&config, format!("events: {events}\n")).expect("host config");
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
    let path = workspace().join("docs/benchmarks.md");
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
