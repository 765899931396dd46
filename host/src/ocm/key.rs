//! Landscaper's global resource key: what the blueprint template function `getResourceKey`
//! returns and the helm deployer's `chart.resourceRef` holds — base64 (standard encoding) of
//! the YAML `model.GlobalResourceIdentity`:
//!
//! ```yaml
//! component: {name: example.com/app, version: 1.0.0}
//! resource: {name: chart}          # the resource's identity: name + extraIdentity (+ version)
//! ```

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::error::KeyError;

/// `model.GlobalResourceIdentity`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GlobalResourceIdentity {
    pub component: ComponentIdentity,
    pub resource: BTreeMap<String, String>,
}

/// `model.ComponentIdentity`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentIdentity {
    pub name: String,
    pub version: String,
}

impl GlobalResourceIdentity {
    /// A key for resource `name` of `component`:`version` (no extra identity).
    pub fn new(component: &str, version: &str, name: &str) -> Self {
        GlobalResourceIdentity {
            component: ComponentIdentity {
                name: component.into(),
                version: version.into(),
            },
            resource: BTreeMap::from([("name".to_string(), name.to_string())]),
        }
    }

    /// Decodes a key; the error says what is wrong with it.
    pub fn decode(key: &str) -> Result<Self, KeyError> {
        let compact: String = key.split_whitespace().collect();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(compact.as_bytes())
            .map_err(KeyError::NotBase64)?;
        let id: GlobalResourceIdentity =
            serde_yaml::from_slice(&bytes).map_err(|source| KeyError::NotAnIdentity {
                text: String::from_utf8_lossy(&bytes).into_owned(),
                source,
            })?;
        if id.component.name.is_empty() || id.component.version.is_empty() {
            return Err(KeyError::NoComponent);
        }
        if id.resource.get("name").is_none_or(|n| n.is_empty()) {
            return Err(KeyError::NoResource);
        }
        Ok(id)
    }

    /// The key, as `getResourceKey` encodes it (YAML, base64).
    pub fn encode(&self) -> String {
        let yaml = serde_yaml::to_string(self).expect("an identity serialises");
        base64::engine::general_purpose::STANDARD.encode(yaml)
    }

    /// `name=chart,…` for messages.
    pub fn describe_resource(&self) -> String {
        describe(&self.resource)
    }
}

/// `k=v,…` of an identity, `name` first.
pub fn describe(identity: &BTreeMap<String, String>) -> String {
    let mut parts: Vec<String> = identity
        .get("name")
        .map(|n| format!("name={n}"))
        .into_iter()
        .collect();
    parts.extend(
        identity
            .iter()
            .filter(|(k, _)| *k != "name")
            .map(|(k, v)| format!("{k}={v}")),
    );
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_decode_what_landscaper_encodes() {
        let id = GlobalResourceIdentity::new("example.com/app", "1.0.0", "chart");
        assert_eq!(GlobalResourceIdentity::decode(&id.encode()).unwrap(), id);
        // What Landscaper's getResourceKey returns (runtime.DefaultYAMLEncoding of the struct).
        let landscaper = base64::engine::general_purpose::STANDARD.encode(
            "component:\n  name: example.com/app\n  version: 1.0.0\nresource:\n  name: chart\n  os: linux\n",
        );
        let id = GlobalResourceIdentity::decode(&landscaper).unwrap();
        assert_eq!(id.component.name, "example.com/app");
        assert_eq!(id.resource["os"], "linux");
        assert_eq!(id.describe_resource(), "name=chart,os=linux");
        // JSON is YAML too.
        let json = base64::engine::general_purpose::STANDARD
            .encode(r#"{"component":{"name":"a","version":"1"},"resource":{"name":"r"}}"#);
        assert!(GlobalResourceIdentity::decode(&json).is_ok());
    }

    #[test]
    fn bad_keys_say_what_is_wrong() {
        let e = GlobalResourceIdentity::decode("not base64!").unwrap_err();
        assert!(matches!(e, KeyError::NotBase64(_)), "{e}");
        assert!(e.to_string().contains("not base64"), "{e}");
        let e = GlobalResourceIdentity::decode("e30=").unwrap_err(); // {}
        assert!(
            e.to_string().contains("not a global resource identity"),
            "{e}"
        );
        let empty = base64::engine::general_purpose::STANDARD
            .encode("component: {name: a, version: '1'}\nresource: {}\n");
        let e = GlobalResourceIdentity::decode(&empty).unwrap_err();
        assert!(matches!(e, KeyError::NoResource), "{e}");
    }
}
