//! The many-clusters soak (`BENCH_CLUSTERS_SOAK_SECS`): churn across many Target clusters with
//! rotation and dead clusters, for as long as asked, sampling the host every 10 s.
//!
//! Every 10 s cycle: 100 new Targets (kubeconfigs never seen) with an item each, the oldest 100
//! deleted (about 500 live), 100 live Targets' kubeconfigs renewed with a new job each, and the
//! 20 items on a refusing and 20 on a hanging cluster given a new job every minute. The slopes of
//! RSS and open descriptors over the last two hours (or, in a shorter soak, all but the first 10
//! minutes of warm-up) go into `docs/reliability.md`, with the curve in `docs/clusters-soak.svg`.
//! Each sample is also appended to `target/clusters-soak.csv` as it is taken, so a soak cut short
//! still leaves its curve.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use test_support::bench::{rss_fds_svg, write_section};
use test_support::workspace;

use super::world::{Sample, World};

const LIVE: usize = 500;
const PER_CYCLE: usize = 100;

/// Where the slopes start: the last two hours, but never inside the first 10 minutes.
fn window_start(secs: u64) -> f64 {
    (secs as f64 - 7200.0).max(600.0)
}

/// Least-squares slope of `ys` over `xs`, per unit of `xs`.
fn slope(xs: &[f64], ys: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let num: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let den: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    if den == 0.0 { 0.0 } else { num / den }
}

pub async fn run(world: &World, secs: u64) {
    let hanging = world.put_dead_targets("refusing", "hanging").await;
    let dead: Vec<(String, &str)> = (0..20)
        .flat_map(|i| {
            [
                (format!("refused-{i}"), "refusing"),
                (format!("hung-{i}"), "hanging"),
            ]
        })
        .collect();
    let started = Instant::now();
    let mut live: VecDeque<String> = VecDeque::new();
    let mut next = 0usize;
    let mut revision = 0u64;
    let mut samples: Vec<(f64, Sample, u64)> = Vec::new();
    let mut last_dead_job = None::<Instant>;
    let csv_path = workspace().join("target/clusters-soak.csv");
    std::fs::write(
        &csv_path,
        "t_s,rss_mib,fds,clients,connections,jobs,kubeconfigs\n",
    )
    .unwrap();
    while started.elapsed() < Duration::from_secs(secs) {
        let cycle = Instant::now();
        revision += 1;
        if last_dead_job.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
            for (name, target) in &dead {
                world.put_item(name, target, revision).await;
            }
            last_dead_job = Some(Instant::now());
        }
        // New clusters.
        let mut new = Vec::new();
        for _ in 0..PER_CYCLE {
            let name = format!("soak-{next}");
            next += 1;
            world.put_target(&name, &world.fresh_kubeconfig()).await;
            world.put_item(&name, &name, revision).await;
            live.push_back(name.clone());
            new.push(name);
        }
        // Rotation of live ones (not the newest).
        let before = world.finished_jobs();
        let rotated: Vec<String> = live.iter().take(PER_CYCLE).cloned().collect();
        for name in &rotated {
            world.put_target(name, &world.fresh_kubeconfig()).await;
            world.put_item(name, name, revision).await;
        }
        world
            .wait_jobs(&new, &HashMap::new(), Duration::from_secs(120))
            .await;
        world
            .wait_jobs(&rotated, &before, Duration::from_secs(120))
            .await;
        // The oldest go.
        if live.len() > LIVE {
            let old: Vec<String> = live.drain(..live.len() - LIVE).collect();
            world.delete_all(&old, &old).await;
        }
        let t = started.elapsed().as_secs_f64();
        let s = world.sample().await;
        let jobs = world.metric("wasm_deployer_jobs_finished_total").await;
        eprintln!(
            "soak {t:.0}s: RSS {:.1} MiB, {} fds, {} clients, {} connections, {jobs} jobs, {next} kubeconfigs",
            s.rss_mib(),
            s.fds,
            s.clients,
            s.connections
        );
        let row = format!(
            "{t:.0},{:.1},{},{},{},{jobs},{next}\n",
            s.rss_mib(),
            s.fds,
            s.clients,
            s.connections
        );
        std::io::Write::write_all(
            &mut std::fs::OpenOptions::new()
                .append(true)
                .open(&csv_path)
                .unwrap(),
            row.as_bytes(),
        )
        .unwrap();
        samples.push((t, s, jobs));
        tokio::time::sleep(Duration::from_secs(10).saturating_sub(cycle.elapsed())).await;
    }
    drop(hanging);
    report(&samples, next, secs, "");
}

