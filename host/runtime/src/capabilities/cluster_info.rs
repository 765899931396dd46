//! The item's Target cluster as Helm's `.Capabilities` sees it (WIT `cluster-info` 1.4): its
//! `/version` and the API versions it serves. Every call goes to the invocation's
//! [`HostServices::kube`] as [`KubeOp::ServerVersion`] / [`KubeOp::ApiVersions`], bounded by
//! the invocation deadline. Granted to deployers.
//!
//! [`HostServices::kube`]: crate::HostServices::kube

use sdk_guest::{DeployerError, KubeOp, ServerVersion};

use super::wit;
use crate::wasm::convert::error_to_wit;
use crate::wasm::store::State;

type WitError = wit::types::DeployerError;

fn invalid(what: &str, e: serde_json::Error) -> WitError {
    error_to_wit(DeployerError::internal(
        "InvalidHostResponse",
        format!("host returned invalid {what}: {e}"),
    ))
}

impl wit::cluster_info::Host for State {
    async fn server_version(&mut self) -> Result<wit::cluster_info::VersionInfo, WitError> {
        let json = self.kube_on(None, KubeOp::ServerVersion).await?;
        let v: ServerVersion = serde_json::from_str(json.as_deref().unwrap_or("null"))
            .map_err(|e| invalid("server version", e))?;
        Ok(wit::cluster_info::VersionInfo {
            major: v.major,
            minor: v.minor,
            git_version: v.git_version,
        })
    }

    async fn api_versions(&mut self) -> Result<Vec<String>, WitError> {
        let json = self.kube_on(None, KubeOp::ApiVersions).await?;
        serde_json::from_str(json.as_deref().unwrap_or("null"))
            .map_err(|e| invalid("API versions", e))
    }
}
