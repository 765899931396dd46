//! `deployer-host`: parses the command line and starts one of the modes. Nothing else — but
//! the error that ends a command is printed here, as the API server's message (never a debug
//! dump of its `Status`: [`deployer_host::apierrors::render_chain`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use deployer_host::config::HostConfig;
use deployer_host::controller::{self, Deployer, TargetClients};
use deployer_host::dev::{self, DevOptions};
use deployer_host::telemetry::{self, LogFormat};
use deployer_host::{plugins, shutdown_signal};

#[derive(Parser)]
#[command(
    name = "deployer-host",
    version,
    about = "Runs Gardener Landscaper deployers as WebAssembly components"
)]
struct Cli {
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "DEPLOYER_LOG_FORMAT", global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the embedded Kubernetes-compatible API server alone.
    Apiserver {
        /// Address to listen on (loopback).
        #[arg(long, default_value = "127.0.0.1:6080", env = "APISERVER_LISTEN")]
        listen: SocketAddr,
        /// Where to write a kubeconfig for kubectl and kube-rs.
        #[arg(long, env = "APISERVER_KUBECONFIG_OUT")]
        kubeconfig_out: PathBuf,
        /// Keep every object in this directory across restarts.
        #[arg(long, env = "APISERVER_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// Authenticate requests and authorize them with RBAC, as kube-apiserver
        /// `--authorization-mode=RBAC`; serves HTTPS (implies `--tls`) and writes a kubeconfig
        /// with a random administrator token.
        #[arg(long, env = "APISERVER_RBAC")]
        rbac: bool,
        /// Serve HTTPS with a CA and certificate generated at start; the kubeconfig carries the
        /// CA (`certificate-authority-data`), also written as `ca.crt` beside it.
        #[arg(long, env = "APISERVER_TLS")]
        tls: bool,
        #[command(flatten)]
        faults: FaultArgs,
    },
    /// Everything on one machine: embedded API server, Landscaper CRDs, a default Target and
    /// Context, the plugins and the controller; plays Landscaper's side of the job protocol.
    Dev {
        #[arg(long, default_value = "127.0.0.1:6080", env = "DEV_LISTEN")]
        listen: SocketAddr,
        #[arg(
            long,
            default_value = "target/dev/kubeconfig",
            env = "DEV_KUBECONFIG_OUT"
        )]
        kubeconfig_out: PathBuf,
        /// Directory of plugin components (default from the config, else `target/plugins`).
        #[arg(long, env = "DEPLOYER_PLUGINS")]
        plugins: Option<PathBuf>,
        /// Host configuration file (YAML).
        #[arg(long, env = "DEPLOYER_CONFIG")]
        config: Option<PathBuf>,
        /// Keep the API server's objects in this directory across restarts.
        #[arg(long, env = "DEV_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// Do not issue jobIDs (no simulated Landscaper): set status.jobID yourself.
        #[arg(long, env = "DEV_NO_LANDSCAPER")]
        no_landscaper: bool,
        /// Create the objects of these YAML files (or directories) once ready.
        #[arg(long)]
        apply: Vec<PathBuf>,
        /// Do not simulate kubelet/controllers (by default Pods become Ready and Deployments,
        /// StatefulSets, DaemonSets, ReplicaSets get the status readiness checks look for).
        #[arg(long, env = "DEV_NO_SIMULATE_WORKLOADS")]
        no_simulate_workloads: bool,
        /// Run the container deployer's pods as local processes (init and wait are this
        /// binary; main runs its command on this machine, the image is ignored: trusted items
        /// only).
        #[arg(long, env = "DEV_RUN_PODS")]
        run_pods: bool,
        /// Authenticate requests and authorize them with RBAC; the API server then serves HTTPS
        /// (kubectl sends tokens only over TLS) and the kubeconfig carries its CA and a random
        /// administrator token.
        #[arg(long, env = "DEV_RBAC")]
        rbac: bool,
        #[command(flatten)]
        faults: FaultArgs,
    },
    /// Landscaper's CRDs (DeployItem, Target, Context, SyncObject, LsHealthCheck), generated from
    /// the host's model: printed as one YAML stream, or written as the chart's files.
    Crds {
        /// Write one file per CRD into this directory (the chart's
        /// `charts/wasm-deployer/charts/landscaper-crds/crds`) instead of printing them.
        #[arg(long)]
        out: Option<PathBuf>,
        /// With `--out`: write nothing, fail if the directory's files differ from what the
        /// code generates.
        #[arg(long, requires = "out")]
        check: bool,
    },
    /// Helm-exact chart rendering (the engine the helm deployer plugin uses).
    Helm {
        #[command(subcommand)]
        command: HelmCommand,
    },
    /// The init and wait containers of the container deployer's pods (run inside the pod).
    Container {
        #[command(subcommand)]
        command: ContainerCommand,
    },
    /// Ship plugins: push a component to an OCI registry (the CNCF wasm layout), signed.
    Plugin {
        #[command(subcommand)]
        command: PluginCommand,
    },
    /// The host's container image, built without a container engine (`cargo xtask image`).
    Image {
        #[command(subcommand)]
        command: ImageCommand,
    },
    /// Run the controller against a real cluster.
    Run {
        /// Kubeconfig of the cluster that holds DeployItems, Targets and Contexts
        /// (default: in-cluster configuration).
        #[arg(long, env = "KUBECONFIG")]
        kubeconfig: Option<PathBuf>,
        /// Kubeconfig of the cluster the host runs in, when it differs from the one holding
        /// DeployItems (fenced environments). Default: in a pod given `--kubeconfig`, the pod's
        /// own cluster (in-cluster configuration); otherwise the same cluster as `--kubeconfig`.
        #[arg(long, env = "HOST_KUBECONFIG")]
        host_kubeconfig: Option<PathBuf>,
        /// Host configuration file (YAML).
        #[arg(long, env = "DEPLOYER_CONFIG")]
        config: Option<PathBuf>,
        /// Directory of plugin components (overrides the config).
        #[arg(long, env = "DEPLOYER_PLUGINS")]
        plugins: Option<PathBuf>,
        /// Serve Prometheus metrics and /healthz on this address.
        #[arg(long, env = "DEPLOYER_METRICS_LISTEN")]
        metrics_listen: Option<SocketAddr>,
    },
}

