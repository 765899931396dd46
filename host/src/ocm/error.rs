//! What can go wrong reading OCM, as one type: [`Error`] says which step failed and on what
//! ([`Subject`]), with the typed cause of each leaf — a resource key ([`KeyError`]), a
//! repository context ([`RepositoryContextError`]), a descriptor ([`DescriptorError`]), an
//! archive ([`ArchiveError`]), an artifact set ([`ArtifactSetError`]) or an access spec
//! ([`AccessError`]). Its one conversion into the plugin-facing [`DeployerError`] gives every
//! OCM failure operation `ocm`, the variant's name as reason and Landscaper's
//! `ERR_CONFIGURATION_PROBLEM` (a registry's own error keeps its codes and reason).
//!
//! Owns: the wording and classification of OCM errors. Must not touch: deciding what to retry
//! (the controller's error policy reads the codes).

use std::fmt;

use plugin_runtime::DeployerError;
use serde_json::Value;

use crate::landscaper::codes;

/// The operation of OCM errors.
pub const OPERATION: &str = "ocm";

/// An error reading a component version or one of its resources.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The item's Context names no component repository.
    #[error(
        "landscaper context {context} does not specify a repository context but has to specify a repository context to resolve resource from an ocm reference"
    )]
    NoRepositoryContext {
        /// `namespace/name` of the Context, or `(none)`.
        context: String,
    },
    /// The repository context (the Context's, or one a request names) cannot be read.
    #[error("repositoryContext{}: {problem}", of_context(context))]
    InvalidRepositoryContext {
        /// `namespace/name` of the Context it came from, if it came from one.
        context: Option<String>,
        #[source]
        problem: RepositoryContextError,
    },
    /// The resource key is not one `getResourceKey` returns.
    #[error(transparent)]
    InvalidResourceKey(#[from] KeyError),
    /// The repository has no such component version.
    #[error("{subject} not found ({reference}): {registry_message}")]
    ComponentVersionNotFound {
        subject: Subject,
        reference: String,
        registry_message: String,
    },
    /// The reference is an OCI artifact but not a component version.
    #[error("{reference} is not an OCM component version (config media type {media_type:?})")]
    NotAComponentVersion {
        reference: String,
        media_type: String,
    },
    /// The component version's manifest, config or descriptor is malformed.
    #[error("{subject}: {problem}")]
    InvalidComponentVersion {
        subject: Subject,
        #[source]
        problem: ComponentVersionError,
    },
    /// The component version has no resource with the identity asked for.
    #[error(
        "component version {component}:{version} has no resource {resource} (it has: {})",
        available.join("; ")
    )]
    ResourceNotFound {
        component: String,
        version: String,
        /// The identity asked for (`name=…,…`).
        resource: String,
        /// Every identity the component version has.
        available: Vec<String>,
    },
    /// The resource's access spec lacks what its type needs.
    #[error("{subject}: {problem}")]
    InvalidAccess {
        subject: Subject,
        #[source]
        problem: AccessError,
    },
    /// The resource's access type is one the host does not read.
    #[error(
        "{subject}: access type {access_type:?} is not supported (localBlob, ociArtifact, ociImage, helm are)"
    )]
    UnsupportedAccess {
        subject: Subject,
        access_type: String,
    },
    /// A `localBlob` names a digest the component version's manifest lacks.
    #[error("{subject}: local blob {digest:?} is not a layer of {reference}")]
    LocalBlobNotFound {
        subject: Subject,
        digest: String,
        reference: String,
    },
    /// A `localBlob` artifact set cannot be unpacked.
    #[error("{subject}: {problem}")]
    InvalidArtifactSet {
        subject: Subject,
        #[source]
        problem: ArtifactSetError,
    },
    /// The artifact an `ociArtifact` names is not in its registry.
    #[error("{subject}: {registry_message}")]
    ArtifactNotFound {
        subject: Subject,
        registry_message: String,
    },
    /// The artifact has no layer of the media types asked for (the message names those it has).
    #[error("{0}")]
    LayerNotFound(String),
    /// The `helm` access's classic repository has no such chart version.
    #[error(
        "{subject}: chart {chart} version {version} is not in the Helm repository {repository} (versions there: {})",
        if available.is_empty() { "none".to_string() } else { available.join(", ") }
    )]
    ChartNotFound {
        subject: Subject,
        chart: Box<str>,
        version: Box<str>,
        repository: Box<str>,
        /// The versions the index has.
        available: Box<[String]>,
    },
    /// A registry (or chart repository) request failed; `credentials` says what the Context
    /// offered when the registry refused access.
    #[error("{subject}: {}{}", registry.message, credentials.as_ref().map(ToString::to_string).unwrap_or_default())]
    Registry {
        subject: Subject,
        #[source]
        registry: Box<DeployerError>,
        credentials: Option<Box<CredentialsHint>>,
    },
}

