//! `deployer-host plugin …`: the plugin author's commands — ship (`push`, `pull`, `digest`,
//! `inspect`), make (`new`, `build`: [`scaffold`]), try (`run`, `bench`: [`call`]) and check
//! (`test`: [`conformance`]).
//!
//! Owns: the subcommands, their flags and what they print. Must not touch: the host's plugin
//! delivery (`crate::plugin_sources`, `crate::plugins`) or the runtime's limits.

pub mod call;
mod check;
pub mod conformance;
mod http_check;
mod inspect;
mod rust_sdk;
pub mod scaffold;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;

use super::registry::registry_options;

#[derive(clap::Subcommand)]
pub enum PluginCommand {
    /// Push FILE to REFERENCE (`registry/repository:tag`) and print the manifest digest.
    Push {
        file: PathBuf,
        reference: String,
        /// Sign the pushed artifact with this PKCS#8 PEM ECDSA P-256 key (cosign-compatible
        /// signature artifact `sha256-<digest>.sig`).
        #[arg(long)]
        key: Option<PathBuf>,
        /// Speak plain HTTP to the registry (only for registries you trust, e.g. on loopback).
        #[arg(long)]
        plain_http: bool,
        /// Docker config with credentials (default: `$DOCKER_CONFIG/config.json` if present).
        #[arg(long)]
        docker_config: Option<PathBuf>,
    },
    /// Print the `sha256:` digest of FILE (for `digest:` pins).
    Digest { file: PathBuf },
    /// Pull a plugin from REFERENCE (the CNCF wasm layout, or the legacy one) into FILE and
    /// print its digest.
    Pull {
        reference: String,
        /// Where to write the component.
        #[arg(long, short = 'o')]
        out: PathBuf,
        /// Speak plain HTTP to the registry (only for registries you trust, e.g. on loopback).
        #[arg(long)]
        plain_http: bool,
    },
    /// Call a plugin's reconcile N times with an item and print calls/s and latency
    /// percentiles (a fresh instance per call, as in the host; Kubernetes calls refused).
    Bench {
        file: PathBuf,
        /// The DeployItem to reconcile (YAML or JSON).
        #[arg(long)]
        item: PathBuf,
        /// Number of calls.
        #[arg(long, default_value_t = 2000)]
        calls: usize,
    },
    /// A new plugin project in DIR (default: ./NAME) that builds as generated: an echo
    /// deployer, the language's guest helper, the WIT files and an item.yaml.
    New {
        name: String,
        /// rust, python, js, c or go.
        #[arg(long)]
        lang: String,
        /// Where to write it (default: ./NAME).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Rust only: an sdk-guest crate to depend on by path (default: the copy of the SDK
        /// the project carries).
        #[arg(long)]
        sdk: Option<PathBuf>,
        /// `echo` (a ConfigMap through the Kubernetes capability) or `http-api` (PUT and DELETE
        /// on the API of the item's `wasm-deployer.dev/http-api` Target; docs/plugins/http.md).
        #[arg(long, default_value = "echo")]
        template: String,
    },
    /// Build the plugin project in DIR (made by `plugin new`) with its language's toolchain;
    /// prints the component's path.
    Build {
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Where to write the component (default: DIR/NAME.wasm).
        #[arg(long, short = 'o')]
        out: Option<PathBuf>,
    },
    /// The conformance suite every plugin should pass (describe valid and stable, a broken
    /// configuration -> ERR_CONFIGURATION_PROBLEM, with --item: reconcile, reconcile again,
    /// delete twice, cleanup; hooks answer; deadline; no network). Offline, on an in-memory
    /// cluster. Exit 1 if a check fails.
    Test {
        file: PathBuf,
        /// A DeployItem the plugin should reconcile successfully (YAML or JSON).
        #[arg(long)]
        item: Option<PathBuf>,
        /// Print the checks as JSON.
        #[arg(long)]
        json: bool,
        /// The item's Target. One of type `wasm-deployer.dev/http-api` is played by a loopback
        /// server the suite starts (its `url`'s path kept), which checks what the plugin sent.
        #[arg(long, requires = "item")]
        target: Option<PathBuf>,
        /// The Secret the http-api Target's `auth` names (YAML; default: a stand-in credential).
        #[arg(long = "secret", value_name = "FILE")]
        secrets: Vec<PathBuf>,
    },
    /// One call of a plugin offline: prints the response (or error) and every host call it
    /// made as JSON; Kubernetes calls are recorded and refused (no cluster). Exit 1 on an error.
    Run {
        file: PathBuf,
        /// The DeployItem (YAML or JSON).
        #[arg(long)]
        item: PathBuf,
        /// Its Target (the resolved content is the Target's `spec.config`).
        #[arg(long)]
        target: Option<PathBuf>,
        /// Its Context.
        #[arg(long)]
        context: Option<PathBuf>,
        /// `reconcile`, `delete`, or a hook type (`BeforeReconcile`, `ShouldReconcile`, ...) to
        /// run a hook plugin's hook with the item.
        #[arg(long, default_value = "reconcile")]
        op: String,
        /// Send Kubernetes calls to this cluster (the Target, unless --target is given).
        #[arg(long, conflicts_with = "replay")]
        kubeconfig: Option<PathBuf>,
        /// Write the Kubernetes calls and their answers to FILE (with --kubeconfig).
        #[arg(long, requires = "kubeconfig")]
        record: Option<PathBuf>,
        /// Answer the Kubernetes calls from FILE (written by --record), offline.
        #[arg(long)]
        replay: Option<PathBuf>,
        /// HTTP (WIT 1.5): requests under the url of a `--target` of type
        /// `wasm-deployer.dev/http-api` are sent, with the Target's `auth` from a Secret given
        /// here (YAML file, repeatable); everything else is refused as the host refuses it.
        #[arg(long = "secret", value_name = "FILE")]
        secrets: Vec<PathBuf>,
        /// Also send HTTP requests under this URL prefix (repeatable; the host's `http.allow`).
        #[arg(long = "http-allow", value_name = "PREFIX")]
        http_allow: Vec<String>,
    },
    /// What a plugin is and whether this host can load it: name, version, DeployItem types,
    /// hook types, WIT version, imports and exports, size, digest. FILE or an OCI reference.
    /// Exits 1 when this host cannot load it, saying why.
    Inspect {
        plugin: String,
        /// Speak plain HTTP to the registry (a reference on loopback).
        #[arg(long)]
        plain_http: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

impl PluginCommand {
    pub async fn run(self) -> anyhow::Result<()> {
        match self {
            PluginCommand::Push {
                file,
                reference,
                key,
                plain_http,
                docker_config,
            } => push(file, &reference, key, plain_http, docker_config).await,
            PluginCommand::Digest { file } => {
                let bytes =
                    std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
                println!("{}", crate::plugin_sources::trust::digest_of(&bytes));
                Ok(())
            }
            PluginCommand::Pull {
                reference,
                out,
                plain_http,
            } => {
                use crate::{oci, plugin_sources::trust};
                let options = registry_options(&reference, plain_http, None)?;
                let pulled = oci::pull(&reference, &options).await?;
                std::fs::write(&out, &pulled.bytes)
                    .with_context(|| format!("writing {}", out.display()))?;
                println!("{}", trust::digest_of(&pulled.bytes));
                Ok(())
            }
            PluginCommand::Bench { file, item, calls } => {
                // With the instance pool, as the host runs it: bench measures the host's cost.
                let bytes =
                    std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
                let runtime = plugin_runtime::PluginRuntime::new(Default::default())?;
                let plugin = runtime
                    .load_bytes(&file.display().to_string(), &bytes)
                    .await?;
                let report = call::bench(plugin, &item, calls).await?;
                println!("{report}");
                Ok(())
            }
            PluginCommand::New {
                name,
                lang,
                dir,
                sdk,
                template,
            } => new(&name, &lang, dir, sdk, &template),
            PluginCommand::Build { dir, out } => {
                let built = scaffold::build(&dir, out.as_deref())?;
                println!("{}", built.display());
                Ok(())
            }
            PluginCommand::Test {
                file,
                item,
                json,
                target,
                secrets,
            } => {
                let http = conformance::HttpTarget {
                    target: target.as_deref(),
                    secrets: &secrets,
                };
                test(&file, item, json, http).await
            }
            PluginCommand::Run {
                file,
                item,
                target,
                context,
                op,
                kubeconfig,
                record,
                replay,
                secrets,
                http_allow,
            } => {
                let files = CallFiles {
                    item,
                    target,
                    context,
                    kubeconfig,
                    record,
                    replay,
                    secrets,
                    http_allow,
                };
                run(&file, &op, files).await
            }
            PluginCommand::Inspect {
                plugin,
                plain_http,
                json,
            } => inspect::inspect(&plugin, plain_http, json).await,
        }
    }
}

/// `plugin push`: the component, then (with `--key`) its signature.
async fn push(
    file: PathBuf,
    reference: &str,
    key: Option<PathBuf>,
    plain_http: bool,
    docker_config: Option<PathBuf>,
) -> anyhow::Result<()> {
    use crate::{oci, plugin_sources::trust};
    let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
    let options = registry_options(reference, plain_http, docker_config)?;
    let title = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "plugin".into());
    let digest = oci::push(reference, &bytes, &title, &options).await?;
    if let Some(key) = key {
        let pem =
            std::fs::read_to_string(&key).with_context(|| format!("reading {}", key.display()))?;
        oci::push_signature(reference, &digest, &trust::signing_key(&pem)?, &options).await?;
        eprintln!("signed {digest}");
    }
    println!("{digest}");
    Ok(())
}

/// `plugin new`: the project, and what to run next.
fn new(
    name: &str,
    lang: &str,
    dir: Option<PathBuf>,
    sdk: Option<PathBuf>,
    template: &str,
) -> anyhow::Result<()> {
    let dir = dir.unwrap_or_else(|| PathBuf::from(name));
    let files = scaffold::new_project(lang, name, &dir, sdk.as_deref(), template)?;
    println!(
        "created {} ({lang}, {} files); next:",
        dir.display(),
        files.len()
    );
    println!("  deployer-host plugin build {}", dir.display());
    let target = if template == "http-api" {
        format!(" --target {}/target.yaml", dir.display())
    } else {
        String::new()
    };
    println!(
        "  deployer-host plugin test {}/{name}.wasm --item {}/item.yaml{target}",
        dir.display(),
        dir.display()
    );
    Ok(())
}

/// `plugin test`: the conformance suite; exit 1 if a check fails.
async fn test(
    file: &std::path::Path,
    item: Option<PathBuf>,
    json: bool,
    http: conformance::HttpTarget<'_>,
) -> anyhow::Result<()> {
    let plugin = call::load_file(file).await?;
    let name = plugin_runtime::DeployerPlugin::description(plugin.as_ref())
        .name
        .clone();
    let checks = conformance::run(plugin, item.as_deref(), http).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&checks)?);
    } else {
        print!("{}", conformance::render(&name, &checks));
    }
    if checks.iter().any(|c| c.outcome == "fail") {
        std::process::exit(1);
    }
    Ok(())
}

