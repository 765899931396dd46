//! The replica rows of the end-to-end bench (`BENCH_REPLICAS=1`): what a job costs the API
//! server at 1, 3 and 5 locking replicas, racing for every lock and split by Leases.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use deployer_host::controller::Context;

use super::{Backend, JobsRun, Locking, median_runs, run_jobs};

/// The replica rows (`BENCH_REPLICAS=1`): 1, 3 and 5 locking replicas, racing for every lock
/// and split by Leases.
pub const REPLICA_CONFIGS: [(Backend, bool, usize, Locking); 6] = [
    (Backend::Wasm, false, 1, Locking::Locks),
    (Backend::Wasm, false, 1, Locking::Leases),
    (Backend::Wasm, false, 3, Locking::Locks),
    (Backend::Wasm, false, 3, Locking::Leases),
    (Backend::Wasm, false, 5, Locking::Locks),
    (Backend::Wasm, false, 5, Locking::Leases),
];

/// With Leases, waits until every replica sees all `replicas` (as in a deployment that has run
/// a while; at a start, a replica learns of the ones after it on its next beat).
pub async fn wait_views_agree(deployers: &[Arc<Context>], replicas: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while deployers.iter().any(|d| {
        d.membership
            .as_ref()
            .is_some_and(|m| m.members().len() != replicas)
    }) {
        assert!(
            Instant::now() < deadline,
            "the replicas' views never agreed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `BENCH_REPLICAS=1`: the replica rows, each once per round (alternating the order), and
/// their table: what a job costs the API server at 1, 3 and 5 replicas, with and without Leases.
pub async fn replica_rounds(rounds: usize, n: usize, cache: &Path) -> String {
    let mut by_config: Vec<Vec<JobsRun>> = REPLICA_CONFIGS.iter().map(|_| Vec::new()).collect();
    for round in 1..=rounds {
        // `BENCH_REPLICA_ROWS=0,3`: only those rows (a quick look at one pair).
        let mut order: Vec<usize> = match std::env::var("BENCH_REPLICA_ROWS") {
            Ok(rows) => rows
                .split(',')
                .filter_map(|r| r.trim().parse().ok())
                .collect(),
            Err(_) => (0..REPLICA_CONFIGS.len()).collect(),
        };
        if round % 2 == 0 {
            order.reverse();
        }
        for k in order {
            let (backend, hooks, replicas, locking) = REPLICA_CONFIGS[k];
            let run = run_jobs(backend, hooks, replicas, locking, n, cache).await;
            eprintln!(
                "round {round}: replicas={replicas} locking={locking:?}: {:.2}s, writes/job {:.2}, refused/job {:.2}",
                run.seconds, run.writes_per_job, run.refused_per_job
            );
            by_config[k].push(run);
        }
    }
    // Paired per round: each row against 1 replica with locks, which ran in the same round.
    let ratios: Vec<Vec<f64>> = by_config
        .iter()
        .filter(|runs| !runs.is_empty())
        .map(|runs| {
            let mut r: Vec<f64> = runs
                .iter()
                .zip(&by_config[0])
                .map(|(run, base)| base.seconds / run.seconds)
                .collect();
            r.sort_by(f64::total_cmp);
            if r.is_empty() {
                r.push(f64::NAN); // the 1-replica row did not run
            }
            r
        })
        .collect();
    let runs = median_runs(by_config.into_iter().filter(|r| !r.is_empty()).collect());
    let mut table = format!(
        "Median of {rounds} rounds, {n} jobs per row and round.\n\n\
         | replicas | locking | jobs/s | jobs/s against 1 replica (median of rounds) | CPU per job | reconciles/job | reads/job | writes/job | of which refused | Lease requests in the run |\n\
         |---|---|---|---|---|---|---|---|---|---|\n"
    );
    for (r, ratio) in runs.iter().zip(&ratios) {
        let reads: f64 = ["get", "list"]
            .iter()
            .map(|v| r.per_job.get(*v).copied().unwrap_or(0.0))
            .sum();
        table.push_str(&format!(
            "| {} | {} | {:.0} | {:.2} | {:.0} µs | {:.2} | {reads:.2} | {:.2} | {:.2} | {} |\n",
            r.replicas,
            r.locking.label(),
            r.items as f64 / r.seconds,
            ratio[ratio.len() / 2],
            r.cpu_us_per_job,
            r.reconciles_per_job,
            r.writes_per_job,
            r.refused_per_job,
            r.lease_requests,
        ));
    }
    table
}
