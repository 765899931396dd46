//! `cargo xtask image`: the host's container image for amd64 and arm64 (static musl binaries,
//! arm64's cross-built by cargo-zigbuild), assembled by the host's own `deployer-host image
//! build`; and the images `cargo xtask dev --pod-runtime podman` puts into podman's storage.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

use crate::{
    IMAGE_LAYOUT_DIR, build_plugins, cargo, ensure_wasm_target, run, target_dir, usage,
    workspace_root,
};

/// The image's platforms, as OCI names them, with the Rust target of each one's binary:
/// static (musl), so the image needs no libc.
const IMAGE_PLATFORMS: [(&str, &str); 2] = [
    ("amd64", "x86_64-unknown-linux-musl"),
    ("arm64", "aarch64-unknown-linux-musl"),
];
/// The target whose binary runs here (and assembles the image).
const IMAGE_TARGET: &str = "x86_64-unknown-linux-musl";
/// Where the arm64 binary is built: a target directory of its own, so its cross build (zig's
/// C compiler and linker) runs beside a build or test in `target/` without waiting for its lock.
const CROSS_TARGET_DIR: &str = "cross";
/// The cross toolchain for arm64, pinned: `cargo-zigbuild` (crates.io) drives Zig (PyPI's
/// `ziglang`) as C compiler and linker for ring's and zstd's C parts and the final link.
const CARGO_ZIGBUILD_VERSION: &str = "0.24.1";
const ZIGLANG_VERSION: &str = "0.17.1";

/// `cargo xtask image [--platform amd64|arm64]…`: each platform's static host binary, the
/// default plugins, then `deployer-host image build` (the project's own OCI code) to write
/// and/or push the image: with both platforms (the default), an image index under one tag.
pub fn image(args: Vec<String>) -> Result<()> {
    let mut platforms: Vec<&str> = Vec::new();
    let mut rest = Vec::new();
    let mut binaries_only = false;
    let mut args = args.into_iter();
    while let Some(a) = args.next() {
        if a == "--binaries-only" {
            binaries_only = true;
            continue;
        }
        let list = match a.strip_prefix("--platform=") {
            Some(v) => v.to_string(),
            None if a == "--platform" => args.next().unwrap_or_else(|| usage()),
            None => {
                rest.push(a);
                continue;
            }
        };
        for p in list.split(',') {
            let Some((name, _)) = IMAGE_PLATFORMS.iter().find(|(n, _)| *n == p) else {
                bail!("unknown platform {p:?} (amd64, arm64)");
            };
            if !platforms.contains(name) {
                platforms.push(name);
            }
        }
    }
    if platforms.is_empty() {
        platforms = IMAGE_PLATFORMS.iter().map(|(n, _)| *n).collect();
    }
    let mut binaries = Vec::new();
    for platform in &platforms {
        binaries.push(build_static_host(platform)?);
    }
    if binaries_only {
        // Only the static hosts (.ci/run builds arm64's this way beside the tests).
        return Ok(());
    }
    ensure_wasm_target()?;
    build_plugins(&[])?;
    let root = workspace_root();
    let target = target_dir()?;
    // The static amd64 binary assembles the image: it runs here as it runs in the image. With
    // arm64 alone, the workspace's own (debug) host does.
    let runner = match platforms.contains(&"amd64") {
        true => binaries[platforms.iter().position(|p| *p == "amd64").unwrap()].clone(),
        false => {
            run(Command::new(cargo()).current_dir(&root).args([
                "build",
                "-p",
                "deployer-host",
                "--bin",
                "deployer-host",
            ]))?;
            target.join("debug/deployer-host")
        }
    };
    let mut cmd = Command::new(&runner);
    cmd.current_dir(&root).args(["image", "build"]);
    for binary in &binaries {
        cmd.arg("--binary").arg(binary);
    }
    cmd.arg("--plugins").arg(target.join("plugins"));
    if !rest.iter().any(|a| a == "--out" || a == "--push") {
        // Not `<target-dir>/image`: that is Cargo's directory for the `image` profile's build
        // scripts, which `cargo clean --profile image` deletes.
        cmd.arg("--out").arg(target.join(IMAGE_LAYOUT_DIR));
    }
    run(cmd.args(&rest))
}

/// Builds the static host for `platform` (profile `image`); returns the binary's path.
fn build_static_host(platform: &str) -> Result<PathBuf> {
    let (_, triple) = IMAGE_PLATFORMS
        .iter()
        .find(|(n, _)| *n == platform)
        .context("platform")?;
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.trim() == *triple)
        })
        .unwrap_or(true);
    if !installed {
        eprintln!("installing the {triple} target");
        run(Command::new("rustup").args(["target", "add", triple]))?;
    }
    let root = workspace_root();
    let target = target_dir()?;
    let started = std::time::Instant::now();
    let args = [
        "--profile",
        "image",
        "--target",
        triple,
        "-p",
        "deployer-host",
    ];
    let out_dir =
        if *triple == IMAGE_TARGET {
            run(Command::new(cargo()).current_dir(&root).arg("build").args(args)).context(
            "building the static host (its C parts need a musl C compiler: apt install musl-tools)",
        )?;
            target.clone()
        } else {
            let cross = target.join(CROSS_TARGET_DIR);
            let zigbuild = cross_toolchain(&target)?;
            run(Command::new(&zigbuild.0)
                .current_dir(&root)
                .env("PATH", &zigbuild.1)
                .env("CARGO_TARGET_DIR", &cross)
                .arg("zigbuild")
                .args(args))
            .with_context(|| {
                format!("building the static host for {triple} with cargo-zigbuild")
            })?;
            cross
        };
    eprintln!(
        "built the {platform} host in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(out_dir.join(triple).join("image/deployer-host"))
}

