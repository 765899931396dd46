//! The real Landscaper that still has deployer lifecycle management (gardener/landscaper
//! c1317824f, the parent of the commit that removed it): its controller in both modes (central
//! mode runs lifecycle management and the built-in agent of `Environment/default`) and its
//! stand-alone agent (`landscaper-agent`), which registers an `Environment` for another host
//! cluster and runs that environment's helm deployer.
//!
//! Optional, as the other real-Landscaper partners: its binaries are built by hand outside the
//! repository (`docs/real-landscaper.md`) and found in `$REAL_LANDSCAPER_DLM_BIN` (default
//! `~/.cache/real-landscaper-dlm/bin`); without them a story prints one `SKIP` line and returns.
//!
//! Owns: starting and stopping those processes. Must not touch: the stories' objects.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use super::RealLandscaper;

/// The directory of this Landscaper's binaries.
pub fn bin_dir() -> PathBuf {
    std::env::var_os("REAL_LANDSCAPER_DLM_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("HOME").unwrap_or_default())
                .join(".cache/real-landscaper-dlm/bin")
        })
}

/// Whether `landscaper-controller` and `landscaper-agent` of that commit are there; says `SKIP`
/// once per test binary when not.
pub fn built() -> bool {
    let dir = bin_dir();
    let missing: Vec<&str> = ["landscaper-controller", "landscaper-agent"]
        .into_iter()
        .filter(|b| !dir.join(b).is_file())
        .collect();
    if missing.is_empty() {
        return true;
    }
    static SAID: OnceLock<()> = OnceLock::new();
    SAID.get_or_init(|| {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "SKIP: the real Landscaper with deployer lifecycle management (c1317824f) is not available: {} not in {} (set REAL_LANDSCAPER_DLM_BIN); see docs/real-landscaper.md",
            missing.join(", "),
            dir.display()
        );
    });
    false
}

/// Returns from the story, saying why, unless the Landscaper with lifecycle management is built.
#[macro_export]
macro_rules! require_dlm_landscaper {
    () => {
        if !$crate::real_landscaper::dlm::built() {
            return;
        }
    };
}

/// Both modes of that Landscaper against `kubeconfig`, with its defaults: lifecycle management
/// and the built-in agent on (namespace `ls-system`, `Environment/default`, the host cluster the
/// Landscaper cluster itself). `env`: more environment (`SSL_CERT_FILE`).
pub fn start_landscaper(kubeconfig: &Path, env: &[(&str, String)]) -> RealLandscaper {
    let mut env = env.to_vec();
    env.push(("REAL_LANDSCAPER_BIN", bin_dir().display().to_string()));
    RealLandscaper::start_with_env(kubeconfig, "30s", &env)
}

/// Landscaper's stand-alone agent for one environment; stopped when dropped.
pub struct Agent {
    child: std::sync::Mutex<Child>,
    dir: tempfile::TempDir,
}

impl Agent {
    /// Starts the agent with `config` (an `AgentConfiguration`, YAML): it runs against the host
    /// cluster of `host_kubeconfig` and registers its environment in the Landscaper cluster of
    /// `landscaper_kubeconfig`. `env`: more environment (`SSL_CERT_FILE`).
    pub fn start(
        config: &str,
        landscaper_kubeconfig: &Path,
        host_kubeconfig: &Path,
        env: &[(&str, String)],
    ) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("landscaper-agent-")
            .tempdir()
            .expect("tempdir");
        let config_file = dir.path().join("agent.yaml");
        std::fs::write(&config_file, config).unwrap();
        let child = Command::new(bin_dir().join("landscaper-agent"))
            .arg("--config")
            .arg(&config_file)
            .arg("--landscaper-kubeconfig")
            .arg(landscaper_kubeconfig)
            .arg("--kubeconfig")
            .arg(host_kubeconfig)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("agent.log")).unwrap())
            .spawn()
            .expect("starting landscaper-agent");
        Self {
            child: std::sync::Mutex::new(child),
            dir,
        }
    }

    /// The last `lines` lines of the agent's log (for failure messages).
    pub fn log_tail(&self, lines: usize) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("agent.log")).unwrap_or_default();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Whether the agent still runs.
    pub fn running(&self) -> bool {
        matches!(self.child.lock().unwrap().try_wait(), Ok(None))
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let child = self.child.get_mut().unwrap();
        let _ = child.kill();
        let _ = child.wait();
        if std::thread::panicking() {
            eprintln!("--- landscaper-agent (last lines)\n{}", self.log_tail(30));
        }
    }
}
