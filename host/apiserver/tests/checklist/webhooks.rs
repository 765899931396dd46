//! Validating admission webhooks (`apiserver.md` item 17): a ValidatingWebhookConfiguration
//! pointing at a loopback HTTPS webhook server of this test's own (refusing objects labelled
//! `deny=yes`), and what kube-apiserver does with it — the refusal in its words, rules matched
//! by operation, resource, subresource and version, namespace and object selectors, failure
//! policies, timeouts, dry runs, writes raced while a webhook is called, and other requests
//! served meanwhile.

use super::*;
use embedded_apiserver::tls::{ServingCert, TlsListener};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The message the test's webhook refuses with.
const REFUSAL: &str = "the label deny=yes is refused";

/// A loopback HTTPS webhook server: every AdmissionReview request it gets is kept (with the
/// path it came to). Paths: `/validate` refuses an object (for a DELETE: the old object)
/// labelled `deny=yes` as controller-runtime does (code 403, reason Forbidden), after sleeping
/// the milliseconds of a `delay-ms` label; `/no-code` refuses with a message only; `/hang`
/// never answers; `/bad-uid` allows with another uid.
struct WebhookServer {
    base: String,
    ca_bundle: String,
    reviews: Arc<Mutex<Vec<(String, Value)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl WebhookServer {
    async fn start(extra_names: &[&str]) -> WebhookServer {
        let names: Vec<String> = extra_names.iter().map(|n| n.to_string()).collect();
        let cert = ServingCert::generate(&names).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("https://{}", listener.local_addr().unwrap());
        let listener = TlsListener::new(listener, cert.server_config().unwrap()).unwrap();
        let reviews: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
        let seen = reviews.clone();
        let app = axum::Router::new().fallback(
            move |uri: axum::http::Uri, axum::Json(review): axum::Json<Value>| {
                let seen = seen.clone();
                async move {
                    let path = uri.path().to_string();
                    seen.lock()
                        .unwrap()
                        .push((path.clone(), review["request"].clone()));
                    axum::Json(answer(&path, &review["request"]).await)
                }
            },
        );
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        WebhookServer {
            base,
            ca_bundle: embedded_apiserver::builtin::base64_encode(cert.ca_pem().as_bytes()),
            reviews,
            task,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The AdmissionReview requests received so far.
    fn requests(&self) -> Vec<Value> {
        self.reviews
            .lock()
            .unwrap()
            .iter()
            .map(|(_, r)| r.clone())
            .collect()
    }

    fn clear(&self) {
        self.reviews.lock().unwrap().clear();
    }
}

async fn answer(path: &str, req: &Value) -> Value {
    let uid = req["uid"].clone();
    let obj = match req["operation"].as_str() {
        Some("DELETE") => &req["oldObject"],
        _ => &req["object"],
    };
    let label = |k: &str| {
        obj.pointer(&format!("/metadata/labels/{k}"))
            .and_then(Value::as_str)
    };
    if let Some(ms) = label("delay-ms").and_then(|v| v.parse().ok()) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    let deny = label("deny") == Some("yes");
    let response = match path {
        "/hang" => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            json!({"uid": uid, "allowed": true})
        }
        "/bad-uid" => json!({"uid": "someone-else", "allowed": true}),
        "/no-code" if deny => json!({"uid": uid, "allowed": false, "status": {"message": REFUSAL}}),
        _ if deny => json!({"uid": uid, "allowed": false,
            "status": {"code": 403, "reason": "Forbidden", "message": REFUSAL}}),
        _ => json!({"uid": uid, "allowed": true}),
    };
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

/// One webhook named `name` calling `url` with `rules`, plus `extra` fields.
fn hook(name: &str, url: &str, ca: &str, rules: Value, extra: Value) -> Value {
    let mut h = json!({
        "name": name,
        "clientConfig": {"url": url, "caBundle": ca},
        "rules": rules,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        h[k] = v.clone();
    }
    h
}

fn rule(ops: &[&str], groups: &[&str], versions: &[&str], resources: &[&str]) -> Value {
    json!([{"operations": ops, "apiGroups": groups, "apiVersions": versions, "resources": resources}])
}

fn configmap_rule(ops: &[&str]) -> Value {
    rule(ops, &[""], &["v1"], &["configmaps"])
}

/// Stores a ValidatingWebhookConfiguration through the typed client.
async fn configure(s: &ApiServer, name: &str, hooks: Vec<Value>) -> ValidatingWebhookConfiguration {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(s.client());
    let vwc =
        serde_json::from_value(json!({"metadata": {"name": name}, "webhooks": hooks})).unwrap();
    api.create(&PostParams::default(), &vwc).await.unwrap()
}

/// Stores the configuration `config` with one webhook `name` for ConfigMap `ops`, calling
/// `wh`'s `/validate`; `extra` is merged into the webhook.
async fn configure_configmaps(
    s: &ApiServer,
    wh: &WebhookServer,
    config: &str,
    name: &str,
    ops: &[&str],
    extra: Value,
) -> ValidatingWebhookConfiguration {
    let hook = hook(
        name,
        &wh.url("/validate"),
        &wh.ca_bundle,
        configmap_rule(ops),
        extra,
    );
    configure(s, config, vec![hook]).await
}

fn configmaps(s: &ApiServer, ns: &str) -> Api<ConfigMap> {
    Api::namespaced(s.client(), ns)
}

fn denied_by(name: &str) -> String {
    format!("admission webhook \"{name}\" denied the request: {REFUSAL}")
}

#[tokio::test]
async fn a_denied_create_answers_in_kube_apiservers_words_and_an_allowed_one_is_stored() {
    let s = server();
    let wh = WebhookServer::start(&[]).await;
    let name = "configmaps.validation.test.dev";
    let stored = configure(
        &s,
        "test-validation",
        vec![hook(
            name,
            &wh.url("/validate"),
            &wh.ca_bundle,
            configmap_rule(&["CREATE", "UPDATE"]),
            json!({}),
        )],
    )
    .await;
    // kube-apiserver's v1 defaults.
    let w = serde_json::to_value(&stored.webhooks.unwrap()[0]).unwrap();
    assert_eq!(w["failurePolicy"], "Fail");
    assert_eq!(w["matchPolicy"], "Equivalent");
    assert_eq!(w["timeoutSeconds"], 10);
    assert_eq!(w["namespaceSelector"], json!({}));
    assert_eq!(w["objectSelector"], json!({}));
    assert_eq!(w["rules"][0]["scope"], "*");

    let api = configmaps(&s, "default");
    let e = api_err(
        api.create(&PostParams::default(), &cm("refused", &[("deny", "yes")]))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert_eq!(e.message, denied_by(name));
    assert!(api.get_opt("refused").await.unwrap().is_none());

    api.create(&PostParams::default(), &cm("welcome", &[("deny", "no")]))
        .await
        .unwrap();
    assert!(api.get_opt("welcome").await.unwrap().is_some());
    let reqs = wh.requests();
    assert_eq!(reqs.len(), 2, "{reqs:#?}");
    let r = &reqs[1];
    assert_eq!(r["operation"], "CREATE");
    assert_eq!(
        r["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        r["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(r["requestKind"], r["kind"]);
    assert_eq!(r["requestResource"], r["resource"]);
    assert_eq!(
        (r["name"].as_str(), r["namespace"].as_str()),
        (Some("welcome"), Some("default"))
    );
    assert_eq!(r["userInfo"]["username"], "system:admin");
    assert_eq!(r["object"]["metadata"]["labels"]["deny"], "no");
    assert_eq!(r["object"]["apiVersion"], "v1");
    assert!(
        r["object"]["metadata"]["uid"].is_string(),
        "the object as it will be stored"
    );
    assert!(r["oldObject"].is_null() && r.get("subResource").is_none());
    assert_eq!(r["dryRun"], false);
    assert_eq!(r["options"]["kind"], "CreateOptions");
    assert!(!r["uid"].as_str().unwrap().is_empty());
    assert_ne!(reqs[0]["uid"], reqs[1]["uid"]);
}

#[tokio::test]
async fn a_refusal_without_a_code_is_a_400_and_other_resources_are_not_sent() {
    let s = server();
    let wh = WebhookServer::start(&[]).await;
    let name = "no-code.validation.test.dev";
    configure(
        &s,
        "no-code",
        vec![
            hook(
                name,
                &wh.url("/no-code"),
                &wh.ca_bundle,
                configmap_rule(&["*"]),
                json!({}),
            ),
            hook(
                "secrets.validation.test.dev",
                &wh.url("/validate"),
                &wh.ca_bundle,
                rule(&["*"], &[""], &["v1"], &["secrets"]),
                json!({}),
            ),
            hook(
                "apps.validation.test.dev",
                &wh.url("/validate"),
                &wh.ca_bundle,
                rule(&["*"], &["apps"], &["*"], &["*"]),
                json!({}),
            ),
            hook(
                "v2.validation.test.dev",
                &wh.url("/validate"),
                &wh.ca_bundle,
                rule(&["*"], &[""], &["v2"], &["configmaps"]),
                json!({}),
            ),
        ],
    )
    .await;
    let e = api_err(
        configmaps(&s, "default")
            .create(&PostParams::default(), &cm("refused", &[("deny", "yes")]))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 400);
    assert_eq!(e.message, denied_by(name));
    // Only the configmaps webhook was called, once.
    let reqs = wh.reviews.lock().unwrap().clone();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].0, "/no-code");
}

#[tokio::test]
async fn updates_patches_and_deletes_are_matched_by_operation() {
    let s = server();
    let wh = WebhookServer::start(&[]).await;
    let updates = "updates.validation.test.dev";
    configure_configmaps(&s, &wh, "updates", updates, &["UPDATE"], json!({})).await;
    let api = configmaps(&s, "default");
    // Not a CREATE rule: created although labelled.
    let created = api
        .create(&PostParams::default(), &cm("x", &[("deny", "yes")]))
        .await
        .unwrap();
    assert!(wh.requests().is_empty());

    let e = api_err(
        api.replace("x", &PostParams::default(), &created)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.message, denied_by(updates));
    let e = api_err(
        api.patch(
            "x",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "2"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.message, denied_by(updates));
    let r = wh.requests().pop().unwrap();
    assert_eq!(r["operation"], "UPDATE");
    assert_eq!(r["options"]["kind"], "PatchOptions");
    assert_eq!(r["object"]["data"]["k"], "2");
    assert_eq!(r["oldObject"]["data"]["k"], "v");
    // Taking the label away is allowed (the webhook looks at the new object).
    api.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"deny": null}}})),
    )
    .await
    .unwrap();
    // Not a DELETE rule: deleted without a call.
    wh.clear();
    api.create(&PostParams::default(), &cm("y", &[("deny", "yes")]))
        .await
        .unwrap();
    api.delete("y", &DeleteParams::default()).await.unwrap();
    assert!(wh.requests().is_empty());

