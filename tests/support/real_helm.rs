//! Real Go Helm (PyPI `helm-python-sdk`, in `target/helm-venv` as `.ci/run` installs it) for the
//! stories: one operation of `tests/chart/helm.py` per call.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn python() -> PathBuf {
    let venv = repo().join("target/helm-venv/bin/python");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

/// One real-Helm operation (`tests/chart/helm.py` documents the jobs); `None` =
/// helm-python-sdk missing (SKIP locally, a failure with `CI=true`). Helm's own refusals come
/// back as `{"error": …}`.
pub fn run(job: Value) -> Option<Value> {
    let out = Command::new(python())
        .arg(repo().join("tests/chart/helm.py"))
        .arg(job.to_string())
        .output()
        .expect("python3");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "helm.py: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    if let Some(why) = v.get("unavailable") {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "helm-python-sdk missing: {why}"
        );
        eprintln!("SKIP: helm-python-sdk not installed ({why})");
        return None;
    }
    Some(v)
}

/// `v`, after asserting Helm did not refuse.
pub fn ok(v: Value) -> Value {
    assert!(v.get("error").is_none(), "helm refused: {}", v["error"]);
    v
}