/// `cargo-zigbuild` and a `PATH` on which it finds Zig (`python3 -m ziglang` of a venv), both
/// installed under `<target>/guest-toolchains/zig` when missing, as the guest toolchains are.
fn cross_toolchain(target: &Path) -> Result<(PathBuf, std::ffi::OsString)> {
    let home = target.join("guest-toolchains/zig");
    let venv = home.join("venv");
    let python = venv.join("bin/python");
    let have_zig = python.exists()
        && Command::new(&python)
            .args(["-m", "ziglang", "version"])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == ZIGLANG_VERSION);
    if !have_zig {
        eprintln!(
            "installing Zig {ZIGLANG_VERSION} (PyPI ziglang) into {}",
            venv.display()
        );
        run(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
        run(Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "-q",
            &format!("ziglang=={ZIGLANG_VERSION}"),
        ]))?;
    }
    let zigbuild = home.join("bin/cargo-zigbuild");
    let have_zigbuild = Command::new(&zigbuild)
        .arg("--version")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(CARGO_ZIGBUILD_VERSION));
    if !have_zigbuild {
        eprintln!(
            "installing cargo-zigbuild {CARGO_ZIGBUILD_VERSION} into {}",
            home.display()
        );
        run(Command::new(cargo())
            .args(["install", "--locked", "--quiet", "--root"])
            .arg(&home)
            .arg(format!("cargo-zigbuild@{CARGO_ZIGBUILD_VERSION}")))?;
    }
    let mut path = std::ffi::OsString::from(venv.join("bin"));
    if let Some(p) = std::env::var_os("PATH") {
        path.push(":");
        path.push(p);
    }
    Ok((zigbuild, path))
}

/// The image `examples/containers/` runs: Debian's static busybox as a shell image.
const EXAMPLE_SHELL_IMAGE: &str = "localhost/wasm-deployer/example-sh:1";
/// The host's image as dev mode's podman pods run it.
const DEV_HOST_IMAGE: &str = "localhost/deployer-host:dev";

/// Builds the host's image (this machine's platform) into `<target>/dev/oci-image`, loads it
/// into podman's storage as [`DEV_HOST_IMAGE`], and builds [`EXAMPLE_SHELL_IMAGE`] there unless
/// it exists. Returns the host image's name.
pub fn dev_container_images() -> Result<String> {
    for tool in ["podman", "skopeo"] {
        if Command::new(tool).arg("--version").output().is_err() {
            bail!("{tool} is missing: apt install podman runc skopeo busybox-static");
        }
    }
    let layout = target_dir()?.join("dev/oci-image");
    image(vec![
        "--platform".into(),
        "amd64".into(),
        "--out".into(),
        layout.display().to_string(),
    ])?;
    let index: Value = serde_json::from_slice(&std::fs::read(layout.join("index.json"))?)?;
    let tag = index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"]
        .as_str()
        .context("the layout's tag")?;
    run(Command::new("skopeo").args([
        "copy",
        "--quiet",
        &format!("oci:{}:{tag}", layout.display()),
        &format!("containers-storage:{DEV_HOST_IMAGE}"),
    ]))?;
    let exists = Command::new("podman")
        .args(["image", "exists", EXAMPLE_SHELL_IMAGE])
        .status()
        .is_ok_and(|s| s.success());
    if !exists {
        let busybox = ["/bin/busybox", "/usr/bin/busybox"]
            .into_iter()
            .map(Path::new)
            .find(|p| p.exists())
            .context("busybox is missing: apt install busybox-static (the example's image)")?;
        let rootfs = target_dir()?.join("dev/example-sh");
        let _ = std::fs::remove_dir_all(&rootfs);
        let bin = rootfs.join("bin");
        std::fs::create_dir_all(&bin)?;
        std::fs::create_dir_all(rootfs.join("tmp"))?;
        std::fs::copy(busybox, bin.join("busybox"))?;
        let applets = Command::new(busybox).arg("--list").output()?;
        for applet in String::from_utf8_lossy(&applets.stdout).lines() {
            if applet != "busybox" {
                std::os::unix::fs::symlink("busybox", bin.join(applet))?;
            }
        }
        let tar = target_dir()?.join("dev/example-sh.tar");
        run(Command::new("tar")
            .arg("-C")
            .arg(&rootfs)
            .arg("-cf")
            .arg(&tar)
            .args(["bin", "tmp"]))?;
        run(Command::new("podman")
            .args(["import", "--quiet", "--change", "CMD [\"/bin/sh\"]"])
            .args(["--change", "ENV PATH=/bin"])
            .arg(&tar)
            .arg(EXAMPLE_SHELL_IMAGE))?;
    }
    Ok(DEV_HOST_IMAGE.to_string())
}
