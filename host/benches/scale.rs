//! Scale curve: a `deployer-host run` process watching 1,000, 10,000 and 100,000 DeployItems,
//! 1 % of them with a new job. Per size: the host's resident memory once the jobs are done,
//! the time from process start to the first finished job, and the jobs per second of the rest.
//!
//! `cargo bench -p deployer-host --bench scale` (or `cargo xtask bench`, which builds the
//! plugins first). `BENCH_SCALE_SIZES=1000,10000` picks the sizes; `BENCH_WRITE_DOCS=1` writes
//! the table into `docs/benchmarks.md` and the points into `docs/bench/scale.csv`, and plots
//! `docs/bench/scale.png` when Python with matplotlib is there (`target/helm-venv`).
//! `BENCH_HOST_ITEM_CACHE=full` runs the host with `itemCache: full` (every item held; its
//! table goes into the section `scale-item-cache-full`).
//!
//! The API server (embedded, in this process, served on loopback) is filled without HTTP; the
//! host reaches it over HTTP like a real cluster. Idle items have no job (`jobID` empty, so
//! nothing to do); the 1 % get a jobID before the host starts, as after a Landscaper restart.

use std::collections::HashSet;
use std::process::Command;
use std::time::{Duration, Instant};

use deployer_host::landscaper::DeployItem;
use futures::StreamExt;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;

use test_support::bench::{landscaper_server, rss_kib, spawn_host, write_docs_section};
use test_support::workspace;

struct Point {
    items: usize,
    jobs: usize,
    rss_kib: u64,
    first_job: f64,
    all_jobs: f64,
}

impl Point {
    /// Jobs per second after the first one (the start-up is its own column).
    fn jobs_per_second(&self) -> f64 {
        (self.jobs.saturating_sub(1)) as f64 / (self.all_jobs - self.first_job).max(1e-6)
    }
}

fn item(i: usize, job: bool) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DeployItem",
        "metadata": {"name": format!("scale-{i}"), "namespace": "default",
                     "labels": {"bench.wasm-deployer.dev/job": if job { "yes" } else { "no" }}},
        "spec": {"type": "landscaper.gardener.cloud/mock",
                 "config": {"apiVersion": "mock.deployer.landscaper.gardener.cloud/v1alpha1",
                            "kind": "ProviderConfiguration", "phase": "Succeeded"}}
    })
}

