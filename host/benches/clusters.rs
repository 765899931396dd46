//! The scale bench's clusters dimension: one `deployer-host run` process (release build, default
//! settings) serving manifest items, one per Target, on many Target clusters over time.
//!
//! Rows, each measured on the host process (RSS and open descriptors from /proc, clients and
//! connections from its metrics):
//! - **live**: 100 and `BENCH_CLUSTERS_LIVE` (1,000) Targets, each with a kubeconfig of its own
//!   and one item; time to all jobs;
//! - **seen**: `BENCH_CLUSTERS_ROUNDS` (10) rounds of 1,000 new Targets and items, each round's
//!   deleted before the next: 10,000 distinct kubeconfigs seen, 1,000 live at once;
//! - **warm** and **after**: a host that ran 10 items on 10 Targets and deleted them, and the
//!   same host once everything above is deleted (how much of the peak it gives back);
//! - **rotation**: 200 Targets whose kubeconfig is renewed every 3 s (and a job each time) for
//!   `BENCH_ROTATION_SECS` (60);
//! - **dead clusters**: 200 items on a healthy cluster alone, then again with 20 items on a
//!   cluster that refuses connections and 20 on one that accepts and never answers created
//!   first: the healthy items' p99 from creation to finished job, side by side, in
//!   `BENCH_DEAD_ROUNDS` (3) rounds (`BENCH_DEAD_KINDS=refused` or `hung`: one kind only).
//!
//! `cargo bench -p deployer-host --bench clusters` (plugins built first: `cargo xtask
//! build-plugins`); `BENCH_WRITE_DOCS=1` writes the table into `docs/benchmarks.md`.
//! `BENCH_CLUSTERS_SOAK_SECS=3600` runs the soak instead (`clusters/soak.rs`);
//! `BENCH_CLUSTERS_SOAK_CSV=target/clusters-soak.csv` reports a soak cut short from its samples.

#[path = "clusters/soak.rs"]
mod soak;
#[path = "clusters/world.rs"]
mod world;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use test_support::bench::{env_usize, write_docs_section};
use test_support::workspace;
use world::{Sample, Scheme, World, quantile};

/// The host's configuration: the defaults, but for anything the environment says.
fn host_config() -> String {
    std::env::var("BENCH_HOST_CONFIG").unwrap_or_else(|_| "events: errors\n".into())
}

