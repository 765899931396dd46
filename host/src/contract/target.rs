//! Resolving a Target's content (contract section 1.4): `spec.config` as JSON text, or the data of
//! the Secret named by `spec.secretRef` (one key, or every key as one JSON object).

use std::collections::BTreeMap;

use crate::landscaper::{ResolvedTarget, Target};

/// Resolves `target`. `secret_data` is the decoded `data` of the Secret named by
/// `spec.secretRef` (the caller reads it from the Target's namespace).
pub fn resolve(
    target: &Target,
    secret_data: Option<&BTreeMap<String, Vec<u8>>>,
) -> Result<ResolvedTarget, String> {
    let name = target.metadata.name.as_deref().unwrap_or_default();
    if target.spec.config.is_some() && target.spec.secret_ref.is_some() {
        return Err(format!(
            "target {name:?}: either config or secretRef may be set, not both"
        ));
    }
    let content = match &target.spec.secret_ref {
        None => match &target.spec.config {
            None => String::new(),
            Some(config) => serde_json::to_string(config).map_err(|e| e.to_string())?,
        },
        Some(secret_ref) => {
            let data = secret_data.ok_or_else(|| {
                format!("target {name:?}: secret {:?} not found", secret_ref.name)
            })?;
            match secret_ref.key.as_deref().filter(|k| !k.is_empty()) {
                Some(key) => {
                    let bytes = data.get(key).ok_or_else(|| {
                        format!("key {key:?} in secret {:?} does not exist", secret_ref.name)
                    })?;
                    String::from_utf8(bytes.clone()).map_err(|_| {
                        format!("key {key:?} in secret {:?} is not UTF-8", secret_ref.name)
                    })?
                }
                None => {
                    let mut all = serde_json::Map::new();
                    for (k, v) in data {
                        let value: serde_json::Value = serde_yaml::from_slice(v).map_err(|e| {
                            format!(
                                "key {k:?} in secret {:?} is not YAML/JSON: {e}",
                                secret_ref.name
                            )
                        })?;
                        all.insert(k.clone(), value);
                    }
                    serde_json::Value::Object(all).to_string()
                }
            }
        }
    };
    let mut target = target.clone();
    // Plugins get the Target without its managed fields (see `for_plugins`).
    target.metadata.managed_fields = None;
    Ok(ResolvedTarget { target, content })
}

/// Extracts the kubeconfig text from a `kubernetes-cluster` target's content: the `kubeconfig`
/// string, or — the legacy fallback — the whole content when none of the known keys is present.
/// The content is read as JSON, or as a YAML mapping (Landscaper decodes it as YAML): a
/// `secretRef` with `key: kubeconfig` usually resolves to the kubeconfig YAML itself.
pub fn kubeconfig_of(content: &str) -> Option<String> {
    let value: serde_json::Value = match serde_json::from_str(content) {
        Ok(v) => v,
        Err(_) => serde_yaml::from_str::<serde_json::Value>(content)
            .ok()
            .filter(serde_json::Value::is_object)?,
    };
    match value.get("kubeconfig") {
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        // Landscaper v0.99's `kubeconfig: {secretRef: …}` names a Secret, not a kubeconfig.
        Some(reference) if reference.get("secretRef").is_some() => None,
        Some(other) => Some(other.to_string()),
        None if value.get("oidcConfig").is_none() && value.get("selfConfig").is_none() => {
            Some(content.to_string())
        }
        None => None,
    }
}

/// Why a `kubernetes-cluster` Target's content gives no kubeconfig ([`kubeconfig_of`] is `None`),
/// in words a user can act on: a way of reaching the cluster this host does not support, or none.
pub fn no_kubeconfig_reason(target_name: &str, content: &str) -> String {
    if let Some(how) = token_request_config(content) {
        return format!(
            "Target {target_name:?} reaches its cluster by {how} (Landscaper v1.x: a ServiceAccount token the deployer requests); this host supports Targets with a kubeconfig only"
        );
    }
    let by_reference = serde_yaml::from_str::<serde_json::Value>(content)
        .ok()
        .is_some_and(|v| v["kubeconfig"].get("secretRef").is_some());
    if by_reference {
        return format!(
            "Target {target_name:?} names its kubeconfig by `kubeconfig.secretRef` (Landscaper v0.99, deprecated and removed in v0.116), which this host does not read; give the kubeconfig inline (`spec.config.kubeconfig`) or the whole content by the Target's `spec.secretRef`"
        );
    }
    format!("Target {target_name:?} has no kubeconfig")
}

