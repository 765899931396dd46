//! Responsibility check 1: is an item of our type, and which Target does it name?
//!
//! Decided from the annotations `landscaper.gardener.cloud/deployer-type` and
//! `landscaper.gardener.cloud/deployer-target-name` when present (metadata only, no extra read),
//! otherwise from the full item's `spec.type` / `spec.target.name` (contract section 3.2).
//! Check 2 (target selectors) is in [`crate::targetselector`].

use std::collections::BTreeMap;

use crate::landscaper::{DeployItem, annotations};

/// The type of an item and the Target it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ItemRoute {
    pub deploy_item_type: String,
    /// `None` = the item has no target (`.noTargetName`).
    pub target_name: Option<String>,
}

/// Reads the route from annotations. `None` if `deployer-type` is absent: then the full item
/// must be read ([`route_from_item`]).
pub fn route_from_annotations(annotations: Option<&BTreeMap<String, String>>) -> Option<ItemRoute> {
    let annotations = annotations?;
    let deploy_item_type = annotations.get(annotations::DEPLOYER_TYPE)?.clone();
    let target_name = annotations
        .get(annotations::DEPLOYER_TARGET_NAME)
        .filter(|n| !n.is_empty() && n.as_str() != annotations::NO_TARGET_NAME)
        .cloned();
    Some(ItemRoute {
        deploy_item_type,
        target_name,
    })
}

/// The compatibility path: route from `spec.type` and `spec.target.name`.
pub fn route_from_item(item: &DeployItem) -> ItemRoute {
    ItemRoute {
        deploy_item_type: item.spec.type_.clone(),
        target_name: item.spec_target_name().map(str::to_string),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::landscaper::ObjectReference;

    #[test]
    fn annotations_decide_without_reading_the_item() {
        let a: BTreeMap<_, _> = [
            (
                annotations::DEPLOYER_TYPE.to_string(),
                "landscaper.gardener.cloud/mock".to_string(),
            ),
            (
                annotations::DEPLOYER_TARGET_NAME.to_string(),
                "t".to_string(),
            ),
        ]
        .into();
        let r = route_from_annotations(Some(&a)).unwrap();
        assert_eq!(r.deploy_item_type, "landscaper.gardener.cloud/mock");
        assert_eq!(r.target_name.as_deref(), Some("t"));
    }

    #[test]
    fn no_target_sentinel_means_no_target() {
        let a: BTreeMap<_, _> = [
            (annotations::DEPLOYER_TYPE.to_string(), "x".to_string()),
            (
                annotations::DEPLOYER_TARGET_NAME.to_string(),
                ".noTargetName".to_string(),
            ),
        ]
        .into();
        assert_eq!(route_from_annotations(Some(&a)).unwrap().target_name, None);
    }

    #[test]
    fn missing_type_annotation_falls_back_to_the_spec() {
        assert_eq!(route_from_annotations(None), None);
        assert_eq!(route_from_annotations(Some(&BTreeMap::new())), None);
        let mut di = DeployItem::default();
        di.spec.type_ = "x".into();
        assert_eq!(route_from_item(&di).target_name, None);
        di.spec.target = Some(ObjectReference {
            name: "t".into(),
            namespace: None,
        });
        assert_eq!(route_from_item(&di).target_name.as_deref(), Some("t"));
    }
}
