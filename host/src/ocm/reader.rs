//! Resolving a resource key to its content, every registry request through an
//! [`oci::Session`](crate::oci::Session) (allowlist, size limit, the Context's credentials, the
//! digest cache), and the `helm` access type's HTTP downloads through [`ChartDownloads`].

use oci_client::manifest::OciImageManifest;
use plugin_runtime::{DeployerError, Fetched, OcmOrigin};
use serde_json::Value;

use super::access::local_blob::layer_of_artifact_set;
use super::access::{Access, Helm, LocalBlob, helm};
use super::descriptor::{ComponentDescriptor, Resource};
use super::key::GlobalResourceIdentity;
use super::repository::OciRepository;
use super::tar::file_in_tar;
use crate::landscaper::{Context, codes};
use crate::oci::session::{missing_layer, pick_layer};
use crate::oci::{ItemContext, Registries, Session};

/// The operation of OCM errors.
pub const OPERATION: &str = "ocm";

/// Config media types of component versions (OCM, and the two legacy Gardener ones).
pub const COMPONENT_CONFIG_TYPES: &[&str] = &[
    "application/vnd.ocm.software.component.config.v1+json",
    "application/vnd.gardener.cloud.cnudie.component.config.v1+json",
    "application/vnd.oci.gardener.cloud.cnudie.component-descriptor-metadata.config.v2+json",
];
/// Descriptor layer media types stored as a tar holding `component-descriptor.yaml`.
pub const DESCRIPTOR_TAR_TYPES: &[&str] = &[
    "application/vnd.ocm.software.component-descriptor.v2+yaml+tar",
    "application/vnd.gardener.cloud.cnudie.component-descriptor.v2+yaml+tar",
    "application/vnd.oci.gardener.cloud.cnudie.component-descriptor.config.v2+yaml+tar",
];
/// Descriptor layer media types stored as the document itself.
pub const DESCRIPTOR_PLAIN_TYPES: &[&str] = &[
    "application/vnd.ocm.software.component-descriptor.v2+json",
    "application/vnd.gardener.cloud.cnudie.component-descriptor.v2+json",
    "application/vnd.ocm.software.component-descriptor.v2+yaml",
    "application/vnd.gardener.cloud.cnudie.component-descriptor.v2+yaml",
];

fn config_error(reason: &str, message: String) -> DeployerError {
    DeployerError {
        codes: vec![codes::CONFIGURATION_PROBLEM.into()],
        operation: OPERATION.into(),
        reason: reason.into(),
        message,
        ..Default::default()
    }
}

/// A component version read from its repository.
pub struct ComponentVersion<'a> {
    pub descriptor: ComponentDescriptor,
    /// `host/…/component-descriptors/<name>:<tag>`.
    pub reference: String,
    session: Session<'a>,
    manifest: OciImageManifest,
}

/// HTTP(S) downloads for the `helm` access type's classic chart repositories, checked as a
/// plugin's downloads are (allowlist, limits, the Context's `helmChartRepoCredentials`, cache).
#[async_trait::async_trait]
pub trait ChartDownloads: Send + Sync {
    /// A GET of `url`; with `expected_digest`, checked against it.
    async fn http_get(
        &self,
        url: &str,
        expected_digest: Option<&str>,
    ) -> Result<Fetched, DeployerError>;
}

/// Reads component versions and resources for one item.
pub struct Reader<'a> {
    registries: &'a Registries,
    item: &'a ItemContext,
    charts: &'a dyn ChartDownloads,
}

impl<'a> Reader<'a> {
    /// A reader for `item` through the host's `registries`; classic Helm repositories through
    /// `charts`.
    pub fn new(
        registries: &'a Registries,
        item: &'a ItemContext,
        charts: &'a dyn ChartDownloads,
    ) -> Self {
        Reader {
            registries,
            item,
            charts,
        }
    }

