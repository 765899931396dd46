//! The peer benchmark's output: the Markdown table (rows per pair, with ratios) and the memory
//! lines, as written to stdout and docs/benchmarks.md.

use super::*;

/// The table's head: how it was measured, and the columns.
pub(super) fn table_head(rounds: usize) -> String {
    format!(
        "A fresh API server per row, {rounds} rounds, medians; ratios are medians of the rounds' paired ratios \
         (ours / Go: jobs/s above 1 and CPU below 1 are better). Helm rows install the 30-object chart \
         (10 ConfigMaps, 10 Services, 10 Deployments, inline archive), readiness checked, one release per item.\n\n\
         | API server | kind | items | workers | deployer | jobs/s | CPU ms/job | API requests/job | API server CPU ms/job | peak RSS | start to first job | jobs/s vs Go | CPU/job vs Go |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
}

/// One row of the table: the medians of `who`'s rounds `v`, and its ratios to Go's.
fn table_row(pair: &Pair, who: &str, v: &[Measured], ratio: Option<(f64, f64)>) -> String {
    let med = |f: fn(&Measured) -> f64| median(v.iter().map(f).collect());
    format!(
        "| {} | {} | {} | {} | {who} | {:.0} | {:.2} | {:.1} | {:.2} | {:.1} MiB | {:.2} s | {} | {} |\n",
        pair.backend.name(),
        pair.kind.name(),
        pair.items,
        pair.workers,
        med(|m| m.jobs_per_s),
        med(|m| m.cpu_ms_per_job),
        med(|m| m.requests_per_job),
        med(|m| m.server_cpu_ms_per_job),
        med(|m| m.peak_rss_kib as f64) / 1024.0,
        med(|m| m.first_job_s),
        ratio.map_or("".into(), |r| format!("**{:.1}×**", r.0)),
        ratio.map_or("".into(), |r| format!("**{:.2}×**", r.1)),
    )
}

/// A pair's rows: Go's (when it has one), then each of ours with the medians of the rounds'
/// paired ratios to Go's.
pub(super) fn pair_rows(pair: &Pair) -> String {
    let mut rows = String::new();
    if !pair.go.is_empty() {
        rows.push_str(&table_row(pair, Side::Go.row_name(), &pair.go, None));
    }
    for (side, ours) in &pair.ours {
        let ratio = (!pair.go.is_empty()).then(|| {
            let paired = pair.go.iter().zip(ours);
            (
                median(
                    paired
                        .clone()
                        .map(|(g, o)| o.jobs_per_s / g.jobs_per_s)
                        .collect(),
                ),
                median(
                    paired
                        .map(|(g, o)| o.cpu_ms_per_job / g.cpu_ms_per_job)
                        .collect(),
                ),
            )
        });
        rows.push_str(&table_row(pair, side.row_name(), ours, ratio));
    }
    rows
}

/// The memory sentences: per host variant, its peak RSS beside the Go deployers'.
pub(super) fn memory_lines(
    settings: &Settings,
    hosts: &[(Side, u64)],
    go: &[(Kind, u64)],
) -> String {
    let mib = |k: u64| k as f64 / 1024.0;
    let largest = go.iter().map(|(_, k)| *k).max().unwrap_or(0);
    let sum: u64 = go.iter().map(|(_, k)| *k).sum();
    let n = settings.memory_items();
    let helm_items = settings.helm_items;
    let mut lines = String::new();
    for &(side, ours) in hosts {
        lines.push_str(&format!(
            "\nMemory of every kind at once ({n} mock, {n} manifest and {helm_items} helm items, triggered together, 5 workers, embedded API server): \
             one host ({}) **{:.1} MiB** peak RSS; Landscaper's Go deployers {} (largest {:.1} MiB, together {:.1} MiB); \
             ours / largest **{:.2}×**, ours / together **{:.2}×**.\n",
            side.row_name(),
            mib(ours),
            go.iter()
                .map(|(k, v)| format!("{} {:.1} MiB", k.name(), mib(*v)))
                .collect::<Vec<_>>()
                .join(", "),
            mib(largest),
            mib(sum),
            ours as f64 / largest.max(1) as f64,
            ours as f64 / sum.max(1) as f64,
        ));
    }
    lines
}
