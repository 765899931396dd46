//! What a kubectl user sees of the host's Events. The host writes `events.k8s.io/v1` Events;
//! `kubectl get events`, `kubectl events --for` and the Events section of `kubectl describe`
//! read `core/v1` ones. A real kube-apiserver serves one store through both APIs; so must the
//! embedded one. Runs on both backends with the same expectations.

use std::path::{Path, PathBuf};
use std::time::Duration;

use test_support::{Harness, Options, mock_item};

fn kubectl() -> Option<PathBuf> {
    let found = ["/usr/bin/kubectl", "/usr/local/bin/kubectl"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "kubectl missing (CI=true)"
        );
        eprintln!("SKIP: kubectl not installed");
    }
    found
}

fn run(kubectl: &Path, kubeconfig: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env("HOME", kubeconfig.parent().unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_host_recorded_events_when_a_kubectl_user_asks_then_get_events_and_describe_show_them()
 {
    let Some(kubectl) = kubectl() else { return };
    let h = Harness::start_with(Options::with_all_events()).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    // The embedded server of the harness listens on no socket: serve it on loopback for kubectl.
    let _serving = match &h.server {
        Some(server) => {
            let serving = server.serve_on_loopback().await.unwrap();
            std::fs::write(&kubeconfig, serving.kubeconfig()).unwrap();
            Some(serving)
        }
        None => {
            std::fs::write(&kubeconfig, &h.target_kubeconfig).unwrap();
            None
        }
    };
    // One item that fails (no such Target) and one that succeeds.
    h.create_item(&mock_item("evented-bad").replace(
        "spec:\n",
        "spec:\n  target: {name: nope, namespace: default}\n",
    ))
    .await;
    h.create_item(&mock_item("evented-ok")).await;
    h.wait_finished("default", "evented-bad").await;
    h.wait_finished("default", "evented-ok").await;

    // `kubectl get events` (core/v1): the host's Events, with reason, object and message.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let events = loop {
        let kc = kubeconfig.clone();
        let kubectl = kubectl.clone();
        let out = tokio::task::spawn_blocking(move || {
            run(&kubectl, &kc, &["get", "events", "-n", "default"])
        })
        .await
        .unwrap();
        if out.contains("JobFailed") && out.contains("JobFinished") {
            break out;
        }
        assert!(tokio::time::Instant::now() < deadline, "{out}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let failed = events
        .lines()
        .find(|l| l.contains("NoTargetFound"))
        .unwrap_or_else(|| panic!("{events}"));
    assert!(failed.contains("Warning"), "{failed}");
    assert!(failed.contains("deployitem/evented-bad"), "{failed}");
    assert!(failed.contains("missing target"), "the message: {failed}");

    let (kc, k) = (kubeconfig.clone(), kubectl.clone());
    let (describe, for_item) = tokio::task::spawn_blocking(move || {
        (
            run(
                &k,
                &kc,
                &["describe", "deployitem", "evented-bad", "-n", "default"],
            ),
            run(
                &k,
                &kc,
                &["events", "-n", "default", "--for", "deployitem/evented-bad"],
            ),
        )
    })
    .await
    .unwrap();
    // `kubectl describe`: the Events section, from core/v1 with involvedObject selectors.
    let section = describe
        .split("Events:")
        .nth(1)
        .unwrap_or_else(|| panic!("no Events section:\n{describe}"));
    for expected in ["Warning", "NoTargetFound", "JobFailed", "missing target"] {
        assert!(section.contains(expected), "{expected}:\n{describe}");
    }
    assert!(!section.contains("<none>"), "{describe}");
    // `kubectl events --for`: only this item's.
    assert!(for_item.contains("JobFailed"), "{for_item}");
    assert!(!for_item.contains("evented-ok"), "{for_item}");
}
