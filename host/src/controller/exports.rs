//! The export Secret: plugins return export values, the host stores them in a Secret in the
//! item's namespace (data key `config`, owner reference to the item) and points
//! `status.exportRef` at it — what Landscaper reads after the job (contract sections 3.10, 8.2).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::landscaper::{API_VERSION, DeployItem, ObjectReference};

/// Data key of the export Secret.
pub const EXPORT_KEY: &str = "config";

/// Landscaper's mock deployer names its export Secrets `mock-export-<random>`.
const MOCK_TYPE: &str = "landscaper.gardener.cloud/mock";

/// Creates or updates the export Secret of `item` and returns the reference for
/// `status.exportRef`.
pub async fn write(
    client: &Client,
    item: &DeployItem,
    values: &Value,
) -> Result<ObjectReference, kube::Error> {
    let item_namespace = item.metadata.namespace.clone().unwrap_or_default();
    let existing = item.status.as_ref().and_then(|s| s.export_ref.clone());
    let namespace = existing
        .as_ref()
        .and_then(|r| r.namespace.clone())
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| item_namespace.clone());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let bytes = serde_json::to_vec(values).map_err(kube::Error::SerdeError)?;
    let data = BTreeMap::from([(EXPORT_KEY.to_string(), ByteString(bytes))]);

    if let Some(r) = &existing
        && secrets.get_opt(&r.name).await?.is_some()
    {
        let patch = json!({ "data": { EXPORT_KEY: data[EXPORT_KEY] } });
        secrets
            .patch(&r.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        return Ok(ObjectReference {
            name: r.name.clone(),
            namespace: Some(namespace),
        });
    }
    let name = existing
        .map(|r| r.name)
        .unwrap_or_else(|| export_name(item));
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            owner_references: Some(vec![OwnerReference {
                api_version: API_VERSION.into(),
                kind: "DeployItem".into(),
                name: item.metadata.name.clone().unwrap_or_default(),
                uid: item.metadata.uid.clone().unwrap_or_default(),
                ..Default::default()
            }]),
            ..Default::default()
        },
        data: Some(data.clone()),
        ..Default::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => {}
        // An earlier attempt of this job created it, but its exportRef was never saved (e.g. a
        // status write conflict): the name is stable per item, so take it over — if it is ours,
        // or left behind by an earlier item of the same name (deleted without uninstall, or not
        // yet collected), as Landscaper's deployers overwrite `<item>-export`. Anything else
        // with that name is not ours to touch.
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let found = secrets.get(&name).await?;
            let owners = found.metadata.owner_references.unwrap_or_default();
            if !takes_over(&owners, item) {
                return Err(kube::Error::Api(s));
            }
            let patch = json!({
                "metadata": { "ownerReferences": secret.metadata.owner_references },
                "data": { EXPORT_KEY: data[EXPORT_KEY] },
            });
            secrets
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        Err(e) => return Err(e),
    }
    Ok(ObjectReference {
        name,
        namespace: Some(namespace),
    })
}

/// Whether an existing export Secret with `owners` may be written for `item`: it is owned by
/// this item, or only by DeployItems of this item's name (earlier incarnations of it).
fn takes_over(owners: &[OwnerReference], item: &DeployItem) -> bool {
    let uid = item.metadata.uid.as_deref().unwrap_or_default();
    let name = item.metadata.name.as_deref().unwrap_or_default();
    owners.iter().any(|o| o.uid == uid)
        || (!owners.is_empty()
            && owners
                .iter()
                .all(|o| o.kind == "DeployItem" && o.name == name && o.api_version == API_VERSION))
}

