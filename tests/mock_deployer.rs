//! Contract stories with the mock deployer plugin (Landscaper contract sections 3 and 8, cases
//! of 12.1 and 12.2), run against the embedded API server with the simulated Landscaper.
//!
//! Every story runs twice: against the Rust mock (`plugins/mock`) and against its Go port
//! (`plugins/go/mock`, built by `cargo xtask build-polyglot go` into
//! `target/polyglot-plugins/go/go-mock.wasm`). Locally the Go runs are skipped when it was not
//! built; under `CI=true` a missing build is a failure. On the real API server only the Rust
//! mock's stories run.

use std::sync::atomic::Ordering;
use std::time::Duration;

use deployer_host::config::HostConfig;
use deployer_host::landscaper::{FINALIZER, Phase, codes};
use deployer_host::targetselector::{Requirement, TargetSelector};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use test_support::skip_on_real;
use test_support::{Harness, Options};

/// A harness whose `landscaper.gardener.cloud/mock` plugin is the one in `lang` (`rust`: the
/// host's own plugins directory; `go`: the Go plugins), or `None` (skip) when the Go plugins
/// were not built outside CI.
async fn start(lang: &str, mut options: Options) -> Option<Harness> {
    if lang == "go" {
        if test_support::backend() == test_support::Backend::Real {
            // The backend's side is covered by the Rust mock's run there; the Go port is about
            // the plugin, and CI's time is better spent elsewhere.
            eprintln!("SKIP on the real API server: the Go mock runs on the embedded one");
            return None;
        }
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../target/polyglot-plugins/go");
        if !dir.join("go-mock.wasm").is_file() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "no Go mock in {} (CI=true): `cargo xtask build-polyglot go` builds it",
                dir.display()
            );
            eprintln!(
                "skipped: no Go mock in {} (run `cargo xtask build-polyglot go`)",
                dir.display()
            );
            return None;
        }
        options.config.plugins.dir = Some(dir);
    }
    Some(Harness::start_with(options).await)
}

/// The mock item of the support module, plus a providerStatus and an export.
fn mock_item(name: &str) -> String {
    test_support::mock_item(name)
        + "    providerStatus:
      apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
      kind: ProviderStatus
      key1: val1
    export:
      key2: val2
"
}

async fn given_a_new_mock_item_when_landscaper_issues_a_job_then_it_succeeds_with_exports(
    lang: &str,
) {
    let Some(h) = start(lang, Options::default()).await else {
        return;
    };
    h.create_item(&mock_item("exports")).await;

    let item = h.wait_finished("default", "exports").await;
    let s = item.status();
    assert_eq!(s.phase, Phase::Succeeded);
    assert_eq!(s.job_id, s.job_id_finished);
    assert_eq!(s.observed_generation, 1);
    assert!(s.last_reconcile_time.is_some(), "pickup is marked");
    assert!(s.last_error.is_none());
    let deployer = s.deployer.clone().expect("status.deployer");
    // Named as Landscaper names its mock deployer; the identity is the host's.
    assert_eq!(deployer.name, "mock.deployer.landscaper.gardener.cloud");
    assert!(!deployer.identity.is_empty() && !deployer.version.is_empty());
    let times = s.transition_times.clone().unwrap();
    assert!(
        times.trigger_time.is_some() && times.init_time.is_some() && times.finished_time.is_some()
    );
    assert_eq!(s.provider_status.clone().unwrap()["key1"], "val1");
    assert!(item.has_finalizer(FINALIZER));
    let validation = s
        .conditions
        .iter()
        .find(|c| c.type_ == "DeployItemValidation")
        .expect("DeployItemValidation condition");
    assert_eq!(validation.status, "True");

    // The host counts the job, by type and final phase, once its final write returned, which
    // the status may show first.
    const FINISHED_ONE: &str = "wasm_deployer_jobs_finished_total{type=\"landscaper.gardener.cloud/mock\",phase=\"Succeeded\"} 1\n";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let metrics = loop {
        let metrics = deployer_host::metrics::render(&h.deployer);
        if metrics.contains(FINISHED_ONE) || tokio::time::Instant::now() > deadline {
            break metrics;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(metrics.contains(FINISHED_ONE), "{metrics}");
    assert!(
        metrics.contains("wasm_deployer_worker_threads_max 10\n"),
        "{metrics}"
    );

    let export_ref = s.export_ref.clone().expect("status.exportRef");
    assert!(
        export_ref.name.starts_with("mock-export-"),
        "{}",
        export_ref.name
    );
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), "default");
    let secret = secrets.get(&export_ref.name).await.unwrap();
    let config = &secret.data.unwrap()["config"].0;
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(config).unwrap(),
        json!({"key2": "val2"})
    );
}