async fn point(n: usize, dir: &std::path::Path) -> Point {
    let server = landscaper_server();
    let jobs = (n / 100).max(1);
    for i in 0..n {
        server
            .install_object(item(i, i % (n / jobs) == 0))
            .expect("item");
    }
    // The jobs: a jobID on 1 % of the items (status subresource, as Landscaper writes it).
    let client = server.client();
    let items: Api<DeployItem> = Api::namespaced(client.clone(), "default");
    let jobbed: Vec<String> = (0..n)
        .filter(|i| i % (n / jobs) == 0)
        .map(|i| format!("scale-{i}"))
        .collect();
    futures::stream::iter(jobbed.clone())
        .for_each_concurrent(16, |name| {
            let items = items.clone();
            async move {
                let current = items.get(&name).await.expect("get");
                let updated = deployer_host::dev::landscaper::with_new_job(&current);
                items
                    .replace_status(&name, &PostParams::default(), &updated)
                    .await
                    .expect("job");
            }
        })
        .await;

    let serving = server.serve_on_loopback().await.unwrap();
    let kubeconfig = dir.join(format!("kubeconfig-{n}"));
    std::fs::write(&kubeconfig, serving.kubeconfig()).unwrap();

    // Count finished jobs through a watch of the jobbed items only.
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let watch = tokio::spawn({
        let items = items.clone();
        async move {
            let config = watcher::Config::default().labels("bench.wasm-deployer.dev/job=yes");
            let mut events = std::pin::pin!(watcher(items, config));
            while let Some(Ok(event)) = events.next().await {
                let objs = match event {
                    watcher::Event::Apply(o) | watcher::Event::InitApply(o) => vec![o],
                    _ => continue,
                };
                for o in objs {
                    let s = o.status.clone().unwrap_or_default();
                    if !s.job_id.is_empty() && s.job_id == s.job_id_finished {
                        let _ = done_tx.send(o.metadata.name.clone().unwrap_or_default());
                    }
                }
            }
        }
    });

    let started = Instant::now();
    let mut host = spawn_host(env!("CARGO_BIN_EXE_deployer-host").as_ref(), &kubeconfig);
    let pid = host.0.id();
    let mut finished = HashSet::new();
    let mut first_job = None;
    let deadline = started + Duration::from_secs(600);
    while finished.len() < jobs {
        let name = tokio::time::timeout_at(deadline.into(), done_rx.recv())
            .await
            .unwrap_or_else(|_| {
                panic!("{n} items: only {} of {jobs} jobs finished", finished.len())
            })
            .expect("watch ended");
        if finished.insert(name) && first_job.is_none() {
            first_job = Some(started.elapsed().as_secs_f64());
        }
    }
    let all_jobs = started.elapsed().as_secs_f64();
    // Settled: the largest RSS over a second.
    let mut rss = 0;
    for _ in 0..5 {
        rss = rss.max(rss_kib(pid));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = host.0.kill();
    watch.abort();
    drop(serving);
    Point {
        items: n,
        jobs,
        rss_kib: rss,
        first_job: first_job.unwrap(),
        all_jobs,
    }
}

fn main() {
    let rt = test_support::bench::runtime();
    let sizes: Vec<usize> = std::env::var("BENCH_SCALE_SIZES")
        .unwrap_or_else(|_| "1000,10000,100000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    rt.block_on(async {
        assert!(
            workspace().join("target/plugins/mock.wasm").exists(),
            "run `cargo xtask build-plugins` first (or `cargo xtask bench`)"
        );
        let dir = tempfile::tempdir().unwrap();
        let mut points = Vec::new();
        for n in sizes {
            let p = point(n, dir.path()).await;
            eprintln!(
                "{n} items: RSS {:.1} MiB, first job {:.2}s, all {} jobs {:.2}s",
                p.rss_kib as f64 / 1024.0,
                p.first_job,
                p.jobs,
                p.all_jobs
            );
            points.push(p);
        }
        let mut table = String::from(
            "| watched items | jobs (1 %) | host RSS | start-up to first finished job | all jobs done | jobs/s after the first |\n|---|---|---|---|---|---|\n",
        );
        for p in &points {
            table.push_str(&format!(
                "| {} | {} | {:.1} MiB | {:.2} s | {:.2} s | {:.0} |\n",
                p.items,
                p.jobs,
                p.rss_kib as f64 / 1024.0,
                p.first_job,
                p.all_jobs,
                p.jobs_per_second()
            ));
        }
        if let [.., a, b] = points.as_slice() {
            let per_item = (b.rss_kib as f64 - a.rss_kib as f64) * 1024.0 / (b.items - a.items) as f64;
            table.push_str(&format!(
                "\nGrowth between the two largest sizes: **{per_item:.0} bytes of RSS per watched item**.\n"
            ));
        }
        println!("{table}");
        let full = std::env::var("BENCH_HOST_ITEM_CACHE").as_deref() == Ok("full");
        if std::env::var("BENCH_WRITE_DOCS").is_ok() && full {
            // The full-object watch's curve: its own section beside the default's.
            write_docs_section("scale-item-cache-full", "## Scale\n\n", &table);
        } else if std::env::var("BENCH_WRITE_DOCS").is_ok() {
            let bench_dir = workspace().join("docs/bench");
            std::fs::create_dir_all(&bench_dir).unwrap();
            let mut csv = String::from("items,jobs,rss_mib,first_job_s,all_jobs_s,jobs_per_s\n");
            for p in &points {
                csv.push_str(&format!(
                    "{},{},{:.1},{:.3},{:.3},{:.1}\n",
                    p.items,
                    p.jobs,
                    p.rss_kib as f64 / 1024.0,
                    p.first_job,
                    p.all_jobs,
                    p.jobs_per_second()
                ));
            }
            let csv_path = bench_dir.join("scale.csv");
            std::fs::write(&csv_path, csv).unwrap();
            plot(&csv_path, &bench_dir.join("scale.png"));
            write_docs_section("scale", "## Scale\n\n", &table);
        }
    });
}

/// `docs/bench/scale.png` from the CSV, with matplotlib (from `target/helm-venv` if it has it).
fn plot(csv: &std::path::Path, png: &std::path::Path) {
    let venv = workspace().join("target/helm-venv/bin/python");
    let python = if venv.exists() {
        venv
    } else {
        "python3".into()
    };
    let script = r#"
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
n = [int(r["items"]) for r in rows]
fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
for ax, key, label in zip(axes, ["rss_mib", "first_job_s", "jobs_per_s"],
                          ["host RSS (MiB)", "start-up to first job (s)", "jobs/s after the first"]):
    ax.plot(n, [float(r[key]) for r in rows], marker="o")
    ax.set_xscale("log"); ax.set_xlabel("watched DeployItems"); ax.set_title(label); ax.grid(True, alpha=0.3)
fig.suptitle("wasm-deployer: one host process, 1 % of the items with a new job")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
"#;
    match Command::new(python)
        .args(["-c", script])
        .arg(csv)
        .arg(png)
        .status()
    {
        Ok(s) if s.success() => eprintln!("plotted {}", png.display()),
        _ => eprintln!("SKIP plot: python3 with matplotlib not available (pip install matplotlib)"),
    }
}
