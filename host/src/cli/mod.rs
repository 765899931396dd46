//! The `deployer-host` command line: its flags (clap) and, per command family, the code that
//! turns them into a call of the module doing the work — `run` (the controller), `dev`,
//! `apiserver`, `crds`, `helm`, `container`, `plugin` (the plugin author's commands and their
//! helpers), `image`. `main.rs` only parses, starts telemetry and calls [`Command::run`].
//!
//! Owns: flags, environment variables, help texts and what a command prints. Must not touch:
//! the work itself (the controller, the API server, plugin delivery, the image builder): each
//! command calls it.

mod apiserver;
mod container;
mod crds;
mod dev;
mod helm;
mod image;
mod open_files;
pub mod plugin;
mod registry;
mod run;

use clap::{Parser, Subcommand};

use crate::telemetry::LogFormat;

#[derive(Parser)]
#[command(
    name = "deployer-host",
    version,
    about = "Runs Gardener Landscaper deployers as WebAssembly components"
)]
pub struct Cli {
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "DEPLOYER_LOG_FORMAT", global = true)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the embedded Kubernetes-compatible API server alone.
    Apiserver(apiserver::ApiserverArgs),
    /// Everything on one machine: embedded API server, Landscaper CRDs, a default Target and
    /// Context, the plugins and the controller; plays Landscaper's side of the job protocol.
    Dev(dev::DevArgs),
    /// Landscaper's CRDs (DeployItem, Target, Context, SyncObject, LsHealthCheck), generated from
    /// the host's model: printed as one YAML stream, or written as the chart's files.
    Crds(crds::CrdsArgs),
    /// Helm-exact chart rendering (the engine the helm deployer plugin uses).
    Helm {
        #[command(subcommand)]
        command: helm::HelmCommand,
    },
    /// The init and wait containers of the container deployer's pods (run inside the pod).
    Container {
        #[command(subcommand)]
        command: container::ContainerCommand,
    },
    /// Ship plugins: push a component to an OCI registry (the CNCF wasm layout), signed.
    Plugin {
        #[command(subcommand)]
        command: plugin::PluginCommand,
    },
    /// The host's container image, built without a container engine (`cargo xtask image`).
    Image {
        #[command(subcommand)]
        command: image::ImageCommand,
    },
    /// Run the controller against a real cluster.
    Run(run::RunArgs),
}

impl Command {
    /// Runs the command; an error ends it (`main` prints it).
    pub async fn run(self) -> anyhow::Result<()> {
        match self {
            Command::Apiserver(args) => args.run().await,
            Command::Dev(args) => args.run().await,
            Command::Crds(args) => args.run(),
            Command::Helm { command } => command.run(),
            Command::Container { command } => command.run().await,
            Command::Plugin { command } => command.run().await,
            Command::Image { command } => command.run().await,
            Command::Run(args) => args.run().await,
        }
    }
}
