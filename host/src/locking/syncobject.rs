//! The `SyncObject` resource (`landscaper.gardener.cloud/v1alpha1`, contract section 1.6).

use std::borrow::Cow;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, Serialize};

use crate::landscaper::{API_VERSION, GROUP, VERSION};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncObject {
    #[serde(default = "api_version")]
    pub api_version: String,
    #[serde(default = "kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: SyncObjectSpec,
}

fn api_version() -> String {
    API_VERSION.into()
}
fn kind() -> String {
    "SyncObject".into()
}

/// `spec` of a SyncObject; every field is required by the CRD.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncObjectSpec {
    /// The pod holding the lock; empty = unlocked.
    #[serde(default)]
    pub pod_name: String,
    /// Kind of the locked object (`DeployItem`).
    #[serde(default)]
    pub kind: String,
    /// Name of the locked object.
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub last_update_time: String,
    /// Controller identifier.
    #[serde(default)]
    pub prefix: String,
}

impl SyncObject {
    pub fn new(namespace: &str, name: &str, spec: SyncObjectSpec) -> Self {
        Self {
            api_version: api_version(),
            kind: kind(),
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(namespace.into()),
                ..Default::default()
            },
            spec,
        }
    }
}

impl Resource for SyncObject {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("SyncObject")
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(GROUP)
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(VERSION)
    }
    fn api_version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(API_VERSION)
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("syncobjects")
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}
