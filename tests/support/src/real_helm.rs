//! Real Go Helm (PyPI `helm-python-sdk`, in `target/helm-venv` as `.ci/run` installs it) for the
//! stories: one operation of `tests/chart/helm.py` per call.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn repo() -> PathBuf {
    crate::workspace()
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

/// Real Go Helm against a story's API server: the real server's kubeconfig, or the embedded
/// server served on loopback for the Python process (for as long as this lives).
pub struct RealHelm {
    pub kubeconfig: String,
    _stop: Option<embedded_apiserver::LoopbackServing>,
}

impl RealHelm {
    pub async fn for_harness(h: &super::Harness) -> RealHelm {
        if let Some(real) = &h.real {
            return RealHelm {
                kubeconfig: real.kubeconfig.clone(),
                _stop: None,
            };
        }
        let serving = h
            .server
            .as_ref()
            .expect("an embedded server")
            .serve_on_loopback()
            .await
            .expect("serving on loopback");
        RealHelm {
            kubeconfig: serving.kubeconfig(),
            _stop: Some(serving),
        }
    }

    /// One job against this server; `None`: helm-python-sdk is not installed (SKIP locally, a
    /// failure with `CI=true`). Helm's refusals come back as `{"error": …}`.
    pub async fn run(&self, mut job: Value) -> Option<Value> {
        job["kubeconfig"] = Value::from(self.kubeconfig.clone());
        tokio::task::spawn_blocking(move || run(job))
            .await
            .expect("real helm job")
    }

    /// [`RealHelm::run`], asserting Helm did not refuse.
    pub async fn ok(&self, job: Value) -> Option<Value> {
        let v = self.run(job).await?;
        assert!(
            v.get("error").is_none(),
            "real helm refused: {}",
            v["error"]
        );
        Some(v)
    }
}