/// Deletes the export Secret named by `status.exportRef`, if any.
pub async fn delete(client: &Client, item: &DeployItem) -> Result<(), kube::Error> {
    let Some(r) = item.status.as_ref().and_then(|s| s.export_ref.clone()) else {
        return Ok(());
    };
    let namespace = r
        .namespace
        .filter(|ns| !ns.is_empty())
        .or_else(|| item.metadata.namespace.clone())
        .unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    match secrets.delete(&r.name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// `mock` for `landscaper.gardener.cloud/mock`, as Landscaper's `mock-export-` names.
fn export_prefix(item: &DeployItem) -> String {
    let last = item.spec.type_.rsplit('/').next().unwrap_or("deployer");
    let cleaned: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let trimmed = cleaned.trim_matches('-');
    if trimmed.is_empty() {
        "deployer".into()
    } else {
        trimmed.chars().take(40).collect()
    }
}

/// The export Secret's name, as Landscaper's Go deployers name it: `<item name>-export` (its
/// deployer library, used by the manifest, helm and container deployers), and for mock items
/// `mock-export-<5 characters>` (its mock deployer's `generateName: mock-export-`). Both are
/// stable per item, so every attempt of every job names the same Secret and a retry never leaves
/// a second one behind. An item name too long for the suffix falls back to the hashed form.
fn export_name(item: &DeployItem) -> String {
    const MAX_NAME: usize = 253;
    let name = item.metadata.name.as_deref().unwrap_or_default();
    let hashed = item.spec.type_ == MOCK_TYPE || name.is_empty();
    if !hashed && name.len() + "-export".len() <= MAX_NAME {
        return format!("{name}-export");
    }
    hashed_export_name(item)
}

/// `<type suffix>-export-<5 characters>`, derived from the item's UID.
fn hashed_export_name(item: &DeployItem) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let uid = item.metadata.uid.as_deref().unwrap_or_default();
    // FNV-1a over the UID: stable across versions of the host, no extra dependency.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in uid.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let suffix: String = (0..5)
        .map(|i| ALPHABET[((h >> (i * 12)) % ALPHABET.len() as u64) as usize] as char)
        .collect();
    format!("{}-export-{suffix}", export_prefix(item))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_comes_from_the_type() {
        let mut di = DeployItem::default();
        di.spec.type_ = "landscaper.gardener.cloud/mock".into();
        assert_eq!(export_prefix(&di), "mock");
        di.spec.type_ = "landscaper.gardener.cloud/kubernetes-manifest".into();
        assert_eq!(export_prefix(&di), "kubernetes-manifest");
    }

    #[test]
    fn the_export_name_is_stable_per_item() {
        let mut di = DeployItem::default();
        di.spec.type_ = "landscaper.gardener.cloud/mock".into();
        di.metadata.uid = Some("3f2a0c4e-0000-4000-8000-000000000001".into());
        let name = export_name(&di);
        assert!(name.starts_with("mock-export-") && name.len() == "mock-export-".len() + 5);
        assert_eq!(
            export_name(&di),
            name,
            "every attempt names the same Secret"
        );
        di.metadata.uid = Some("3f2a0c4e-0000-4000-8000-000000000002".into());
        assert_ne!(export_name(&di), name, "another item, another Secret");
    }

    #[test]
    fn an_export_secret_left_by_an_earlier_item_of_the_same_name_is_taken_over_and_no_other() {
        let mut di = DeployItem::default();
        di.metadata.name = Some("web".into());
        di.metadata.uid = Some("new".into());
        let owner = |name: &str, uid: &str| OwnerReference {
            api_version: API_VERSION.into(),
            kind: "DeployItem".into(),
            name: name.into(),
            uid: uid.into(),
            ..Default::default()
        };
        assert!(takes_over(&[owner("web", "new")], &di), "ours");
        assert!(takes_over(&[owner("web", "old")], &di), "an earlier `web`");
        assert!(!takes_over(&[owner("other", "x")], &di), "another item's");
        assert!(!takes_over(&[], &di), "a Secret nobody owns");
        let mut foreign = owner("web", "x");
        foreign.kind = "ConfigMap".into();
        assert!(!takes_over(&[foreign], &di), "owned by something else");
    }

    #[test]
    fn other_items_export_into_their_name_with_export_as_landscapers_deployer_library_does() {
        let mut di = DeployItem::default();
        di.spec.type_ = "landscaper.gardener.cloud/helm".into();
        di.metadata.name = Some("configmap-deployment".into());
        di.metadata.uid = Some("3f2a0c4e-0000-4000-8000-000000000001".into());
        assert_eq!(export_name(&di), "configmap-deployment-export");
        // a name with no room for the suffix falls back to the hashed form
        di.metadata.name = Some("n".repeat(250));
        assert!(export_name(&di).starts_with("helm-export-"));
    }
}
