//! rust-echo: the example deployer plugin in Rust, the same as `plugins/{python,js,c}/echo`
//! (tests/polyglot_plugins.rs runs one set of stories on all four).
//!
//! Writes the provider configuration's `message` into a ConfigMap `<item>-echo` next to the
//! DeployItem and exports it. `crash: true` panics: the host reports the trap with the panic
//! message as ERR_INTERNAL_PROBLEM.

use sdk_guest::{
    Ctx, Deployer, DeployerError, Description, Invocation, ObjectRef, Response, export_deployer,
};
use serde_json::json;

const API_VERSION: &str = "examples.wasm-deployer.dev/v1";

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Config {
    message: String,
    #[serde(default)]
    crash: bool,
}

pub struct Echo;

fn config_map(inv: &Invocation) -> ObjectRef {
    let meta = &inv.deploy_item["metadata"];
    let name = meta["name"].as_str().unwrap_or_default();
    let namespace = meta["namespace"].as_str().unwrap_or("default");
    ObjectRef::namespaced("v1", "ConfigMap", namespace, format!("{name}-echo"))
}

impl Deployer for Echo {
    fn describe() -> Description {
        Description {
            name: "rust-echo".into(),
            version: "0.1.0".into(),
            deploy_item_types: vec!["examples.wasm-deployer.dev/echo-rust".into()],
            hook_types: vec![],
        }
    }

    fn reconcile(ctx: &Ctx, inv: Invocation) -> Result<Response, DeployerError> {
        // ERR_CONFIGURATION_PROBLEM naming the field if `message` is missing or not a string.
        let config: Config = inv.provider_config()?;
        if config.crash {
            panic!("crash requested");
        }
        let cm = config_map(&inv);
        ctx.info(&format!(
            "echo: writing {:?} into ConfigMap {}",
            config.message, cm.name
        ));
        match ctx.kube_get(&cm)? {
            Some(mut existing) => {
                existing["data"] = json!({"message": config.message});
                ctx.kube_update(&existing)?;
            }
            None => {
                ctx.kube_create(&json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": cm.name, "namespace": cm.namespace},
                    "data": {"message": config.message},
                }))?;
            }
        }
        Ok(Response {
            phase: Some("Succeeded".into()),
            provider_status: Some(
                json!({"apiVersion": API_VERSION, "kind": "ProviderStatus", "configMap": cm.name}),
            ),
            exports: Some(json!({"message": config.message})),
            ..Default::default()
        })
    }

    fn delete(ctx: &Ctx, inv: Invocation) -> Result<Response, DeployerError> {
        let cm = config_map(&inv);
        let existed = ctx.kube_delete(&cm)?;
        ctx.info(&format!(
            "echo: ConfigMap {} {}",
            cm.name,
            if existed {
                "deleted"
            } else {
                "was already gone"
            }
        ));
        Ok(Response {
            phase: Some("Succeeded".into()),
            ..Default::default()
        })
    }
}

export_deployer!(Echo);
