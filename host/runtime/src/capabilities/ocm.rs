//! OCM resources (WIT `ocm` 1.3): the content of a resource of a component version, read by
//! the host. Every call goes to the invocation's [`HostServices::ocm_resource`] (the host owns
//! the repository, credentials, allowlist and cache), bounded by the invocation deadline.
//! Granted to deployers.
//!
//! [`HostServices::ocm_resource`]: crate::HostServices::ocm_resource

use super::fetch::blob;
use super::wit;
use crate::wasm::store::State;

type WitError = wit::types::DeployerError;

impl wit::ocm::Host for State {
    async fn get_resource(
        &mut self,
        resource_key: String,
        layer_media_types: Vec<String>,
    ) -> Result<wit::ocm::ComponentResource, WitError> {
        let mut f = self
            .download(
                |host| async move { host.ocm_resource(&resource_key, &layer_media_types).await },
            )
            .await?;
        let origin = f.ocm.take().unwrap_or_default();
        Ok(wit::ocm::ComponentResource {
            component_name: origin.component_name,
            component_version: origin.component_version,
            name: origin.name,
            version: origin.version,
            type_: origin.r#type,
            access_type: origin.access_type,
            content: blob(f),
        })
    }
}
