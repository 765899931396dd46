//! Real-chart corpus (`shared/charts/bitnami/*`, `shared/charts/ingress-nginx`, and the charts
//! copied into `tests/helm/corpus/`) compared with Go Helm through the PyPI `helm-python-sdk`
//! oracle (`tests/oracle/render.py`). Cases whose chart is not on disk are skipped (`SKIP:`).
//!
//! Objects compared: every document of the release manifest (the `helm template` stream without
//! hooks, order included) and every hook document. The oracle output is cached under
//! `target/helm-oracle/`. Without Python/helm-python-sdk the test prints `SKIP:` and passes.
//! `HELM_ORACLE_PYTHON` selects the interpreter (default: `target/helm-venv/bin/python`, then
//! `python3`); `CORPUS_DIFF=<chart>` prints the first differing documents.

mod common;

use common::{CASES, oracle, repo_root};
use helm_engine::sort::{SplitMode, sort_manifests};
use helm_engine::{Chart, RenderOptions, render};

fn docs(stream: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in stream.split("---\n# Source: ").skip(1) {
        out.push(format!("# Source: {part}"));
    }
    out
}

#[test]
fn corpus_matches_helm() {
    let Some(results) = oracle(1) else { return };
    let show = std::env::var("CORPUS_DIFF").ok();
    let (mut total, mut same) = (0usize, 0usize);
    println!(
        "{:<22} {:>8} {:>8} {:>7}  stream",
        "chart", "objects", "same", "rate"
    );
    for case in CASES {
        if !common::available(case) {
            continue;
        }
        let res = &results[case.id];
        if let Some(err) = res["error"].as_str() {
            println!("{:<22} oracle error: {err}", case.id);
            continue;
        }
        let chart = Chart::load_dir(repo_root().join(case.chart)).expect("chart loads");
        // helm-python-sdk 0.2.2 embeds Helm 4.2.3, which splits documents the legacy way
        let opts = RenderOptions {
            values_files: vec![case.values.to_string()],
            split_mode: SplitMode::Legacy,
            ..Default::default()
        };
        let mine = render(&chart, &opts);
        let want_manifest = res["manifest"].as_str().unwrap_or_default();
        let want_files: Vec<(String, String)> = res["files"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let want_docs = docs(want_manifest);
        let want_hooks = sort_manifests(&want_files, SplitMode::Legacy)
            .map(|(h, _)| h)
            .unwrap_or_default();
        let n = want_docs.len() + want_hooks.len();
        let (ok, stream_same) = match &mine {
            Ok(r) => {
                let got_docs = docs(&r.manifest());
                let mut ok = 0;
                for (i, w) in want_docs.iter().enumerate() {
                    if got_docs.get(i) == Some(w) {
                        ok += 1;
                    } else if show.as_deref() == Some(case.id) {
                        println!(
                            "--- want[{i}]\n{w}\n--- got[{i}]\n{}",
                            got_docs.get(i).map(String::as_str).unwrap_or("<none>")
                        );
                    }
                }
                for w in &want_hooks {
                    let hit = r
                        .hooks
                        .iter()
                        .any(|h| h.path == w.path && h.manifest == w.manifest);
                    if hit {
                        ok += 1;
                    } else if show.as_deref() == Some(case.id) {
                        println!("--- want hook {}\n{}", w.path, w.manifest);
                    }
                }
                let stream_same = r.manifest() == want_manifest;
                (ok, stream_same)
            }
            Err(e) => {
                println!("{:<22} render error: {e}", case.id);
                (0, false)
            }
        };
        total += n;
        same += ok;
        println!(
            "{:<22} {:>8} {:>8} {:>6.1}%  {}",
            case.id,
            n,
            ok,
            if n == 0 {
                100.0
            } else {
                100.0 * ok as f64 / n as f64
            },
            if stream_same { "identical" } else { "differs" }
        );
    }
    let rate = if total == 0 {
        1.0
    } else {
        same as f64 / total as f64
    };
    println!(
        "aggregate: {same}/{total} objects identical ({:.1}%)",
        rate * 100.0
    );
    assert!(
        rate >= common::CORPUS_MIN_RATE,
        "corpus pass rate {rate:.3} below {}",
        common::CORPUS_MIN_RATE
    );
}
