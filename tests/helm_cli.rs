//! `deployer-host helm template` prints the same stream as `helm template`: checked byte for
//! byte against Helm's own goldens (`../shared/charts/helm-testdata`). The engine's full golden
//! and corpus suites are in `host/helm/tests/`.

use std::path::PathBuf;
use std::process::Command;

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/charts/helm-testdata")
}

fn template(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_deployer-host"))
        .arg("helm")
        .arg("template")
        .args(args)
        .current_dir(testdata())
        .output()
        .expect("run deployer-host helm template");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn golden(name: &str) -> String {
    std::fs::read_to_string(testdata().join("output").join(name)).expect("golden")
}

#[test]
fn helm_template_matches_helms_golden_output() {
    // The goldens were made with Helm's then built-in default, Kubernetes v1.20.0.
    let (ok, out) = template(&[
        "testcharts/subchart",
        "--kube-version",
        "v1.20.0",
        "--set",
        "service.name=apache",
    ]);
    assert!(ok);
    assert_eq!(out, golden("template-set.txt"));

    let (ok, out) = template(&[
        "testcharts/subchart",
        "--kube-version",
        "v1.20.0",
        "--show-only",
        "templates/service.yaml",
        "--show-only",
        "charts/subcharta/templates/service.yaml",
    ]);
    assert!(ok);
    assert_eq!(out, golden("template-show-only-multiple.txt"));
}

#[test]
fn a_library_chart_is_an_error_not_output() {
    let (ok, out) = template(&["testcharts/lib-chart"]);
    assert!(!ok, "library charts are not installable");
    assert!(out.is_empty());
}