/// Fault injection in the embedded API server (`docs/reliability.md`): probabilities in 0..=1.
#[derive(clap::Args)]
struct FaultArgs {
    /// Probability that a write is answered 409 Conflict (not applied).
    #[arg(long, default_value_t = 0.0)]
    fault_conflict: f64,
    /// Probability that a write is answered 500 InternalError (not applied).
    #[arg(long, default_value_t = 0.0)]
    fault_error: f64,
    /// Probability that a request is answered 503 ServiceUnavailable (not handled).
    #[arg(long, default_value_t = 0.0)]
    fault_unavailable: f64,
    /// Probability that a request is answered 504 Timeout (a write is applied first).
    #[arg(long, default_value_t = 0.0)]
    fault_timeout: f64,
    /// Probability, per watch event, that the watch stream is closed after it.
    #[arg(long, default_value_t = 0.0)]
    fault_watch_drop: f64,
}

impl FaultArgs {
    fn config(&self) -> anyhow::Result<embedded_apiserver::FaultConfig> {
        let faults = embedded_apiserver::FaultConfig {
            write_conflict_probability: self.fault_conflict,
            write_error_probability: self.fault_error,
            unavailable_probability: self.fault_unavailable,
            timeout_probability: self.fault_timeout,
            watch_drop_probability: self.fault_watch_drop,
            ..Default::default()
        };
        faults
            .validate()
            .map_err(|e| anyhow::anyhow!("--fault-*: {e}"))?;
        if faults.any() {
            tracing::warn!(?faults, "the API server injects faults");
        }
        Ok(faults)
    }
}

#[derive(Subcommand)]
enum ContainerCommand {
    /// Write the item's imports, Target, component descriptor, blueprint and state into the
    /// shared volume.
    Init,
    /// Wait for the main container, then store its state and exports.
    Wait,
}

