//! Isolation stories: a plugin that traps, loops or allocates without bound fails its own item
//! with the right Landscaper code, and the host goes on serving every other item.

use std::time::Duration;

use deployer_host::config::{HostConfig, LimitsConfig};
use deployer_host::landscaper::{Phase, codes};
use test_support::{Harness, Options, faulty_item as faulty, mock_item};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_misbehaving_plugins_then_only_their_own_items_fail_with_the_right_code() {
    let mut config = HostConfig {
        requeue_interval: Some("200ms".into()),
        ..HostConfig::default()
    };
    config.plugins.per_plugin.insert(
        "faulty".into(),
        LimitsConfig {
            deadline: Some("1s".into()),
            memory_mib: Some(32),
        },
    );
    let h = Harness::start_with(Options {
        config,
        test_plugins: true,
        ..Options::default()
    })
    .await;

    h.create_item(&faulty("traps", "trap")).await;
    h.create_item(&faulty("loops", "loop")).await;
    h.create_item(&faulty("hogs", "allocate")).await;
    h.create_item(&mock_item("healthy")).await;

    let wait = |name: &'static str| {
        h.wait_for("default", name, Duration::from_secs(30), |i| {
            let s = i.status();
            !s.job_id.is_empty() && s.job_id == s.job_id_finished
        })
    };
    let traps = wait("traps").await.status();
    let loops = wait("loops").await.status();
    let hogs = wait("hogs").await.status();
    let healthy = wait("healthy").await.status();

    assert_eq!(traps.phase, Phase::Failed);
    let err = traps.last_error.unwrap();
    assert_eq!(err.codes, vec![codes::INTERNAL_PROBLEM.to_string()]);
    assert!(
        err.message.contains("deliberate trap") || err.message.contains("unreachable"),
        "{}",
        err.message
    );

    assert_eq!(loops.phase, Phase::Failed);
    assert_eq!(
        loops.last_error.unwrap().codes,
        vec![codes::TIMEOUT.to_string()]
    );

    assert_eq!(hogs.phase, Phase::Failed);
    let err = hogs.last_error.unwrap();
    assert_eq!(err.codes, vec![codes::INTERNAL_PROBLEM.to_string()]);
    assert!(err.message.contains("memory"), "{}", err.message);

    assert_eq!(
        healthy.phase,
        Phase::Succeeded,
        "the host and other items are unaffected"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_plugin_without_ambient_authority_then_it_sees_no_env_files_or_network() {
    let h = Harness::start_with(Options {
        test_plugins: true,
        ..Options::default()
    })
    .await;
    for action in ["env", "fs", "net"] {
        h.create_item(&faulty(action, action)).await;
    }
    for action in ["env", "fs", "net"] {
        let s = h.wait_finished("default", action).await.status();
        assert_eq!(s.phase, Phase::Succeeded, "{action}: {:?}", s.last_error);
        let seen = s.provider_status.unwrap();
        match action {
            "env" => {
                assert_eq!(seen["env"], serde_json::json!([]), "no environment");
                assert_eq!(seen["args"], serde_json::json!([]), "no arguments");
            }
            "fs" => {
                for probe in ["root", "dot"] {
                    assert!(
                        seen[probe].as_str().unwrap().starts_with("error"),
                        "{probe}: {seen}"
                    );
                }
                assert!(
                    seen["passwd"].is_string(),
                    "reading /etc/passwd failed: {seen}"
                );
                assert!(seen["write"].is_string(), "writing failed: {seen}");
            }
            _ => assert!(seen["connect"].is_string(), "connecting failed: {seen}"),
        }
    }
}
