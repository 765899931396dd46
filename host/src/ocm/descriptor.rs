//! Component descriptors, schema v2 (`meta.schemaVersion: v2`, Landscaper's and the OCM CLI's
//! default) and v3 (`apiVersion: ocm.software/v3alpha1`, `kind: ComponentVersion`), read into one
//! model: the component's name and version, its resources with their identities and accesses,
//! and its component references.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::access::Access;
use super::error::DescriptorError;

/// A component version as its descriptor describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct ComponentDescriptor {
    /// `v2` or `ocm.software/v3alpha1`.
    pub schema: String,
    pub name: String,
    pub version: String,
    pub resources: Vec<Resource>,
    pub references: Vec<Reference>,
    /// The descriptor as read (JSON), for consumers that need all of it.
    pub raw: Value,
}

/// A resource of a component version.
#[derive(Clone, Debug, PartialEq)]
pub struct Resource {
    pub name: String,
    pub version: String,
    pub r#type: String,
    pub extra_identity: BTreeMap<String, String>,
    /// `access.type` without its version suffix (`localBlob`, `ociRegistry`, …).
    pub access_type: String,
    /// How to read the content.
    pub access: Access,
}

/// A reference to another component version.
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    pub name: String,
    pub component_name: String,
    pub version: String,
}

impl Resource {
    /// The access type (`localBlob`, `ociArtifact`, …) with its version suffix (`/v1`) removed.
    pub fn access_type(&self) -> &str {
        &self.access_type
    }

    /// The resource's identity among `all` (OCM's `GetIdentity`): its name and extra identity,
    /// plus its version if another resource has the same name and extra identity.
    pub fn identity(&self, all: &[Resource]) -> BTreeMap<String, String> {
        let mut id = self.extra_identity.clone();
        id.insert("name".into(), self.name.clone());
        let ambiguous = all.iter().any(|o| {
            !std::ptr::eq(o, self) && o.name == self.name && o.extra_identity == self.extra_identity
        });
        if ambiguous && !self.version.is_empty() {
            id.insert("version".into(), self.version.clone());
        }
        id
    }
}

impl ComponentDescriptor {
    /// Reads a descriptor (YAML or JSON), v2 or v3.
    pub fn parse(text: &[u8]) -> Result<Self, DescriptorError> {
        let raw: Value = serde_yaml::from_slice(text).map_err(DescriptorError::NotYaml)?;
        if raw["meta"]["schemaVersion"].as_str() == Some("v2") {
            Self::v2(raw)
        } else if let Some(api) = raw["apiVersion"].as_str().map(str::to_string)
            && api.starts_with("ocm.software/v3")
        {
            Self::v3(raw, api)
        } else {
            Err(DescriptorError::UnknownSchema {
                schema_version: raw["meta"]["schemaVersion"].clone(),
                api_version: raw["apiVersion"].clone(),
            })
        }
    }

    fn v2(raw: Value) -> Result<Self, DescriptorError> {
        let c: V2Component =
            serde_json::from_value(raw["component"].clone()).map_err(DescriptorError::V2)?;
        Ok(ComponentDescriptor {
            schema: "v2".into(),
            name: c.name,
            version: c.version,
            resources: c.resources.into_iter().map(Into::into).collect(),
            references: c.component_references.into_iter().map(Into::into).collect(),
            raw,
        })
    }