impl Error {
    /// The Landscaper reason: the variant's name (`NotFound` for the three ways content is
    /// missing, as Landscaper's OCM library says it), or the registry's own.
    pub fn reason(&self) -> &str {
        match self {
            Error::NoRepositoryContext { .. } => "NoRepositoryContext",
            Error::InvalidRepositoryContext { .. } => "InvalidRepositoryContext",
            Error::InvalidResourceKey(_) => "InvalidResourceKey",
            Error::ComponentVersionNotFound { .. } => "ComponentVersionNotFound",
            Error::NotAComponentVersion { .. } => "NotAComponentVersion",
            Error::InvalidComponentVersion { .. } => "InvalidComponentVersion",
            Error::ResourceNotFound { .. } => "ResourceNotFound",
            Error::InvalidAccess { .. } => "InvalidAccess",
            Error::UnsupportedAccess { .. } => "UnsupportedAccess",
            Error::LocalBlobNotFound { .. } => "LocalBlobNotFound",
            Error::InvalidArtifactSet { .. } => "InvalidArtifactSet",
            Error::ArtifactNotFound { .. }
            | Error::LayerNotFound(_)
            | Error::ChartNotFound { .. } => "NotFound",
            Error::Registry { registry, .. } => &registry.reason,
        }
    }
}

impl From<Error> for DeployerError {
    fn from(e: Error) -> Self {
        let message = e.to_string();
        match e {
            // The registry's codes and reason stand; refused credentials are the Context's
            // configuration problem.
            Error::Registry {
                registry,
                credentials,
                ..
            } => {
                let mut out = DeployerError {
                    operation: OPERATION.into(),
                    message,
                    ..*registry
                };
                if credentials.is_some() && !out.has_code(codes::CONFIGURATION_PROBLEM) {
                    out.codes.push(codes::CONFIGURATION_PROBLEM.into());
                }
                out
            }
            e => DeployerError {
                codes: vec![codes::CONFIGURATION_PROBLEM.into()],
                operation: OPERATION.into(),
                reason: e.reason().into(),
                message,
                ..Default::default()
            },
        }
    }
}

fn of_context(context: &Option<String>) -> String {
    context
        .as_deref()
        .map(|c| format!(" of context {c}"))
        .unwrap_or_default()
}

/// What was being read when an error happened, as messages name it. (Its text is immutable,
/// and `Box<str>` keeps [`Error`] small.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    /// `component version <name>:<version> in repository <host/subPath>`.
    ComponentVersion {
        name: Box<str>,
        version: Box<str>,
        repository: Box<str>,
    },
    /// `resource <name> of component version <component>:<version>`.
    Resource {
        name: Box<str>,
        component: Box<str>,
        version: Box<str>,
    },
    /// `<subject> (<reference>)`: the OCI artifact a resource's access names.
    Artifact {
        of: Box<Subject>,
        reference: Box<str>,
    },
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::ComponentVersion {
                name,
                version,
                repository,
            } => write!(
                f,
                "component version {name}:{version} in repository {repository}"
            ),
            Subject::Resource {
                name,
                component,
                version,
            } => write!(
                f,
                "resource {name} of component version {component}:{version}"
            ),
            Subject::Artifact { of, reference } => write!(f, "{of} ({reference})"),
        }
    }
}