    let deletes = "deletes.validation.test.dev";
    configure_configmaps(&s, &wh, "deletes", deletes, &["DELETE"], json!({})).await;
    api.create(&PostParams::default(), &cm("z", &[("deny", "yes")]))
        .await
        .unwrap();
    let e = api_err(api.delete("z", &DeleteParams::default()).await.unwrap_err());
    assert_eq!(e.message, denied_by(deletes));
    assert!(api.get_opt("z").await.unwrap().is_some());
    let r = wh.requests().pop().unwrap();
    assert_eq!(r["operation"], "DELETE");
    assert!(r["object"].is_null());
    assert_eq!(r["oldObject"]["metadata"]["name"], "z");
    assert_eq!(r["options"]["kind"], "DeleteOptions");
    // A collection: item by item; the allowed one goes, the refused one stays.
    api.create(&PostParams::default(), &cm("a-ok", &[("group", "c")]))
        .await
        .unwrap();
    api.create(
        &PostParams::default(),
        &cm("b-refused", &[("group", "c"), ("deny", "yes")]),
    )
    .await
    .unwrap();
    let e = api_err(
        api.delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("group=c"),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.message, denied_by(deletes));
    assert!(api.get_opt("a-ok").await.unwrap().is_none());
    assert!(api.get_opt("b-refused").await.unwrap().is_some());
}

