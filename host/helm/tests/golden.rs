//! Helm's own `helm template` goldens (`shared/charts/helm-testdata`), run with the arguments
//! listed in its `CASES.md` and compared byte for byte (stdout followed by `Error: …`).

use std::path::{Path, PathBuf};

use clap::Parser;
use helm_engine::{TemplateArgs, cli_template_output};

#[derive(Parser)]
struct Cmd {
    #[command(flatten)]
    args: TemplateArgs,
}

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/charts/helm-testdata")
}

/// (golden file, arguments after `helm template`); `CHART` is `testcharts/subchart`.
const CASES: &[(&str, &[&str])] = &[
    ("template.txt", &["CHART"]),
    (
        "template-set.txt",
        &["CHART", "--set", "service.name=apache"],
    ),
    (
        "template-values-files.txt",
        &["CHART", "--values", "CHART/charts/subchartA/values.yaml"],
    ),
    (
        "template-name-template.txt",
        &[
            "CHART",
            "--name-template",
            "foobar-{{ b64enc \"abc\" | lower }}-baz",
        ],
    ),
    ("template-lib-chart.txt", &["testcharts/lib-chart"]),
    (
        "template-chart-bad-type.txt",
        &["testcharts/chart-bad-type"],
    ),
    (
        "template-chart-with-template-lib-dep.txt",
        &["testcharts/chart-with-template-lib-dep"],
    ),
    (
        "template-chart-with-template-lib-archive-dep.txt",
        &["testcharts/chart-with-template-lib-archive-dep"],
    ),
    (
        "template-with-kube-version.txt",
        &["--kube-version", "1.16.0", "CHART"],
    ),
    (
        "template-with-api-version.txt",
        &[
            "--api-versions",
            "helm.k8s.io/test,helm.k8s.io/test2",
            "CHART",
        ],
    ),
    ("template-with-crds.txt", &["CHART", "--include-crds"]),
    (
        "template-show-only-one.txt",
        &["CHART", "--show-only", "templates/service.yaml"],
    ),
    (
        "template-show-only-multiple.txt",
        &[
            "CHART",
            "--show-only",
            "templates/service.yaml",
            "--show-only",
            "charts/subcharta/templates/service.yaml",
        ],
    ),
    (
        "template-show-only-glob.txt",
        &["CHART", "--show-only", "templates/subdir/role*"],
    ),
    ("object-order.txt", &["testcharts/object-order"]),
    (
        "template-with-invalid-yaml.txt",
        &["testcharts/chart-with-template-with-invalid-yaml"],
    ),
    (
        "template-with-invalid-yaml-debug.txt",
        &[
            "testcharts/chart-with-template-with-invalid-yaml",
            "--debug",
        ],
    ),
    (
        "template-with-invalid-template-expr-debug-show-only.txt",
        &[
            "testcharts/chart-with-template-with-invalid-template-expr",
            "--debug",
            "--show-only",
            "templates/alpine-pod.yaml",
        ],
    ),
    ("template-skip-tests.txt", &["CHART", "--skip-tests"]),
    ("issue-9027.txt", &["testcharts/issue-9027"]),
    (
        "template-subchart-cm.txt",
        &[
            "CHART",
            "--set",
            "configmap.enabled=true",
            "--set",
            "subchartb.enabled=true",
        ],
    ),
    (
        "template-subchart-cm-set.txt",
        &[
            "CHART",
            "--set",
            "configmap.enabled=true",
            "--set",
            "subchartb.enabled=true",
            "--set",
            "configmap.value=baz",
        ],
    ),
    (
        "template-subchart-cm-set-file.txt",
        &["CHART", "-f", "CHART/extra_values.yaml"],
    ),
    ("template-no-args.txt", &[]),
];

fn run_case(args: &[&str]) -> String {
    let td = testdata();
    let chart = td.join("testcharts/subchart");
    let mut argv = vec!["helm-template".to_string()];
    for a in args {
        let a = a.replace("CHART", &chart.display().to_string());
        let a = if a.starts_with("testcharts/") {
            td.join(&a).display().to_string()
        } else {
            a
        };
        argv.push(a);
    }
    let cmd = Cmd::try_parse_from(&argv).expect("arguments parse");
    let mut targs = cmd.args;
    // the goldens were produced by Helm's unit tests: Kubernetes v1.20.0 unless overridden
    if targs.kube_version.is_none() {
        targs.kube_version = Some("v1.20.0".into());
    }
    let out = cli_template_output(&targs);
    let mut s = out.stdout;
    if let Some(e) = out.error {
        s.push_str(&format!("Error: {e}\n"));
    }
    s
}

#[test]
fn helm_testdata_goldens() {
    let td = testdata();
    let Ok(cases_md) = std::fs::read_to_string(td.join("CASES.md")) else {
        skip(format!("{} not found", td.display()));
        return;
    };
    // every golden listed in CASES.md must be covered here
    for line in cases_md.lines() {
        if let Some(name) = line.strip_prefix("| ").and_then(|l| l.split(" |").next())
            && name.ends_with(".txt")
        {
            assert!(
                CASES.iter().any(|(n, _)| *n == name),
                "case {name} from CASES.md is not covered"
            );
        }
    }
    let mut failed = Vec::new();
    println!("{:<58} result", "golden");
    for (name, args) in CASES {
        let want = std::fs::read_to_string(td.join("output").join(name)).unwrap();
        let got = run_case(args);
        let ok = got == want;
        println!("{name:<58} {}", if ok { "PASS" } else { "FAIL" });
        if !ok {
            failed.push(*name);
            if std::env::var("GOLDEN_DIFF").is_ok() {
                println!("--- want\n{want}\n--- got\n{got}\n---");
            }
        }
    }
    println!(
        "goldens: {}/{} byte-identical",
        CASES.len() - failed.len(),
        CASES.len()
    );
    assert!(failed.is_empty(), "failed goldens: {failed:?}");
}

/// A missing tool: SKIP locally, a failure in CI (`CI=true`), where `.ci/run` installs it.
fn skip(reason: impl std::fmt::Display) {
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{reason} (CI=true: a missing tool is a failure, not a skip)");
    }
    println!("SKIP: {reason}");
}
