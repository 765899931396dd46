//! One image for amd64 and arm64 (issue #62, docs/install.md): `cargo xtask image` builds the
//! static host for both and writes one OCI image index under one tag. On this x86_64 machine the
//! arm64 host runs under Debian's `qemu-user-static` (`qemu-aarch64-static BINARY`, no binfmt
//! registration): it says its version, and `dev` mode serves the mock and manifest examples to
//! `Succeeded`, compiling its plugins into a cache an amd64 host shares, each keeping its own
//! compiled code. skopeo reads the layout as an index of both platforms.
//!
//! Without qemu, the arm64 binary or a two-platform layout, each story prints one SKIP line; in
//! CI (`CI=true`) that is a failure, as for every other tool, except in .ci/run's main pass
//! (`DEPLOYER_TEST_MULTIARCH=later`), which runs beside the arm64 build: its last step runs them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use deployer_host::landscaper::{DeployItem, Phase};
use kube::Api;
use serde_json::Value;
use test_support::skip_on_real;

/// Where `cargo xtask image` builds the arm64 host: `$DEPLOYER_TEST_ARM64_HOST`, else its cross
/// target directory.
fn arm64_host() -> PathBuf {
    std::env::var_os("DEPLOYER_TEST_ARM64_HOST")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            test_support::paths::workspace()
                .join("target/cross/aarch64-unknown-linux-musl/image/deployer-host")
        })
}

/// `Some(path)`, or `None` after one SKIP line (a panic under `CI=true`).
fn needed(what: &str, path: PathBuf, how: &str) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    skip_or_fail(&format!("{what} missing: {} ({how})", path.display()));
    None
}

/// One SKIP line; a failure under `CI=true`, unless these stories run later
/// (`DEPLOYER_TEST_MULTIARCH=later`: .ci/run's main pass, while the arm64 host is still being
/// built beside it; its last step runs them with everything there).
fn skip_or_fail(why: &str) {
    let later = std::env::var("DEPLOYER_TEST_MULTIARCH").as_deref() == Ok("later");
    assert!(
        later || std::env::var("CI").as_deref() != Ok("true"),
        "CI=true: {why}"
    );
    eprintln!("SKIP: {why}");
}

fn qemu() -> Option<PathBuf> {
    needed(
        "qemu-aarch64-static",
        PathBuf::from("/usr/bin/qemu-aarch64-static"),
        "apt install qemu-user-static",
    )
}

/// A `deployer-host dev` process (under qemu when `qemu` is given) on a free port.
struct Dev {
    child: Child,
    kubeconfig: PathBuf,
}

