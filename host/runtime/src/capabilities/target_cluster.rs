//! The item's Target cluster (WIT `kubernetes` 1.0 and `cluster` 1.1): every operation goes to
//! the invocation's [`HostServices::kube`], bounded by the invocation deadline. The plugin
//! never sees the Target's credentials. Granted to deployers.
//!
//! [`HostServices::kube`]: crate::HostServices::kube

use sdk_guest::{DeployerError, KubeOp, PatchType, ResourceInfo};

use super::wit;
use crate::wasm::convert::{error_to_wit, ref_from_wit};
use crate::wasm::store::State;

type WitError = wit::types::DeployerError;

/// How long before the invocation deadline a Kubernetes call still running is cut off.
const RETURN_MARGIN: std::time::Duration = std::time::Duration::from_millis(500);

impl State {
    /// One Kubernetes call on the item's Target cluster.
    async fn kube(&mut self, op: KubeOp) -> Result<Option<String>, wit::types::DeployerError> {
        self.kube_on(None, op).await
    }

    /// One Kubernetes call through [`HostServices::kube`] (no `target_name`) or
    /// [`HostServices::kube_on`], bounded by the invocation deadline (a call still running
    /// half a second before the deadline returns `ERR_TIMEOUT`, so that the plugin can still
    /// report it).
    pub(crate) async fn kube_on(
        &mut self,
        target_name: Option<String>,
        op: KubeOp,
    ) -> Result<Option<String>, wit::types::DeployerError> {
        let Some(host) = self.host.clone() else {
            return Err(error_to_wit(DeployerError::internal(
                "KubernetesUnavailable",
                "Kubernetes access is not available during describe or in hooks",
            )));
        };
        let call = async {
            match &target_name {
                None => host.kube(op).await,
                Some(name) => host.kube_on(name, op).await,
            }
        };
        // Cut the call off a little before the deadline, so that the plugin still has time to
        // return its error (and the item says what the call was waiting for) instead of being
        // interrupted.
        let cutoff = self
            .deadline
            .checked_sub(RETURN_MARGIN)
            .filter(|cutoff| *cutoff > std::time::Instant::now())
            .unwrap_or(self.deadline);
        match tokio::time::timeout_at(cutoff.into(), call).await {
            Ok(r) => r.map_err(error_to_wit),
            Err(_) => Err(error_to_wit(DeployerError::timeout(
                "PluginDeadlineExceeded",
                format!(
                    "a Kubernetes call of plugin {:?} did not finish within the invocation deadline",
                    self.plugin
                ),
            ))),
        }
    }
}

impl wit::kubernetes::Host for State {
    async fn get(
        &mut self,
        r: wit::kubernetes::ObjectRef,
    ) -> Result<Option<String>, wit::types::DeployerError> {
        self.kube(KubeOp::Get(ref_from_wit(r))).await
    }

    async fn create(&mut self, object: String) -> Result<String, wit::types::DeployerError> {
        let out = self
            .kube(KubeOp::Create {
                object_json: object,
            })
            .await?;
        Ok(out.unwrap_or_default())
    }

    async fn update(&mut self, object: String) -> Result<String, wit::types::DeployerError> {
        let out = self
            .kube(KubeOp::Update {
                object_json: object,
            })
            .await?;
        Ok(out.unwrap_or_default())
    }

    async fn delete(
        &mut self,
        r: wit::kubernetes::ObjectRef,
    ) -> Result<bool, wit::types::DeployerError> {
        Ok(self.kube(KubeOp::Delete(ref_from_wit(r))).await?.is_some())
    }
}

impl wit::cluster::Host for State {
    async fn get(&mut self, r: wit::cluster::ObjectRef) -> Result<Option<String>, WitError> {
        self.kube(KubeOp::Get(ref_from_wit(r))).await
    }

    async fn list(
        &mut self,
        api_version: String,
        kind: String,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<String, WitError> {
        let out = self
            .kube(KubeOp::List {
                api_version,
                kind,
                namespace,
                label_selector,
            })
            .await?;
        Ok(out.unwrap_or_else(|| r#"{"items":[]}"#.into()))
    }

    async fn create(&mut self, object: String) -> Result<String, WitError> {
        let out = self
            .kube(KubeOp::Create {
                object_json: object,
            })
            .await?;
        Ok(out.unwrap_or_default())
    }

    async fn update(&mut self, object: String) -> Result<String, WitError> {
        let out = self
            .kube(KubeOp::Update {
                object_json: object,
            })
            .await?;
        Ok(out.unwrap_or_default())
    }

    async fn patch(
        &mut self,
        r: wit::cluster::ObjectRef,
        patch: String,
        options: wit::cluster::PatchOptions,
    ) -> Result<String, WitError> {
        let patch_type = match options.patch_type {
            wit::cluster::PatchType::Merge => PatchType::Merge,
            wit::cluster::PatchType::Json => PatchType::Json,
            wit::cluster::PatchType::Apply => PatchType::Apply,
        };
        let out = self
            .kube(KubeOp::Patch {
                target: ref_from_wit(r),
                patch_json: patch,
                patch_type,
                field_manager: options.field_manager,
                force: options.force,
            })
            .await?;
        Ok(out.unwrap_or_default())
    }

    async fn delete(&mut self, r: wit::cluster::ObjectRef) -> Result<bool, WitError> {
        Ok(self.kube(KubeOp::Delete(ref_from_wit(r))).await?.is_some())
    }

    async fn discover(
        &mut self,
        api_version: String,
        kind: String,
    ) -> Result<Option<wit::cluster::ResourceInfo>, WitError> {
        let Some(json) = self.kube(KubeOp::Discover { api_version, kind }).await? else {
            return Ok(None);
        };
        let info: ResourceInfo = serde_json::from_str(&json).map_err(|e| {
            error_to_wit(DeployerError::internal(
                "InvalidHostResponse",
                format!("host returned invalid discovery info: {e}"),
            ))
        })?;
        Ok(Some(wit::cluster::ResourceInfo {
            api_version: info.api_version,
            kind: info.kind,
            plural: info.plural,
            namespaced: info.namespaced,
        }))
    }
}
