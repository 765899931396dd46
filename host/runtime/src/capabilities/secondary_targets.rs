//! Secondary Targets (WIT `secondary-targets` 1.1): get, list and delete on the cluster of a
//! Target the plugin names, which the host looks up in the item's namespace
//! ([`HostServices::kube_on`], bounded by the invocation deadline). Granted to deployers.
//!
//! [`HostServices::kube_on`]: crate::HostServices::kube_on

use sdk_guest::KubeOp;

use super::wit;
use crate::wasm::convert::ref_from_wit;
use crate::wasm::store::State;

type WitError = wit::types::DeployerError;

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