/// What the item's Context offers a registry that refused access.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialsHint {
    /// The Context's name.
    pub context: String,
    /// Its `registryPullSecrets`.
    pub pull_secrets: Vec<String>,
    /// Its `ocmConfig`, if it names one.
    pub ocm_config: Option<String>,
}

impl fmt::Display for CredentialsHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let CredentialsHint {
            context,
            pull_secrets,
            ocm_config,
        } = self;
        let secrets = pull_secrets.join(", ");
        match ocm_config {
            Some(config) => write!(
                f,
                " — the credentials of context {context}'s registryPullSecrets ({secrets}) and ocmConfig ({config}) were refused or do not name this registry"
            ),
            None if pull_secrets.is_empty() => write!(
                f,
                " — missing credentials: context {context} has no registryPullSecrets (a Secret with .dockerconfigjson for this registry)"
            ),
            None => write!(
                f,
                " — the credentials of context {context}'s registryPullSecrets ({secrets}) were refused or do not name this registry"
            ),
        }
    }
}

/// A resource key that is not a `model.GlobalResourceIdentity`.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("the resource key is not base64: {0}")]
    NotBase64(#[source] base64::DecodeError),
    #[error(
        "the resource key {text:?} is not a global resource identity {{component: {{name, version}}, resource: {{name, …}}}}: {source}"
    )]
    NotAnIdentity {
        /// The decoded key.
        text: String,
        source: serde_yaml::Error,
    },
    #[error("the resource key names no component name and version")]
    NoComponent,
    #[error("the resource key names no resource (resource.name)")]
    NoResource,
}

/// A `repositoryContext` the host cannot read.
#[derive(Debug, thiserror::Error)]
pub enum RepositoryContextError {
    #[error("repository context type {0:?} is not supported: only OCIRegistry (OCI registries) is")]
    UnsupportedType(String),
    #[error("the repository context has no baseUrl")]
    NoBaseUrl,
    #[error("unknown componentNameMapping {0:?}")]
    UnknownNameMapping(String),
}

