//! Resolving a resource key to its content, every registry request through an
//! [`oci::Session`](crate::oci::Session) (allowlist, size limit, the Context's credentials, the
//! digest cache), and the `helm` access type's HTTP downloads through [`ChartDownloads`].
//! Every failure is an [`Error`] saying which step failed on what.

use oci_client::manifest::OciImageManifest;
use plugin_runtime::{DeployerError, Fetched, OcmOrigin};
use serde_json::Value;

use super::access::local_blob::layer_of_artifact_set;
use super::access::{Access, Helm, LocalBlob, helm};
use super::descriptor::{ComponentDescriptor, Resource};
use super::error::{AccessError, ComponentVersionError, CredentialsHint, Error, Subject};
use super::key::GlobalResourceIdentity;
use super::repository::OciRepository;
use super::tar::file_in_tar;
use crate::landscaper::{Context, codes};
use crate::oci::session::{missing_layer, pick_layer};
use crate::oci::{ItemContext, Registries, Session};

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

    async fn session(&self, reference: &str, subject: &Subject) -> Result<Session<'a>, Error> {
        self.registries
            .session(reference, self.item)
            .await
            .map_err(|e| self.registry_error(subject, e))
    }

    /// A registry error while reading `subject`. A registry that refuses access is a
    /// configuration problem: the Context lacks the credentials, and the error says which
    /// (its `registryPullSecrets`, its `ocmConfig`) it has.
    fn registry_error(&self, subject: &Subject, registry: DeployerError) -> Error {
        let credentials = registry.has_code(codes::UNAUTHORIZED).then(|| {
            let context = self.context();
            Box::new(CredentialsHint {
                context: context
                    .and_then(|c| c.metadata.name.clone())
                    .unwrap_or_default(),
                pull_secrets: context
                    .map(|c| {
                        c.registry_pull_secrets
                            .iter()
                            .map(|r| r.name.clone())
                            .collect()
                    })
                    .unwrap_or_default(),
                ocm_config: context
                    .and_then(|c| c.ocm_config.as_ref())
                    .map(|r| r.name.clone())
                    .filter(|n| !n.is_empty()),
            })
        });
        Error::Registry {
            subject: subject.clone(),
            registry: Box::new(registry),
            credentials,
        }
    }

    /// The repository of the item's Context.
    pub fn repository(&self) -> Result<OciRepository, Error> {
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
            return Err(Error::NoRepositoryContext { context: name });
        };
        OciRepository::from_context(spec).map_err(|problem| Error::InvalidRepositoryContext {
            context: Some(name),
            problem,
        })
    }

    /// Component `name` version `version` from `repository`.
    pub async fn component_version(
        &self,
        repository: &OciRepository,
        name: &str,
        version: &str,
    ) -> Result<ComponentVersion<'a>, Error> {
        let reference = repository.component_reference(name, version);
        let subject = Subject::ComponentVersion {
            name: name.into(),
            version: version.into(),
            repository: repository.describe().into(),
        };
        let invalid = |problem: ComponentVersionError| Error::InvalidComponentVersion {
            subject: subject.clone(),
            problem,
        };
        let session = self.session(&reference, &subject).await?;
        let (manifest, _digest) = match session.manifest().await {
            Ok(m) => m,
            Err(e) if e.reason == "NotFound" => {
                return Err(Error::ComponentVersionNotFound {
                    subject,
                    reference,
                    registry_message: e.message,
                });
            }
            Err(e) => return Err(self.registry_error(&subject, e)),
        };
        if !COMPONENT_CONFIG_TYPES.contains(&manifest.config.media_type.as_str()) {
            return Err(Error::NotAComponentVersion {
                reference,
                media_type: manifest.config.media_type.clone(),
            });
        }
        let (config, _) = session
            .blob(&manifest.config)
            .await
            .map_err(|e| self.registry_error(&subject, e))?;
        let config: Value = serde_json::from_slice(&config)
            .map_err(|e| invalid(ComponentVersionError::Config(e)))?;
        let layer = &config["componentDescriptorLayer"];
        let digest = layer["digest"].as_str().unwrap_or_default();
        let media_type = layer["mediaType"].as_str().unwrap_or_default();
        let Some(descriptor_layer) = manifest.layers.iter().find(|l| l.digest == digest) else {
            return Err(invalid(ComponentVersionError::MissingDescriptorLayer(
                digest.to_string(),
            )));
        };
        let (data, _) = session
            .blob(descriptor_layer)
            .await
            .map_err(|e| self.registry_error(&subject, e))?;
        let text = if DESCRIPTOR_TAR_TYPES.contains(&media_type) {
            file_in_tar(&data, "component-descriptor.yaml").map_err(|e| invalid(e.into()))?
        } else if DESCRIPTOR_PLAIN_TYPES.contains(&media_type) {
            data
        } else {
            return Err(invalid(ComponentVersionError::UnknownDescriptorMediaType(
                media_type.to_string(),
            )));
        };
        let descriptor = ComponentDescriptor::parse(&text).map_err(|e| invalid(e.into()))?;
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
    ) -> Result<Fetched, Error> {
        let repository = match repository_context {
            Some(spec) => OciRepository::from_context(spec).map_err(|problem| {
                Error::InvalidRepositoryContext {
                    context: None,
                    problem,
                }
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
                return Err(Error::ResourceNotFound {
                    component: name.to_string(),
                    version: version.to_string(),
                    resource: format!("name={resource_name}"),
                    available: cv.descriptor.resource_identities(),
                });
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
    ) -> Result<Fetched, Error> {
        // Landscaper's order: the repository context first, then the key.
        let repository = self.repository()?;
        let id = GlobalResourceIdentity::decode(key)?;
        let cv = self
            .component_version(&repository, &id.component.name, &id.component.version)
            .await?;
        let Some(resource) = cv.descriptor.resource(&id.resource) else {
            return Err(Error::ResourceNotFound {
                resource: id.describe_resource(),
                available: cv.descriptor.resource_identities(),
                component: id.component.name,
                version: id.component.version,
            });
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
    ) -> Result<Fetched, Error> {
        let subject = Subject::Resource {
            name: resource.name.as_str().into(),
            component: cv.descriptor.name.as_str().into(),
            version: cv.descriptor.version.as_str().into(),
        };
        match &resource.access {
            Access::LocalBlob(blob) => self.local_blob(cv, blob, subject, layer_media_types).await,
            Access::OciArtifact(artifact) => {
                let Some(reference) = artifact.reference() else {
                    return Err(Error::InvalidAccess {
                        subject,
                        problem: AccessError::NoImageReference(resource.access_type().to_string()),
                    });
                };
                self.oci_artifact(reference, subject, layer_media_types)
                    .await
            }
            Access::Helm(chart) => self.helm_chart(subject, chart).await,
            Access::Unsupported => Err(Error::UnsupportedAccess {
                subject,
                access_type: resource.access_type().to_string(),
            }),
        }
    }

    /// A `localBlob`: a layer of the component version's manifest (an artifact set: its layer).
    async fn local_blob(
        &self,
        cv: &ComponentVersion<'_>,
        blob: &LocalBlob,
        subject: Subject,
        layer_media_types: &[String],
    ) -> Result<Fetched, Error> {
        let digest = blob.digest();
        let Some(layer) = cv.manifest.layers.iter().find(|l| l.digest == digest) else {
            return Err(Error::LocalBlobNotFound {
                subject,
                digest: digest.to_string(),
                reference: cv.reference.clone(),
            });
        };
        let (data, cached) = cv
            .session
            .blob(layer)
            .await
            .map_err(|e| self.registry_error(&subject, e))?;
        if blob.is_artifact_set() {
            let (layer, data) = layer_of_artifact_set(&data, layer_media_types)
                .map_err(|problem| Error::InvalidArtifactSet { subject, problem })?;
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
        resource: Subject,
        layer_media_types: &[String],
    ) -> Result<Fetched, Error> {
        let subject = Subject::Artifact {
            of: Box::new(resource),
            reference: reference.into(),
        };
        let session = self.session(reference, &subject).await?;
        let (manifest, manifest_digest) = match session.manifest().await {
            Ok(m) => m,
            Err(e) if e.reason == "NotFound" => {
                return Err(Error::ArtifactNotFound {
                    subject,
                    registry_message: e.message,
                });
            }
            Err(e) => return Err(self.registry_error(&subject, e)),
        };
        let layer = pick_layer(&manifest.layers, layer_media_types).ok_or_else(|| {
            Error::LayerNotFound(missing_layer(
                &subject.to_string(),
                layer_media_types,
                &manifest,
            ))
        })?;
        session
            .layer(&manifest, manifest_digest, layer)
            .await
            .map_err(|e| self.registry_error(&subject, e))
    }

    /// The `helm` access type (see [`helm`]). Downloads from a classic repository go through
    /// the [`ChartDownloads`] (allowlist, limits, the Context's `helmChartRepoCredentials`,
    /// cache); from an `oci://` one through the item's registry session.
    async fn helm_chart(&self, subject: Subject, access: &Helm) -> Result<Fetched, Error> {
        let invalid = |problem| Error::InvalidAccess {
            subject: subject.clone(),
            problem,
        };
        let repository = access.repository();
        let Some((name, version)) = access.name_and_version() else {
            return Err(invalid(AccessError::ChartNotNameVersion(
                access.chart().to_string(),
            )));
        };
        if repository.is_empty() {
            return Err(invalid(AccessError::NoHelmRepository));
        }
        if let Some(oci) = repository.strip_prefix("oci://") {
            let reference = helm::oci_reference(oci, name, version);
            let layer_media_types = helm::CHART_LAYERS.map(String::from);
            let session = self.session(&reference, &subject).await?;
            return session
                .pull_layer(&layer_media_types)
                .await
                .map_err(|e| self.registry_error(&subject, e));
        }
        let fetch = |url: String, expected_digest: Option<String>| {
            let subject = &subject;
            async move {
                self.charts
                    .http_get(&url, expected_digest.as_deref())
                    .await
                    .map_err(|e| self.registry_error(subject, e))
            }
        };
        let base = repository.trim_end_matches('/');
        let url = format!("{base}/index.yaml");
        let index = fetch(url.clone(), None).await?;
        let index: Value = serde_yaml::from_slice(&index.data)
            .map_err(|source| invalid(AccessError::HelmIndex { url, source }))?;
        let entry =
            helm::index_entry(&index, name, version).map_err(|available| Error::ChartNotFound {
                subject: subject.clone(),
                chart: name.into(),
                version: version.into(),
                repository: base.into(),
                available: available.into(),
            })?;
        let (url, expected_digest) = helm::archive(base, entry);
        fetch(url, expected_digest).await
    }
}
