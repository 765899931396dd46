//! Test tooling for OCM: pushes real component versions into an OCI registry, laid out as the
//! OCM CLI lays them out (OCM specification, "OCI registries"; `genericocireg` in the OCM Go
//! library): the manifest `<registry>/<subPath>/component-descriptors/<name>:<version>` with
//! config `application/vnd.ocm.software.component.config.v1+json`
//! (`{"componentDescriptorLayer": …}`), the descriptor as its first layer (a tar holding
//! `component-descriptor.yaml`), and every local blob as a further layer. Also pushes a Helm
//! chart as an OCI artifact (Helm's media types), as `helm push` does.

use std::collections::BTreeMap;

use deployer_host::oci::{RegistryOptions, client_for, parse};
use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::OciImageManifest;
use serde_json::{Value, json};

pub const COMPONENT_CONFIG: &str = "application/vnd.ocm.software.component.config.v1+json";
pub const DESCRIPTOR_TAR: &str = "application/vnd.ocm.software.component-descriptor.v2+yaml+tar";
pub const HELM_CHART_LAYER: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
pub const HELM_CONFIG: &str = "application/vnd.cncf.helm.config.v1+json";
pub const BLUEPRINT_MEDIA_TYPE: &str = "application/vnd.gardener.landscaper.blueprint.v1+tar+gzip";
/// A blueprint pushed as an OCI artifact: its config and its one layer.
pub const BLUEPRINT_CONFIG: &str = "application/vnd.gardener.landscaper.blueprint.config.v1";
pub const BLUEPRINT_LAYER: &str = "application/vnd.gardener.landscaper.blueprint.layer.v1.tar+gzip";

/// How a resource's content is reached.
pub enum Content {
    /// A layer of the component version's manifest.
    LocalBlob { media_type: String, data: Vec<u8> },
    /// An OCI artifact elsewhere (`ociArtifact` access).
    OciArtifact { image_reference: String },
    /// A chart in a Helm repository (`helm` access).
    Helm { repository: String, chart: String },
}

/// One resource of a component version.
pub struct Resource {
    pub name: String,
    pub version: String,
    pub r#type: String,
    pub content: Content,
}

impl Resource {
    pub fn local(name: &str, r#type: &str, media_type: &str, data: Vec<u8>) -> Self {
        Resource {
            name: name.into(),
            version: "1.0.0".into(),
            r#type: r#type.into(),
            content: Content::LocalBlob {
                media_type: media_type.into(),
                data,
            },
        }
    }

    /// A chart `chart` (`name:version`) of the Helm repository `repository` (`helm` access).
    pub fn helm(name: &str, repository: &str, chart: &str) -> Self {
        Resource {
            name: name.into(),
            version: "1.0.0".into(),
            r#type: "helmChart".into(),
            content: Content::Helm {
                repository: repository.into(),
                chart: chart.into(),
            },
        }
    }

    pub fn oci(name: &str, r#type: &str, image_reference: &str) -> Self {
        Resource {
            name: name.into(),
            version: "1.0.0".into(),
            r#type: r#type.into(),
            content: Content::OciArtifact {
                image_reference: image_reference.into(),
            },
        }
    }
}

/// Descriptor schema to write.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    V2,
    V3,
}

/// Registries that speak HTTPS with a certificate of the test's own CA: registry -> CA (PEM).
static TLS: std::sync::Mutex<BTreeMap<String, String>> = std::sync::Mutex::new(BTreeMap::new());

/// The tooling pushes to `registry` over HTTPS, trusting `ca_pem` (every other registry is
/// spoken to over plain HTTP).
pub fn trust(registry: &str, ca_pem: &str) {
    TLS.lock()
        .unwrap()
        .insert(registry.to_string(), ca_pem.to_string());
}

fn options(registry: &str, auth: Option<(&str, &str)>) -> RegistryOptions {
    let ca = TLS.lock().unwrap().get(registry).cloned();
    RegistryOptions {
        plain_http: match ca {
            Some(_) => Vec::new(),
            None => vec![registry.to_string()],
        },
        docker_configs: auth
            .map(|(u, p)| docker_config(registry, u, p))
            .into_iter()
            .collect(),
        ca_certs: ca.into_iter().collect(),
    }
}