/// A malformed component version: its config, its descriptor layer or the descriptor.
#[derive(Debug, thiserror::Error)]
pub enum ComponentVersionError {
    #[error("config: {0}")]
    Config(#[source] serde_json::Error),
    #[error("the config names descriptor layer {0:?}, which the manifest lacks")]
    MissingDescriptorLayer(String),
    #[error("unknown descriptor media type {0:?}")]
    UnknownDescriptorMediaType(String),
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    #[error(transparent)]
    Descriptor(#[from] DescriptorError),
}

/// A component descriptor the host cannot read.
#[derive(Debug, thiserror::Error)]
pub enum DescriptorError {
    #[error("the component descriptor is not YAML: {0}")]
    NotYaml(#[source] serde_yaml::Error),
    #[error(
        "unknown component descriptor schema (meta.schemaVersion {schema_version:?}, apiVersion {api_version:?}): v2 and ocm.software/v3alpha1 are supported"
    )]
    UnknownSchema {
        schema_version: Value,
        api_version: Value,
    },
    #[error("component descriptor v2: {0}")]
    V2(#[source] serde_json::Error),
    #[error("component descriptor {api}: {part}: {source}")]
    V3 {
        api: String,
        /// `metadata` or `spec`.
        part: &'static str,
        source: serde_json::Error,
    },
}

/// A tar (gzipped or not) that cannot be read, or lacks a file.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("not a gzip archive: {0}")]
    NotGzip(#[source] std::io::Error),
    #[error("not a tar archive: {0}")]
    NotTar(#[source] std::io::Error),
    #[error("tar entry: {0}")]
    EntryPath(#[source] std::io::Error),
    #[error("tar entry {name}: {source}")]
    Entry {
        name: String,
        source: std::io::Error,
    },
    #[error("no {0} in the descriptor tar")]
    Missing(String),
}

/// An OCM artifact set (an OCI layout tar) that cannot be unpacked.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactSetError {
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    #[error("artifact set has no index.json")]
    NoIndex,
    #[error("artifact set index.json: {0}")]
    Index(#[source] serde_json::Error),
    #[error("artifact set has no main artifact")]
    NoMainArtifact,
    #[error("artifact set lacks blob {0}")]
    MissingBlob(String),
    #[error("artifact set manifest {digest}: {source}")]
    Manifest {
        digest: String,
        source: serde_json::Error,
    },
    #[error("artifact set has no layer of media type {}", .0.join(" or "))]
    NoLayer(Vec<String>),
}

/// An access spec that lacks what its type needs.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("access {0} has no imageReference")]
    NoImageReference(String),
    #[error("helm access: helmChart {0:?} is not name:version")]
    ChartNotNameVersion(String),
    #[error("helm access has no helmRepository")]
    NoHelmRepository,
    #[error("{url}: {source}")]
    HelmIndex {
        url: String,
        source: serde_yaml::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cv() -> Subject {
        Subject::ComponentVersion {
            name: "example.com/app".into(),
            version: "1.0.0".into(),
            repository: "r.io/ocm".into(),
        }
    }

    fn resource() -> Subject {
        Subject::Resource {
            name: "chart".into(),
            component: "example.com/app".into(),
            version: "1.0.0".into(),
        }
    }

    #[test]
    fn every_error_is_a_configuration_problem_of_operation_ocm_named_by_its_variant() {
        let cases: Vec<(Error, &str, &str)> = vec![
            (
                Error::NoRepositoryContext {
                    context: "ns/ctx".into(),
                },
                "NoRepositoryContext",
                "landscaper context ns/ctx does not specify a repository context but has to specify a repository context to resolve resource from an ocm reference",
            ),
            (
                Error::InvalidRepositoryContext {
                    context: Some("ns/ctx".into()),
                    problem: RepositoryContextError::NoBaseUrl,
                },
                "InvalidRepositoryContext",
                "repositoryContext of context ns/ctx: the repository context has no baseUrl",
            ),
            (
                Error::InvalidRepositoryContext {
                    context: None,
                    problem: RepositoryContextError::UnsupportedType("CTF".into()),
                },
                "InvalidRepositoryContext",
                "repositoryContext: repository context type \"CTF\" is not supported: only OCIRegistry (OCI registries) is",
            ),
            (
                KeyError::NoResource.into(),
                "InvalidResourceKey",
                "the resource key names no resource (resource.name)",
            ),
            (
                Error::ComponentVersionNotFound {
                    subject: cv(),
                    reference: "r.io/ocm/component-descriptors/example.com/app:1.0.0".into(),
                    registry_message: "manifest unknown".into(),
                },
                "ComponentVersionNotFound",
                "component version example.com/app:1.0.0 in repository r.io/ocm not found (r.io/ocm/component-descriptors/example.com/app:1.0.0): manifest unknown",
            ),
            (
                Error::InvalidComponentVersion {
                    subject: cv(),
                    problem: ComponentVersionError::MissingDescriptorLayer("sha256:aa".into()),
                },
                "InvalidComponentVersion",
                "component version example.com/app:1.0.0 in repository r.io/ocm: the config names descriptor layer \"sha256:aa\", which the manifest lacks",
            ),
            (
                Error::ResourceNotFound {
                    component: "example.com/app".into(),
                    version: "1.0.0".into(),
                    resource: "name=x".into(),
                    available: vec!["name=chart".into(), "name=image,os=linux".into()],
                },
                "ResourceNotFound",
                "component version example.com/app:1.0.0 has no resource name=x (it has: name=chart; name=image,os=linux)",
            ),
            (
                Error::InvalidAccess {
                    subject: resource(),
                    problem: AccessError::NoHelmRepository,
                },
                "InvalidAccess",
                "resource chart of component version example.com/app:1.0.0: helm access has no helmRepository",
            ),
            (
                Error::UnsupportedAccess {
                    subject: resource(),
                    access_type: "s3".into(),
                },
                "UnsupportedAccess",
                "resource chart of component version example.com/app:1.0.0: access type \"s3\" is not supported (localBlob, ociArtifact, ociImage, helm are)",
            ),
            (
                Error::InvalidArtifactSet {
                    subject: resource(),
                    problem: ArtifactSetError::NoLayer(vec!["a/b".into(), "c/d".into()]),
                },
                "InvalidArtifactSet",
                "resource chart of component version example.com/app:1.0.0: artifact set has no layer of media type a/b or c/d",
            ),
            (
                Error::ArtifactNotFound {
                    subject: Subject::Artifact {
                        of: Box::new(resource()),
                        reference: "r.io/img:1".into(),
                    },
                    registry_message: "manifest unknown".into(),
                },
                "NotFound",
                "resource chart of component version example.com/app:1.0.0 (r.io/img:1): manifest unknown",
            ),
            (
                Error::ChartNotFound {
                    subject: resource(),
                    chart: "app".into(),
                    version: "2.0.0".into(),
                    repository: "https://charts.example".into(),
                    available: Box::new([]),
                },
                "NotFound",
                "resource chart of component version example.com/app:1.0.0: chart app version 2.0.0 is not in the Helm repository https://charts.example (versions there: none)",
            ),
        ];
        for (error, reason, message) in cases {
            let e = DeployerError::from(error);
            assert_eq!(
                (e.codes, e.operation.as_str(), e.reason.as_str()),
                (
                    vec![codes::CONFIGURATION_PROBLEM.to_string()],
                    OPERATION,
                    reason
                )
            );
            assert_eq!(e.message, message);
        }
    }

    #[test]
    fn a_refused_registry_keeps_its_reason_and_says_what_credentials_the_context_has() {
        let refused = DeployerError::new(&[codes::UNAUTHORIZED], "Unauthorized", "401 from r.io");
        let e = DeployerError::from(Error::Registry {
            subject: cv(),
            registry: Box::new(refused),
            credentials: Some(Box::new(CredentialsHint {
                context: "ctx".into(),
                pull_secrets: vec![],
                ocm_config: None,
            })),
        });
        assert_eq!(e.reason, "Unauthorized");
        assert_eq!(e.operation, OPERATION);
        assert_eq!(
            e.codes,
            [codes::UNAUTHORIZED, codes::CONFIGURATION_PROBLEM].map(String::from)
        );
        assert_eq!(
            e.message,
            "component version example.com/app:1.0.0 in repository r.io/ocm: 401 from r.io — missing credentials: context ctx has no registryPullSecrets (a Secret with .dockerconfigjson for this registry)"
        );
        let hint = CredentialsHint {
            context: "ctx".into(),
            pull_secrets: vec!["a".into(), "b".into()],
            ocm_config: Some("cfg".into()),
        };
        assert_eq!(
            hint.to_string(),
            " — the credentials of context ctx's registryPullSecrets (a, b) and ocmConfig (cfg) were refused or do not name this registry"
        );
        // Any other registry error passes through with its codes, under operation `ocm`.
        let unreachable = DeployerError::new(&[], "Unreachable", "connection refused");
        let e = DeployerError::from(Error::Registry {
            subject: resource(),
            registry: Box::new(unreachable),
            credentials: None,
        });
        assert!(e.codes.is_empty());
        assert_eq!(e.reason, "Unreachable");
        assert_eq!(
            e.message,
            "resource chart of component version example.com/app:1.0.0: connection refused"
        );
    }
}