async fn given_a_succeeded_item_when_it_is_deleted_then_it_and_its_export_disappear(lang: &str) {
    let Some(h) = start(lang, Options::default()).await else {
        return;
    };
    h.create_item(&mock_item("to-delete")).await;
    let item = h.wait_finished("default", "to-delete").await;
    let export = item.status().export_ref.unwrap().name;

    h.items("default")
        .delete("to-delete", &DeleteParams::default())
        .await
        .unwrap();
    h.wait_gone("default", "to-delete", Duration::from_secs(20))
        .await;
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), "default");
    assert!(
        secrets.get_opt(&export).await.unwrap().is_none(),
        "export Secret removed"
    );
}

async fn given_delete_without_uninstall_when_deleted_then_only_the_finalizer_goes(lang: &str) {
    let Some(h) = start(lang, Options::default()).await else {
        return;
    };
    h.create_item(&mock_item("keep")).await;
    h.wait_finished("default", "keep").await;
    let patch = json!({"metadata": {"annotations": {"landscaper.gardener.cloud/delete-without-uninstall": "true"}}});
    h.items("default")
        .patch("keep", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let calls_before = h.deployer.stats.plugin_calls.load(Ordering::Relaxed);

    h.items("default")
        .delete("keep", &DeleteParams::default())
        .await
        .unwrap();
    h.wait_gone("default", "keep", Duration::from_secs(20))
        .await;
    assert_eq!(
        h.deployer.stats.plugin_calls.load(Ordering::Relaxed),
        calls_before,
        "the plugin's delete was not called"
    );
}

async fn given_a_spec_change_when_landscaper_issues_a_new_job_then_the_new_config_is_applied(
    lang: &str,
) {
    let Some(h) = start(lang, Options::default()).await else {
        return;
    };
    h.create_item(&mock_item("changed")).await;
    let first = h.wait_finished("default", "changed").await;

    let patch = json!({"spec": {"config": {"providerStatus": {"key1": "val2"}}}});
    h.items("default")
        .patch("changed", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let second = h
        .wait_for("default", "changed", Duration::from_secs(20), |i| {
            let s = i.status();
            s.job_id != first.status().job_id && s.job_id == s.job_id_finished
        })
        .await;
    let s = second.status();
    assert_eq!(s.observed_generation, 2);
    assert_eq!(s.provider_status.unwrap()["key1"], "val2");
    assert_eq!(
        s.export_ref,
        first.status().export_ref,
        "the export Secret is reused"
    );
}

async fn given_a_malformed_config_then_the_item_fails_with_a_configuration_problem(lang: &str) {
    let Some(h) = start(lang, Options::default()).await else {
        return;
    };
    h.create_item(
        r#"
apiVersion: landscaper.gardener.cloud/v1alpha1
kind: DeployItem
metadata: {name: broken, namespace: default}
spec:
  type: landscaper.gardener.cloud/mock
  config:
    apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1
    kind: ProviderConfiguration
    phase: [not, a, phase]
"#,
    )
    .await;
    let item = h.wait_finished("default", "broken").await;
    let s = item.status();
    assert_eq!(s.phase, Phase::Failed);
    let err = s.last_error.unwrap();
    assert!(
        err.codes
            .contains(&codes::CONFIGURATION_PROBLEM.to_string()),
        "{err:?}"
    );
    assert!(
        err.message.contains("phase"),
        "message says what is wrong: {}",
        err.message
    );
}

async fn given_no_provider_configuration_then_the_item_fails(lang: &str) {
    let Some(h) = start(lang, Options::default()).await else {
        return;
    };
    h.create_item(
        "apiVersion: landscaper.gardener.cloud/v1alpha1\nkind: DeployItem\nmetadata: {name: empty, namespace: default}\nspec: {type: landscaper.gardener.cloud/mock}\n",
    )
    .await;
    let s = h.wait_finished("default", "empty").await.status();
    assert_eq!(s.phase, Phase::Failed);
    let err = s.last_error.unwrap();
    assert_eq!(err.reason, "ProviderConfigurationMissing");
    assert_eq!(err.codes, vec![codes::CONFIGURATION_PROBLEM.to_string()]);
}

async fn given_a_missing_target_then_the_item_fails_with_no_target_found(lang: &str) {
    let Some(h) = start(lang, Options::default()).await else {
        return;
    };
    h.create_item(&mock_item("no-target").replace(
        "spec:\n",
        "spec:\n  target: {name: does-not-exist, namespace: default}\n",
    ))
    .await;
    let s = h.wait_finished("default", "no-target").await.status();
    assert_eq!(s.phase, Phase::Failed);
    assert_eq!(s.last_error.unwrap().reason, "NoTargetFound");
    assert!(
        s.last_reconcile_time.is_none(),
        "Landscaper does not initialise the status here"
    );
}

async fn given_a_missing_context_then_the_job_stays_unfinished_and_is_retried(lang: &str) {
    let Some(h) = start(lang, Options::default()).await else {
        return;
    };
    h.create_item(&mock_item("no-context").replace("spec:\n", "spec:\n  context: nope\n"))
        .await;
    let item = h
        .wait_for("default", "no-context", Duration::from_secs(20), |i| {
            i.status().last_errors.len() >= 2
        })
        .await;
    let s = item.status();
    assert_ne!(
        s.job_id, s.job_id_finished,
        "retryable errors do not finish the job"
    );
    assert_eq!(s.phase, Phase::Init);
    assert_eq!(s.last_error.unwrap().reason, "GetLandscaperContext");
}

async fn given_items_that_are_not_ours_then_they_are_never_written(lang: &str) {
    let mut config = HostConfig {
        requeue_interval: Some("200ms".into()),
        ..HostConfig::default()
    };
    config.target_selectors = vec![TargetSelector {
        annotations: vec![Requirement {
            key: "somekey".into(),
            operator: "=".into(),
            values: vec!["do".into()],
        }],
        ..Default::default()
    }];
    let Some(h) = start(
        lang,
        Options {
            config,
            ..Options::default()
        },
    )
    .await
    else {
        return;
    };
    // An item of another type, and a mock item whose Target does not match the selector.
    h.create_item(
        &mock_item("foreign").replace("landscaper.gardener.cloud/mock", "example.com/other"),
    )
    .await;
    h.create_item(&mock_item("unmatched").replace(
        "spec:\n",
        "spec:\n  target: {name: default, namespace: default}\n",
    ))
    .await;
    // Snapshot them once the simulated Landscaper has given them a job.
    let mut snapshots = Vec::new();
    for name in ["foreign", "unmatched"] {
        let item = h
            .wait_for("default", name, Duration::from_secs(10), |i| {
                !i.status().job_id.is_empty()
            })
            .await;
        snapshots.push((name, serde_json::to_string(&item).unwrap()));
    }
    // A Target that matches, and an item on it, to know when the host has run.
    let targets: Api<deployer_host::landscaper::Target> =
        Api::namespaced(h.client.clone(), "default");
    let mut matching = targets.get("default").await.unwrap();
    matching.metadata = kube::api::ObjectMeta {
        name: Some("matching".into()),
        namespace: Some("default".into()),
        annotations: Some([("somekey".to_string(), "do".to_string())].into()),
        ..Default::default()
    };
    targets
        .create(&PostParams::default(), &matching)
        .await
        .unwrap();
    h.create_item(&mock_item("matched").replace(
        "spec:\n",
        "spec:\n  target: {name: matching, namespace: default}\n",
    ))
    .await;
    assert_eq!(
        h.wait_finished("default", "matched").await.status().phase,
        Phase::Succeeded
    );
    tokio::time::sleep(Duration::from_millis(500)).await;

    for (name, before) in snapshots {
        let now = serde_json::to_string(&h.items("default").get(name).await.unwrap()).unwrap();
        assert_eq!(now, before, "{name} is byte-for-byte unchanged");
    }
}

async fn given_an_item_without_a_jobid_change_then_the_host_writes_nothing(lang: &str) {
    let Some(h) = start(
        lang,
        Options {
            landscaper: false,
            ..Options::default()
        },
    )
    .await
    else {
        return;
    };
    let created = h.create_item(&mock_item("idle")).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let now = h.items("default").get("idle").await.unwrap();
    assert_eq!(
        now.metadata.resource_version,
        created.metadata.resource_version
    );
}

async fn given_a_provider_status_without_api_version_and_kind_then_the_item_fails_with_a_clear_error(
    lang: &str,
) {
    let Some(h) = start(lang, Options::default()).await else {
        return;
    };
    h.create_item(&mock_item("bad-status").replace(
        "      apiVersion: mock.deployer.landscaper.gardener.cloud/v1alpha1\n      kind: ProviderStatus\n",
        "",
    ))
    .await;
    let s = h.wait_finished("default", "bad-status").await.status();
    assert_eq!(s.phase, Phase::Failed);
    let err = s.last_error.unwrap();
    assert_eq!(err.reason, "InvalidProviderStatus");
    assert!(
        err.message.contains("apiVersion and kind"),
        "{}",
        err.message
    );
}

async fn given_an_initial_phase_then_the_item_stays_in_it_until_its_progressing_timeout(
    lang: &str,
) {
    let Some(h) = start(lang, Options::default()).await else {
        return;
    };
    h.create_item(
        &mock_item("initial")
            .replace("spec:\n", "spec:\n  timeout: 2s\n")
            .replace("phase: Succeeded\n", "initialPhase: Progressing\n"),
    )
    .await;
    // The first step writes the initial phase; later steps keep it: the job stays open …
    let open = h
        .wait_for("default", "initial", Duration::from_secs(20), |i| {
            i.status().phase == Phase::Progressing
        })
        .await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let still = h.items("default").get("initial").await.unwrap().status();
    assert_eq!(still.phase, Phase::Progressing, "no automatic Succeeded");
    assert_eq!(still.job_id, open.status().job_id);
    assert_ne!(still.job_id, still.job_id_finished);
    // … until the host's progressing timeout ends it.
    let s = h.wait_finished("default", "initial").await.status();
    assert_eq!(s.phase, Phase::Failed);
    assert_eq!(s.last_error.unwrap().reason, "ProgressingTimeout");
    assert_eq!(
        s.last_reconcile_time,
        open.status().last_reconcile_time,
        "polling a running job keeps lastReconcileTime at its pickup (Landscaper sets it only when a job starts)"
    );
}

/// Given many items whose jobs are finished (as after a restart of the host), when the host
/// starts, then it reads them with a paginated list instead of one GET per item, and a new job
/// on one of them still runs.
async fn given_many_finished_items_when_the_host_starts_then_it_lists_them_instead_of_reading_each(
    lang: &str,
) {
    skip_on_real!("counts requests at the embedded API server");
    let Some(h) = start(
        lang,
        Options {
            landscaper: false,
            controller: false,
            ..Options::default()
        },
    )
    .await
    else {
        return;
    };
    let server = h.server.clone().expect("embedded");
    let items = h.items("default");
    // More than one page of the sweep (500), all finished: Landscaper's last job is done.
    let n = 520;
    for i in 0..n {
        let created = h.create_item(&mock_item(&format!("done-{i}"))).await;
        let mut finished = deployer_host::dev::landscaper::with_new_job(&created);
        let mut status = finished.status();
        status.job_id_finished = status.job_id.clone();
        status.phase = Phase::Succeeded;
        finished.status = Some(status);
        items
            .replace_status(&format!("done-{i}"), &PostParams::default(), &finished)
            .await
            .unwrap();
    }
    server.reset_stats();
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let controller = tokio::spawn(deployer_host::controller::run(
        h.deployer.clone(),
        None,
        4,
        Default::default(),
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        },
    ));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while h.deployer.stats.reconciles.load(Ordering::Relaxed) < n as u64 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the host did not look at every item"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stats = server.stats();
    // The sweep runs beside the watch: the few items reconciled before its first page arrived
    // were read one by one (without the sweep: all 520).
    let reads = stats.count("get", "deployitems.landscaper.gardener.cloud");
    assert!(
        reads < n as u64 / 2,
        "{reads} of {n} items read one by one ({stats:?})"
    );
    assert!(
        stats.count("list", "deployitems.landscaper.gardener.cloud") >= 2,
        "the sweep's two pages ({stats:?})"
    );
    assert_eq!(
        h.deployer.memory.settled_len(),
        n,
        "every finished item recorded"
    );

    // A new job on one of them is picked up as usual.
    let current = items.get("done-7").await.unwrap();
    items
        .replace_status(
            "done-7",
            &PostParams::default(),
            &deployer_host::dev::landscaper::with_new_job(&current),
        )
        .await
        .unwrap();
    let s = h.wait_finished("default", "done-7").await.status();
    assert_eq!(s.phase, Phase::Succeeded);
    assert_ne!(s.job_id, current.status().job_id);
    stop.send(true).unwrap();
    let _ = controller.await;
}

/// The stories above, once per implementation of the mock.
macro_rules! mock_stories {
    ($($module:ident: $lang:expr),*) => {$(
        mod $module {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn given_a_new_mock_item_when_landscaper_issues_a_job_then_it_succeeds_with_exports() {
            super::given_a_new_mock_item_when_landscaper_issues_a_job_then_it_succeeds_with_exports($lang).await
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn given_a_succeeded_item_when_it_is_deleted_then_it_and_its_export_disappear() {
            super::given_a_succeeded_item_when_it_is_deleted_then_it_and_its_export_disappear($lang).await
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn given_delete_without_uninstall_when_deleted_then_only_the_finalizer_goes() {
            super::given_delete_without_uninstall_when_deleted_then_only_the_finalizer_goes($lang).await
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn given_a_spec_change_when_landscaper_issues_a_new_job_then_the_new_config_is_applied() {
            super::given_a_spec_change_when_landscaper_issues_a_new_job_then_the_new_config_is_applied($lang).await
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn given_a_malformed_config_then_the_item_fails_with_a_configuration_problem() {
            super::given_a_malformed_config_then_the_item_fails_with_a_configuration_problem($lang).await
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn given_no_provider_configuration_then_the_item_fails() {
            super::given_no_provider_configuration_then_the_item_fails($lang).await
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn given_a_missing_target_then_the_item_fails_with_no_target_found() {
            super::given_a_missing_target_then_the_item_fails_with_no_target_found($lang).await
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn given_a_missing_context_then_the_job_stays_unfinished_and_is_retried() {
            super::given_a_missing_context_then_the_job_stays_unfinished_and_is_retried($lang).await
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn given_items_that_are_not_ours_then_they_are_never_written() {
            super::given_items_that_are_not_ours_then_they_are_never_written($lang).await
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn given_an_item_without_a_jobid_change_then_the_host_writes_nothing() {
            super::given_an_item_without_a_jobid_change_then_the_host_writes_nothing($lang).await
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn given_a_provider_status_without_api_version_and_kind_then_the_item_fails_with_a_clear_error() {
            super::given_a_provider_status_without_api_version_and_kind_then_the_item_fails_with_a_clear_error($lang).await
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn given_an_initial_phase_then_the_item_stays_in_it_until_its_progressing_timeout() {
            super::given_an_initial_phase_then_the_item_stays_in_it_until_its_progressing_timeout($lang).await
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn given_many_finished_items_when_the_host_starts_then_it_lists_them_instead_of_reading_each() {
            super::given_many_finished_items_when_the_host_starts_then_it_lists_them_instead_of_reading_each($lang).await
        }
        }
    )*};
}

mock_stories!(rust: "rust", go: "go");
