//! The Rust SDK a `plugin new --lang rust` project carries with it: the sources of `sdk-guest`
//! and `landscaper-model` as this binary was built from them, with manifests that need no
//! workspace around them — so a project builds with nothing but this binary, cargo and crates.io
//! (as the Python, JavaScript, C and Go projects carry their SDKs).
//!
//! Owns: the file list and the two manifests. Must not touch: the rest of the project
//! (`scaffold`).

/// Where the SDK goes in the project, and how the project's `Cargo.toml` names it.
pub const DIR: &str = "sdk-guest";

/// `sdk-guest`'s own sources (its tests stay behind), then `landscaper-model`'s (its `crd` module,
/// the host's CRD generator, too).
const SOURCES: [(&str, &str); 19] = [
    (
        "sdk-guest/src/lib.rs",
        include_str!("../../../../sdk-guest/src/lib.rs"),
    ),
    (
        "sdk-guest/src/ctx.rs",
        include_str!("../../../../sdk-guest/src/ctx.rs"),
    ),
    (
        "sdk-guest/src/deployer.rs",
        include_str!("../../../../sdk-guest/src/deployer.rs"),
    ),
    (
        "sdk-guest/src/hooks.rs",
        include_str!("../../../../sdk-guest/src/hooks.rs"),
    ),
    (
        "sdk-guest/src/wasm/mod.rs",
        include_str!("../../../../sdk-guest/src/wasm/mod.rs"),
    ),
    (
        "sdk-guest/src/wasm/world.rs",
        include_str!("../../../../sdk-guest/src/wasm/world.rs"),
    ),
    (
        "sdk-guest/src/wasm/imports.rs",
        include_str!("../../../../sdk-guest/src/wasm/imports.rs"),
    ),
    (
        "sdk-guest/src/wasm/exports.rs",
        include_str!("../../../../sdk-guest/src/wasm/exports.rs"),
    ),
    (
        "sdk-guest/src/http.rs",
        include_str!("../../../../sdk-guest/src/http.rs"),
    ),
    (
        "sdk-guest/src/wasm/http.rs",
        include_str!("../../../../sdk-guest/src/wasm/http.rs"),
    ),
    (
        "landscaper-model/src/lib.rs",
        include_str!("../../../../sdk-guest/model/src/lib.rs"),
    ),
    (
        "landscaper-model/src/codes.rs",
        include_str!("../../../../sdk-guest/model/src/codes.rs"),
    ),
    (
        "landscaper-model/src/duration.rs",
        include_str!("../../../../sdk-guest/model/src/duration.rs"),
    ),
    (
        "landscaper-model/src/hooks.rs",
        include_str!("../../../../sdk-guest/model/src/hooks.rs"),
    ),
    (
        "landscaper-model/src/meta.rs",
        include_str!("../../../../sdk-guest/model/src/meta.rs"),
    ),
    (
        "landscaper-model/src/plugin.rs",
        include_str!("../../../../sdk-guest/model/src/plugin.rs"),
    ),
    (
        "landscaper-model/src/resources.rs",
        include_str!("../../../../sdk-guest/model/src/resources.rs"),
    ),
    (
        "landscaper-model/src/time.rs",
        include_str!("../../../../sdk-guest/model/src/time.rs"),
    ),
    (
        "landscaper-model/src/wire.rs",
        include_str!("../../../../sdk-guest/model/src/wire.rs"),
    ),
];

/// `sdk-guest`'s manifest outside the workspace: the versions the workspace pins.
const SDK_MANIFEST: &str = r#"[package]
name = "sdk-guest"
description = "Write wasm-deployer plugins in Rust (copied into this project by `deployer-host plugin new`)"
version = "0.1.0"
edition = "2024"
license = "Apache-2.0"

[dependencies]
landscaper-model = { path = "../landscaper-model" }
serde = { version = "1", features = ["derive"] }
serde_json = "1"
serde_path_to_error = "0.1"

[target.'cfg(target_arch = "wasm32")'.dependencies]
wit-bindgen = "0.63.0"
wasip2 = "1"

[lints.rust]
unexpected_cfgs = "allow"
"#;

/// `landscaper-model`'s manifest outside the workspace (without the host's `schema` feature).
const MODEL_MANIFEST: &str = r#"[package]
name = "landscaper-model"
description = "Landscaper's resources and the wasm-deployer plugin protocol (copied into this project by `deployer-host plugin new`)"
version = "0.1.0"
edition = "2024"
license = "Apache-2.0"

[dependencies]
serde = { version = "1", features = ["derive"] }
serde_json = "1"
serde_path_to_error = "0.1"
k8s-openapi = { version = "0.29", features = ["v1_33"] }

[lints.rust]
unexpected_cfgs = "allow"
"#;

/// Every file of the SDK, by its path in the project. `sdk-guest` finds the WIT files at
/// `../wit`: the project's own `wit/`.
pub fn files() -> Vec<(&'static str, &'static str)> {
    let mut files = vec![
        ("sdk-guest/Cargo.toml", SDK_MANIFEST),
        ("landscaper-model/Cargo.toml", MODEL_MANIFEST),
    ];
    files.extend(SOURCES);
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every source file of both crates is carried, but the ones a plugin build never compiles.
    #[test]
    fn every_source_file_of_the_sdk_is_carried() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk-guest");
        let mut on_disk = Vec::new();
        for (crate_dir, as_) in [
            ("src", "sdk-guest/src"),
            ("model/src", "landscaper-model/src"),
        ] {
            let base = root.join(crate_dir);
            let mut stack = vec![base.clone()];
            while let Some(dir) = stack.pop() {
                for entry in std::fs::read_dir(&dir).unwrap() {
                    let path = entry.unwrap().path();
                    if path.is_dir() {
                        stack.push(path);
                    } else if path.extension().is_some_and(|e| e == "rs") {
                        let rel = path.strip_prefix(&base).unwrap().display().to_string();
                        on_disk.push(format!("{as_}/{rel}"));
                    }
                }
            }
        }
        // Left behind on purpose: sdk-guest's unit tests (cfg(test)) and the model's CRD
        // generator (feature `schema`, the host's).
        on_disk.retain(|p| p != "sdk-guest/src/tests.rs" && p != "landscaper-model/src/crd.rs");
        on_disk.sort();
        let mut carried: Vec<String> = SOURCES.iter().map(|(p, _)| p.to_string()).collect();
        carried.sort();
        assert_eq!(carried, on_disk);
    }

    /// The pinned versions are the workspace's.
    #[test]
    fn the_manifests_pin_the_workspaces_versions() {
        let workspace = include_str!("../../../../Cargo.toml");
        for dep in [
            "wit-bindgen = \"0.63.0\"",
            "wasip2 = \"1\"",
            "k8s-openapi = { version = \"0.29\"",
        ] {
            assert!(
                workspace.contains(dep),
                "the workspace no longer pins {dep}"
            );
        }
    }
}
