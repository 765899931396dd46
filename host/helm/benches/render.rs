//! Render time per corpus chart: helm-engine (load + render + `helm template` stream) against Go
//! Helm embedded in helm-python-sdk (`install --dry-run=client` from the chart path, timed inside
//! the same Python process). Run: `cargo bench -p helm-engine --bench render`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{CASES, oracle, repo_root};
use helm_engine::sort::SplitMode;
use helm_engine::{Chart, RenderOptions, render};

const RUNS: usize = 10;

fn main() {
    let helm = oracle(RUNS);
    println!(
        "{:<16} {:>12} {:>12} {:>8}",
        "chart", "engine (ms)", "helm (ms)", "ratio"
    );
    let (mut sum_ours, mut sum_helm) = (0.0, 0.0);
    for case in CASES.iter().filter(|c| common::available(c)) {
        let dir = repo_root().join(case.chart);
        let opts = RenderOptions {
            values_files: vec![case.values.to_string()],
            split_mode: SplitMode::Legacy,
            ..Default::default()
        };
        let mut best = Duration::MAX;
        for _ in 0..RUNS {
            let t = Instant::now();
            let chart = Chart::load_dir(&dir).expect("chart loads");
            let r = render(&chart, &opts).expect("renders");
            let s = r.to_template_stream(&[], false).expect("stream");
            std::hint::black_box(s);
            best = best.min(t.elapsed());
        }
        let ours = best.as_secs_f64() * 1000.0;
        let theirs = helm
            .as_ref()
            .and_then(|h| h[case.id]["seconds"].as_f64())
            .map(|s| s * 1000.0);
        match theirs {
            Some(t) => {
                sum_ours += ours;
                sum_helm += t;
                println!(
                    "{:<16} {:>12.2} {:>12.2} {:>8.2}",
                    case.id,
                    ours,
                    t,
                    ours / t
                );
            }
            None => println!("{:<16} {:>12.2} {:>12} {:>8}", case.id, ours, "n/a", "-"),
        }
    }
    if sum_helm > 0.0 {
        println!(
            "{:<16} {:>12.2} {:>12.2} {:>8.2}",
            "total",
            sum_ours,
            sum_helm,
            sum_ours / sum_helm
        );
    }
}
