//! OCM for one item (WIT `ocm`, 1.3): the content of a resource a plugin names by Landscaper's
//! global resource key, and component versions for the host's own deployers (the container
//! deployer's `componentDescriptor.ref` / `blueprint.ref`), read from the component repository
//! of the item's Context.
//!
//! Owns: handing one item's registries and Context to the `ocm` reader. Must not touch: reading
//! descriptors or access types (`crate::ocm`), or registries themselves (`crate::oci`); a
//! classic Helm repository's downloads are the `fetch` capability's.

use plugin_runtime::{DeployerError, FetchRequest, Fetched, OcmComponentRequest};

use super::fetch::ItemFetch;
use crate::ocm::{ChartDownloads, Reader};

/// The content of the resource `resource_key` names (WIT `ocm.get-resource`).
pub async fn resource(
    fetch: &ItemFetch,
    resource_key: &str,
    layer_media_types: &[String],
) -> Result<Fetched, DeployerError> {
    let charts = Charts(fetch);
    Reader::new(fetch.registries(), fetch.item(), &charts)
        .resource(resource_key, layer_media_types)
        .await
        .map_err(DeployerError::from)
}

/// A component version for the host's own deployers ([`OcmComponentRequest`]).
pub async fn component(
    fetch: &ItemFetch,
    request: OcmComponentRequest,
) -> Result<Fetched, DeployerError> {
    let charts = Charts(fetch);
    Reader::new(fetch.registries(), fetch.item(), &charts)
        .component(
            request.repository_context.as_ref(),
            &request.component_name,
            &request.version,
            request.resource_name.as_deref(),
        )
        .await
        .map_err(DeployerError::from)
}

/// The `helm` access type's chart repositories, downloaded as a plugin's `fetch.http-get` is.
struct Charts<'a>(&'a ItemFetch);

#[async_trait::async_trait]
impl ChartDownloads for Charts<'_> {
    async fn http_get(
        &self,
        url: &str,
        expected_digest: Option<&str>,
    ) -> Result<Fetched, DeployerError> {
        self.0
            .fetch(FetchRequest::Http {
                url: url.to_string(),
                expected_digest: expected_digest.map(str::to_string),
            })
            .await
    }
}