/// A Docker config JSON (`.dockerconfigjson`) with `user`:`password` for `registry`.
pub fn docker_config(registry: &str, user: &str, password: &str) -> String {
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    json!({"auths": {registry: {"auth": auth}}}).to_string()
}

fn tar_of(name: &str, data: &[u8]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    b.append_data(&mut h, name, data).unwrap();
    b.into_inner().unwrap()
}

/// Pushes component `name`:`version` with `resources` to `registry` (`127.0.0.1:<port>`,
/// plain HTTP) under `sub_path`. Returns the descriptor as written (JSON).
pub async fn push_component(
    registry: &str,
    sub_path: &str,
    name: &str,
    version: &str,
    resources: Vec<Resource>,
    schema: Schema,
) -> Value {
    push_component_as(
        registry,
        None,
        sub_path,
        name,
        version,
        resources,
        &[],
        schema,
    )
    .await
}

/// The stories' component: `name` 1.0.0 under `ocm/` with one resource `chart` (type
/// `helmChart`) holding the chart `archive` as a local blob, schema v2.
pub async fn push_chart_component(
    registry: &str,
    auth: Option<(&str, &str)>,
    name: &str,
    archive: Vec<u8>,
) -> Value {
    push_component_as(
        registry,
        auth,
        "ocm",
        name,
        "1.0.0",
        vec![Resource::local(
            "chart",
            "helmChart",
            HELM_CHART_LAYER,
            archive,
        )],
        &[],
        Schema::V2,
    )
    .await
}

/// [`push_component`] to a registry that wants `auth` (user, password), with component
/// `references` (reference name, component name, version).
#[allow(clippy::too_many_arguments)]
pub async fn push_component_as(
    registry: &str,
    auth: Option<(&str, &str)>,
    sub_path: &str,
    name: &str,
    version: &str,
    resources: Vec<Resource>,
    references: &[(&str, &str, &str)],
    schema: Schema,
) -> Value {
    let references: Vec<Value> = references
        .iter()
        .map(|(n, c, v)| json!({"name": n, "componentName": c, "version": v}))
        .collect();
    let mut layers = Vec::new();
    let mut described = Vec::new();
    for r in resources {
        let access = match r.content {
            Content::LocalBlob { media_type, data } => {
                let layer = ImageLayer::new(data, media_type.clone(), None);
                let digest = layer.sha256_digest();
                layers.push(layer);
                json!({"type": "localBlob", "localReference": digest, "mediaType": media_type})
            }
            Content::OciArtifact { image_reference } => {
                json!({"type": "ociArtifact", "imageReference": image_reference})
            }
            Content::Helm { repository, chart } => {
                json!({"type": "helm", "helmRepository": repository, "helmChart": chart})
            }
        };
        let relation = if access["type"] == "localBlob" {
            "local"
        } else {
            "external"
        };
        described.push(
            json!({"name": r.name, "version": r.version, "type": r.r#type,
                              "relation": relation, "access": access}),
        );
    }
    let repository_context = json!({"type": "OCIRegistry", "baseUrl": registry, "subPath": sub_path,
                                    "componentNameMapping": "urlPath"});
    let descriptor = match schema {
        Schema::V2 => json!({
            "meta": {"schemaVersion": "v2"},
            "component": {"name": name, "version": version, "provider": "acme",
                          "repositoryContexts": [repository_context], "sources": [],
                          "componentReferences": references, "resources": described}
        }),
        Schema::V3 => json!({
            "apiVersion": "ocm.software/v3alpha1", "kind": "ComponentVersion",
            "metadata": {"name": name, "version": version, "provider": {"name": "acme"}},
            "repositoryContexts": [repository_context],
            "spec": {"resources": described, "sources": [], "references": references}
        }),
    };
    push_descriptor(registry, auth, sub_path, &descriptor, layers).await;
    descriptor
}