struct Row {
    what: String,
    seen: usize,
    live: usize,
    sample: Sample,
    took: Option<f64>,
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// Creates `n` Targets (fresh kubeconfigs over `scheme`), then their `n` items all together
/// (as many writers in parallel as Landscaper's Execution uses), so that every job is in the
/// host at once; returns the names and the time from the first item to the last finished job.
async fn live_over(world: &World, prefix: &str, n: usize, scheme: Scheme) -> (Vec<String>, f64) {
    let names = names(prefix, n);
    futures::stream::iter(&names)
        .for_each_concurrent(32, |name| async move {
            world
                .put_target(name, &world.fresh_kubeconfig_over(scheme))
                .await;
        })
        .await;
    let started = Instant::now();
    futures::stream::iter(&names)
        .for_each_concurrent(32, |name| world.put_item(name, name, 0))
        .await;
    let done = world
        .wait_jobs(&names, &HashMap::new(), Duration::from_secs(900))
        .await;
    assert_eq!(done, n, "{prefix}: only {done} of {n} jobs finished");
    (names, started.elapsed().as_secs_f64())
}

async fn live(world: &World, prefix: &str, n: usize) -> (Vec<String>, f64) {
    live_over(world, prefix, n, Scheme::Tls).await
}

async fn live_and_seen(world: &World, rows: &mut Vec<Row>, start: Sample) -> Sample {
    let big = env_usize("BENCH_CLUSTERS_LIVE", 1000);
    let rounds = env_usize("BENCH_CLUSTERS_ROUNDS", 10);
    let mut seen = 10;
    for (n, scheme) in [(100, Scheme::Tls), (big, Scheme::Tls), (big, Scheme::Plain)] {
        let prefix = format!("live{n}-{}", format!("{scheme:?}").to_lowercase());
        let (names, took) = live_over(world, &prefix, n, scheme).await;
        seen += n;
        rows.push(Row {
            what: match scheme {
                Scheme::Tls => format!("{n} live Targets"),
                Scheme::Plain => format!("{n} live Targets, plain HTTP"),
            },
            seen,
            live: n,
            sample: world.sample().await,
            took: Some(took),
        });
        world.delete_all(&names, &names).await;
        // Each row starts from a host that released the last one's clients.
        world.wait_clients_at_most(0, Duration::from_secs(60)).await;
    }
    let mut peak = Sample::default();
    let mut last = None;
    for round in 0..rounds {
        let (names, took) = live(world, &format!("round{round}"), big).await;
        seen += big;
        let s = world.sample().await;
        peak.rss_kib = peak.rss_kib.max(s.rss_kib);
        peak.fds = peak.fds.max(s.fds);
        eprintln!(
            "round {round}: {seen} seen, RSS {:.1} MiB, {} fds, {} clients, {took:.1}s",
            s.rss_mib(),
            s.fds,
            s.clients
        );
        last = Some((s, took));
        world.delete_all(&names, &names).await;
    }
    if let Some((s, took)) = last {
        rows.push(Row {
            what: format!("{big} live, after {rounds} rounds (last round)"),
            seen,
            live: big,
            sample: s,
            took: Some(took),
        });
        rows.push(Row {
            what: format!("… the highest of the {rounds} rounds"),
            seen,
            live: big,
            sample: peak,
            took: None,
        });
    }
    assert!(
        world.wait_clients_at_most(0, Duration::from_secs(60)).await,
        "clients left after every Target was deleted"
    );
    // Let connections and freed memory settle (the host's sweeper gives freed memory back to
    // the operating system at most 10 s after clients were released).
    tokio::time::sleep(Duration::from_secs(12)).await;
    let after = world.sample().await;
    eprintln!(
        "everything deleted: RSS {:.1} MiB against warm {:.1} MiB (mapped files: {:.1} against \
         {:.1} MiB; heap in use {:.1} against {:.1} MiB, free in the arenas {:.1} against {:.1} \
         MiB); the plugin pool's idle slots hold {:.1} MiB against {:.1} MiB warm",
        after.rss_mib(),
        start.rss_mib(),
        after.file_mib(),
        start.file_mib(),
        after.heap_mib(),
        start.heap_mib(),
        after.heap_free_mib(),
        start.heap_free_mib(),
        after.pool_mib(),
        start.pool_mib()
    );
    rows.push(Row {
        what: format!(
            "everything deleted (warm: {:.1} MiB, {} fds)",
            start.rss_mib(),
            start.fds
        ),
        seen,
        live: 0,
        sample: after,
        took: None,
    });
    after
}

/// 200 Targets renewed every 3 s for `secs`: returns the first and last sample.
async fn rotation(world: &World, secs: u64) -> (Sample, Sample, usize) {
    let n = 200;
    let names = names("rot", n);
    for name in &names {
        world.put_target(name, &world.fresh_kubeconfig()).await;
        world.put_item(name, name, 0).await;
    }
    world
        .wait_jobs(&names, &HashMap::new(), Duration::from_secs(300))
        .await;
    let first = world.sample().await;
    let started = Instant::now();
    let mut renewals = 0;
    let mut revision = 0;
    while started.elapsed() < Duration::from_secs(secs) {
        let tick = Instant::now();
        revision += 1;
        let before = world.finished_jobs();
        for name in &names {
            world.put_target(name, &world.fresh_kubeconfig()).await;
            world.put_item(name, name, revision).await;
        }
        world
            .wait_jobs(&names, &before, Duration::from_secs(120))
            .await;
        renewals += n;
        tokio::time::sleep(Duration::from_secs(3).saturating_sub(tick.elapsed())).await;
    }
    let last = world.sample().await;
    world.delete_all(&names, &names).await;
    (first, last, renewals)
}

/// 200 items on a new healthy Target: creates them, waits, returns their p99 and names.
async fn healthy_run(world: &World, tag: &str) -> (f64, Vec<String>) {
    let target = format!("healthy-{tag}");
    let healthy = names(&target, 200);
    world.put_target(&target, &world.fresh_kubeconfig()).await;
    for name in &healthy {
        world.put_item(name, &target, 0).await;
    }
    let done = world
        .wait_jobs(&healthy, &HashMap::new(), Duration::from_secs(300))
        .await;
    assert_eq!(done, healthy.len(), "healthy items of {tag} did not finish");
    let latencies = world.latencies(&healthy);
    let p99 = quantile(&latencies, 0.99);
    eprintln!(
        "  {tag}: p50 {:.3} s, p90 {:.3} s, p99 {p99:.3} s, max {:.3} s",
        quantile(&latencies, 0.5),
        quantile(&latencies, 0.9),
        quantile(&latencies, 1.0)
    );
    world.delete_all(&healthy, &[target]).await;
    (p99, healthy)
}

/// One round of the dead-cluster rows: the healthy items' p99 alone, then beside 20 items on a
/// refusing and 20 on a hanging cluster created first; also one dead item's lastError of each.
async fn dead_clusters(world: &World, round: usize) -> (f64, f64, String, String) {
    let (alone, _) = healthy_run(world, &format!("{round}a")).await;
    let (refusing, hanging_target) = (format!("refusing-{round}"), format!("hanging-{round}"));
    let hanging = world.put_dead_targets(&refusing, &hanging_target).await;
    let refused = names(&format!("refused-{round}"), 20);
    let hung = names(&format!("hung-{round}"), 20);
    // BENCH_DEAD_KINDS=refused or =hung: only one kind of dead cluster (to see which costs).
    let kinds = std::env::var("BENCH_DEAD_KINDS").unwrap_or_else(|_| "refused,hung".into());
    for (r, h) in refused.iter().zip(&hung) {
        if kinds.contains("refused") {
            world.put_item(r, &refusing, 0).await;
        }
        if kinds.contains("hung") {
            world.put_item(h, &hanging_target, 0).await;
        }
    }
    let (r0, p0) = (
        world.metric("wasm_deployer_reconciles_total").await,
        world.metric("wasm_deployer_plugin_calls_total").await,
    );
    let (beside, _) = healthy_run(world, &format!("{round}b")).await;
    eprintln!(
        "  beside: {} reconciles, {} plugin calls",
        world.metric("wasm_deployer_reconciles_total").await - r0,
        world.metric("wasm_deployer_plugin_calls_total").await - p0
    );
    // Give the dead items time for their first errors.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let error_of = |name: &String| {
        let name = name.clone();
        async move {
            world
                .items
                .get(&name)
                .await
                .ok()
                .and_then(|i| i.status?.last_error.map(|e| e.message))
                .unwrap_or_default()
        }
    };
    let refused_error = error_of(&refused[0]).await;
    let hung_error = error_of(&hung[0]).await;
    // The dead items' delete jobs cannot reach their clusters either: release them by hand.
    for name in refused.iter().chain(&hung) {
        let _ = world.items.delete(name, &Default::default()).await;
        let _ = world
            .items
            .patch(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
            )
            .await;
    }
    let dead: Vec<String> = refused.iter().chain(&hung).cloned().collect();
    world.delete_all(&dead, &[refusing, hanging_target]).await;
    drop(hanging);
    (alone, beside, refused_error, hung_error)
}

