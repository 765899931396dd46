//! `deployer-host plugin inspect`: what a plugin is and whether this host can load it.
//!
//! Owns: the report (text or JSON) and its exit code. Must not touch: loading (the runtime).

use std::path::PathBuf;

use anyhow::Context as _;

use crate::cli::registry::registry_options;

/// `deployer-host plugin inspect`: load the component in a fresh runtime (no cache) and say
/// what it is, or why this host cannot load it.
pub(super) async fn inspect(plugin: &str, plain_http: bool, json: bool) -> anyhow::Result<()> {
    use crate::{oci, plugin_sources::trust};
    let path = PathBuf::from(plugin);
    let bytes = if path.exists() {
        std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?
    } else {
        let options = registry_options(plugin, plain_http, None)?;
        oci::pull(plugin, &options)
            .await
            .with_context(|| format!("{plugin} is neither a file nor a pullable OCI reference"))?
            .bytes
    };
    let digest = trust::digest_of(&bytes);
    let loaded = super::call::load_bytes(plugin, &bytes).await;
    let mut out = serde_json::json!({
        "source": plugin,
        "size": bytes.len(),
        "digest": digest,
        "hostWit": sdk_guest::WIT_VERSION,
    });
    match &loaded {
        Ok(p) => {
            let d = plugin_runtime::DeployerPlugin::description(p.as_ref());
            let (imports, exports) = p.interfaces();
            out["loadable"] = true.into();
            out["name"] = d.name.clone().into();
            out["version"] = d.version.clone().into();
            out["deployItemTypes"] = serde_json::json!(d.deploy_item_types);
            out["hookTypes"] = serde_json::json!(
                p.hook_setup()
                    .map(|h| h
                        .hook_types
                        .iter()
                        .map(|t| t.as_str().to_string())
                        .collect::<Vec<_>>())
                    .unwrap_or_default()
            );
            out["wit"] = serde_json::json!(p.wit_version());
            out["imports"] = serde_json::json!(imports);
            out["exports"] = serde_json::json!(exports);
        }
        Err(e) => {
            out["loadable"] = false.into();
            out["error"] = format!("{e:#}").into();
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        let s = |k: &str| match &out[k] {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Null => "-".into(),
            v => v.to_string(),
        };
        let list = |k: &str| {
            out[k]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "-".into())
        };
        println!("source:      {}", s("source"));
        println!("size:        {} bytes", s("size"));
        println!("digest:      {}", s("digest"));
        if loaded.is_ok() {
            println!("name:        {} {}", s("name"), s("version"));
            println!("types:       {}", list("deployItemTypes"));
            println!("hook types:  {}", list("hookTypes"));
            println!(
                "WIT:         wasm-deployer:plugin@{} (host: {})",
                s("wit"),
                s("hostWit")
            );
            println!("imports:     {}", list("imports"));
            println!("exports:     {}", list("exports"));
            println!("loadable:    yes");
        } else {
            println!("loadable:    no — {}", s("error"));
        }
    }
    if loaded.is_err() {
        std::process::exit(1);
    }
    Ok(())
}