    fn context(&self) -> Option<&'a Context> {
        self.item.context.as_ref()
    }

    async fn session(&self, reference: &str) -> Result<Session<'a>, DeployerError> {
        self.registries.session(reference, self.item).await
    }

    /// A registry error while reading `what`: operation `ocm`, the message saying what was
    /// read. A registry that refuses access is a configuration problem: the Context lacks the
    /// credentials (its `registryPullSecrets`), and the message says which it has.
    fn registry_error(&self, what: &str, e: DeployerError) -> DeployerError {
        let mut e = DeployerError {
            operation: OPERATION.into(),
            message: format!("{what}: {}", e.message),
            ..e
        };
        if e.has_code(codes::UNAUTHORIZED) {
            let context = self.context();
            let secrets: Vec<&str> = context
                .map(|c| {
                    c.registry_pull_secrets
                        .iter()
                        .map(|r| r.name.as_str())
                        .collect()
                })
                .unwrap_or_default();
            let name = context
                .and_then(|c| c.metadata.name.as_deref())
                .unwrap_or_default();
            let ocm_config = context
                .and_then(|c| c.ocm_config.as_ref())
                .map(|r| r.name.as_str())
                .filter(|n| !n.is_empty());
            e.message.push_str(&if let Some(config) = ocm_config {
                format!(
                    " — the credentials of context {name}'s registryPullSecrets ({}) and ocmConfig ({config}) were refused or do not name this registry",
                    secrets.join(", ")
                )
            } else if secrets.is_empty() {
                format!(
                    " — missing credentials: context {name} has no registryPullSecrets (a Secret with .dockerconfigjson for this registry)"
                )
            } else {
                format!(
                    " — the credentials of context {name}'s registryPullSecrets ({}) were refused or do not name this registry",
                    secrets.join(", ")
                )
            });
            if !e.has_code(codes::CONFIGURATION_PROBLEM) {
                e.codes.push(codes::CONFIGURATION_PROBLEM.into());
            }
        }
        e
    }

    /// The repository of the item's Context.
    pub fn repository(&self) -> Result<OciRepository, DeployerError> {
        let context = self.context();
        let name = context
            .map(|c| {
                format!(
                    "{}/{}",
                    c.metadata.namespace.as_deref().unwrap_or_default(),
                    c.metadata.name.as_deref().unwrap_or_default()
                )
            })
            .unwrap_or_else(|| "(none)".into());
        let Some(spec) = context.and_then(|c| c.repository_context.as_ref()) else {
            return Err(config_error(
                "NoRepositoryContext",
                format!(
                    "landscaper context {name} does not specify a repository context but has to specify a repository context to resolve resource from an ocm reference"
                ),
            ));
        };
        OciRepository::from_context(spec).map_err(|e| {
            config_error(
                "InvalidRepositoryContext",
                format!("repositoryContext of context {name}: {e}"),
            )
        })
    }

    /// Component `name` version `version` from `repository`.
    pub async fn component_version(
        &self,
        repository: &OciRepository,
        name: &str,
        version: &str,
    ) -> Result<ComponentVersion<'a>, DeployerError> {
        let reference = repository.component_reference(name, version);
        let what = format!(
            "component version {name}:{version} in repository {}",
            repository.describe()
        );
        let session = self
            .session(&reference)
            .await
            .map_err(|e| self.registry_error(&what, e))?;
        let (manifest, _digest) = match session.manifest().await {
            Ok(m) => m,
            Err(e) if e.reason == "NotFound" => {
                return Err(config_error(
                    "ComponentVersionNotFound",
                    format!("{what} not found ({reference}): {}", e.message),
                ));
            }
            Err(e) => return Err(self.registry_error(&what, e)),
        };
        if !COMPONENT_CONFIG_TYPES.contains(&manifest.config.media_type.as_str()) {
            return Err(config_error(
                "NotAComponentVersion",
                format!(
                    "{reference} is not an OCM component version (config media type {:?})",
                    manifest.config.media_type
                ),
            ));
        }
        let (config, _) = session
            .blob(&manifest.config)
            .await
            .map_err(|e| self.registry_error(&what, e))?;
        let config: Value = serde_json::from_slice(&config)
            .map_err(|e| config_error("InvalidComponentVersion", format!("{what}: config: {e}")))?;
        let layer = &config["componentDescriptorLayer"];
        let digest = layer["digest"].as_str().unwrap_or_default();
        let media_type = layer["mediaType"].as_str().unwrap_or_default();
        let Some(descriptor_layer) = manifest.layers.iter().find(|l| l.digest == digest) else {
            return Err(config_error(
                "InvalidComponentVersion",
                format!(
                    "{what}: the config names descriptor layer {digest:?}, which the manifest lacks"
                ),
            ));
        };
        let (data, _) = session
            .blob(descriptor_layer)
            .await
            .map_err(|e| self.registry_error(&what, e))?;
        let text = if DESCRIPTOR_TAR_TYPES.contains(&media_type) {
            file_in_tar(&data, "component-descriptor.yaml")
                .map_err(|e| config_error("InvalidComponentVersion", format!("{what}: {e}")))?
        } else if DESCRIPTOR_PLAIN_TYPES.contains(&media_type) {
            data
        } else {
            return Err(config_error(
                "InvalidComponentVersion",
                format!("{what}: unknown descriptor media type {media_type:?}"),
            ));
        };
        let descriptor = ComponentDescriptor::parse(&text)
            .map_err(|e| config_error("InvalidComponentVersion", format!("{what}: {e}")))?;
        Ok(ComponentVersion {
            descriptor,
            reference,
            session,
            manifest,
        })
    }

    /// [`OcmComponentRequest`](plugin_runtime::OcmComponentRequest): the resolved
    /// descriptor list of `name`:`version` (it and, transitively, the versions it references,
    /// from the same repository), or the content of its resource `resource_name`.
    pub async fn component(
        &self,
        repository_context: Option<&Value>,
        name: &str,
        version: &str,
        resource_name: Option<&str>,
    ) -> Result<Fetched, DeployerError> {
        let repository = match repository_context {
            Some(spec) => OciRepository::from_context(spec).map_err(|e| {
                config_error(
                    "InvalidRepositoryContext",
                    format!("repositoryContext: {e}"),
                )
            })?,
            None => self.repository()?,
        };
        let cv = self.component_version(&repository, name, version).await?;
        if let Some(resource_name) = resource_name {
            let wanted =
                std::collections::BTreeMap::from([("name".to_string(), resource_name.to_string())]);
            let Some(resource) = cv.descriptor.resource(&wanted).or_else(|| {
                cv.descriptor
                    .resources
                    .iter()
                    .find(|r| r.name == resource_name)
            }) else {
                return Err(config_error(
                    "ResourceNotFound",
                    format!(
                        "component version {name}:{version} has no resource name={resource_name} (it has: {})",
                        cv.descriptor.resource_identities().join("; ")
                    ),
                ));
            };
            let mut fetched = self.content(&cv, resource, &[]).await?;
            fetched.ocm = Some(OcmOrigin {
                component_name: name.to_string(),
                component_version: version.to_string(),
                name: resource.name.clone(),
                version: resource.version.clone(),
                r#type: resource.r#type.clone(),
                access_type: resource.access_type().to_string(),
            });
            return Ok(fetched);
        }
        // The version and, breadth first, every version it references (each once).
        let mut components = vec![cv.descriptor.raw.clone()];
        let mut seen = std::collections::BTreeSet::from([(name.to_string(), version.to_string())]);
        let mut queue: std::collections::VecDeque<_> = cv.descriptor.references.clone().into();
        while let Some(r) = queue.pop_front() {
            if !seen.insert((r.component_name.clone(), r.version.clone())) {
                continue;
            }
            let referenced = self
                .component_version(&repository, &r.component_name, &r.version)
                .await?;
            queue.extend(referenced.descriptor.references.clone());
            components.push(referenced.descriptor.raw);
        }
        let list = serde_json::json!({"meta": {"schemaVersion": "v2"}, "components": components});
        let data = serde_json::to_vec(&list).expect("JSON");
        Ok(Fetched {
            digest: format!(
                "sha256:{}",
                hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&data))
            ),
            media_type: "application/json".into(),
            data,
            ..Default::default()
        })
    }

    /// The content of the resource `key` names (WIT `ocm.get-resource`).
    pub async fn resource(
        &self,
        key: &str,
        layer_media_types: &[String],
    ) -> Result<Fetched, DeployerError> {
        // Landscaper's order: the repository context first, then the key.
        let repository = self.repository()?;
        let id = GlobalResourceIdentity::decode(key)
            .map_err(|e| config_error("InvalidResourceKey", e))?;
        let cv = self
            .component_version(&repository, &id.component.name, &id.component.version)
            .await?;
        let Some(resource) = cv.descriptor.resource(&id.resource) else {
            return Err(config_error(
                "ResourceNotFound",
                format!(
                    "component version {}:{} has no resource {} (it has: {})",
                    id.component.name,
                    id.component.version,
                    id.describe_resource(),
                    cv.descriptor.resource_identities().join("; ")
                ),
            ));
        };
        let mut fetched = self.content(&cv, resource, layer_media_types).await?;
        fetched.ocm = Some(OcmOrigin {
            component_name: cv.descriptor.name.clone(),
            component_version: cv.descriptor.version.clone(),
            name: resource.name.clone(),
            version: resource.version.clone(),
            r#type: resource.r#type.clone(),
            access_type: resource.access_type().to_string(),
        });
        Ok(fetched)
    }

    /// The content of `resource` of `cv`, through its access.
    pub async fn content(
        &self,
        cv: &ComponentVersion<'_>,
        resource: &Resource,
        layer_media_types: &[String],
    ) -> Result<Fetched, DeployerError> {
        let what = format!(
            "resource {} of component version {}:{}",
            resource.name, cv.descriptor.name, cv.descriptor.version
        );
        match &resource.access {
            Access::LocalBlob(blob) => self.local_blob(cv, blob, &what, layer_media_types).await,
            Access::OciArtifact(artifact) => {
                let Some(reference) = artifact.reference() else {
                    return Err(config_error(
                        "InvalidAccess",
                        format!(
                            "{what}: access {} has no imageReference",
                            resource.access_type()
                        ),
                    ));
                };
                self.oci_artifact(reference, &what, layer_media_types).await
            }
            Access::Helm(chart) => self.helm_chart(&what, chart).await,
            Access::Unsupported => Err(config_error(
                "UnsupportedAccess",
                format!(
                    "{what}: access type {:?} is not supported (localBlob, ociArtifact, ociImage, helm are)",
                    resource.access_type()
                ),
            )),
        }
    }

    /// A `localBlob`: a layer of the component version's manifest (an artifact set: its layer).
    async fn local_blob(
        &self,
        cv: &ComponentVersion<'_>,
        blob: &LocalBlob,
        what: &str,
        layer_media_types: &[String],
    ) -> Result<Fetched, DeployerError> {
        let digest = blob.digest();
        let Some(layer) = cv.manifest.layers.iter().find(|l| l.digest == digest) else {
            return Err(config_error(
                "LocalBlobNotFound",
                format!(
                    "{what}: local blob {digest:?} is not a layer of {}",
                    cv.reference
                ),
            ));
        };
        let (data, cached) = cv
            .session
            .blob(layer)
            .await
            .map_err(|e| self.registry_error(what, e))?;
        if blob.is_artifact_set() {
            let (layer, data) = layer_of_artifact_set(&data, layer_media_types)
                .map_err(|e| config_error("InvalidArtifactSet", format!("{what}: {e}")))?;
            return Ok(Fetched {
                digest: layer.digest,
                media_type: layer.media_type,
                data,
                cached,
                ..Default::default()
            });
        }
        Ok(Fetched {
            digest: layer.digest.clone(),
            media_type: if blob.media_type.is_empty() {
                layer.media_type.clone()
            } else {
                blob.media_type.clone()
            },
            data,
            cached,
            ..Default::default()
        })
    }

    /// An `ociArtifact`: the first layer of `reference` whose media type is in
    /// `layer_media_types` (empty: the first layer).
    async fn oci_artifact(
        &self,
        reference: &str,
        what: &str,
        layer_media_types: &[String],
    ) -> Result<Fetched, DeployerError> {
        let what = format!("{what} ({reference})");
        let session = self
            .session(reference)
            .await
            .map_err(|e| self.registry_error(&what, e))?;
        let (manifest, manifest_digest) = match session.manifest().await {
            Ok(m) => m,
            Err(e) if e.reason == "NotFound" => {
                return Err(config_error("NotFound", format!("{what}: {}", e.message)));
            }
            Err(e) => return Err(self.registry_error(&what, e)),
        };
        let layer = pick_layer(&manifest.layers, layer_media_types).ok_or_else(|| {
            config_error(
                "NotFound",
                missing_layer(&what, layer_media_types, &manifest),
            )
        })?;
        session
            .layer(&manifest, manifest_digest, layer)
            .await
            .map_err(|e| self.registry_error(&what, e))
    }

    /// The `helm` access type (see [`helm`]). Downloads from a classic repository go through
    /// the [`ChartDownloads`] (allowlist, limits, the Context's `helmChartRepoCredentials`,
    /// cache); from an `oci://` one through the item's registry session.
    async fn helm_chart(&self, what: &str, access: &Helm) -> Result<Fetched, DeployerError> {
        let repository = access.repository();
        let Some((name, version)) = access.name_and_version() else {
            return Err(config_error(
                "InvalidAccess",
                format!(
                    "{what}: helm access: helmChart {:?} is not name:version",
                    access.chart()
                ),
            ));
        };
        if repository.is_empty() {
            return Err(config_error(
                "InvalidAccess",
                format!("{what}: helm access has no helmRepository"),
            ));
        }
        if let Some(oci) = repository.strip_prefix("oci://") {
            let reference = helm::oci_reference(oci, name, version);
            let layer_media_types = helm::CHART_LAYERS.map(String::from);
            let pulled = match self.session(&reference).await {
                Ok(session) => session.pull_layer(&layer_media_types).await,
                Err(e) => Err(e),
            };
            return pulled.map_err(|e| self.registry_error(what, e));
        }
        let fetch = |url: String, expected_digest: Option<String>| async move {
            self.charts
                .http_get(&url, expected_digest.as_deref())
                .await
                .map_err(|e| self.registry_error(what, e))
        };
        let base = repository.trim_end_matches('/');
        let index = fetch(format!("{base}/index.yaml"), None).await?;
        let index: Value = serde_yaml::from_slice(&index.data).map_err(|e| {
            config_error("InvalidAccess", format!("{what}: {base}/index.yaml: {e}"))
        })?;
        let entry = helm::index_entry(&index, name, version).map_err(|available| {
            config_error(
                "NotFound",
                format!(
                    "{what}: chart {name} version {version} is not in the Helm repository {base} (versions there: {})",
                    if available.is_empty() {
                        "none".to_string()
                    } else {
                        available.join(", ")
                    }
                ),
            )
        })?;
        let (url, expected_digest) = helm::archive(base, entry);
        fetch(url, expected_digest).await
    }
}
