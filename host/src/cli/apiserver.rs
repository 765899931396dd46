//! `deployer-host apiserver`: the embedded API server alone, and the fault-injection flags it
//! shares with `dev`.
//!
//! Owns: those flags. Must not touch: the API server itself (`embedded-apiserver`).

use std::net::SocketAddr;
use std::path::PathBuf;

// The command's help text is the doc comment of `Command::Apiserver`.
#[derive(clap::Args)]
pub struct ApiserverArgs {
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
}

impl ApiserverArgs {
    pub async fn run(self) -> anyhow::Result<()> {
        let options = embedded_apiserver::Options {
            data_dir: self.data_dir,
            faults: self.faults.config()?,
            rbac: self.rbac,
            tls: self.tls || self.rbac,
            admin_token: self.rbac.then(crate::dev::random_token),
            ..Default::default()
        };
        embedded_apiserver::run_standalone(self.listen, &self.kubeconfig_out, options).await
    }
}

/// Fault injection in the embedded API server (`docs/reliability.md`): probabilities in 0..=1.
#[derive(clap::Args)]
pub struct FaultArgs {
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
    pub fn config(&self) -> anyhow::Result<embedded_apiserver::FaultConfig> {
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
