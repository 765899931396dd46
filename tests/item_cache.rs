//! Stories of the full-object DeployItem watch (`itemCache: full`): the host holds every item
//! as controller-runtime's cache does for Landscaper's Go deployers, and reads none per job.
//! The contract is the same as with the default metadata-only watch; what changes is where the
//! item comes from, so these stories look for what a stale cached item could break: a new job
//! right after the last one, a deletion.
//!
//! Any other suite runs against the full-object watch with `DEPLOYER_TEST_ITEM_CACHE=full`; CI
//! runs the contract, mock (spec changes, broken configs, ...), hook, continuous-reconcile and
//! manifest stories so (`.ci/run`).

use std::time::Duration;

use deployer_host::config::ItemCache;
use deployer_host::landscaper::Phase;
use kube::api::{DeleteParams, PostParams};
use test_support::skip_on_real;
use test_support::{Harness, Options};

const ITEMS: &str = "deployitems.landscaper.gardener.cloud";

fn options(item_cache: ItemCache, landscaper: bool) -> Options {
    Options {
        item_cache: Some(item_cache),
        landscaper,
        ..Options::default()
    }
}

/// Issues a new job on `name` as Landscaper does (a status write of a new jobID).
async fn new_job(h: &Harness, name: &str) -> String {
    let items = h.items("default");
    let current = items.get(name).await.unwrap();
    let next = deployer_host::dev::landscaper::with_new_job(&current);
    items
        .replace_status(name, &PostParams::default(), &next)
        .await
        .unwrap();
    next.status().job_id
}

/// Runs `n` mock jobs with the given item cache and returns the host's DeployItem GETs.
async fn item_reads_for_jobs(item_cache: ItemCache, n: usize) -> u64 {
    let h = Harness::start_with(options(item_cache, false)).await;
    let server = h.server.clone().expect("embedded");
    let items = h.items("default");
    let mut current = Vec::new();
    for i in 0..n {
        current.push(
            h.create_item(&test_support::mock_item(&format!("job-{i}")))
                .await,
        );
    }
    // Let the watch see the items (nothing to do yet: no jobID), then count from here; the
    // story itself only writes new jobs and lists (a GET would count as the host's).
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.reset_stats();
    let mut jobs = Vec::new();
    for item in &current {
        let next = deployer_host::dev::landscaper::with_new_job(item);
        let name = item.metadata.name.as_deref().unwrap();
        items
            .replace_status(name, &PostParams::default(), &next)
            .await
            .unwrap();
        jobs.push(next.status().job_id);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let listed = items.list(&Default::default()).await.unwrap().items;
        let done: Vec<_> = listed
            .iter()
            .filter(|i| jobs.contains(&i.status().job_id_finished))
            .collect();
        if done.len() == n {
            for i in done {
                assert_eq!(
                    i.status().phase,
                    Phase::Succeeded,
                    "{:?}",
                    i.status().last_error
                );
            }
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {n} jobs finished",
            done.len()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    server.stats().count("get", ITEMS)
}

/// Given the full item cache, when Landscaper issues jobs, then the host reads no item to run
/// them; the default watch reads each item once per job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_full_item_cache_when_jobs_run_then_the_host_reads_no_item() {
    skip_on_real!("counts requests at the embedded API server");
    let n = 12;
    let full = item_reads_for_jobs(ItemCache::Full, n).await;
    assert_eq!(full, 0, "the full-object watch holds every item");
    let metadata = item_reads_for_jobs(ItemCache::Metadata, n).await;
    assert!(
        metadata >= n as u64,
        "the metadata watch reads an item per job: {metadata} reads for {n} jobs"
    );
}

/// Given the full item cache and a finished job, when Landscaper issues the next job at once
/// (the cache may still hold the item of the last), then the next job runs, and again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_full_item_cache_when_jobs_follow_each_other_then_each_runs_once() {
    let h = Harness::start_with(options(ItemCache::Full, false)).await;
    h.create_item(&test_support::mock_item("again")).await;
    for round in 0..5 {
        let job = new_job(&h, "again").await;
        let item = h
            .wait_for("default", "again", Duration::from_secs(20), |i| {
                i.status().job_id_finished == job
            })
            .await;
        let s = item.status();
        assert_eq!(
            s.phase,
            Phase::Succeeded,
            "round {round}: {:?}",
            s.last_error
        );
        assert_eq!(s.job_id, job, "round {round}: no job invented");
    }
}

/// Given the full item cache, when a finished item is deleted, then the host removes its
/// finalizer and the item is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_full_item_cache_when_an_item_is_deleted_then_it_disappears() {
    let h = Harness::start_with(options(ItemCache::Full, true)).await;
    h.create_item(&test_support::mock_item("to-delete")).await;
    h.wait_finished("default", "to-delete").await;
    h.items("default")
        .delete("to-delete", &DeleteParams::default())
        .await
        .unwrap();
    h.wait_gone("default", "to-delete", Duration::from_secs(20))
        .await;
}