/// Which Landscaper v1.x way of reaching a cluster without a kubeconfig the content uses, if any:
/// `oidcConfig` or `selfConfig` (the deployer requests a ServiceAccount token for it), which this
/// host does not support.
pub fn token_request_config(content: &str) -> Option<&'static str> {
    let value: serde_json::Value = serde_yaml::from_str(content).ok()?;
    ["oidcConfig", "selfConfig"]
        .into_iter()
        .find(|key| value.get(key).is_some())
}

/// Validates a resolved target before any reconcile or delete: a kubeconfig in it must not
/// use credential files, impersonation, auth providers or exec plugins (contract section 1.4).
pub fn validate(resolved: &ResolvedTarget) -> Result<(), String> {
    let Some(kubeconfig) = kubeconfig_of(&resolved.content) else {
        return Ok(());
    };
    let verdicts = || {
        VERDICTS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    if let Some(verdict) = verdicts().get(&kubeconfig) {
        return verdict.clone();
    }
    let verdict = validate_kubeconfig(&kubeconfig);
    let mut known = verdicts();
    if known.len() >= KNOWN_VERDICTS {
        known.clear();
    }
    known.insert(kubeconfig, verdict.clone());
    verdict
}

/// Kubeconfig texts validated before, with their verdicts: every job of an item validates the
/// same text, and parsing its YAML each time was a visible share of a job's CPU.
static VERDICTS: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<String, Result<(), String>>>,
> = std::sync::LazyLock::new(Default::default);

/// At most this many texts are remembered (a kubeconfig is a few KiB).
const KNOWN_VERDICTS: usize = 256;

fn validate_kubeconfig(kubeconfig: &str) -> Result<(), String> {
    let Ok(doc) = serde_yaml::from_str::<serde_yaml::Value>(kubeconfig) else {
        // Not a kubeconfig document (e.g. another target type): nothing to check here.
        return Ok(());
    };
    let users = doc
        .get("users")
        .and_then(|u| u.as_sequence())
        .cloned()
        .unwrap_or_default();
    for user in users {
        let name = user
            .get("name")
            .and_then(|n| n.as_str())
            .unwrap_or("")
            .to_string();
        let Some(auth) = user.get("user").and_then(|u| u.as_mapping()) else {
            continue;
        };
        for (key, value) in auth {
            let key = key.as_str().unwrap_or_default();
            let forbidden = match key {
                "client-certificate" | "client-key" | "tokenFile" | "as" | "as-groups"
                | "as-uid" | "as-user-extra" | "exec" => true,
                "auth-provider" => value
                    .get("config")
                    .and_then(|c| c.as_mapping())
                    .is_some_and(|c| !c.is_empty()),
                _ => false,
            };
            if forbidden {
                return Err(format!(
                    "kubeconfig user {name:?} uses {key:?}, which is not allowed; allowed credential fields are client-certificate-data, client-key-data, token, username, password"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::landscaper::LocalSecretReference;

    #[test]
    fn oidc_and_self_config_targets_are_named() {
        let oidc = r#"{"oidcConfig": {"server": "https://x", "caData": "", "serviceAccount": {"name": "sa"}, "audience": ["a"]}}"#;
        assert_eq!(kubeconfig_of(oidc), None);
        assert_eq!(token_request_config(oidc), Some("oidcConfig"));
        let own = "selfConfig:\n  serviceAccount: {name: sa}\n  expirationSeconds: 3600\n";
        assert_eq!(token_request_config(own), Some("selfConfig"));
        assert_eq!(
            token_request_config(r#"{"kubeconfig": "apiVersion: v1"}"#),
            None
        );
    }

    fn target(config: Option<serde_json::Value>, secret: Option<(&str, Option<&str>)>) -> Target {
        let mut t = Target::default();
        t.metadata.name = Some("t".into());
        t.spec.config = config;
        t.spec.secret_ref = secret.map(|(n, k)| LocalSecretReference {
            name: n.into(),
            key: k.map(Into::into),
        });
        t
    }

    #[test]
    fn inline_config_is_the_content() {
        let r = resolve(
            &target(Some(serde_json::json!({"kubeconfig": "abc"})), None),
            None,
        )
        .unwrap();
        assert_eq!(r.content, r#"{"kubeconfig":"abc"}"#);
        assert_eq!(kubeconfig_of(&r.content).as_deref(), Some("abc"));
        assert_eq!(resolve(&target(None, None), None).unwrap().content, "");
    }

    #[test]
    fn secret_ref_with_key_takes_that_key() {
        let data: BTreeMap<_, _> = [("kubeconfig".to_string(), b"apiVersion: v1".to_vec())].into();
        let r = resolve(&target(None, Some(("s", Some("kubeconfig")))), Some(&data)).unwrap();
        assert_eq!(r.content, "apiVersion: v1");
        let err = resolve(&target(None, Some(("s", Some("other")))), Some(&data)).unwrap_err();
        assert!(err.contains("does not exist"), "{err}");
    }

    #[test]
    fn a_kubeconfig_yaml_content_is_the_kubeconfig() {
        let yaml = "apiVersion: v1\nkind: Config\nclusters: []\n";
        assert_eq!(kubeconfig_of(yaml).as_deref(), Some(yaml));
        let wrapped = "kubeconfig: |\n  apiVersion: v1\n";
        assert_eq!(kubeconfig_of(wrapped).as_deref(), Some("apiVersion: v1\n"));
        assert_eq!(kubeconfig_of("not a mapping"), None);
        assert_eq!(kubeconfig_of(""), None);
    }

    #[test]
    fn secret_ref_without_key_takes_all_keys_as_json() {
        let data: BTreeMap<_, _> = [
            ("kubeconfig".to_string(), b"abc".to_vec()),
            ("n".to_string(), b"5".to_vec()),
        ]
        .into();
        let r = resolve(&target(None, Some(("s", None))), Some(&data)).unwrap();
        assert_eq!(r.content, r#"{"kubeconfig":"abc","n":5}"#);
    }

    #[test]
    fn kubeconfigs_with_files_or_exec_are_rejected() {
        let with = |user: &str| {
            ResolvedTarget {
            target: Target::default(),
            content: serde_json::json!({
                "kubeconfig": format!("apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    {user}\n")
            })
            .to_string(),
        }
        };
        assert!(validate(&with("token: abc")).is_ok());
        let err = validate(&with("tokenFile: /etc/token")).unwrap_err();
        assert!(err.contains("tokenFile"), "{err}");
        assert!(validate(&with("exec: {command: aws}")).is_err());
        assert!(validate(&with("client-key: /k")).is_err());
        // A remembered verdict is the same verdict, a rejection included.
        let again = validate(&with("tokenFile: /etc/token")).unwrap_err();
        assert_eq!(again, err);
        assert!(validate(&with("token: abc")).is_ok());
    }

    #[test]
    fn a_v0_99_kubeconfig_secret_ref_is_no_kubeconfig_and_says_so() {
        let content = r#"{"kubeconfig":{"secretRef":{"name":"access","namespace":"default","key":"kubeconfig"}}}"#;
        assert_eq!(kubeconfig_of(content), None);
        let why = no_kubeconfig_reason("legacy", content);
        assert!(
            why.contains("kubeconfig.secretRef") && why.contains("v0.99"),
            "{why}"
        );
        assert_eq!(
            no_kubeconfig_reason("empty", "{}"),
            "Target \"empty\" has no kubeconfig"
        );
    }

    #[test]
    fn config_and_secret_ref_together_are_rejected() {
        let err = resolve(
            &target(Some(serde_json::json!({})), Some(("s", None))),
            None,
        )
        .unwrap_err();
        assert!(err.contains("not both"));
    }
}
