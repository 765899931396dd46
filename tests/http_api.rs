//! Outgoing HTTP stories (WIT 1.5, `wasi:http`): a plugin reaches the API its item's
//! `wasm-deployer.dev/http-api` Target names, with credentials the host adds and the plugin never
//! sees, and nothing else. The plugin is `test-http` (tests only: it sends the requests its
//! configuration scripts with `wstd`'s standard wasi:http client and exports what came back); the
//! API is test support's loopback server. Every story runs on both backends.

use std::time::Duration;

use deployer_host::config::HostConfig;
use deployer_host::landscaper::{DeployItem, Phase, codes};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use test_support::http_api::{ApiOptions, ApiServer, refusing_url};
use test_support::manifest::export_config;
use test_support::{Harness, Options};

fn options(config: HostConfig) -> Options {
    Options {
        config: HostConfig {
            requeue_interval: Some("200ms".into()),
            ..config
        },
        test_plugins: true,
        ..Options::default()
    }
}

/// Creates `objects` (Targets, Secrets) in namespace `default`.
async fn create(h: &Harness, objects: &[Value]) {
    for o in objects {
        let kind = o["kind"].as_str().unwrap();
        let api_resource = match kind {
            "Secret" => {
                kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&())
            }
            _ => kube::discovery::ApiResource::erase::<deployer_host::landscaper::Target>(&()),
        };
        let api: Api<kube::api::DynamicObject> =
            Api::namespaced_with(h.client.clone(), "default", &api_resource);
        let obj: kube::api::DynamicObject = serde_json::from_value(o.clone()).unwrap();
        api.create(&PostParams::default(), &obj)
            .await
            .expect("create");
    }
}

fn http_target(name: &str, config: Value) -> Value {
    json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
           "metadata": {"name": name, "namespace": "default"},
           "spec": {"type": "wasm-deployer.dev/http-api", "config": config}})
}

fn secret(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": name, "namespace": "default"}, "stringData": data})
}

/// A `test-http` item on Target `target` with `config` (`requests`, ...).
fn item(name: &str, target: &str, mut config: Value) -> String {
    config["apiVersion"] = json!("test.wasm-deployer.dev/v1");
    config["kind"] = json!("ProviderConfiguration");
    serde_json::to_string(&json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": "test.wasm-deployer.dev/http",
                 "target": {"name": target, "namespace": "default"}, "config": config}
    }))
    .unwrap()
}

async fn finished(h: &Harness, name: &str) -> DeployItem {
    h.wait_for("default", name, Duration::from_secs(60), |i| {
        let s = i.status();
        !s.job_id.is_empty() && s.job_id == s.job_id_finished
    })
    .await
}