    fn v3(raw: Value, api: String) -> Result<Self, DescriptorError> {
        let part = |part: &'static str| {
            let api = api.clone();
            move |source| DescriptorError::V3 { api, part, source }
        };
        let m: V3Meta =
            serde_json::from_value(raw["metadata"].clone()).map_err(part("metadata"))?;
        let s: V3Spec = serde_json::from_value(raw["spec"].clone()).map_err(part("spec"))?;
        Ok(ComponentDescriptor {
            schema: api,
            name: m.name,
            version: m.version,
            resources: s.resources.into_iter().map(Into::into).collect(),
            references: s.references.into_iter().map(Into::into).collect(),
            raw,
        })
    }

    /// The resource whose identity is `wanted` (a `version` in `wanted` that the resource's
    /// identity lacks must still equal the resource's version).
    pub fn resource(&self, wanted: &BTreeMap<String, String>) -> Option<&Resource> {
        self.resources.iter().find(|r| {
            let mut id = r.identity(&self.resources);
            if !id.contains_key("version")
                && let Some(v) = wanted.get("version")
                && *v == r.version
            {
                id.insert("version".into(), v.clone());
            }
            id == *wanted
        })
    }

    /// `name=…` of every resource, for messages.
    pub fn resource_identities(&self) -> Vec<String> {
        self.resources
            .iter()
            .map(|r| super::key::describe(&r.identity(&self.resources)))
            .collect()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct V2Component {
    name: String,
    version: String,
    #[serde(default)]
    resources: Vec<RawResource>,
    #[serde(default)]
    component_references: Vec<RawReference>,
}

#[derive(Deserialize)]
struct V3Meta {
    name: String,
    version: String,
}

#[derive(Deserialize)]
struct V3Spec {
    #[serde(default)]
    resources: Vec<RawResource>,
    #[serde(default)]
    references: Vec<RawReference>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawResource {
    name: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    r#type: String,
    #[serde(default)]
    extra_identity: Option<BTreeMap<String, String>>,
    #[serde(default)]
    access: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawReference {
    name: String,
    component_name: String,
    version: String,
}

impl From<RawReference> for Reference {
    fn from(r: RawReference) -> Self {
        Reference {
            name: r.name,
            component_name: r.component_name,
            version: r.version,
        }
    }
}

impl From<RawResource> for Resource {
    fn from(r: RawResource) -> Self {
        Resource {
            name: r.name,
            version: r.version,
            r#type: r.r#type,
            extra_identity: r.extra_identity.unwrap_or_default(),
            access_type: {
                let t = r.access["type"].as_str().unwrap_or_default();
                t.split('/').next().unwrap_or(t).to_string()
            },
            access: Access::of(&r.access),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V2: &str = r#"
meta: {schemaVersion: v2}
component:
  name: example.com/app
  version: 1.0.0
  provider: acme
  repositoryContexts: [{type: ociRegistry, baseUrl: "127.0.0.1:5000/ocm"}]
  sources: []
  componentReferences:
  - {name: db, componentName: example.com/db, version: 2.0.0}
  resources:
  - name: chart
    version: 1.0.0
    type: helmChart
    relation: local
    access: {type: localBlob, localReference: "sha256:aa", mediaType: application/vnd.cncf.helm.chart.content.v1.tar+gzip}
  - name: image
    version: 1.0.0
    type: ociImage
    extraIdentity: {os: linux}
    relation: external
    access: {type: ociRegistry, imageReference: "127.0.0.1:5000/img:1"}
  - name: image
    version: 1.0.0
    type: ociImage
    extraIdentity: {os: windows}
    relation: external
    access: {type: ociArtifact/v1, imageReference: "127.0.0.1:5000/img:1-win"}
"#;

    const V3: &str = r#"
apiVersion: ocm.software/v3alpha1
kind: ComponentVersion
metadata: {name: example.com/app, version: 1.0.0, provider: {name: acme}}
repositoryContexts: []
spec:
  references: [{name: db, componentName: example.com/db, version: 2.0.0}]
  resources:
  - {name: chart, version: 1.0.0, type: helmChart, relation: local, access: {type: localBlob, localReference: "sha256:aa", mediaType: application/tar+gzip}}
  - {name: chart, version: 2.0.0, type: helmChart, relation: local, access: {type: localBlob, localReference: "sha256:bb", mediaType: application/tar+gzip}}
"#;

    fn id(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn v2_descriptors_are_read_with_identities_and_accesses() {
        let cd = ComponentDescriptor::parse(V2.as_bytes()).unwrap();
        assert_eq!(
            (cd.name.as_str(), cd.version.as_str()),
            ("example.com/app", "1.0.0")
        );
        assert_eq!(cd.references[0].component_name, "example.com/db");
        let chart = cd.resource(&id(&[("name", "chart")])).unwrap();
        assert_eq!(chart.access_type(), "localBlob");
        let linux = cd
            .resource(&id(&[("name", "image"), ("os", "linux")]))
            .unwrap();
        assert_eq!(linux.access_type(), "ociRegistry");
        let windows = cd
            .resource(&id(&[("name", "image"), ("os", "windows")]))
            .unwrap();
        assert_eq!(windows.access_type(), "ociArtifact");
        assert!(
            cd.resource(&id(&[("name", "image")])).is_none(),
            "extra identity counts"
        );
        assert!(
            cd.resource(&id(&[("name", "chart"), ("version", "1.0.0")]))
                .is_some()
        );
        assert!(
            cd.resource(&id(&[("name", "chart"), ("version", "9")]))
                .is_none()
        );
        assert_eq!(
            cd.resource_identities(),
            ["name=chart", "name=image,os=linux", "name=image,os=windows"]
        );
    }

    #[test]
    fn v3_descriptors_are_read_and_a_version_tells_same_named_resources_apart() {
        let cd = ComponentDescriptor::parse(V3.as_bytes()).unwrap();
        assert_eq!(cd.schema, "ocm.software/v3alpha1");
        assert_eq!(cd.references[0].name, "db");
        let two = cd
            .resource(&id(&[("name", "chart"), ("version", "2.0.0")]))
            .unwrap();
        let Access::LocalBlob(blob) = &two.access else {
            panic!("{:?}", two.access)
        };
        assert_eq!(blob.digest(), "sha256:bb");
        assert!(
            cd.resource(&id(&[("name", "chart")])).is_none(),
            "ambiguous"
        );
        // JSON descriptors too.
        let json = serde_json::to_vec(&cd.raw).unwrap();
        assert_eq!(ComponentDescriptor::parse(&json).unwrap(), cd);
    }

    #[test]
    fn unknown_schemas_are_named() {
        let e = ComponentDescriptor::parse(b"meta: {schemaVersion: v1}\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown component descriptor schema (meta.schemaVersion String(\"v1\"), apiVersion Null): v2 and ocm.software/v3alpha1 are supported"
        );
    }
}
