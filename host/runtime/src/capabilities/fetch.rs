//! Downloads (WIT `fetch` 1.2): HTTP(S) GETs and OCI pulls done by the host for a plugin that
//! has no sockets. Every call goes to the invocation's [`HostServices::fetch`] (which owns the
//! allowlist, limits, credentials and cache), bounded by the invocation deadline. Granted to
//! deployers.
//!
//! [`HostServices::fetch`]: crate::HostServices::fetch

use std::future::Future;
use std::sync::Arc;

use sdk_guest::{DeployerError, FetchRequest, Fetched};

use super::wit;
use crate::api::HostServices;
use crate::wasm::convert::error_to_wit;
use crate::wasm::store::State;

type WitError = wit::types::DeployerError;

impl State {
    async fn fetch(&mut self, request: FetchRequest) -> Result<Fetched, WitError> {
        self.download(|host| async move { host.fetch(request).await })
            .await
    }

    /// One download by the host (`fetch` or `ocm`), bounded by the invocation deadline.
    pub(super) async fn download<F, Fut>(&mut self, call: F) -> Result<Fetched, WitError>
    where
        F: FnOnce(Arc<dyn HostServices>) -> Fut,
        Fut: Future<Output = Result<Fetched, DeployerError>>,
    {
        let Some(host) = self.host.clone() else {
            return Err(error_to_wit(DeployerError::internal(
                "FetchUnavailable",
                "downloads are not available during describe or in hooks",
            )));
        };
        match tokio::time::timeout_at(self.deadline.into(), call(host)).await {
            Ok(r) => r.map_err(error_to_wit),
            Err(_) => Err(error_to_wit(
                DeployerError::timeout(
                    "PluginDeadlineExceeded",
                    format!(
                        "a download of plugin {:?} did not finish within the invocation deadline",
                        self.plugin
                    ),
                )
                .with_operation("fetch"),
            )),
        }
    }
}

pub(super) fn blob(f: Fetched) -> wit::fetch::Blob {
    wit::fetch::Blob {
        digest: f.digest,
        media_type: f.media_type,
        data: f.data,
        cached: f.cached,
    }
}

impl wit::fetch::Host for State {
    async fn http_get(
        &mut self,
        url: String,
        expected_digest: Option<String>,
    ) -> Result<wit::fetch::Blob, WitError> {
        let request = FetchRequest::Http {
            url,
            expected_digest,
        };
        self.fetch(request).await.map(blob)
    }

    async fn oci_pull(
        &mut self,
        reference: String,
        layer_media_types: Vec<String>,
    ) -> Result<wit::fetch::OciArtifact, WitError> {
        let request = FetchRequest::Oci {
            reference,
            layer_media_types,
        };
        let f = self.fetch(request).await?;
        Ok(wit::fetch::OciArtifact {
            manifest_digest: f.manifest_digest.clone().unwrap_or_default(),
            config_media_type: f.config_media_type.clone().unwrap_or_default(),
            layer: blob(f),
        })
    }
}