#[tokio::test]
async fn status_writes_match_resource_slash_subresource() {
    let (s, api) = with_widgets().await;
    let wh = WebhookServer::start(&[]).await;
    let name = "widget-status.validation.test.dev";
    configure(
        &s,
        "widget-status",
        vec![hook(
            name,
            &wh.url("/validate"),
            &wh.ca_bundle,
            rule(&["*"], &["example.com"], &["v1"], &["widgets/status"]),
            json!({}),
        )],
    )
    .await;
    let mut w = widget("w", json!({"size": 1}));
    w.metadata.labels = Some([("deny".to_string(), "yes".to_string())].into());
    api.create(&PostParams::default(), &w).await.unwrap();
    api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 2}})),
    )
    .await
    .unwrap();
    assert!(
        wh.requests().is_empty(),
        "main resource writes are not widgets/status"
    );
    let e = api_err(
        api.patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ok": true}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.message, denied_by(name));
    let r = wh.requests().pop().unwrap();
    assert_eq!(
        (r["subResource"].as_str(), r["requestSubResource"].as_str()),
        (Some("status"), Some("status"))
    );
    assert_eq!(
        r["resource"],
        json!({"group": "example.com", "version": "v1", "resource": "widgets"})
    );
    assert_eq!(r["kind"]["kind"], "Widget");
}

