//! The host's container image, built without a container engine (`deployer-host image build`,
//! which `cargo xtask image` runs on the static binary) and pushed to Debian's
//! `docker-registry` on loopback: what comes back from the registry is an OCI image whose
//! config runs the binary as a non-root user, and whose layers hold that binary — byte for
//! byte, executable — the default plugins, and the user's passwd entry.

use std::process::Command;

use deployer_host::image::{self, BINARY_PATH};
use deployer_host::oci;
use oci_client::manifest::OciDescriptor;
use serde_json::Value;
use test_support::skip_on_real;

fn host_binary() -> &'static str {
    env!("CARGO_BIN_EXE_deployer-host")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_host_and_its_plugins_when_the_image_is_built_and_pushed_then_the_registry_serves_a_runnable_non_root_image()
 {
    skip_on_real!("needs no API server");
    let Some(registry) = test_support::registry::start_registry() else {
        return;
    };
    let layout = tempfile::tempdir().unwrap();
    let reference = format!("{}/wasm-deployer/deployer-host:test", registry.addr);
    // This test's host binary is dynamically linked (a debug build); the image refuses it
    // unless told that only the layout is under test.
    let refused = Command::new(host_binary())
        .args(["image", "build", "--binary", host_binary(), "--out"])
        .arg(layout.path())
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("dynamically linked"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    let built = Command::new(host_binary())
        .args([
            "image",
            "build",
            "--allow-dynamic",
            "--binary",
            host_binary(),
        ])
        .arg("--plugins")
        .arg(test_support::plugins_dir())
        .arg("--out")
        .arg(layout.path())
        .args(["--push", &reference, "--plain-http"])
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let digest = String::from_utf8(built.stdout).unwrap().trim().to_string();
    assert!(digest.starts_with("sha256:"), "{digest}");

    // The OCI layout on disk names the same manifest.
    let index: Value =
        serde_json::from_slice(&std::fs::read(layout.path().join("index.json")).unwrap()).unwrap();
    assert_eq!(index["manifests"][0]["digest"], digest.as_str());
    assert!(layout.path().join("oci-layout").exists());

    // What the registry serves: the same digest, an OCI image manifest, its config and layers.
    let options = oci::RegistryOptions {
        plain_http: vec![registry.addr.clone()],
        ..Default::default()
    };
    assert_eq!(oci::resolve(&reference, &options).await.unwrap(), digest);
    let r = oci::parse(&reference).unwrap();
    let (client, auth) = oci::client_for(&r, &options);
    let (manifest, _, config) = client.pull_manifest_and_config(&r, &auth).await.unwrap();
    assert_eq!(
        manifest.media_type.as_deref(),
        Some(image::MANIFEST_MEDIA_TYPE)
    );
    assert_eq!(manifest.config.media_type, image::CONFIG_MEDIA_TYPE);
    let config: Value = serde_json::from_str(&config).unwrap();
    assert_eq!(config["os"], "linux");
    assert_eq!(config["architecture"], "amd64");
    assert_eq!(
        config["created"], "2023-11-14T22:13:20Z",
        "SOURCE_DATE_EPOCH"
    );
    assert_eq!(config["config"]["User"], "65532:65532", "non-root");
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/usr/local/bin/deployer-host"])
    );
    assert_eq!(config["config"]["Cmd"], serde_json::json!(["run"]));
    assert_eq!(
        config["rootfs"]["diff_ids"].as_array().unwrap().len(),
        manifest.layers.len()
    );

    let mut files = std::collections::BTreeMap::new();
    let mut layers = Vec::new();
    for layer in &manifest.layers {
        assert_eq!(layer.media_type, image::LAYER_MEDIA_TYPE);
        let mut bytes = Vec::new();
        client
            .pull_blob(&r, layer as &OciDescriptor, &mut bytes)
            .await
            .unwrap();
        files.extend(image::layer_files(&bytes).unwrap());
        layers.push(bytes);
    }
    let (mode, _, size) = files[BINARY_PATH];
    assert_eq!(mode & 0o755, 0o755, "the binary is executable");
    assert_eq!(size, std::fs::metadata(host_binary()).unwrap().len());
    for plugin in ["mock", "manifest", "continuous-reconcile"] {
        assert!(
            files.contains_key(&format!("plugins/{plugin}.wasm")),
            "{plugin} missing: {:?}",
            files.keys().collect::<Vec<_>>()
        );
    }
    assert!(files.contains_key("etc/passwd"));
    assert_eq!(files["var/cache/wasm-deployer/"].1, 65532, "writable cache");

    // The binary that came back from the registry runs.
    let unpacked = tempfile::tempdir().unwrap();
    for bytes in &layers {
        tar::Archive::new(flate2::read::GzDecoder::new(&bytes[..]))
            .unpack(unpacked.path())
            .unwrap();
    }
    let version = Command::new(unpacked.path().join(BINARY_PATH))
        .arg("--version")
        .output()
        .unwrap();
    assert!(version.status.success());
    assert!(String::from_utf8_lossy(&version.stdout).contains(env!("CARGO_PKG_VERSION")));
    let passwd = std::fs::read_to_string(unpacked.path().join("etc/passwd")).unwrap();
    assert!(passwd.contains("nonroot:x:65532:65532"), "{passwd}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_a_binary_per_architecture_when_pushed_then_the_tag_names_an_index_of_both_and_each_platform_resolves_to_its_own_image()
 {
    skip_on_real!("needs no API server");
    let Some(registry) = test_support::registry::start_registry() else {
        return;
    };
    // Given an x86_64 and an aarch64 binary (headers only: the layout is under test),
    let dir = tempfile::tempdir().unwrap();
    let (amd64, arm64) = (dir.path().join("amd64"), dir.path().join("arm64"));
    std::fs::write(&amd64, test_support::elf_header(0x3e, false)).unwrap();
    std::fs::write(&arm64, test_support::elf_header(0xb7, false)).unwrap();
    let reference = format!("{}/wasm-deployer/deployer-host:multi", registry.addr);
    // when one image build takes both and pushes,
    let built = Command::new(host_binary())
        .args(["image", "build", "--binary"])
        .arg(&arm64)
        .arg("--binary")
        .arg(&amd64)
        .arg("--plugins")
        .arg(test_support::plugins_dir())
        .args(["--push", &reference, "--plain-http"])
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let digest = String::from_utf8(built.stdout).unwrap().trim().to_string();

    // then the registry answers the tag with an OCI image index of that digest,
    let (host, repository) = reference.split_once('/').unwrap();
    let (repository, tag) = repository.rsplit_once(':').unwrap();
    oci::install_crypto();
    let http = reqwest::Client::new();
    let get = |what: String, accept: &'static str| {
        let http = http.clone();
        let url = format!("http://{host}/v2/{repository}/manifests/{what}");
        async move {
            let r = http.get(url).header("Accept", accept).send().await.unwrap();
            assert!(r.status().is_success(), "{}", r.status());
            let digest = r.headers()["docker-content-digest"]
                .to_str()
                .unwrap()
                .to_string();
            (digest, r.json::<Value>().await.unwrap())
        }
    };
    let (served, index) = get(tag.to_string(), image::INDEX_MEDIA_TYPE).await;
    assert_eq!(served, digest);
    assert_eq!(index["mediaType"], image::INDEX_MEDIA_TYPE);
    let manifests = index["manifests"].as_array().unwrap();
    let platforms: Vec<&str> = manifests
        .iter()
        .map(|m| m["platform"]["architecture"].as_str().unwrap())
        .collect();
    assert_eq!(platforms, ["amd64", "arm64"]);
    // and each platform's manifest, by its digest, is an image whose config names its
    // architecture and whose binary layer holds that architecture's binary.
    for (m, binary) in manifests.iter().zip([&amd64, &arm64]) {
        let (served, manifest) = get(
            m["digest"].as_str().unwrap().to_string(),
            image::MANIFEST_MEDIA_TYPE,
        )
        .await;
        assert_eq!(served, m["digest"].as_str().unwrap());
        let blob = |digest: &str| {
            let url = format!("http://{host}/v2/{repository}/blobs/{digest}");
            let http = http.clone();
            async move { http.get(url).send().await.unwrap().bytes().await.unwrap() }
        };
        let config: Value =
            serde_json::from_slice(&blob(manifest["config"]["digest"].as_str().unwrap()).await)
                .unwrap();
        assert_eq!(config["architecture"], m["platform"]["architecture"]);
        let layer = blob(manifest["layers"][1]["digest"].as_str().unwrap()).await;
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&layer[..]));
        let mut found = false;
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            if entry.path().unwrap().to_str() == Some(BINARY_PATH) {
                let mut bytes = Vec::new();
                std::io::Read::read_to_end(&mut entry, &mut bytes).unwrap();
                assert_eq!(bytes, std::fs::read(binary).unwrap());
                found = true;
            }
        }
        assert!(found, "no {BINARY_PATH} in the binary layer");
    }
}
