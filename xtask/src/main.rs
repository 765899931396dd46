//! `cargo xtask` — repository automation (install-free: it only calls `cargo`).
//!
//! Owns: `cargo xtask build-plugins`, which builds every crate under `plugins/` for
//! `wasm32-wasip2` with `--profile plugin` and copies the components to
//! `<target-dir>/plugins/<name>.wasm` (test-only plugins, marked with
//! `[package.metadata.wasm-deployer] test-only = true`, go to `<target-dir>/test-plugins/`).
//! Must not touch: sources, the host build, or anything outside the target directory.

use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const WASM_TARGET: &str = "wasm32-wasip2";
const PROFILE: &str = "plugin";

fn usage() -> ! {
    eprintln!(
        "usage: cargo xtask build-plugins [-p <plugin>]...\n\n\
         Builds every crate under plugins/ for {WASM_TARGET} (profile `{PROFILE}`) and copies\n\
         <name>.wasm to <target-dir>/plugins/ (test-only plugins: <target-dir>/test-plugins/)."
    );
    std::process::exit(2)
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    match args.next().as_deref() {
        Some("build-plugins") => {
            let mut only = Vec::new();
            while let Some(a) = args.next() {
                match a.as_str() {
                    "-p" | "--package" => only.push(args.next().unwrap_or_else(|| usage())),
                    _ => usage(),
                }
            }
            build_plugins(&only)
        }
        _ => usage(),
    }
}

struct Plugin {
    name: String,
    lib_name: String,
    test_only: bool,
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

fn build_plugins(only: &[String]) -> Result<()> {
    let out = Command::new(cargo())
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let meta: Value = serde_json::from_slice(&out.stdout).context("parsing cargo metadata")?;
    let root = PathBuf::from(meta["workspace_root"].as_str().context("workspace_root")?);
    let target_dir = PathBuf::from(
        meta["target_directory"]
            .as_str()
            .context("target_directory")?,
    );
    let plugins_root = root.join("plugins");

    let mut plugins = Vec::new();
    for pkg in meta["packages"].as_array().context("packages")? {
        let manifest = Path::new(pkg["manifest_path"].as_str().unwrap_or_default());
        if !manifest.starts_with(&plugins_root) {
            continue;
        }
        let name = pkg["name"].as_str().unwrap_or_default().to_string();
        if !only.is_empty() && !only.contains(&name) {
            continue;
        }
        let lib_name = pkg["targets"]
            .as_array()
            .and_then(|ts| {
                ts.iter().find(|t| {
                    t["kind"]
                        .as_array()
                        .is_some_and(|k| k.iter().any(|k| k == "cdylib"))
                })
            })
            .and_then(|t| t["name"].as_str())
            .with_context(|| format!("plugin crate {name} has no cdylib target"))?
            .replace('-', "_");
        let test_only = pkg["metadata"]["wasm-deployer"]["test-only"].as_bool() == Some(true);
        plugins.push(Plugin {
            name,
            lib_name,
            test_only,
        });
    }
    if plugins.is_empty() {
        bail!("no plugin crates found under {}", plugins_root.display());
    }
    plugins.sort_by(|a, b| a.name.cmp(&b.name));

    let mut cmd = Command::new(cargo());
    cmd.current_dir(&root).args([
        "build",
        "--target",
        WASM_TARGET,
        "--profile",
        PROFILE,
        "--lib",
    ]);
    for p in &plugins {
        cmd.args(["-p", &p.name]);
    }
    eprintln!("xtask: {cmd:?}");
    let status = cmd.status().context("running cargo build")?;
    if !status.success() {
        bail!(
            "building plugins failed (is the target installed? `rustup target add {WASM_TARGET}`)"
        );
    }

    let built_dir = target_dir.join(WASM_TARGET).join(PROFILE);
    println!("{:<12} {:>10}  path", "plugin", "bytes");
    for p in &plugins {
        let src = built_dir.join(format!("{}.wasm", p.lib_name));
        let bytes = std::fs::read(&src).with_context(|| format!("reading {}", src.display()))?;
        // A component has layer 1 in the preamble (`\0asm` 0x0d 0x00 0x01 0x00).
        if bytes.len() < 8 || &bytes[0..4] != b"\0asm" || bytes[6..8] != [1, 0] {
            bail!("{} is not a WebAssembly component", src.display());
        }
        let dir = target_dir.join(if p.test_only {
            "test-plugins"
        } else {
            "plugins"
        });
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let dst = dir.join(format!("{}.wasm", p.name));
        let tmp = dir.join(format!(".{}.wasm.tmp", p.name));
        std::fs::write(&tmp, &bytes).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &dst).with_context(|| format!("writing {}", dst.display()))?;
        println!("{:<12} {:>10}  {}", p.name, bytes.len(), dst.display());
    }
    Ok(())
}