#[tokio::test]
async fn namespace_and_object_selectors_are_honoured() {
    let s = server();
    let wh = WebhookServer::start(&[]).await;
    let by_ns = "by-namespace.validation.test.dev";
    let by_obj = "by-object.validation.test.dev";
    configure(
        &s,
        "selectors",
        vec![
            hook(by_ns, &wh.url("/validate"), &wh.ca_bundle,
                rule(&["CREATE"], &["", "rbac.authorization.k8s.io"], &["v1"], &["configmaps", "clusterroles"]),
                json!({"namespaceSelector": {"matchLabels": {"webhooks": "enabled"}}})),
            hook(by_obj, &wh.url("/validate"), &wh.ca_bundle, rule(&["CREATE"], &[""], &["v1"], &["secrets"]),
                json!({"objectSelector": {"matchExpressions": [{"key": "checked", "operator": "Exists"}]}})),
        ],
    )
    .await;
    // `default` has no such label: not called.
    configmaps(&s, "default")
        .create(&PostParams::default(), &cm("a", &[("deny", "yes")]))
        .await
        .unwrap();
    let ns: Namespace = serde_json::from_value(
        json!({"metadata": {"name": "guarded", "labels": {"webhooks": "enabled"}}}),
    )
    .unwrap();
    Api::<Namespace>::all(s.client())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let e = api_err(
        configmaps(&s, "guarded")
            .create(&PostParams::default(), &cm("a", &[("deny", "yes")]))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.message, denied_by(by_ns));
    // Cluster-scoped objects are always selected by a namespaceSelector.
    let (code, body) = raw(
        &s,
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        Some("application/json"),
        &json!({"metadata": {"name": "r", "labels": {"deny": "yes"}}, "rules": []}).to_string(),
    )
    .await;
    assert_eq!(
        (code, body["message"].as_str()),
        (403, Some(denied_by(by_ns).as_str()))
    );

    let secrets: Api<Secret> = Api::namespaced(s.client(), "default");
    let secret = |name: &str, labels: Value| -> Secret {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
    };
    secrets
        .create(
            &PostParams::default(),
            &secret("unchecked", json!({"deny": "yes"})),
        )
        .await
        .unwrap();
    let e = api_err(
        secrets
            .create(
                &PostParams::default(),
                &secret("checked", json!({"deny": "yes", "checked": ""})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(e.message, denied_by(by_obj));
}

#[tokio::test]
async fn failure_policy_decides_when_the_webhook_cannot_be_called() {
    let s = server();
    let wh = WebhookServer::start(&[]).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let down = format!("https://{closed}/validate");
    let fail = "fail.validation.test.dev";
    configure(
        &s,
        "fail",
        vec![hook(
            fail,
            &down,
            &wh.ca_bundle,
            configmap_rule(&["CREATE"]),
            json!({}),
        )],
    )
    .await;
    let api = configmaps(&s, "default");
    let e = api_err(
        api.create(&PostParams::default(), &cm("a", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (500, "InternalError"));
    let prefix = format!(
        "Internal error occurred: failed calling webhook \"{fail}\": Post \"{down}?timeout=10s\": "
    );
    assert!(
        e.message.starts_with(&prefix) && e.message.contains("Connection refused"),
        "{}",
        e.message
    );
    assert!(api.get_opt("a").await.unwrap().is_none());

    // Ignore: stored. (The same configuration, patched through the typed client.)
    let vwcs: Api<ValidatingWebhookConfiguration> = Api::all(s.client());
    vwcs.patch(
        "fail",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(
                json!([{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}]),
            )
            .unwrap(),
        ),
    )
    .await
    .unwrap();
    api.create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    vwcs.delete("fail", &DeleteParams::default()).await.unwrap();

    // A certificate the caBundle does not vouch for, and a response for another request.
    let other_ca = embedded_apiserver::builtin::base64_encode(
        ServingCert::generate(&[]).unwrap().ca_pem().as_bytes(),
    );
    configure(
        &s,
        "broken",
        vec![
            hook(
                "untrusted.validation.test.dev",
                &wh.url("/validate"),
                &other_ca,
                configmap_rule(&["CREATE"]),
                json!({}),
            ),
            hook(
                "bad-uid.validation.test.dev",
                &wh.url("/bad-uid"),
                &wh.ca_bundle,
                configmap_rule(&["UPDATE"]),
                json!({}),
            ),
        ],
    )
    .await;
    let e = api_err(
        api.create(&PostParams::default(), &cm("b", &[]))
            .await
            .unwrap_err(),
    );
    assert!(
        e.message
            .contains("failed calling webhook \"untrusted.validation.test.dev\"")
            && e.message.contains("certificate"),
        "{}",
        e.message
    );
    let e = api_err(
        api.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "2"}})),
        )
        .await
        .unwrap_err(),
    );
    let want = regex::Regex::new(
        r#"^Internal error occurred: failed calling webhook "bad-uid.validation.test.dev": expected response.uid="[0-9a-f-]{36}", got "someone-else"$"#,
    )
    .unwrap();
    assert!(want.is_match(&e.message), "{}", e.message);
}

