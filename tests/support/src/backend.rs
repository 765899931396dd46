//! The Kubernetes API a story runs against, chosen by the harness:
//!
//! - `embedded` (default): the project's own API server, in-process, one per story;
//! - `real` (`DEPLOYER_TEST_BACKEND=real`): a real kube-apiserver 1.20 + etcd on loopback, one
//!   per story, started by `../shared/tools/real-apiserver` (built once, cached in `~/.cache`),
//!   prepared in the background while the story before it runs (`real_apiserver`).
//!   `REAL_KUBE_APISERVER` (and optionally `REAL_ETCD`) name other binaries, e.g. a hand-built
//!   newer kube-apiserver: every real-backend story then runs on that one (docs/kubernetes-versions.md).
//!
//! The same story code runs on both. A story that needs what only one backend has (fault
//! injection, the workload simulator, the audit log) says so in one line with
//! [`skip_on_real!`] and returns.

use embedded_apiserver::ApiServer;
use kube::Client;

use crate::real_apiserver::RealApiServer;

/// Which API server the stories run against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Embedded,
    Real,
}

/// `DEPLOYER_TEST_BACKEND` (`embedded` or `real`; default `embedded`).
pub fn backend() -> Backend {
    match std::env::var("DEPLOYER_TEST_BACKEND").as_deref() {
        Ok("real") => Backend::Real,
        Ok("embedded") | Ok("") | Err(_) => Backend::Embedded,
        Ok(other) => panic!("DEPLOYER_TEST_BACKEND={other:?}: expected `embedded` or `real`"),
    }
}

/// Returns from the story, saying why, when it runs on the real API server.
#[macro_export]
macro_rules! skip_on_real {
    ($why:literal) => {
        if $crate::backend() == $crate::Backend::Real {
            eprintln!("SKIP on the real API server: {}", $why);
            return;
        }
    };
}

/// Returns from the story, saying why, when it runs on the embedded API server.
#[macro_export]
macro_rules! skip_on_embedded {
    ($why:literal) => {
        if $crate::backend() == $crate::Backend::Embedded {
            eprintln!("SKIP on the embedded API server: {}", $why);
            return;
        }
    };
}

/// The cluster of one story: the Landscaper cluster, also the `default` Target's cluster.
pub struct TestCluster {
    pub client: Client,
    /// Kubeconfig text of the `default` Target.
    pub target_kubeconfig: String,
    /// The embedded server (`None` on the real backend).
    pub embedded: Option<ApiServer>,
    /// The real server (`None` on the embedded backend); stops when dropped.
    pub real: Option<RealApiServer>,
}

impl TestCluster {
    /// Starts the backend's server with Landscaper's CRDs, a `default` Target pointing at the
    /// server itself and a `default` Context (and, on a real server, the `default`
    /// ServiceAccount a controller-manager would create).
    pub async fn start(backend: Backend) -> Self {
        match backend {
            Backend::Embedded => {
                let server = ApiServer::new(Default::default()).expect("api server");
                let env = deployer_host::dev::DevEnvironment::bootstrap(
                    server.clone(),
                    "http://127.0.0.1:1",
                )
                .await
                .expect("bootstrap");
                TestCluster {
                    client: env.client,
                    target_kubeconfig: env.target_kubeconfig,
                    embedded: Some(server),
                    real: None,
                }
            }
            Backend::Real => {
                let real = RealApiServer::prepared();
                TestCluster {
                    client: real.client().await,
                    target_kubeconfig: real.kubeconfig.clone(),
                    embedded: None,
                    real: Some(real),
                }
            }
        }
    }
}