/// Pushes `descriptor` (a v2 or v3 component descriptor, as written) and its local blobs as the
/// OCM CLI does: `<registry>/<sub_path>/component-descriptors/<name>:<version>`.
pub async fn push_descriptor(
    registry: &str,
    auth: Option<(&str, &str)>,
    sub_path: &str,
    descriptor: &Value,
    layers: Vec<ImageLayer>,
) {
    let (name, version) = match descriptor.get("component") {
        Some(c) => (&c["name"], &c["version"]),
        None => (
            &descriptor["metadata"]["name"],
            &descriptor["metadata"]["version"],
        ),
    };
    let (name, version) = (name.as_str().unwrap(), version.as_str().unwrap());
    let yaml = serde_yaml::to_string(descriptor).unwrap();
    let descriptor_layer = ImageLayer::new(
        tar_of("component-descriptor.yaml", yaml.as_bytes()),
        DESCRIPTOR_TAR.into(),
        None,
    );
    let config = json!({"componentDescriptorLayer": {
        "mediaType": DESCRIPTOR_TAR,
        "digest": descriptor_layer.sha256_digest(),
        "size": descriptor_layer.data.len(),
    }});
    let config = Config::new(
        serde_json::to_vec(&config).unwrap(),
        COMPONENT_CONFIG.into(),
        None,
    );
    let mut all = vec![descriptor_layer];
    all.extend(layers);
    let prefix = [registry, sub_path]
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("/");
    let tag = version.replace('+', ".build-");
    let reference = format!("{prefix}/component-descriptors/{name}:{tag}");
    push(&reference, registry, auth, all, config).await;
}

/// Pushes a blueprint directory's archive (a gzipped tar, [`tgz`]) as an OCI artifact the way
/// Landscaper's tooling does (its blueprint config and layer media types); returns its reference.
pub async fn push_blueprint(
    registry: &str,
    repository: &str,
    tag: &str,
    archive: Vec<u8>,
) -> String {
    let layer = ImageLayer::new(archive, BLUEPRINT_LAYER.into(), None);
    let config = Config::new(b"{}".to_vec(), BLUEPRINT_CONFIG.into(), None);
    let reference = format!("{registry}/{repository}:{tag}");
    push(&reference, registry, None, vec![layer], config).await;
    reference
}

/// Pushes a Helm chart archive as `helm push` lays it out; returns its reference.
pub async fn push_chart(registry: &str, repository: &str, tag: &str, archive: Vec<u8>) -> String {
    push_chart_as(registry, None, repository, tag, archive).await
}

/// [`push_chart`] to a registry that wants `auth` (user, password).
pub async fn push_chart_as(
    registry: &str,
    auth: Option<(&str, &str)>,
    repository: &str,
    tag: &str,
    archive: Vec<u8>,
) -> String {
    let layer = ImageLayer::new(archive, HELM_CHART_LAYER.into(), None);
    let config = Config::new(
        serde_json::to_vec(
            &json!({"name": repository.rsplit('/').next(), "version": tag,
                                   "apiVersion": "v2"}),
        )
        .unwrap(),
        HELM_CONFIG.into(),
        None,
    );
    let reference = format!("{registry}/{repository}:{tag}");
    push(&reference, registry, auth, vec![layer], config).await;
    reference
}

async fn push(
    reference: &str,
    registry: &str,
    auth: Option<(&str, &str)>,
    layers: Vec<ImageLayer>,
    config: Config,
) {
    let r = parse(reference).unwrap();
    let (client, auth) = client_for(&r, &options(registry, auth));
    let manifest = OciImageManifest::build(&layers, &config, None::<BTreeMap<String, String>>);
    client
        .push(&r, &layers, config, &auth, Some(manifest))
        .await
        .unwrap_or_else(|e| panic!("pushing {reference}: {e}"));
}

/// Landscaper's global resource key (`getResourceKey`) of resource `resource` of
/// `component`:`version`.
pub fn resource_key(component: &str, version: &str, resource: &str) -> String {
    use base64::Engine as _;
    let yaml = format!(
        "component:\n  name: {component}\n  version: {version}\nresource:\n  name: {resource}\n"
    );
    base64::engine::general_purpose::STANDARD.encode(yaml)
}

/// A gzipped tar of `files` (path, content): how blueprints are stored in component versions
/// (`application/vnd.gardener.landscaper.blueprint.v1+tar+gzip`).
pub fn tgz(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::default(),
    ));
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}
