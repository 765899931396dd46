//! What the DeployItem watch holds and hands to a reconcile: [`ItemMeta`] (metadata only, the
//! default) or the full item (`itemCache: full`), both seen as [`Watched`].
//!
//! Owns: these types. Must not touch: the watch itself (`mod.rs` runs it).

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;

use crate::landscaper::DeployItem;

/// What the watch delivered of one item: always its metadata; the item itself with
/// `itemCache: full`.
#[derive(Clone, Copy)]
pub(crate) struct Watched<'a> {
    pub meta: &'a ObjectMeta,
    pub item: Option<&'a DeployItem>,
}

/// A DeployItem as the watch holds it.
pub(super) trait WatchedItem:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    fn watched(&self) -> Watched<'_>;
}

/// A DeployItem as the default watch reads it: `PartialObjectMeta<DeployItem>` (the server sends
/// metadata only), but read without managedFields like every model type
/// ([`landscaper_model::meta`]).
#[derive(Clone, Debug, serde::Deserialize)]
pub(crate) struct ItemMeta {
    #[serde(
        default,
        deserialize_with = "landscaper_model::meta::without_managed_fields"
    )]
    metadata: ObjectMeta,
}

impl Resource for ItemMeta {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    /// Lists and watches ask for `PartialObjectMetadata[List]`.
    fn metadata_api() -> bool {
        true
    }
    fn kind(_: &()) -> Cow<'_, str> {
        DeployItem::kind(&())
    }
    fn group(_: &()) -> Cow<'_, str> {
        DeployItem::group(&())
    }
    fn version(_: &()) -> Cow<'_, str> {
        DeployItem::version(&())
    }
    fn plural(_: &()) -> Cow<'_, str> {
        DeployItem::plural(&())
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl WatchedItem for ItemMeta {
    fn watched(&self) -> Watched<'_> {
        Watched {
            meta: &self.metadata,
            item: None,
        }
    }
}

impl WatchedItem for DeployItem {
    fn watched(&self) -> Watched<'_> {
        Watched {
            meta: &self.metadata,
            item: Some(self),
        }
    }
}
