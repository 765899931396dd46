//! Many Target clusters over a long time: the host keeps a client only for what is live, and a
//! dead cluster does not hold the others up (`docs/scaling.md`, "Many Target clusters").
//!
//! Distinct clusters on one machine: distinct kubeconfigs of the test's API server (each a
//! client of its own, as a rotated token would be), loopback ports that refuse connections, and
//! a listener that accepts and never answers. Runs on both backends.

use std::time::Duration;

use deployer_host::capabilities::TargetClustersConfig;
use deployer_host::landscaper::{DeployItem, Phase};
use serde_json::{Value, json};
use test_support::manifest::{cm, create, create_target, item_on, put};
use test_support::{Harness, Options, until};

/// A kubeconfig that reaches the test's API server over the network (the embedded server is
/// served on loopback for it; keep the returned handle while it is used).
async fn reachable(h: &Harness) -> (Value, Option<embedded_apiserver::LoopbackServing>) {
    match &h.server {
        Some(server) => {
            let serving = server.serve_on_loopback().await.unwrap();
            (
                serde_yaml::from_str(&serving.kubeconfig()).unwrap(),
                Some(serving),
            )
        }
        None => (serde_yaml::from_str(&h.target_kubeconfig).unwrap(), None),
    }
}

/// The same cluster and credentials under another context name: to the host another
/// kubeconfig, so another client — as a new cluster or a rotated token would be.
fn variant(kubeconfig: &Value, name: &str) -> String {
    let mut k = kubeconfig.clone();
    k["contexts"][0]["name"] = json!(name);
    k["current-context"] = json!(name);
    serde_yaml::to_string(&k).unwrap()
}

/// `kubeconfig` pointing at `server` instead.
fn at_server(kubeconfig: &Value, server: &str) -> String {
    let mut k = kubeconfig.clone();
    k["clusters"][0]["cluster"]["server"] = json!(server);
    serde_yaml::to_string(&k).unwrap()
}