/// The report of a soak from the samples it appended to `csv` as it went (one cut short: its
/// window and slopes are then those of the time it ran).
pub fn report_csv(csv: &std::path::Path) {
    let text = std::fs::read_to_string(csv).expect("the soak's samples");
    let mut samples = Vec::new();
    let mut kubeconfigs = 0;
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let num = |i: usize| f[i].parse::<f64>().expect("a number");
        let sample = Sample {
            rss_kib: (num(1) * 1024.0) as u64,
            fds: num(2) as usize,
            clients: num(3) as u64,
            connections: num(4) as u64,
            pool_kib: 0,
            file_kib: 0,
            heap_kib: 0,
            heap_free_kib: 0,
        };
        kubeconfigs = num(6) as usize;
        samples.push((num(0), sample, num(5) as u64));
    }
    let ran = samples.last().map_or(0, |(t, _, _)| *t as u64);
    report(
        &samples,
        kubeconfigs,
        ran,
        " (cut short; reported from its samples, `BENCH_CLUSTERS_SOAK_CSV`)",
    );
}

fn report(samples: &[(f64, Sample, u64)], kubeconfigs: usize, secs: u64, how: &str) {
    let from = window_start(secs);
    let half: Vec<&(f64, Sample, u64)> = samples.iter().filter(|(t, _, _)| *t >= from).collect();
    let xs: Vec<f64> = half.iter().map(|(t, _, _)| t / 3600.0).collect();
    let rss: Vec<f64> = half.iter().map(|(_, s, _)| s.rss_mib()).collect();
    let fds: Vec<f64> = half.iter().map(|(_, s, _)| s.fds as f64).collect();
    let clients: Vec<f64> = half.iter().map(|(_, s, _)| s.clients as f64).collect();
    let (rss_slope, fds_slope, clients_slope) =
        (slope(&xs, &rss), slope(&xs, &fds), slope(&xs, &clients));
    let jobs = samples.last().map_or(0, |(_, _, j)| *j);
    let max = |f: fn(&Sample) -> f64| half.iter().map(|(_, s, _)| f(s)).fold(0.0, f64::max);
    let min = |f: fn(&Sample) -> f64| half.iter().map(|(_, s, _)| f(s)).fold(f64::MAX, f64::min);
    let mut out = format!(
        "{secs} s{how}, {kubeconfigs} distinct kubeconfigs seen (about 500 Targets live, 100 new, 100 \
         deleted and 100 renewed every 10 s), 20 items on a refusing and 20 on a hanging cluster, \
         {jobs} jobs finished.\n\n\
         | from {from:.0} s to the end | slope per hour | range |\n|---|---|---|\n\
         | RSS | {rss_slope:+.2} MiB | {:.1}–{:.1} MiB |\n\
         | open fds | {fds_slope:+.1} | {:.0}–{:.0} |\n\
         | Target clients held | {clients_slope:+.1} | {:.0}–{:.0} |\n\n\
         | t (s) | RSS (MiB) | open fds | clients | connections | jobs finished |\n|---|---|---|---|---|---|\n",
        min(Sample::rss_mib),
        max(Sample::rss_mib),
        min(|s| s.fds as f64),
        max(|s| s.fds as f64),
        min(|s| s.clients as f64),
        max(|s| s.clients as f64),
    );
    let every = (samples.len() / 24).max(1);
    for (t, s, j) in samples.iter().step_by(every) {
        out.push_str(&format!(
            "| {t:.0} | {:.1} | {} | {} | {} | {j} |\n",
            s.rss_mib(),
            s.fds,
            s.clients,
            s.connections
        ));
    }
    println!("{out}");
    let points: Vec<(f64, f64, f64)> = samples
        .iter()
        .map(|(t, s, _)| (*t, s.rss_mib(), s.fds as f64))
        .collect();
    let plot = rss_fds_svg(&points, &format!("{jobs} jobs, {kubeconfigs} kubeconfigs"));
    std::fs::write(workspace().join("target/clusters-soak.svg"), &plot).unwrap();
    if std::env::var("BENCH_WRITE_DOCS").is_ok() {
        std::fs::write(workspace().join("docs/clusters-soak.svg"), &plot).unwrap();
        write_section(
            "docs/reliability.md",
            "clusters-soak",
            "### Soak across many Target clusters\n\n",
            &out,
        );
    }
}