impl Dev {
    async fn client(&self) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_dev(qemu: Option<&Path>, host: &Path, dir: &Path, apply: &Path, name: &str) -> Dev {
    let mut cmd = match qemu {
        Some(q) => {
            let mut c = Command::new(q);
            c.arg(host);
            c
        }
        None => Command::new(host),
    };
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
    let kubeconfig = dir.join(format!("{name}.kubeconfig"));
    let mut child = cmd
        .args(["dev", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(&kubeconfig)
        .arg("--config")
        .arg(dir.join("config.yaml"))
        .arg("--apply")
        .arg(apply)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("deployer-host dev");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.trim().strip_prefix("ready ").unwrap_or_else(|| {
        panic!(
            "{name}: expected `ready <url>`, got {line:?}: {}",
            std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default()
        )
    });
    Dev { child, kubeconfig }
}

/// Waits until every named item of `dev` has finished its job; returns their phases.
async fn finished(dev: &Dev, names: &[&str], within: Duration) -> Vec<Phase> {
    let client = dev.client().await;
    let items: Api<DeployItem> = Api::namespaced(client, "default");
    let deadline = Instant::now() + within;
    let mut phases = Vec::new();
    for name in names {
        loop {
            if let Some(item) = items.get_opt(name).await.unwrap() {
                let s = item.status();
                if !s.job_id.is_empty() && s.job_id == s.job_id_finished {
                    phases.push(s.phase);
                    break;
                }
            }
            assert!(
                Instant::now() < deadline,
                "{name} not finished within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    phases
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_the_arm64_host_under_qemu_then_it_says_its_version_and_dev_mode_serves_the_mock_and_manifest_examples()
 {
    skip_on_real!("dev mode serves its own embedded API server");
    let (Some(qemu), Some(arm64)) = (
        qemu(),
        needed(
            "the arm64 host",
            arm64_host(),
            "cargo xtask image --platform arm64",
        ),
    ) else {
        return;
    };
    // Given the arm64 binary (an aarch64 ELF, which this x86_64 machine cannot run itself),
    let elf = std::fs::read(&arm64).unwrap();
    assert_eq!(&elf[..4], b"\x7fELF");
    assert_eq!(
        u16::from_le_bytes([elf[0x12], elf[0x13]]),
        0xb7,
        "EM_AARCH64"
    );
    // when qemu runs it, then it says what it is;
    let out = Command::new(&qemu)
        .arg(&arm64)
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(
        version.contains(&format!("deployer-host {}", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );

    // and given the mock and manifest examples and their plugins, with a compiled-code cache
    // that an amd64 host fills first,
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    let cache = dir.path().join("cache");
    std::fs::create_dir(&plugins).unwrap();
    for name in ["mock.wasm", "manifest.wasm", "continuous-reconcile.wasm"] {
        std::fs::copy(test_support::plugins_dir().join(name), plugins.join(name)).unwrap();
    }
    // No instance pool: qemu-user 7.2 backs the pool's reserved address space (terabytes) with
    // its own page tables, 24 GB of them here, and the kernel kills it. On arm64 hardware the
    // pool works as on amd64.
    std::fs::write(
        dir.path().join("config.yaml"),
        format!("plugins: {{dir: {plugins:?}, cacheDir: {cache:?}, instanceSlots: 0}}\n"),
    )
    .unwrap();
    let examples = dir.path().join("examples");
    std::fs::create_dir(&examples).unwrap();
    for name in [
        "10-deployitem-mock.yaml",
        "20-deployitem-manifest-continuous.yaml",
    ] {
        std::fs::copy(
            test_support::paths::workspace().join("examples").join(name),
            examples.join(name),
        )
        .unwrap();
    }
    let items = ["hello-mock", "my-manifest-item"];
    {
        let amd64 = start_dev(
            None,
            Path::new(env!("CARGO_BIN_EXE_deployer-host")),
            dir.path(),
            &examples,
            "amd64",
        );
        let phases = finished(&amd64, &items, Duration::from_secs(60)).await;
        assert_eq!(phases, [Phase::Succeeded, Phase::Succeeded]);
    }
    let compiled_by_amd64 = cwasm_files(&cache);
    assert_eq!(compiled_by_amd64.len(), 3, "{compiled_by_amd64:?}");

    // when the arm64 host serves them in dev mode under qemu,
    let started = Instant::now();
    let arm = start_dev(Some(&qemu), &arm64, dir.path(), &examples, "arm64");
    let phases = finished(&arm, &items, Duration::from_secs(300)).await;
    // then both items succeed,
    assert_eq!(phases, [Phase::Succeeded, Phase::Succeeded]);
    eprintln!(
        "arm64 under qemu: both examples Succeeded {:.1} s after start",
        started.elapsed().as_secs_f64()
    );
    // the manifest item's ConfigMap is there,
    let client = arm.client().await;
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client, "default");
    let colors = maps
        .get("colors")
        .await
        .expect("the manifest example's ConfigMap");
    assert!(colors.data.is_some_and(|d| !d.is_empty()));
    // and the cache holds each plugin's code twice: amd64's, untouched, and arm64's beside it.
    let both = cwasm_files(&cache);
    assert_eq!(both.len(), 6, "{both:?}");
    for (file, bytes) in &compiled_by_amd64 {
        assert_eq!(
            both.iter().find(|(f, _)| f == file).map(|(_, b)| b),
            Some(bytes),
            "{file} was rewritten"
        );
    }
}

/// The cache's compiled files, by name, with their contents.
fn cwasm_files(cache: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(cache)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        std::fs::read(e.path()).unwrap(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

#[test]
fn given_the_image_layout_then_skopeo_reads_one_index_of_amd64_and_arm64() {
    let layout = test_support::podman::image_layout();
    let Some(skopeo) = needed(
        "skopeo",
        PathBuf::from("/usr/bin/skopeo"),
        "apt install skopeo",
    ) else {
        return;
    };
    let Some(index) = needed(
        "the image layout",
        layout.join("index.json"),
        "cargo xtask image",
    ) else {
        return;
    };
    let top: Value = serde_json::from_slice(&std::fs::read(index).unwrap()).unwrap();
    let tag = top["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"]
        .as_str()
        .unwrap()
        .to_string();
    let reference = format!("oci:{}:{tag}", layout.display());
    let raw = Command::new(&skopeo)
        .args(["inspect", "--raw", &reference])
        .output()
        .unwrap();
    assert!(raw.status.success(), "{raw:?}");
    let raw: Value = serde_json::from_slice(&raw.stdout).unwrap();
    if raw["mediaType"] != "application/vnd.oci.image.index.v1+json" {
        skip_or_fail(&format!(
            "{reference} is one platform's image, not an index (cargo xtask image builds both)"
        ));
        return;
    }
    let mut platforms: Vec<String> = raw["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}/{}",
                m["platform"]["os"].as_str().unwrap(),
                m["platform"]["architecture"].as_str().unwrap()
            )
        })
        .collect();
    platforms.sort();
    assert_eq!(platforms, ["linux/amd64", "linux/arm64"]);
    // Each platform's image, as skopeo resolves the index for that platform: its config names
    // the architecture, and its binary layer is that architecture's.
    for arch in ["amd64", "arm64"] {
        let out = Command::new(&skopeo)
            .args(["--override-arch", arch, "--override-os", "linux"])
            .args(["inspect", "--config", &reference])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let config: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(config["architecture"], arch);
        assert_eq!(config["os"], "linux");
    }
}