fn server_of(kubeconfig: &Value) -> String {
    kubeconfig["clusters"][0]["cluster"]["server"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn set_target(h: &Harness, name: &str, kubeconfig: &str) {
    create_target(h, name, json!({"config": {"kubeconfig": kubeconfig}})).await;
}

/// A manifest item on Target `target` that creates the ConfigMap `name` (optionally with a
/// progressing timeout).
fn configmap_item(name: &str, target: &str, timeout: Option<&str>) -> Value {
    let mut item = item_on(
        name,
        target,
        json!({"updateStrategy": "update",
               "manifests": [{"policy": "manage", "manifest": cm(name, json!({"k": "v"}))}]}),
    );
    if let Some(t) = timeout {
        item["spec"]["timeout"] = json!(t);
    }
    item
}

fn harness_options(clusters: &str) -> Options {
    let mut options = Options::default();
    options.config.target_clusters =
        serde_yaml::from_str::<TargetClustersConfig>(clusters).unwrap();
    options
}

async fn wait_succeeded(h: &Harness, name: &str) -> DeployItem {
    let item = h
        .wait_for("default", name, Duration::from_secs(60), |i| {
            let s = i.status();
            !s.job_id.is_empty() && s.job_id == s.job_id_finished
        })
        .await;
    assert_eq!(
        item.status().phase,
        Phase::Succeeded,
        "{name}: {:?}",
        item.status().last_error
    );
    item
}

async fn delete_all(h: &Harness, items: &[String], targets: &[String]) {
    for name in items {
        h.items("default")
            .delete(name, &Default::default())
            .await
            .unwrap();
    }
    for name in items {
        h.wait_gone("default", name, Duration::from_secs(30)).await;
    }
    let api: kube::Api<deployer_host::landscaper::Target> =
        kube::Api::namespaced(h.client.clone(), "default");
    for name in targets {
        api.delete(name, &Default::default()).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_targets_whose_kubeconfigs_rotate_then_old_clients_go_at_once_and_deleted_targets_take_theirs()
 {
    let h = Harness::start().await;
    let (base, _serving) = reachable(&h).await;
    let pinned = h.target_clients.stats().clients;
    let names: Vec<String> = (0..3).map(|i| format!("rotating-{i}")).collect();

    // Given three Targets, each with a kubeconfig of its own, and an item on each.
    for (i, name) in names.iter().enumerate() {
        set_target(&h, name, &variant(&base, &format!("c{i}-v1"))).await;
        create(&h, &configmap_item(name, name, None)).await;
    }
    for name in &names {
        wait_succeeded(&h, name).await;
    }
    let stats = h.target_clients.stats();
    assert_eq!(
        stats.clients,
        pinned + 3,
        "one client per live Target: {stats:?}"
    );

    // When every Target's kubeconfig is renewed and the items run again,
    for (i, name) in names.iter().enumerate() {
        set_target(&h, name, &variant(&base, &format!("c{i}-v2"))).await;
        let before = h.items("default").get(name).await.unwrap().status().job_id;
        let mut item = configmap_item(name, name, None);
        item["spec"]["config"]["manifests"][0]["manifest"]["data"]["k"] = json!("v2");
        put(&h, item).await;
        test_support::manifest::wait_next_job(&h, name, &before).await;
    }
    // then the host holds one client per Target still, and let the old ones go as it saw the
    // new kubeconfigs.
    let stats = h.target_clients.stats();
    assert_eq!(stats.clients, pinned + 3, "{stats:?}");
    assert_eq!(stats.released_target, 3, "{stats:?}");
    assert_eq!(stats.built, 6, "{stats:?}");

    // When the items and their Targets are deleted, their clients go with the Targets.
    delete_all(&h, &names, &names).await;
    until(
        "the deleted Targets' clients to be released",
        Duration::from_secs(20),
        || h.target_clients.stats().clients == pinned,
    )
    .await;
    assert_eq!(h.target_clients.stats().released_target, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_cluster_left_idle_then_its_connections_close_and_later_its_client_goes() {
    let h = Harness::start_with(harness_options(
        "idleTimeout: 3s\nconnectionIdleTimeout: 300ms\n",
    ))
    .await;
    let (base, _serving) = reachable(&h).await;
    let pinned = h.target_clients.stats().clients;
    set_target(&h, "quiet", &variant(&base, "quiet")).await;
    create(&h, &configmap_item("quiet", "quiet", None)).await;
    wait_succeeded(&h, "quiet").await;
    assert_eq!(h.target_clients.stats().clients, pinned + 1);

    // The Target still exists, but nothing uses its cluster: first its kept-alive connection
    // closes, then the client itself is released.
    until(
        "the idle connection to close",
        Duration::from_secs(10),
        || h.target_clients.stats().connections == 0,
    )
    .await;
    until(
        "the idle client to be released",
        Duration::from_secs(20),
        || h.target_clients.stats().clients == pinned,
    )
    .await;
    assert_eq!(h.target_clients.stats().released_idle, 1);

    // And when the item runs again, a new client serves it.
    let before = h
        .items("default")
        .get("quiet")
        .await
        .unwrap()
        .status()
        .job_id;
    let mut item = configmap_item("quiet", "quiet", None);
    item["spec"]["config"]["manifests"][0]["manifest"]["data"]["k"] = json!("again");
    put(&h, item).await;
    let done = test_support::manifest::wait_next_job(&h, "quiet", &before).await;
    assert_eq!(done.status().phase, Phase::Succeeded);
}

/// Forwards every connection on `listener` to `backend` (`host:port`): a cluster that "comes
/// back" on a port that refused connections before.
fn forward(listener: tokio::net::TcpListener, backend: String) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let backend = backend.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(&backend).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_refusing_and_a_hanging_cluster_then_their_items_say_why_and_the_healthy_ones_finish()
 {
    let h = Harness::start_with(harness_options(
        "connectTimeout: 1s\nrequestTimeout: 2s\nunreachableRetry: 300ms\nunreachableRetryMax: 1s\n",
    ))
    .await;
    let (base, _serving) = reachable(&h).await;
    let server = server_of(&base);
    let backend = server
        .split("://")
        .nth(1)
        .unwrap()
        .trim_end_matches('/')
        .to_string();

    // Given a cluster whose port refuses connections (bound and not listening: it refuses, and
    // no other socket can take the port before the cluster comes back on it),
    let refusing = tokio::net::TcpSocket::new_v4().unwrap();
    refusing.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let refusing_port = refusing.local_addr().unwrap().port();
    let scheme = server.split("://").next().unwrap();
    let refusing_url = format!("{scheme}://127.0.0.1:{refusing_port}");
    set_target(&h, "refusing", &at_server(&base, &refusing_url)).await;
    // a cluster that accepts connections and never answers (the kernel accepts for a listener
    // that is never served),
    let hanging = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hanging_url = format!("https://{}", hanging.local_addr().unwrap());
    let mut hanging_kubeconfig = base.clone();
    hanging_kubeconfig["clusters"][0]["cluster"] =
        json!({"server": hanging_url, "insecure-skip-tls-verify": true});
    set_target(
        &h,
        "hanging",
        &serde_yaml::to_string(&hanging_kubeconfig).unwrap(),
    )
    .await;
    // and a healthy one.
    set_target(&h, "healthy", &variant(&base, "healthy")).await;

    // When items are created on all three,
    for i in 0..3 {
        create(
            &h,
            &configmap_item(&format!("refused-{i}"), "refusing", None),
        )
        .await;
        create(
            &h,
            &configmap_item(&format!("hung-{i}"), "hanging", Some("8s")),
        )
        .await;
    }
    let healthy: Vec<String> = (0..10).map(|i| format!("healthy-{i}")).collect();
    for name in &healthy {
        create(&h, &configmap_item(name, "healthy", None)).await;
    }

    // then the healthy items succeed,
    for name in &healthy {
        wait_succeeded(&h, name).await;
    }
    // the dead clusters' items say which Target, which API server and why,
    let error_of = |needle: &'static str| {
        move |i: &DeployItem| {
            i.status()
                .last_error
                .is_some_and(|e| e.message.contains(needle))
        }
    };
    for i in 0..3 {
        let refused = h
            .wait_for(
                "default",
                &format!("refused-{i}"),
                Duration::from_secs(20),
                error_of("connection refused"),
            )
            .await;
        let e = refused.status().last_error.unwrap();
        assert!(
            e.message.contains("Target default/refusing"),
            "{}",
            e.message
        );
        assert!(e.message.contains(&refusing_url), "{}", e.message);
        assert_ne!(refused.status().phase, Phase::Failed, "retried, not failed");

        let hung = h
            .wait_for(
                "default",
                &format!("hung-{i}"),
                Duration::from_secs(20),
                error_of("Target default/hanging"),
            )
            .await;
        let e = hung.status().last_error.unwrap();
        assert!(
            e.message.contains("timed out") || e.message.contains("no answer"),
            "{}",
            e.message
        );
        assert!(e.message.contains(&hanging_url), "{}", e.message);
    }
    // and the host knows both endpoints are down.
    assert!(h.target_clients.stats().unreachable >= 1);

    // When the refusing cluster comes back, its items succeed by themselves;
    let _back = forward(refusing.listen(1024).unwrap(), backend);
    for i in 0..3 {
        wait_succeeded(&h, &format!("refused-{i}")).await;
    }
    // the hanging cluster's items are retried until their progressing timeout ends them.
    for i in 0..3 {
        let item = h
            .wait_for(
                "default",
                &format!("hung-{i}"),
                Duration::from_secs(40),
                |i| {
                    let s = i.status();
                    !s.job_id.is_empty() && s.job_id == s.job_id_finished
                },
            )
            .await;
        let s = item.status();
        assert_eq!(s.phase, Phase::Failed);
        assert_eq!(s.last_error.unwrap().reason, "ProgressingTimeout");
    }
    drop(hanging);
}