#[tokio::test]
async fn a_hanging_webhook_is_cut_off_at_its_timeout_while_other_requests_are_served() {
    let s = server();
    let wh = WebhookServer::start(&[]).await;
    let name = "hang.validation.test.dev";
    configure(
        &s,
        "hang",
        vec![hook(
            name,
            &wh.url("/hang"),
            &wh.ca_bundle,
            configmap_rule(&["CREATE"]),
            json!({"timeoutSeconds": 1}),
        )],
    )
    .await;
    let api = configmaps(&s, "default");
    let started = Instant::now();
    let pending = tokio::spawn({
        let api = api.clone();
        async move { api.create(&PostParams::default(), &cm("slow", &[])).await }
    });
    // Wait until the webhook has the request, then use the server meanwhile.
    while wh.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let t = Instant::now();
    let secrets: Api<Secret> = Api::namespaced(s.client(), "default");
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "s"}})).unwrap(),
        )
        .await
        .unwrap();
    api.list(&ListParams::default()).await.unwrap();
    Api::<Namespace>::all(s.client())
        .get("default")
        .await
        .unwrap();
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "other requests waited {:?}",
        t.elapsed()
    );
    assert!(!pending.is_finished());

    let e = api_err(pending.await.unwrap().unwrap_err());
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(4),
        "{took:?}"
    );
    assert_eq!(e.code, 500);
    assert!(
        e.message.ends_with(&format!(
            "failed calling webhook \"{name}\": Post \"{}?timeout=1s\": context deadline exceeded",
            wh.url("/hang")
        )),
        "{}",
        e.message
    );
    assert!(api.get_opt("slow").await.unwrap().is_none());
}