/// The finished item `name`: Succeeded, its first request answered 201; its exports.
async fn succeeded_with_201(h: &Harness, name: &str) -> (DeployItem, Value) {
    let done = finished(h, name).await;
    let s = done.status();
    assert_eq!(s.phase, Phase::Succeeded, "{name}: {:?}", s.last_error);
    let exports = export_config(h, &done).await;
    assert_eq!(
        exports["results"][0]["status"].as_u64(),
        Some(201),
        "{name}: {exports}"
    );
    (done, exports)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_bearer_target_when_the_plugin_calls_its_api_then_the_host_adds_the_token_the_plugin_never_sees()
 {
    let api = ApiServer::start(ApiOptions::bearer("t0ken-never-shown")).await;
    let h = Harness::start_with(options(HostConfig::default())).await;
    create(&h, &[
        secret("api-token", json!({"token": "t0ken-never-shown"})),
        http_target("api", json!({"url": api.url(), "auth": {"bearer": {"secretRef": {"name": "api-token", "key": "token"}}}})),
    ]).await;
    // The plugin tries to set its own Authorization: the host's replaces it.
    h.create_item(&item("put", "api", json!({"requests": [
        {"method": "PUT", "url": "things/a", "headers": {"authorization": "Bearer forged"}, "body": {"size": 3}},
        {"method": "GET", "url": "echo-headers"},
    ]}))).await;
    let (_, exports) = succeeded_with_201(&h, "put").await;
    let received = api.requests();
    let put = received
        .iter()
        .find(|r| r.method == "PUT")
        .expect("the PUT arrived");
    assert_eq!(
        put.headers.get("authorization").map(String::as_str),
        Some("Bearer t0ken-never-shown")
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&put.body).unwrap(),
        json!({"size": 3})
    );
    // Neither the Target the plugin saw nor anything it could read back holds the token.
    let seen = exports.to_string();
    assert!(
        !seen.contains("t0ken-never-shown")
            || exports["results"][1]["body"]
                .as_str()
                .unwrap_or_default()
                .contains("t0ken"),
        "only the server's echo may show the token: {seen}"
    );
    assert!(
        !exports["target"].to_string().contains("t0ken-never-shown"),
        "{}",
        exports["target"]
    );
    assert_eq!(
        exports["target"]["content"]
            .as_str()
            .map(|c| c.contains("api-token")),
        Some(true)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_basic_auth_over_https_with_the_targets_ca_then_requests_arrive_authenticated() {
    let api = ApiServer::start_tls(ApiOptions::basic("deployer", "pa55")).await;
    let h = Harness::start_with(options(HostConfig::default())).await;
    let ca = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, api.ca_pem());
    create(&h, &[
        secret("api-basic", json!({"username": "deployer", "password": "pa55"})),
        http_target("tls-api", json!({"url": api.url(), "caData": ca, "auth": {"basic": {"secretRef": {"name": "api-basic"}}}})),
    ]).await;
    h.create_item(&item(
        "tls",
        "tls-api",
        json!({"requests": [
            {"method": "PUT", "url": "things/tls", "body": {"ok": true}},
        ]}),
    ))
    .await;
    succeeded_with_201(&h, "tls").await;
    assert_eq!(api.objects().get("things/tls"), Some(&json!({"ok": true})));
    let expected = format!(
        "Basic {}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "deployer:pa55")
    );
    for r in api.requests() {
        assert_eq!(r.headers.get("authorization"), Some(&expected));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_urls_outside_the_grant_then_the_item_fails_with_http_not_allowed_naming_the_url() {
    let api = ApiServer::start(ApiOptions::default()).await;
    let other = ApiServer::start(ApiOptions::default()).await;
    let h = Harness::start_with(options(HostConfig::default())).await;
    create(&h, &[http_target("api", json!({"url": api.url()}))]).await;
    let outside = format!("{}things/x", other.url());
    // A direct request elsewhere, and a redirect out of the grant that the plugin follows.
    h.create_item(&item(
        "direct",
        "api",
        json!({"requests": [{"method": "GET", "url": outside}]}),
    ))
    .await;
    let to = urlencode(&format!("{}stolen", other.url()));
    h.create_item(&item(
        "redirected",
        "api",
        json!({"followRedirects": true,
        "requests": [{"method": "GET", "url": format!("redirect?to={to}")}]}),
    ))
    .await;
    // Below the Target's host but outside its path, and a dot segment climbing out of it.
    h.create_item(&item(
        "sideways",
        "api",
        json!({"requests": [
        {"method": "GET", "url": api.url().replace("/api/v1/", "/admin")}]}),
    ))
    .await;
    for (name, url) in [
        ("direct", outside.clone()),
        ("redirected", format!("{}stolen", other.url())),
        ("sideways", api.url().replace("/api/v1/", "/admin")),
    ] {
        let s = finished(&h, name).await.status();
        assert_eq!(s.phase, Phase::Failed, "{name}");
        let e = s.last_error.expect("lastError");
        assert_eq!(
            e.codes,
            vec![codes::CONFIGURATION_PROBLEM.to_string()],
            "{name}"
        );
        assert_eq!(e.reason, "HttpNotAllowed", "{name}");
        assert!(e.message.contains(&url), "{name}: {}", e.message);
    }
    assert!(
        other.requests().is_empty(),
        "nothing reached the API outside the grant"
    );
    assert_eq!(h.deployer.http.stats.count("test-http", "denied"), 3);
    let metrics = deployer_host::metrics::render(&h.deployer);
    assert!(
        metrics.contains("wasm_deployer_plugin_http_requests_total{plugin=\"test-http\""),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_secondary_target_named_by_target_name_then_it_is_granted_and_others_are_not() {
    let primary = ApiServer::start(ApiOptions::default()).await;
    let second = ApiServer::start(ApiOptions::bearer("second-token")).await;
    let third = ApiServer::start(ApiOptions::default()).await;
    let h = Harness::start_with(options(HostConfig::default())).await;
    create(&h, &[
        secret("second-token", json!({"token": "second-token"})),
        http_target("primary", json!({"url": primary.url()})),
        http_target("second", json!({"url": second.url(), "auth": {"bearer": {"secretRef": {"name": "second-token"}}}})),
        http_target("third", json!({"url": third.url()})),
    ]).await;
    h.create_item(&item(
        "named",
        "primary",
        json!({"also": {"targetName": "second"},
        "requests": [{"method": "PUT", "url": format!("{}things/b", second.url()), "body": {}}]}),
    ))
    .await;
    h.create_item(&item(
        "unnamed",
        "primary",
        json!({
        "requests": [{"method": "PUT", "url": format!("{}things/c", third.url()), "body": {}}]}),
    ))
    .await;
    let named = finished(&h, "named").await.status();
    assert_eq!(named.phase, Phase::Succeeded, "{:?}", named.last_error);
    assert_eq!(
        second.requests()[0]
            .headers
            .get("authorization")
            .map(String::as_str),
        Some("Bearer second-token")
    );
    let unnamed = finished(&h, "unnamed").await.status();
    assert_eq!(
        unnamed.last_error.expect("lastError").reason,
        "HttpNotAllowed"
    );
    assert!(third.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_response_over_the_cap_then_the_item_fails_naming_the_limit() {
    let api = ApiServer::start(ApiOptions::default()).await;
    let mut config = HostConfig::default();
    config.http.max_response_kib = Some(64);
    let h = Harness::start_with(options(config)).await;
    create(&h, &[http_target("api", json!({"url": api.url()}))]).await;
    h.create_item(&item(
        "small",
        "api",
        json!({"requests": [{"url": "big?bytes=60000"}]}),
    ))
    .await;
    h.create_item(&item(
        "big",
        "api",
        json!({"requests": [{"url": "big?bytes=70000"}]}),
    ))
    .await;
    assert_eq!(finished(&h, "small").await.status().phase, Phase::Succeeded);
    let s = finished(&h, "big").await.status();
    assert_eq!(s.phase, Phase::Failed);
    let e = s.last_error.unwrap();
    assert_eq!(e.reason, "HttpResponseTooLarge", "{}", e.message);
    assert!(
        e.message.contains("64 KiB") && e.message.contains("big?bytes=70000"),
        "{}",
        e.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_refusing_and_a_hanging_endpoint_then_their_items_name_the_endpoint_and_healthy_items_go_on()
 {
    let api = ApiServer::start(ApiOptions::default()).await;
    let mut config = HostConfig::default();
    config.http.request_timeout = Some("2s".into());
    let h = Harness::start_with(options(config)).await;
    let refusing = refusing_url();
    create(
        &h,
        &[
            http_target("api", json!({"url": api.url()})),
            http_target("refusing", json!({"url": refusing})),
        ],
    )
    .await;
    h.create_item(&item(
        "refused",
        "refusing",
        json!({"failOnError": true, "requests": [{"url": "x"}]}),
    ))
    .await;
    h.create_item(&item(
        "hangs",
        "api",
        json!({"failOnError": true, "requests": [{"url": "hang"}]}),
    ))
    .await;
    for i in 0..6 {
        h.create_item(&item(
            &format!("healthy-{i}"),
            "api",
            json!({"requests": [{"method": "PUT", "url": format!("things/{i}"), "body": {}}]}),
        ))
        .await;
    }
    for i in 0..6 {
        let s = finished(&h, &format!("healthy-{i}")).await.status();
        assert_eq!(s.phase, Phase::Succeeded, "healthy-{i}: {:?}", s.last_error);
    }
    let waiting = |name: &'static str, needle: &'static str| {
        h.wait_for("default", name, Duration::from_secs(30), move |i| {
            i.status()
                .last_error
                .is_some_and(|e| e.message.contains(needle))
        })
    };
    let refused = waiting("refused", "127.0.0.1")
        .await
        .status()
        .last_error
        .unwrap();
    assert!(
        refused.message.contains("ConnectionRefused"),
        "{}",
        refused.message
    );
    assert!(refused.codes.is_empty(), "retried, not failed: {refused:?}");
    let hangs = waiting("hangs", "/hang").await.status().last_error.unwrap();
    assert!(hangs.message.contains("Timeout"), "{}", hangs.message);
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Creates `n` healthy items (`{prefix}-{i}`, one PUT each) at once and returns how long each
/// took from its creation to its finished job, sorted.
async fn healthy_round(h: &Harness, prefix: &str, n: usize) -> Vec<Duration> {
    let started = std::time::Instant::now();
    for i in 0..n {
        h.create_item(&item(
            &format!("{prefix}-{i}"),
            "api",
            json!({"requests": [
            {"method": "PUT", "url": format!("things/{prefix}-{i}"), "body": {"i": i}}]}),
        ))
        .await;
    }
    let waits = (0..n).map(|i| {
        let name = format!("{prefix}-{i}");
        async move {
            let s = finished(h, &name).await.status();
            assert_eq!(s.phase, Phase::Succeeded, "{name}: {:?}", s.last_error);
            started.elapsed()
        }
    });
    let mut times = futures::future::join_all(waits).await;
    times.sort();
    times
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_dead_endpoints_beside_healthy_items_then_the_healthy_ones_are_not_held_behind_them()
{
    let api = ApiServer::start(ApiOptions::default()).await;
    let mut config = HostConfig::default();
    config.plugins.per_plugin.insert(
        "test-http".into(),
        deployer_host::config::LimitsConfig {
            deadline: Some("5s".into()),
            memory_mib: None,
        },
    );
    let h = Harness::start_with(options(config)).await;
    create(
        &h,
        &[
            http_target("api", json!({"url": api.url()})),
            http_target("refusing", json!({"url": refusing_url()})),
        ],
    )
    .await;
    healthy_round(&h, "warm-up", 4).await;
    let alone = healthy_round(&h, "alone", 12).await;
    // Three items whose API never answers and three whose API refuses, retried all along.
    for i in 0..3 {
        h.create_item(&item(
            &format!("hangs-{i}"),
            "api",
            json!({"failOnError": true, "requests": [{"url": "hang"}]}),
        ))
        .await;
        h.create_item(&item(
            &format!("refused-{i}"),
            "refusing",
            json!({"failOnError": true, "requests": [{"url": "x"}]}),
        ))
        .await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    // p99 of 12 is the slowest: the median of three rounds' keeps one scheduling hiccup of a
    // loaded 2-core machine from deciding.
    let p99 = |t: &[Duration]| t[t.len() - 1];
    let mut beside = Vec::new();
    for round in 0..3 {
        beside.push(p99(&healthy_round(&h, &format!("beside-{round}"), 12).await));
    }
    beside.sort();
    eprintln!(
        "healthy p99 alone: {:?}, beside dead endpoints (3 rounds): {beside:?}",
        p99(&alone)
    );
    // A healthy item held behind a dead endpoint would wait for that item's 5 s deadline, so
    // the bound is half of it: far above a loaded machine's noise (alone ~0.2 s, up to 0.7 s
    // beside the whole CI pass), far below being held. How close to alone they are is a
    // figure (printed above), not a timed assertion.
    let held = Duration::from_secs(5) / 2;
    assert!(
        beside[1] < held,
        "healthy p99 beside dead endpoints {:?} (alone {:?}) is not below {held:?}: held behind \
         a dead endpoint's deadline",
        beside[1],
        p99(&alone)
    );
    // The dead ones are still being retried, each naming its endpoint.
    for i in 0..3 {
        let e = h
            .items("default")
            .get(&format!("hangs-{i}"))
            .await
            .unwrap()
            .status()
            .last_error;
        if let Some(e) = e {
            assert!(e.message.contains("/hang"), "{}", e.message);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_plugin_built_against_wit_1_4_then_it_serves_unchanged_beside_an_http_plugin() {
    // The mock as built against WIT 1.4.0 (host/runtime/tests/fixtures), the only plugin of the
    // host's plugin directory; test-http (1.5) beside it.
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(
        test_support::workspace().join("host/runtime/tests/fixtures/mock-wit-1.4.0.wasm"),
        plugins.path().join("mock.wasm"),
    )
    .unwrap();
    let mut config = HostConfig::default();
    config.plugins.dir = Some(plugins.path().to_path_buf());
    let api = ApiServer::start(ApiOptions::default()).await;
    let h = Harness::start_with(options(config)).await;
    create(&h, &[http_target("api", json!({"url": api.url()}))]).await;
    h.create_item(&test_support::mock_item("old-mock")).await;
    h.create_item(&item(
        "new-http",
        "api",
        json!({"requests": [
        {"method": "PUT", "url": "things/new", "body": {}}]}),
    ))
    .await;
    let old = finished(&h, "old-mock").await.status();
    assert_eq!(old.phase, Phase::Succeeded, "{:?}", old.last_error);
    let new = finished(&h, "new-http").await.status();
    assert_eq!(new.phase, Phase::Succeeded, "{:?}", new.last_error);
    assert_eq!(api.objects().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_target_whose_secret_ref_holds_the_whole_config_then_it_grants_as_an_inline_one() {
    let api = ApiServer::start(ApiOptions::bearer("from-a-secret")).await;
    let h = Harness::start_with(options(HostConfig::default())).await;
    let config = json!({"url": api.url(), "auth": {"bearer": {"secretRef": {"name": "token"}}}});
    create(&h, &[
        secret("token", json!({"token": "from-a-secret"})),
        // One key with the whole config, and every key its own field (auth as JSON text).
        secret("whole", json!({"config": config.to_string()})),
        secret("keys", json!({"url": api.url(), "auth": config["auth"].to_string()})),
        json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
               "metadata": {"name": "by-key", "namespace": "default"},
               "spec": {"type": "wasm-deployer.dev/http-api", "secretRef": {"name": "whole", "key": "config"}}}),
        json!({"apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
               "metadata": {"name": "by-keys", "namespace": "default"},
               "spec": {"type": "wasm-deployer.dev/http-api", "secretRef": {"name": "keys"}}}),
    ]).await;
    for (name, target) in [("one", "by-key"), ("all", "by-keys")] {
        h.create_item(&item(
            name,
            target,
            json!({"requests": [
            {"method": "PUT", "url": format!("things/{name}"), "body": {}}]}),
        ))
        .await;
        let done = finished(&h, name).await;
        assert_eq!(
            done.status().phase,
            Phase::Succeeded,
            "{name}: {:?}",
            done.status().last_error
        );
        let exports = export_config(&h, &done).await;
        assert_eq!(
            exports["results"][0]["status"].as_u64(),
            Some(201),
            "{name}: {exports}"
        );
        assert!(
            !exports["target"].to_string().contains("from-a-secret"),
            "{name}"
        );
    }
    assert_eq!(api.objects().len(), 2);
}
