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
];

/// The repository root (`host/helm/../..`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
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
    let jobs: Vec<serde_json::Value> = CASES
        .iter()
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
    if !repo_root().join(CASES[0].chart).exists() {
        skip(format!(
            "corpus charts not found under {}",
            repo_root().join("../shared/charts").display()
        ));
        return None;
    }
    let input = serde_json::to_string(&jobs).unwrap();
    let cache_dir = repo_root().join("target/helm-oracle");
    let cache = cache_dir.join(format!("{:016x}-r{repeat}.json", fnv(&input)));
    if repeat == 1
        && let Ok(s) = std::fs::read_to_string(&cache)
        && let Ok(v) = serde_json::from_str::<serde_json::Value>(&s)
    {
        return Some(v);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/render.py");
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
    let _ = std::fs::create_dir_all(&cache_dir);
    let _ = std::fs::write(&cache, serde_json::to_string(&v).unwrap());
    Some(v)
}

/// A missing tool: SKIP locally, a failure in CI (`CI=true`), where `.ci/run` installs it.
pub fn skip(reason: impl std::fmt::Display) {
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{reason} (CI=true: a missing tool is a failure, not a skip)");
    }
    println!("SKIP: {reason}");
}
