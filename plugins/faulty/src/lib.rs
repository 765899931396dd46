//! Test-only plugin (type `test.wasm-deployer.dev/faulty`) for the runtime's isolation tests.
//!
//! Owns: misbehaviour on demand, chosen by `spec.config.action`:
//! `ok` (succeeds), `trap` (panics → wasm trap), `loop` (spins forever), `allocate` (grows
//! memory without bound), `recurse` (overflows the stack), `env` / `fs` (report what ambient
//! environment, arguments and files are visible), `checkpoint` (calls the progress import),
//! `kube` (reads a ConfigMap through the host), `log` (logs at every level), `inputs` (echoes
//! the Context and whether a Target came), `exit` (calls
//! `std::process::exit`), `sleep` (sleeps an hour on the WASI monotonic clock), `target`
//! (reaches for the secondary Target `config.targetName`, if given, and for `other-items-target`,
//! which its configuration never names).
//! Must not touch: anything outside tests — xtask builds it into `target/test-plugins/`.

use sdk_guest::{
    Ctx, Deployer, DeployerError, Description, Invocation, LogLevel, ObjectRef, Response,
    export_deployer,
};
use serde::Deserialize;
use serde_json::json;

/// DeployItem type handled.
pub const DEPLOY_ITEM_TYPE: &str = "test.wasm-deployer.dev/faulty";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Config {
    action: String,
    /// A secondary Target this item's configuration names (granted by the host).
    target_name: Option<String>,
}

/// The faulty deployer.
pub struct Faulty;

#[inline(never)]
fn recurse(n: u64) -> u64 {
    if n == u64::MAX {
        return 0;
    }
    let buf = std::hint::black_box([n; 64]);
    buf[0].wrapping_add(recurse(n + 1))
}

impl Deployer for Faulty {
    fn describe() -> Description {
        Description {
            name: "faulty".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            deploy_item_types: vec![DEPLOY_ITEM_TYPE.into()],
            hook_types: vec![],
        }
    }

    fn reconcile(ctx: &Ctx, inv: Invocation) -> Result<Response, DeployerError> {
        let config: Config = inv.provider_config()?;
        let status = match config.action.as_str() {
            "ok" => json!({"ok": true}),
            // Echo what the host handed over: the Context (with resolved pull secrets) and
            // whether a Target came with it.
            "inputs" => json!({
                "context": inv.context.clone(),
                "hasTarget": inv.target.is_some(),
            }),
            "trap" => panic!("faulty plugin: deliberate trap"),
            "loop" => {
                let mut i: u64 = 0;
                loop {
                    i = std::hint::black_box(i.wrapping_add(1));
                }
            }
            "allocate" => {
                let mut hog: Vec<Vec<u8>> = Vec::new();
                loop {
                    hog.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hog);
                }
            }
            "recurse" => json!({"n": recurse(0)}),
            "env" => json!({
                "env": std::env::vars().collect::<Vec<_>>(),
                "args": std::env::args().collect::<Vec<_>>(),
                "cwd": std::env::current_dir().ok().map(|p| p.display().to_string()),
            }),
            "fs" => {
                let probe = |p: &str| match std::fs::read_dir(p) {
                    Ok(entries) => format!("listed {} entries", entries.count()),
                    Err(e) => format!("error: {e}"),
                };
                json!({
                    "root": probe("/"),
                    "dot": probe("."),
                    "passwd": std::fs::read_to_string("/etc/passwd").map_err(|e| e.to_string()).err(),
                    "write": std::fs::write("/tmp/faulty-was-here", b"x").map_err(|e| e.to_string()).err(),
                })
            }
            "net" => json!({
                "connect": std::net::TcpStream::connect("127.0.0.1:80").map(|_| ()).map_err(|e| e.to_string()).err(),
            }),
            "checkpoint" => {
                ctx.checkpoint("faulty: checkpoint")?;
                json!({"remainingMs": ctx.remaining().map(|d| d.as_millis() as u64)})
            }
            "kube" => {
                let cm = ctx.kube_get(&ObjectRef::namespaced("v1", "ConfigMap", "ns", "probe"))?;
                let created = ctx.kube_create(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "made", "namespace": "ns"}}))?;
                let deleted =
                    ctx.kube_delete(&ObjectRef::namespaced("v1", "ConfigMap", "ns", "gone"))?;
                json!({"get": cm, "created": created, "deleted": deleted})
            }
            "log" => {
                for level in [
                    LogLevel::Trace,
                    LogLevel::Debug,
                    LogLevel::Info,
                    LogLevel::Warn,
                    LogLevel::Error,
                ] {
                    ctx.log(level, &format!("faulty log at {level:?}"));
                }
                json!({"now": ctx.now_rfc3339(), "mono": ctx.monotonic_nanos()})
            }
            "exit" => std::process::exit(3),
            "sleep" => {
                std::thread::sleep(std::time::Duration::from_secs(3600));
                json!({"slept": true})
            }
            "target" => {
                let probe = |name: &str| {
                    let r = ObjectRef::namespaced("v1", "ConfigMap", "default", "probe");
                    match ctx.kube_on(name, sdk_guest::KubeOp::Get(r)) {
                        Ok(found) => json!({"reached": found.is_some()}),
                        Err(e) => json!({"denied": e.reason, "message": e.message}),
                    }
                };
                json!({
                    "named": config.target_name.as_deref().map(probe),
                    "other": probe("other-items-target"),
                })
            }
            other => {
                return Err(DeployerError::configuration(
                    "UnknownAction",
                    format!("unknown action {other:?}"),
                ));
            }
        };
        // providerStatus is an embedded resource: the API server requires apiVersion and kind.
        let mut status = status;
        status["apiVersion"] = json!("faulty.test/v1");
        status["kind"] = json!("ProviderStatus");
        Ok(Response {
            phase: Some("Succeeded".into()),
            provider_status: Some(status),
            ..Default::default()
        })
    }

    fn delete(_ctx: &Ctx, _inv: Invocation) -> Result<Response, DeployerError> {
        Ok(Response::default())
    }
}

export_deployer!(Faulty);
