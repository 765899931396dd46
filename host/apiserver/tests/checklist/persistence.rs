//! Persistence with a data dir: restarts keep everything; torn writes are detected.

use crate::*;
use embedded_apiserver::{ApiServer, Options};
use kube::api::{Api, DynamicObject, PostParams};
use std::io::Write;

fn open(dir: &std::path::Path) -> anyhow::Result<ApiServer> {
    ApiServer::new(Options {
        data_dir: Some(dir.to_path_buf()),
        ..Default::default()
    })
}

#[tokio::test]
async fn restart_keeps_objects_crd_registrations_and_the_resource_version() {
    let dir = tempfile::tempdir().unwrap();
    let (rv_before, uid) = {
        let s = open(dir.path()).unwrap();
        s.install_object(widget_crd()).unwrap();
        let api: Api<DynamicObject> =
            Api::namespaced_with(s.client(), "default", &widget_resource());
        let w = api
            .create(&PostParams::default(), &widget("w", json!({"size": 3})))
            .await
            .unwrap();
        let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
        cms.create(&PostParams::default(), &cm("gone", &[]))
            .await
            .unwrap();
        cms.delete("gone", &Default::default()).await.unwrap();
        s.flush().await.unwrap();
        (s.resource_version(), w.metadata.uid.unwrap())
    };
    let s = open(dir.path()).unwrap();
    assert!(s.resource_version() >= rv_before, "the rv counter survives");
    let api: Api<DynamicObject> = Api::namespaced_with(s.client(), "default", &widget_resource());
    let w = api.get("w").await.unwrap();
    assert_eq!(
        (w.metadata.uid.as_deref(), w.data["spec"]["size"].as_i64()),
        (Some(uid.as_str()), Some(3))
    );
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    assert_eq!(api_err(cms.get("gone").await.unwrap_err()).code, 404);
    let next = cms
        .create(&PostParams::default(), &cm("new", &[]))
        .await
        .unwrap();
    assert!(rv(&next) > rv_before);
}

#[tokio::test]
async fn writes_are_kept_without_a_flush_and_a_torn_tail_is_reported_not_loaded() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open(dir.path()).unwrap();
        let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
        cms.create(&PostParams::default(), &cm("unflushed", &[]))
            .await
            .unwrap();
        // dropped without flush(): every write was already appended
    }
    {
        let s = open(dir.path()).unwrap();
        assert!(
            Api::<ConfigMap>::default_namespaced(s.client())
                .get("unflushed")
                .await
                .is_ok()
        );
    }
    let log = dir.path().join("store.log");
    let len = std::fs::metadata(&log).unwrap().len();
    // A crash in the middle of an append: a header promising more bytes than were written.
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    f.write_all(&100u32.to_le_bytes()).unwrap();
    f.write_all(&0u32.to_le_bytes()).unwrap();
    f.write_all(b"{\"rv\":").unwrap();
    drop(f);
    let err = open(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("store.log") && err.contains(&format!("offset {len}")) && err.contains("torn"),
        "{err}"
    );

    // A flipped byte inside an earlier record is a checksum error.
    let mut bytes = std::fs::read(&log).unwrap();
    bytes.truncate(len as usize);
    let at = bytes.len() - 5;
    bytes[at] ^= 0x55;
    std::fs::write(&log, &bytes).unwrap();
    let err = open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("checksum mismatch"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_writes_a_kubeconfig_kube_accepts_and_persists_on_a_clean_stop() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("out/kubeconfig");
    let data = dir.path().join("data");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn({
        let (kubeconfig, data) = (kubeconfig.clone(), data.clone());
        async move {
            embedded_apiserver::run_standalone_until(
                "127.0.0.1:0".parse().unwrap(),
                &kubeconfig,
                embedded_apiserver::Options {
                    data_dir: Some(data),
                    ..Default::default()
                },
                async {
                    let _ = rx.await;
                },
            )
            .await
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !kubeconfig.exists() {
        assert!(std::time::Instant::now() < deadline, "kubeconfig written");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    assert!(
        cfg.cluster_url.to_string().starts_with("http://127.0.0.1:"),
        "{}",
        cfg.cluster_url
    );
    let client = kube::Client::try_from(cfg).unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    cms.create(&PostParams::default(), &cm("over-http", &[]))
        .await
        .unwrap();
    let w = cms
        .watch(&kube::api::WatchParams::default(), "0")
        .await
        .unwrap();
    // Stop with a watch still open: the server must not wait for it.
    tx.send(()).unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(10), task)
        .await
        .expect("stops promptly")
        .unwrap()
        .unwrap();
    drop(w);
    let s = open(&data).unwrap();
    assert!(
        Api::<ConfigMap>::default_namespaced(s.client())
            .get("over-http")
            .await
            .is_ok()
    );
}
