//! kube-controller-manager's ServiceAccount token controller (`tokens`, on by default): a
//! legacy token Secret is filled in the request that creates it, waits for a missing
//! ServiceAccount, and its token authenticates as the ServiceAccount (with RBAC) until the
//! Secret or the ServiceAccount goes — across a restart too.

use super::*;
use embedded_apiserver::auth::ADMIN_TOKEN;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::api::{Api, DeleteParams, PostParams};

const SA_NAME: &str = "kubernetes.io/service-account.name";
const SA_UID: &str = "kubernetes.io/service-account.uid";

/// What Landscaper creates: a token Secret for `sa`, by generateName.
fn token_secret(sa: &str) -> Secret {
    serde_json::from_value(json!({
        "metadata": {"generateName": format!("{sa}-token-"), "annotations": {SA_NAME: sa}},
        "type": "kubernetes.io/service-account-token",
    }))
    .unwrap()
}

fn service_account(name: &str) -> ServiceAccount {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

fn data(s: &Secret, key: &str) -> Option<String> {
    let d = s.data.as_ref()?.get(key)?;
    Some(String::from_utf8(d.0.clone()).unwrap())
}

fn annotation(s: &Secret, key: &str) -> Option<String> {
    s.metadata.annotations.as_ref()?.get(key).cloned()
}

/// Creates ServiceAccount `ns/sa` and a token Secret for it; the Secret as a GET right after
/// the create sees it.
async fn account_and_secret(client: &kube::Client, ns: &str, sa: &str) -> (ServiceAccount, Secret) {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let account = sas
        .create(&PostParams::default(), &service_account(sa))
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let created = secrets
        .create(&PostParams::default(), &token_secret(sa))
        .await
        .unwrap();
    let name = created.metadata.name.unwrap();
    (account, secrets.get(&name).await.unwrap())
}

#[tokio::test]
async fn a_legacy_token_secret_is_filled_in_the_request_that_creates_it() {
    let s = server();
    let client = s.client();
    let before = s.resource_version();
    let (account, secret) = account_and_secret(&client, "default", "deployer").await;
    let name = secret.metadata.name.clone().unwrap();
    assert!(name.starts_with("deployer-token-"), "{name}");
    let token = data(&secret, "token").expect("data.token");
    assert!(token.starts_with("eas-sa."), "{token}");
    assert_eq!(data(&secret, "namespace").as_deref(), Some("default"));
    assert_eq!(data(&secret, "ca.crt"), None, "not served over HTTPS");
    assert_eq!(annotation(&secret, SA_UID), account.metadata.uid);
    assert_eq!(
        annotation(&secret, SA_NAME).as_deref(),
        Some("deployer"),
        "the client's annotation is kept"
    );
    // Two events, as a controller's write after the create: ADDED without, MODIFIED with it.
    let (code, lines, _) = watch_lines(
        &s,
        &format!("/api/v1/namespaces/default/secrets?watch=1&resourceVersion={before}"),
        None,
        2,
        Duration::from_secs(2),
    )
    .await;
    assert_eq!(code, 200);
    let seen: Vec<(&str, bool)> = lines
        .iter()
        .map(|l| {
            (
                l["type"].as_str().unwrap(),
                l.pointer("/object/data/token").is_some(),
            )
        })
        .collect();
    assert_eq!(seen, [("ADDED", false), ("MODIFIED", true)]);
    // Emptied by a client: filled again, with a new token.
    let secrets: Api<Secret> = Api::default_namespaced(client.clone());
    let mut emptied = secret.clone();
    emptied.data = None;
    secrets
        .replace(&name, &PostParams::default(), &emptied)
        .await
        .unwrap();
    let again = secrets.get(&name).await.unwrap();
    let new_token = data(&again, "token").expect("filled again");
    assert_ne!(new_token, token);
}

#[tokio::test]
async fn a_secret_for_a_missing_service_account_waits_for_it_and_other_secrets_are_left_alone() {
    let s = server_with(|o| o.rbac = true);
    let client = s.client();
    let secrets: Api<Secret> = Api::default_namespaced(client.clone());
    let waiting = secrets
        .create(&PostParams::default(), &token_secret("later"))
        .await
        .unwrap();
    let name = waiting.metadata.name.unwrap();
    let got = secrets.get(&name).await.unwrap();
    assert_eq!((&got.data, annotation(&got, SA_UID)), (&None, None));
    // An Opaque Secret with the annotation, and a token Secret with a client's token.
    let opaque: Secret = serde_json::from_value(json!({
        "metadata": {"name": "opaque", "annotations": {SA_NAME: "later"}},
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &opaque)
        .await
        .unwrap();
    let own: Secret = serde_json::from_value(json!({
        "metadata": {"name": "own", "annotations": {SA_NAME: "later"}},
        "type": "kubernetes.io/service-account-token",
        "stringData": {"token": "my-own-token"},
    }))
    .unwrap();
    secrets.create(&PostParams::default(), &own).await.unwrap();
    // The ServiceAccount comes: the waiting Secret gets its token, the others stay as they are.
    let sas: Api<ServiceAccount> = Api::default_namespaced(client.clone());
    let account = sas
        .create(&PostParams::default(), &service_account("later"))
        .await
        .unwrap();
    let filled = secrets.get(&name).await.unwrap();
    assert!(data(&filled, "token").is_some());
    assert_eq!(annotation(&filled, SA_UID), account.metadata.uid);
    assert_eq!(secrets.get("opaque").await.unwrap().data, None);
    let own = secrets.get("own").await.unwrap();
    assert_eq!(
        (data(&own, "token").as_deref(), annotation(&own, SA_UID)),
        (Some("my-own-token"), None)
    );
    let (code, _) = call(&s, "my-own-token", "GET", "/api", Value::Null).await;
    assert_eq!(code, 401, "a client's token does not authenticate");
    // A filled token copied into another Secret does not authenticate through that one.
    let token = data(&filled, "token").unwrap();
    secrets
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    let copy: Secret = serde_json::from_value(json!({
        "metadata": {"name": "copy", "annotations": {SA_NAME: "later", SA_UID: account.metadata.uid}},
        "type": "kubernetes.io/service-account-token",
        "stringData": {"token": token},
    }))
    .unwrap();
    secrets.create(&PostParams::default(), &copy).await.unwrap();
    let (code, _) = call(&s, &token, "GET", "/api", Value::Null).await;
    assert_eq!(code, 401);
}

#[tokio::test]
async fn a_legacy_token_authenticates_as_its_service_account_until_its_secret_or_account_goes() {
    let s = server_with(|o| o.rbac = true);
    let serving = s.serve_tls_on_loopback().await.unwrap();
    let admin = s.client();
    Api::<k8s_openapi::api::core::v1::Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap(),
        )
        .await
        .unwrap();
    let (account, secret) = account_and_secret(&admin, "team", "deployer").await;
    assert_eq!(data(&secret, "ca.crt").as_deref(), serving.ca_pem());
    assert_eq!(data(&secret, "namespace").as_deref(), Some("team"));
    let token = data(&secret, "token").unwrap();

    // Over HTTPS, as Landscaper uses it: a kubeconfig with the token and the Secret's CA.
    let kubeconfig =
        ApiServer::kubeconfig_yaml_tls(&serving.url, data(&secret, "ca.crt").as_deref(), &token);
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&kubeconfig).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    let as_sa = kube::Client::try_from(config).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(as_sa.clone(), "team");
    let e = api_err(cms.list(&Default::default()).await.unwrap_err());
    assert_eq!(e.code, 403);
    assert!(
        e.message.contains(
            r#"User "system:serviceaccount:team:deployer" cannot list resource "configmaps""#
        ),
        "{}",
        e.message
    );
    let (code, me) = who_am_i(&s, &token).await;
    assert_eq!(code, 201, "{me}");
    assert_eq!(
        me["status"]["userInfo"],
        json!({"username": "system:serviceaccount:team:deployer", "groups": [
            "system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"]})
    );

    // A RoleBinding allows the namespace, a ClusterRoleBinding the cluster.
    let subject = json!([{"kind": "ServiceAccount", "name": "deployer", "namespace": "team"}]);
    s.install_object(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "view", "namespace": "team"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": subject}),
    )
    .unwrap();
    cms.list(&Default::default()).await.unwrap();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(as_sa.clone());
    assert_eq!(
        api_err(namespaces.list(&Default::default()).await.unwrap_err()).code,
        403
    );
    s.install_object(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "deployer-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": subject}))
    .unwrap();
    namespaces.list(&Default::default()).await.unwrap();

    // The Secret goes: 401.
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "team");
    secrets
        .delete(
            secret.metadata.name.as_deref().unwrap(),
            &DeleteParams::default(),
        )
        .await
        .unwrap();
    match cms.list(&Default::default()).await.unwrap_err() {
        kube::Error::Api(e) => assert_eq!(e.code, 401),
        e => panic!("expected 401, got {e:?}"),
    }

    // Another Secret's token: dies with the ServiceAccount, and a new account of the same
    // name does not bring it back.
    let second = secrets
        .create(&PostParams::default(), &token_secret("deployer"))
        .await
        .unwrap();
    let second = secrets
        .get(second.metadata.name.as_deref().unwrap())
        .await
        .unwrap();
    let token2 = data(&second, "token").unwrap();
    assert_eq!(annotation(&second, SA_UID), account.metadata.uid);
    assert_eq!(call(&s, &token2, "GET", "/api", Value::Null).await.0, 200);
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), "team");
    sas.delete("deployer", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(call(&s, &token2, "GET", "/api", Value::Null).await.0, 401);
    sas.create(&PostParams::default(), &service_account("deployer"))
        .await
        .unwrap();
    assert_eq!(call(&s, &token2, "GET", "/api", Value::Null).await.0, 401);
    let kept = secrets
        .get(second.metadata.name.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(
        data(&kept, "token"),
        Some(token2),
        "a filled Secret is not refilled"
    );
    // The admin token is not a ServiceAccount's.
    assert_eq!(
        call(&s, ADMIN_TOKEN, "GET", "/api", Value::Null).await.0,
        200
    );
}

#[tokio::test]
async fn a_legacy_token_outlives_a_restart_as_its_secret_does() {
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        ApiServer::new(Options {
            data_dir: Some(dir.path().to_path_buf()),
            rbac: true,
            ..Default::default()
        })
        .unwrap()
    };
    let token = {
        let s = open();
        let (_, secret) = account_and_secret(&s.client(), "default", "deployer").await;
        let token = data(&secret, "token").unwrap();
        assert_eq!(call(&s, &token, "GET", "/api", Value::Null).await.0, 200);
        token
    };
    let s = open();
    let (code, me) = who_am_i(&s, &token).await;
    assert_eq!(code, 201, "{me}");
    assert_eq!(
        me["status"]["userInfo"]["username"],
        "system:serviceaccount:default:deployer"
    );
    s.flush().await.unwrap();
    drop(s);
    // A restart from the compacted snapshot, with another key: the token is no longer one of
    // this server's.
    let s = open();
    assert_eq!(call(&s, &token, "GET", "/api", Value::Null).await.0, 200);
    std::fs::remove_file(dir.path().join(embedded_apiserver::tokens::KEY_FILE)).unwrap();
    drop(s);
    let s = open();
    assert_eq!(call(&s, &token, "GET", "/api", Value::Null).await.0, 401);
}
