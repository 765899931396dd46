//! The engine as a `wasm32-wasip2` component: builds the `template` example for wasip2 (into
//! `target/helm-wasm-test`) and runs it under wasmtime with the chart directory preopened, then
//! compares its stdout with Helm's golden `template.txt`. Prints `SKIP:` when the wasip2 target
//! cannot be built here.

use std::path::{Path, PathBuf};
use std::process::Command as Proc;

use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::p2::bindings::sync::Command;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

struct State {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn build_component() -> Option<PathBuf> {
    let target = repo_root().join("target/helm-wasm-test");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Proc::new(cargo)
        .args([
            "build",
            "-p",
            "helm-engine",
            "--target",
            "wasm32-wasip2",
            "--example",
            "template",
        ])
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(repo_root())
        .status()
        .ok()?;
    if !status.success() {
        return None;
    }
    Some(target.join("wasm32-wasip2/debug/examples/template.wasm"))
}

#[test]
fn renders_golden_under_wasm32_wasip2() -> anyhow::Result<()> {
    let td = repo_root().join("../shared/charts/helm-testdata");
    if !td.exists() {
        skip(format!("{} not found", td.display()));
        return Ok(());
    }
    let Some(wasm) = build_component() else {
        skip("could not build the wasm32-wasip2 example (rustup target add wasm32-wasip2)");
        return Ok(());
    };
    let engine = Engine::new(&Config::new())?;
    let component = Component::from_file(&engine, &wasm)?;
    let run = |chart: &Path, args: &[&str]| -> anyhow::Result<(bool, String, String)> {
        let mut linker: Linker<State> = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        let stdout = MemoryOutputPipe::new(16 << 20);
        let stderr = MemoryOutputPipe::new(1 << 20);
        let wasi = WasiCtxBuilder::new()
            .args(args)
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .preopened_dir(chart, "/chart", FsPerms::ReadOnly)?
            .build();
        let mut store = Store::new(
            &engine,
            State {
                wasi,
                table: ResourceTable::new(),
            },
        );
        let cmd = Command::instantiate(&mut store, &component, &linker)?;
        let ok = cmd.wasi_cli_run().call_run(&mut store)?;
        let out = String::from_utf8(stdout.contents().to_vec())?;
        let err = String::from_utf8_lossy(&stderr.contents()).into_owned();
        Ok((ok.is_ok(), out, err))
    };
    let (ok, out, err) = run(
        &td.join("testcharts/subchart"),
        &["helm-template", "/chart", "--kube-version", "v1.20.0"],
    )?;
    assert!(ok, "component failed: {err}");
    let want = std::fs::read_to_string(td.join("output/template.txt"))?;
    assert_eq!(out, want, "wasm output differs from the golden");
    println!(
        "wasm32-wasip2: template.txt byte-identical ({} bytes, component {})",
        out.len(),
        wasm.display()
    );

    // Sprig's crypto under wasm: the OS random source (getrandom on WASI) and the RustCrypto
    // code paths (EC/Ed25519 keys, X.509, AES); RSA is left out (slow in a debug wasm build).
    let chart = std::env::temp_dir().join(format!("helm-wasm-crypto-{}", std::process::id()));
    std::fs::create_dir_all(chart.join("templates"))?;
    std::fs::write(
        chart.join("Chart.yaml"),
        "apiVersion: v2\nname: crypto\nversion: 0.1.0\n",
    )?;
    std::fs::write(
        chart.join("templates/cm.yaml"),
        r#"{{- $ca := genCAWithKey "ca" 30 (genPrivateKey "ecdsa") }}
{{- $leaf := genSignedCertWithKey "x" (list "10.0.0.1") (list "x.local") 1 $ca (genPrivateKey "ed25519") }}
apiVersion: v1
kind: ConfigMap
metadata: {name: crypto}
data:
  ca: {{ $ca.Cert | b64enc }}
  leaf: {{ $leaf.Cert | b64enc }}
  key: {{ $leaf.Key | b64enc }}
  aes: {{ encryptAES "k" "secret" | decryptAES "k" }}
"#,
    )?;
    let res = run(&chart, &["helm-template", "/chart"]);
    let _ = std::fs::remove_dir_all(&chart);
    let (ok, out, err) = res?;
    assert!(ok, "component failed: {err}");
    assert!(out.contains("\n  aes: secret\n"), "{out}");
    use base64::Engine as _;
    let field = |k: &str| -> String {
        let line = out
            .lines()
            .find_map(|l| l.strip_prefix(&format!("  {k}: ")))
            .unwrap_or_default();
        let b = base64::engine::general_purpose::STANDARD
            .decode(line)
            .unwrap_or_default();
        String::from_utf8(b).unwrap_or_default()
    };
    assert!(
        field("ca").starts_with("-----BEGIN CERTIFICATE-----\n"),
        "{out}"
    );
    assert!(
        field("leaf").starts_with("-----BEGIN CERTIFICATE-----\n"),
        "{out}"
    );
    assert!(
        field("key").starts_with("-----BEGIN PRIVATE KEY-----\n"),
        "{out}"
    );
    assert_ne!(field("ca"), field("leaf"));
    println!("wasm32-wasip2: genCAWithKey/genSignedCertWithKey/encryptAES render");
    Ok(())
}

/// A missing tool: SKIP locally, a failure in CI (`CI=true`), where `.ci/run` installs it.
fn skip(reason: impl std::fmt::Display) {
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{reason} (CI=true: a missing tool is a failure, not a skip)");
    }
    println!("SKIP: {reason}");
}