#[derive(Subcommand)]
enum PluginCommand {
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
        /// Rust only: the sdk-guest crate to depend on (default: this checkout's).
        #[arg(long)]
        sdk: Option<PathBuf>,
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

#[derive(Subcommand)]
enum ImageCommand {
    /// Build the image from a static `deployer-host` binary and plugins; write it as an OCI
    /// image layout and/or push it. Prints the image's digest.
    Build {
        /// The `deployer-host` executable to ship (statically linked).
        #[arg(long)]
        binary: PathBuf,
        /// A directory of `.wasm` components to ship in `/plugins`.
        #[arg(long)]
        plugins: Option<PathBuf>,
        /// PEM CA bundle to ship (default: /etc/ssl/certs/ca-certificates.crt if present).
        #[arg(long)]
        ca_bundle: Option<PathBuf>,
        /// Write an OCI image layout into this directory.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Push to this reference (`registry/repository:tag`).
        #[arg(long)]
        push: Option<String>,
        /// Speak plain HTTP to the registry (only for registries you trust, e.g. on loopback).
        #[arg(long)]
        plain_http: bool,
        /// Version label (default: this host's version).
        #[arg(long)]
        version: Option<String>,
        /// Accept a dynamically linked binary (the image cannot run it: layout tests only).
        #[arg(long)]
        allow_dynamic: bool,
    },
}

#[derive(Subcommand)]
enum HelmCommand {
    /// Render a chart like `helm template`: same flags, same output stream.
    Template {
        #[command(flatten)]
        args: helm_engine::TemplateArgs,
    },
}

fn load_config(path: Option<&PathBuf>, plugins: Option<PathBuf>) -> anyhow::Result<HostConfig> {
    let mut config = match path {
        Some(p) => HostConfig::from_file(p)?,
        None => HostConfig::default(),
    };
    if let Some(dir) = plugins {
        config.plugins.dir = Some(dir);
    }
    Ok(config)
}

/// A client from a kubeconfig file, or the in-cluster / `KUBECONFIG` configuration.
/// `deployer-host plugin inspect`: load the component in a fresh runtime (no cache) and say
/// what it is, or why this host cannot load it.
async fn inspect_plugin(plugin: &str, plain_http: bool, json: bool) -> anyhow::Result<()> {
    use deployer_host::{oci, plugin_sources::trust};
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
    let loaded = deployer_host::plugin_cli::load_bytes(plugin, &bytes).await;
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

/// How to reach the registry of `reference`: plain HTTP if asked, credentials from
/// `docker_config` or `$DOCKER_CONFIG/config.json`.
fn registry_options(
    reference: &str,
    plain_http: bool,
    docker_config: Option<PathBuf>,
) -> anyhow::Result<deployer_host::oci::RegistryOptions> {
    use deployer_host::oci;
    let mut options = oci::RegistryOptions::default();
    if plain_http {
        options
            .plain_http
            .push(oci::parse(reference)?.resolve_registry().to_string());
    }
    let config_path = docker_config.or_else(|| {
        std::env::var("DOCKER_CONFIG")
            .ok()
            .map(|d| PathBuf::from(d).join("config.json"))
    });
    if let Some(p) = config_path.filter(|p| p.exists()) {
        options
            .docker_configs
            .push(std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?);
    }
    Ok(options)
}

/// Running in a Kubernetes pod (in-cluster configuration available).
fn in_cluster() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
        && std::path::Path::new("/var/run/secrets/kubernetes.io/serviceaccount/token").exists()
}

async fn client_from(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run_command().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {}", deployer_host::apierrors::render_chain(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run_command() -> anyhow::Result<()> {
    let cli = Cli::parse();
    telemetry::init(cli.log_format);
    match cli.command {
        Command::Apiserver {
            listen,
            kubeconfig_out,
            data_dir,
            rbac,
            tls,
            faults,
        } => {
            let options = embedded_apiserver::Options {
                data_dir,
                faults: faults.config()?,
                rbac,
                tls: tls || rbac,
                admin_token: rbac.then(dev::random_token),
                ..Default::default()
            };
            embedded_apiserver::run_standalone(listen, &kubeconfig_out, options).await
        }
        Command::Dev {
            listen,
            kubeconfig_out,
            plugins,
            config,
            data_dir,
            no_landscaper,
            apply,
            no_simulate_workloads,
            run_pods,
            rbac,
            faults,
        } => {
            let config = load_config(config.as_ref(), plugins)?;
            dev::run(
                DevOptions {
                    listen,
                    kubeconfig_out,
                    data_dir,
                    simulate_landscaper: !no_landscaper,
                    apply,
                    simulate_workloads: !no_simulate_workloads,
                    faults: faults.config()?,
                    run_pods,
                    rbac,
                },
                config,
            )
            .await
        }
        Command::Helm {
            command: HelmCommand::Template { args },
        } => {
            let out = helm_engine::cli_template_output(&args);
            print!("{}", out.stdout);
            match out.error {
                None => Ok(()),
                Some(e) => {
                    eprintln!("Error: {e}");
                    std::process::exit(1);
                }
            }
        }
        Command::Plugin { command } => match command {
            PluginCommand::Pull {
                reference,
                out,
                plain_http,
            } => {
                use deployer_host::{oci, plugin_sources::trust};
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
                let report = deployer_host::plugin_cli::bench(plugin, &item, calls).await?;
                println!("{report}");
                Ok(())
            }
            PluginCommand::Digest { file } => {
                let bytes =
                    std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
                println!(
                    "{}",
                    deployer_host::plugin_sources::trust::digest_of(&bytes)
                );
                Ok(())
            }
            PluginCommand::New {
                name,
                lang,
                dir,
                sdk,
            } => {
                let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
                let files = deployer_host::plugin_scaffold::new_project(
                    &lang,
                    &name,
                    &dir,
                    sdk.as_deref(),
                )?;
                println!(
                    "created {} ({lang}, {} files); next:",
                    dir.display(),
                    files.len()
                );
                println!("  deployer-host plugin build {}", dir.display());
                println!(
                    "  deployer-host plugin test {}/{name}.wasm --item {}/item.yaml",
                    dir.display(),
                    dir.display()
                );
                Ok(())
            }
            PluginCommand::Build { dir, out } => {
                let built = deployer_host::plugin_scaffold::build(&dir, out.as_deref())?;
                println!("{}", built.display());
                Ok(())
            }
            PluginCommand::Test { file, item, json } => {
                let plugin = deployer_host::plugin_cli::load_file(&file).await?;
                let name = plugin_runtime::DeployerPlugin::description(plugin.as_ref())
                    .name
                    .clone();
                let checks =
                    deployer_host::plugin_conformance::run(plugin, item.as_deref()).await?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&checks)?);
                } else {
                    print!(
                        "{}",
                        deployer_host::plugin_conformance::render(&name, &checks)
                    );
                }
                if checks.iter().any(|c| c.outcome == "fail") {
                    std::process::exit(1);
                }
                Ok(())
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
            } => {
                let plugin = deployer_host::plugin_cli::load_file(&file).await?;
                use deployer_host::plugin_cli as cli;
                let target = match (&target, &kubeconfig) {
                    (Some(t), _) => Some((cli::read_yaml(t)?, t.display().to_string())),
                    (None, Some(k)) => {
                        Some((cli::target_for_kubeconfig(k)?, k.display().to_string()))
                    }
                    // Replayed calls need no cluster, but the plugin must see a Target.
                    (None, None) if replay.is_some() => {
                        Some((cli::replay_target(), "--replay".to_string()))
                    }
                    (None, None) => None,
                };
                let inv = cli::invocation_with(&item, target, context.as_deref())?;
                let cluster = match (&kubeconfig, &replay) {
                    (Some(_), _) => cli::live_cluster(&inv)?,
                    (None, Some(r)) => cli::read_recording(r)?,
                    (None, None) => cli::Cluster::Offline,
                };
                let host = Arc::new(cli::RecordingHost::new(cluster));
                let report = cli::run_with(plugin, &op, inv, host.clone()).await?;
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
            PluginCommand::Inspect {
                plugin,
                plain_http,
                json,
            } => inspect_plugin(&plugin, plain_http, json).await,
            PluginCommand::Push {
                file,
                reference,
                key,
                plain_http,
                docker_config,
            } => {
                use deployer_host::{oci, plugin_sources::trust};
                let bytes =
                    std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
                let options = registry_options(&reference, plain_http, docker_config)?;
                let title = file
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "plugin".into());
                let digest = oci::push(&reference, &bytes, &title, &options).await?;
                if let Some(key) = key {
                    let pem = std::fs::read_to_string(&key)
                        .with_context(|| format!("reading {}", key.display()))?;
                    oci::push_signature(&reference, &digest, &trust::signing_key(&pem)?, &options)
                        .await?;
                    eprintln!("signed {digest}");
                }
                println!("{digest}");
                Ok(())
            }
        },
        Command::Crds { out: None, .. } => {
            let files = deployer_host::crds::landscaper_files();
            for (_, yaml) in files {
                print!("---\n{yaml}");
            }
            Ok(())
        }
        Command::Crds {
            out: Some(dir),
            check,
        } => {
            let changed = deployer_host::crds::write_landscaper_files(&dir, check)?;
            if check {
                println!("{}: up to date", dir.display());
            } else {
                println!("{}: {} file(s) written", dir.display(), changed.len());
            }
            Ok(())
        }
        Command::Container { command } => {
            use deployer_host::container::runner;
            match command {
                ContainerCommand::Init => runner::run_and_report(runner::init()).await,
                ContainerCommand::Wait => runner::run_and_report(runner::wait()).await,
            }
        }
        Command::Image {
            command:
                ImageCommand::Build {
                    binary,
                    plugins,
                    ca_bundle,
                    out,
                    push,
                    plain_http,
                    version,
                    allow_dynamic,
                },
        } => {
            use deployer_host::image;
            let plugins = match plugins {
                Some(dir) => {
                    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                        .with_context(|| format!("reading {}", dir.display()))?
                        .filter_map(|e| e.ok().map(|e| e.path()))
                        .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
                        .collect();
                    files.sort();
                    files
                }
                None => Vec::new(),
            };
            let default_ca = PathBuf::from("/etc/ssl/certs/ca-certificates.crt");
            let ca_bundle = ca_bundle.or_else(|| default_ca.exists().then_some(default_ca));
            // Reproducible: the creation time comes from SOURCE_DATE_EPOCH (default: 0).
            let epoch = std::env::var("SOURCE_DATE_EPOCH")
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
                .unwrap_or(0);
            let created = jiff::Timestamp::from_second(epoch)?.to_string();
            let version = version.unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string());
            let built = image::build(&image::ImageSpec {
                binary,
                plugins,
                ca_bundle,
                version: version.clone(),
                created,
                allow_dynamic,
            })?;
            if let Some(dir) = &out {
                built.write_layout(dir, &version)?;
                eprintln!("wrote OCI image layout {}", dir.display());
            }
            if let Some(reference) = &push {
                let options = registry_options(reference, plain_http, None)?;
                built.push(reference, &options).await?;
                eprintln!("pushed {reference}");
            }
            if out.is_none() && push.is_none() {
                anyhow::bail!("nothing to do: give --out DIR and/or --push REFERENCE");
            }
            println!("{}", built.digest());
            Ok(())
        }
        Command::Run {
            kubeconfig,
            host_kubeconfig,
            config,
            plugins,
            metrics_listen,
        } => {
            let config = load_config(config.as_ref(), plugins)?;
            let client = client_from(kubeconfig.as_ref()).await?;
            let host_client = match (&host_kubeconfig, &kubeconfig) {
                (Some(path), _) => client_from(Some(path)).await?,
                // In a pod with a kubeconfig for the Landscaper cluster (the chart's
                // `deployer.landscaperClusterKubeconfig`): the host cluster is the pod's own.
                (None, Some(_)) if in_cluster() => {
                    kube::Client::try_from(kube::Config::incluster()?)?
                }
                (None, _) => client.clone(),
            };
            if let Ok(pod) = std::env::var("MY_POD_NAME") {
                tracing::info!(pod = %pod, "replica identity");
            }
            // WasmPlugins live in the host's cluster: so does their CRD.
            if config.crd_management.deploy_crd() {
                let outcome = deployer_host::crds::ensure_wasm_plugin_crd(&host_client)
                    .await
                    .context(
                        "keeping the WasmPlugin CRD up to date (crdManagement.deployCrd: false \
                         leaves it to you)",
                    )?;
                tracing::info!(?outcome, "WasmPlugin CRD");
            }
            // Large plugins (Python, JavaScript: seconds to compile cold) do not hold up
            // start-up: after this window the host serves what has loaded, the rest joins
            // when ready (hook plugins the configuration names are always waited for).
            let (registry, container, pending) = plugins::load_within(
                &config,
                &plugins::Clusters {
                    landscaper: client.clone(),
                    host: host_client.clone(),
                },
                std::time::Duration::from_secs(2),
            )
            .await?;
            if let Some(container) = &container
                && let Some(interval) = container.settings().gc_interval
            {
                tokio::spawn(
                    container
                        .garbage_collector()
                        .run(interval, std::future::pending()),
                );
            }
            let deployer = Arc::new(Deployer::new(
                client,
                host_client,
                registry,
                &config,
                TargetClients::default(),
            )?);
            let (catalog, _delivery) = plugins::start_delivery(
                &config,
                deployer.host_client.clone(),
                deployer.plugins.clone(),
                deployer.hooks.clone(),
            )?;
            if let Some(pending) = pending {
                let loading = deployer.plugins.loading.clone();
                loading.store(pending.sources.len(), std::sync::atomic::Ordering::Relaxed);
                tokio::spawn(pending.arrive(catalog.clone(), loading));
            }
            if let Some(addr) = metrics_listen {
                tokio::spawn(deployer_host::metrics::serve(
                    addr,
                    deployer.clone(),
                    Some(catalog),
                ));
            }
            if deployer.locker.is_some() {
                tracing::info!("locking enabled (more than one replica may run)");
            }
            controller::run(
                deployer,
                config.namespace.clone(),
                config.workers(),
                config.item_cache,
                shutdown_signal(),
            )
            .await;
            Ok(())
        }
    }
}