/// The files of `plugin run`: the item, its Target and Context, and where Kubernetes calls go.
struct CallFiles {
    item: PathBuf,
    target: Option<PathBuf>,
    context: Option<PathBuf>,
    kubeconfig: Option<PathBuf>,
    record: Option<PathBuf>,
    replay: Option<PathBuf>,
    secrets: Vec<PathBuf>,
    http_allow: Vec<String>,
}

/// `plugin run`: one call, its report as JSON; exit 1 on an error or a diverged replay.
async fn run(file: &std::path::Path, op: &str, files: CallFiles) -> anyhow::Result<()> {
    let CallFiles {
        item,
        target,
        context,
        kubeconfig,
        record,
        replay,
        secrets,
        http_allow,
    } = files;
    let plugin = call::load_file(file).await?;
    let target = match (&target, &kubeconfig) {
        (Some(t), _) => Some((call::read_yaml(t)?, t.display().to_string())),
        (None, Some(k)) => Some((call::target_for_kubeconfig(k)?, k.display().to_string())),
        // Replayed calls need no cluster, but the plugin must see a Target.
        (None, None) if replay.is_some() => Some((call::replay_target(), "--replay".to_string())),
        (None, None) => None,
    };
    let inv = call::invocation_with(&item, target, context.as_deref())?;
    let cluster = match (&kubeconfig, &replay) {
        (Some(_), _) => call::live_cluster(&inv)?,
        (None, Some(r)) => call::read_recording(r)?,
        (None, None) => call::Cluster::Offline,
    };
    let mut host = call::RecordingHost::new(cluster);
    host.http = call::OfflineHttp::new(&inv, &secrets, &http_allow)?;
    let host = Arc::new(host);
    let report = call::run_with(plugin, op, inv, host.clone()).await?;
    if let Some(path) = &record {
        let exchanges = host.exchanges.lock().expect("exchanges").clone();
        std::fs::write(path, serde_json::to_string_pretty(&exchanges)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    println!("{}", serde_json::to_string_pretty(&report)?);
    if report["ok"] != true || report.get("replayDiverged").is_some() {
        std::process::exit(1);
    }
    Ok(())
}