#[tokio::test]
async fn a_write_raced_while_its_webhooks_are_called_starts_over() {
    let s = server();
    let wh = WebhookServer::start(&[]).await;
    configure_configmaps(
        &s,
        &wh,
        "updates",
        "updates.validation.test.dev",
        &["UPDATE"],
        json!({}),
    )
    .await;
    let api = configmaps(&s, "default");
    for with_rv in [false, true] {
        let name = if with_rv { "with-rv" } else { "without-rv" };
        let created = api
            .create(&PostParams::default(), &cm(name, &[]))
            .await
            .unwrap();
        // A slow replacement (its webhook sleeps 600 ms).
        let mut slow = created.clone();
        slow.metadata.labels = Some([("delay-ms".to_string(), "600".to_string())].into());
        slow.data = Some([("k".to_string(), "slow".to_string())].into());
        if !with_rv {
            slow.metadata.resource_version = None;
        }
        let replace = tokio::spawn({
            let api = api.clone();
            let name = name.to_string();
            async move { api.replace(&name, &PostParams::default(), &slow).await }
        });
        // Once the webhook holds the slow one, a quick patch overtakes it.
        let slow_calls = || {
            wh.requests()
                .iter()
                .filter(|r| r["name"] == name && r["object"]["data"]["k"] == "slow")
                .count()
        };
        while slow_calls() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "quick"}})),
        )
        .await
        .unwrap();
        let result = replace.await.unwrap();
        let now = api.get(name).await.unwrap();
        let slow_calls = slow_calls();
        if with_rv {
            // Started over: the precondition no longer holds.
            assert_eq!(api_err(result.unwrap_err()).code, 409);
            assert_eq!(now.data.unwrap()["k"], "quick");
            assert_eq!(slow_calls, 1);
        } else {
            // Started over, webhooks called again, applied to the new state.
            result.unwrap();
            assert_eq!(now.data.unwrap()["k"], "slow");
            assert_eq!(slow_calls, 2);
        }
    }
}

#[tokio::test]
async fn dry_runs_and_server_side_apply_are_sent_as_such() {
    let s = server();
    let wh = WebhookServer::start(&[]).await;
    let name = "configmaps.validation.test.dev";
    configure_configmaps(&s, &wh, "all", name, &["*"], json!({})).await;
    let api = configmaps(&s, "default");
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    api.create(&dry, &cm("dry", &[])).await.unwrap();
    assert!(api.get_opt("dry").await.unwrap().is_none());
    let r = wh.requests().pop().unwrap();
    assert_eq!(
        (r["dryRun"].as_bool(), &r["options"]["dryRun"]),
        (Some(true), &json!(["All"]))
    );
    let e = api_err(
        api.create(&dry, &cm("dry", &[("deny", "yes")]))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.message, denied_by(name));

    // An apply that creates is a CREATE, with PatchOptions.
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied", "labels": {"deny": "yes"}}});
    let e = api_err(
        api.patch(
            "applied",
            &PatchParams::apply("test"),
            &Patch::Apply(&applied),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.message, denied_by(name));
    let r = wh.requests().pop().unwrap();
    assert_eq!(
        (r["operation"].as_str(), r["options"]["kind"].as_str()),
        (Some("CREATE"), Some("PatchOptions"))
    );
    assert_eq!(r["options"]["fieldManager"], "test");
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "1"}});
    api.patch(
        "applied",
        &PatchParams::apply("test"),
        &Patch::Apply(&applied),
    )
    .await
    .unwrap();
    assert_eq!(api.get("applied").await.unwrap().data.unwrap()["a"], "1");
}

#[tokio::test]
async fn webhook_configurations_are_validated_and_never_sent_to_webhooks() {
    let s = server();
    let wh = WebhookServer::start(&[]).await;
    configure(
        &s,
        "everything",
        vec![hook(
            "everything.validation.test.dev",
            &wh.url("/validate"),
            &wh.ca_bundle,
            rule(&["*"], &["*"], &["*"], &["*/*"]),
            json!({}),
        )],
    )
    .await;
    let vwcs: Api<ValidatingWebhookConfiguration> = Api::all(s.client());
    let mut labelled: ValidatingWebhookConfiguration = serde_json::from_value(
        json!({"metadata": {"name": "labelled", "labels": {"deny": "yes"}}}),
    )
    .unwrap();
    labelled = vwcs
        .create(&PostParams::default(), &labelled)
        .await
        .unwrap();
    vwcs.replace("labelled", &PostParams::default(), &labelled)
        .await
        .unwrap();
    vwcs.delete("labelled", &DeleteParams::default())
        .await
        .unwrap();
    assert!(wh.requests().is_empty());

    let (code, body) = raw(&s, "POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", Some("application/json"),
        &json!({"metadata": {"name": "bad"}, "webhooks": [{"name": "bad", "clientConfig": {"url": "http://127.0.0.1:1/x"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]}]}).to_string()).await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        "ValidatingWebhookConfiguration.admissionregistration.k8s.io \"bad\" is invalid: [webhooks[0].name: Invalid value: \"bad\": should be a domain with at least three segments separated by dots, \
         webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun, \
         webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1, \
         webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]]"
    );
    // Served in discovery.
    let (_, d) = raw(&s, "GET", "/apis/admissionregistration.k8s.io/v1", None, "").await;
    assert!(
        d["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "validatingwebhookconfigurations" && r["namespaced"] == false)
    );
}

