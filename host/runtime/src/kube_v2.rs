//! Host side of the WIT `cluster` interface (0.2): Kubernetes get/list/create/update/patch/
//! delete/discover on the item's Target cluster, forwarded to [`crate::HostServices::kube`]
//! as [`KubeOp`]s.
//!
//! Also the 1.1 `secondary-targets` interface (get/list/delete on a Target named by the
//! plugin, forwarded to [`crate::HostServices::kube_on`]).
//!
//! Owns: the conversion between the `cluster`/`secondary-targets` bindings and [`KubeOp`];
//! each call goes through `State::kube_on`, which bounds it by the invocation deadline.
//! Must not touch: the 0.1 `kubernetes` interface (in `wasm`) or Kubernetes itself.

use crate::wasm::bindings::wasm_deployer::plugin as wit;
use crate::wasm::{State, error_to_wit, ref_from_wit};
use sdk_guest::{DeployerError, KubeOp, PatchType, ResourceInfo};

type WitError = wit::types::DeployerError;

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

impl wit::secondary_targets::Host for State {
    async fn get(
        &mut self,
        target_name: String,
        r: wit::secondary_targets::ObjectRef,
    ) -> Result<Option<String>, WitError> {
        self.kube_on(Some(target_name), KubeOp::Get(ref_from_wit(r)))
            .await
    }

    async fn list(
        &mut self,
        target_name: String,
        api_version: String,
        kind: String,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<String, WitError> {
        let op = KubeOp::List {
            api_version,
            kind,
            namespace,
            label_selector,
        };
        Ok(self
            .kube_on(Some(target_name), op)
            .await?
            .unwrap_or_default())
    }

    async fn delete(
        &mut self,
        target_name: String,
        r: wit::secondary_targets::ObjectRef,
    ) -> Result<bool, WitError> {
        Ok(self
            .kube_on(Some(target_name), KubeOp::Delete(ref_from_wit(r)))
            .await?
            .is_some())
    }
}
