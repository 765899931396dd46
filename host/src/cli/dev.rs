//! `deployer-host dev`: its flags, turned into [`crate::dev::DevOptions`].
//!
//! Owns: those flags. Must not touch: what dev mode runs (`crate::dev`).

use std::net::SocketAddr;
use std::path::PathBuf;

use super::apiserver::FaultArgs;
use super::run::load_config;
use crate::dev::{self, DevOptions};

// The command's help text is the doc comment of `Command::Dev`.
#[derive(clap::Args)]
pub struct DevArgs {
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
    /// What runs the pods of `--run-pods`: `process` (local processes, the default) or `podman`
    /// (real containers: init and wait from `container.hostImage`, main pulled from its
    /// registry; see docs/container-deployer.md).
    #[arg(long, env = "DEV_POD_RUNTIME", default_value = "process")]
    pod_runtime: crate::dev::kubelet::PodRuntime,
    /// Authenticate requests and authorize them with RBAC; the API server then serves HTTPS
    /// (kubectl sends tokens only over TLS) and the kubeconfig carries its CA and a random
    /// administrator token.
    #[arg(long, env = "DEV_RBAC")]
    rbac: bool,
    #[command(flatten)]
    faults: FaultArgs,
}

impl DevArgs {
    pub async fn run(self) -> anyhow::Result<()> {
        let config = load_config(self.config.as_ref(), self.plugins)?;
        super::open_files::raise();
        dev::run(
            DevOptions {
                listen: self.listen,
                kubeconfig_out: self.kubeconfig_out,
                data_dir: self.data_dir,
                simulate_landscaper: !self.no_landscaper,
                apply: self.apply,
                simulate_workloads: !self.no_simulate_workloads,
                faults: self.faults.config()?,
                run_pods: self.run_pods,
                pod_runtime: self.pod_runtime,
                rbac: self.rbac,
            },
            config,
        )
        .await
    }
}