#[tokio::test]
async fn a_service_reference_is_called_at_its_endpoints() {
    let s = server();
    let wh = WebhookServer::start(&["hooks.default.svc"]).await;
    let port = wh.base.rsplit(':').next().unwrap().parse::<u16>().unwrap();
    let name = "service.validation.test.dev";
    let mut h = hook(
        name,
        "",
        &wh.ca_bundle,
        configmap_rule(&["CREATE"]),
        json!({}),
    );
    h["clientConfig"] = json!({"service": {"namespace": "default", "name": "hooks", "path": "/validate"}, "caBundle": wh.ca_bundle});
    configure(&s, "service", vec![h]).await;
    let api = configmaps(&s, "default");
    // No such Service yet: a failed call.
    let e = api_err(
        api.create(&PostParams::default(), &cm("a", &[]))
            .await
            .unwrap_err(),
    );
    assert!(
        e.message.ends_with(&format!(
            "failed calling webhook \"{name}\": service \"hooks\" not found"
        )),
        "{}",
        e.message
    );
    for (uri, obj) in [
        (
            "/api/v1/namespaces/default/services",
            json!({"metadata": {"name": "hooks"}, "spec": {"ports": [{"port": 443, "targetPort": 9443}]}}),
        ),
        (
            "/api/v1/namespaces/default/endpoints",
            json!({"metadata": {"name": "hooks"}, "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": port}]}]}),
        ),
    ] {
        let (code, body) = raw(&s, "POST", uri, Some("application/json"), &obj.to_string()).await;
        assert_eq!(code, 201, "{body}");
    }
    api.create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    let e = api_err(
        api.create(&PostParams::default(), &cm("b", &[("deny", "yes")]))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.message, denied_by(name));
}

#[tokio::test]
async fn match_policy_equivalent_sends_another_version_of_the_resource() {
    let s = server();
    let mut crd = widget_crd();
    crd["metadata"]["name"] = json!("gadgets.example.com");
    crd["spec"]["names"] = json!({"plural": "gadgets", "singular": "gadget", "kind": "Gadget"});
    let v1 = crd["spec"]["versions"][0].clone();
    let mut v2 = v1.clone();
    v2["name"] = json!("v2");
    v2["storage"] = json!(false);
    crd["spec"]["versions"] = json!([v1, v2]);
    s.install_object(crd).unwrap();
    let wh = WebhookServer::start(&[]).await;
    let v2_rule = rule(&["CREATE"], &["example.com"], &["v2"], &["gadgets"]);
    let equivalent = "equivalent.validation.test.dev";
    configure(
        &s,
        "versions",
        vec![
            hook(
                equivalent,
                &wh.url("/validate"),
                &wh.ca_bundle,
                v2_rule.clone(),
                json!({}),
            ),
            hook(
                "exact.validation.test.dev",
                &wh.url("/validate"),
                &wh.ca_bundle,
                v2_rule,
                json!({"matchPolicy": "Exact"}),
            ),
        ],
    )
    .await;
    let gadget = json!({"apiVersion": "example.com/v1", "kind": "Gadget",
        "metadata": {"name": "g", "labels": {"deny": "yes"}}});
    let (code, body) = raw(
        &s,
        "POST",
        "/apis/example.com/v1/namespaces/default/gadgets",
        Some("application/json"),
        &gadget.to_string(),
    )
    .await;
    assert_eq!(
        (code, body["message"].as_str()),
        (403, Some(denied_by(equivalent).as_str()))
    );
    let reqs = wh.requests();
    assert_eq!(reqs.len(), 1, "the Exact webhook is not called: {reqs:#?}");
    let r = &reqs[0];
    assert_eq!(
        r["kind"],
        json!({"group": "example.com", "version": "v2", "kind": "Gadget"})
    );
    assert_eq!(r["requestKind"]["version"], "v1");
    assert_eq!(r["resource"]["version"], "v2");
    assert_eq!(r["requestResource"]["version"], "v1");
    assert_eq!(r["object"]["apiVersion"], "example.com/v2");
}