fn table(rows: &[Row]) -> String {
    let mut t = String::from(
        "| host | distinct kubeconfigs seen | live Targets | RSS | open fds | clients held | open connections | all jobs done |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        t.push_str(&format!(
            "| {} | {} | {} | {:.1} MiB | {} | {} | {} | {} |\n",
            r.what,
            r.seen,
            r.live,
            r.sample.rss_mib(),
            r.sample.fds,
            r.sample.clients,
            r.sample.connections,
            r.took.map_or("—".into(), |t| format!("{t:.1} s")),
        ));
    }
    t
}

fn main() {
    let rt = test_support::bench::runtime();
    assert!(
        workspace().join("target/plugins/manifest.wasm").exists(),
        "run `cargo xtask build-plugins` first (or `cargo xtask bench`)"
    );
    // `BENCH_CLUSTERS_SOAK_CSV=target/clusters-soak.csv`: the report of a soak that was cut
    // short, from the samples it wrote as it went.
    if let Ok(csv) = std::env::var("BENCH_CLUSTERS_SOAK_CSV") {
        soak::report_csv(std::path::Path::new(&csv));
        return;
    }
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let world = World::start(dir.path(), &host_config()).await;
        if let Ok(secs) = std::env::var("BENCH_CLUSTERS_SOAK_SECS") {
            soak::run(&world, secs.parse().expect("BENCH_CLUSTERS_SOAK_SECS")).await;
            return;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let start = world.sample().await;
        let mut rows = vec![Row {
            what: "started, no items".into(),
            seen: 0,
            live: 0,
            sample: start,
            took: None,
        }];
        // Warm: the plugin instantiated, the Target watch and HTTP stacks in use once (10 items
        // on 10 Targets, deleted again): what a running host holds with no cluster in use.
        let (names, _) = live(&world, "warmup", 10).await;
        world.delete_all(&names, &names).await;
        world.wait_clients_at_most(0, Duration::from_secs(60)).await;
        tokio::time::sleep(Duration::from_secs(12)).await;
        let warm = world.sample().await;
        rows.push(Row {
            what: "warm (10 items on 10 Targets run and deleted)".into(),
            seen: 10,
            live: 0,
            sample: warm,
            took: None,
        });
        // `BENCH_CLUSTERS_STOP_AT=warm|after`: end (and stop the host) right after that row's
        // sample, e.g. for a heap profile of what the host holds then (`BENCH_HOST_WRAPPER`).
        let stop_at = std::env::var("BENCH_CLUSTERS_STOP_AT").unwrap_or_default();
        if stop_at == "warm" {
            return;
        }
        let after = live_and_seen(&world, &mut rows, warm).await;
        if stop_at == "after" {
            return;
        }
        let warm = rows[1].sample;
        let secs = env_usize("BENCH_ROTATION_SECS", 60) as u64;
        let (first, last, renewals) = rotation(&world, secs).await;
        let mut pairs = Vec::new();
        let mut errors = (String::new(), String::new());
        for round in 0..env_usize("BENCH_DEAD_ROUNDS", 3) {
            let (alone, beside, refused, hung) = dead_clusters(&world, round).await;
            eprintln!("dead clusters, round {round}: p99 {alone:.3} s alone, {beside:.3} s beside");
            pairs.push((alone, beside));
            errors = (refused, hung);
        }
        let (refused_error, hung_error) = errors;
        let ratios: Vec<f64> = pairs.iter().map(|(a, b)| b / a).collect();
        let ratio = quantile(&ratios, 0.5);
        let rounds: Vec<String> = pairs
            .iter()
            .map(|(a, b)| format!("{a:.2} → {b:.2} s"))
            .collect();
        let mut out = table(&rows);
        // The cost of one more live cluster: between the 100-live and the largest live row.
        if let (Some(small), Some(big)) = (
            rows.iter().find(|r| r.live == 100 && r.took.is_some()),
            rows.iter().find(|r| r.live > 100 && r.took.is_some()),
        ) {
            let n = (big.live - small.live) as f64;
            out.push_str(&format!(
                "\nPer live cluster (a client, its discovery and one open TLS connection; between \
                 {} and {} live): **{:.0} KiB of RSS and {:.2} open fds**.\n",
                small.live,
                big.live,
                (big.sample.rss_kib as f64 - small.sample.rss_kib as f64) / n,
                (big.sample.fds as f64 - small.sample.fds as f64) / n,
            ));
        }
        out.push_str(&format!(
            "\nAfter everything was deleted: RSS {:+.1} % and open fds {:+} against the warm host \
             ({:+.1} % against the cold start); the plugin pool's idle slots hold {:.1} MiB of it \
             ({:.1} MiB warm, `wasm_deployer_plugin_pool_idle_resident_bytes`).\n\
             \nRotation: 200 Targets, {renewals} kubeconfig renewals in {secs} s (each with a job): \
             RSS {:.1} → {:.1} MiB, open fds {} → {}, clients {} → {}.\n\
             \nDead clusters: 200 healthy items' p99 from creation to finished job, alone → beside \
             20 items on a refusing and 20 on a hanging cluster (created first), {} rounds: {}; \
             median ratio **{ratio:.2}×**.\n\
             A refused item's lastError: `{refused_error}`  \nA hanging one's: `{hung_error}`\n",
            (after.rss_kib as f64 / warm.rss_kib as f64 - 1.0) * 100.0,
            after.fds as i64 - warm.fds as i64,
            (after.rss_kib as f64 / start.rss_kib as f64 - 1.0) * 100.0,
            after.pool_mib(),
            warm.pool_mib(),
            first.rss_mib(),
            last.rss_mib(),
            first.fds,
            last.fds,
            first.clients,
            last.clients,
            pairs.len(),
            rounds.join(", "),
        ));
        println!("{out}");
        if std::env::var("BENCH_WRITE_DOCS").is_ok() {
            write_docs_section("clusters", "## Many Target clusters\n\n", &out);
        }
    });
}
