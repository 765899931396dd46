//! Target selectors: which Targets this host instance is responsible for.
//!
//! Exactly Landscaper's semantics (contract section 3.3): selectors are OR-ed; inside one selector
//! `targets`, `annotations` and `labels` are AND-ed and an empty part is ignored; requirements use
//! Kubernetes label-selector operators and are validated like Kubernetes validates them (an invalid
//! requirement is an error, never a silent non-match). Pure functions, no I/O.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::landscaper::{ObjectReference, Target};

/// One `TargetSelector` of the host configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TargetSelector {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<ObjectReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub annotations: Vec<Requirement>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<Requirement>,
}

/// A Kubernetes selector requirement: `key`, `operator`, `values`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Requirement {
    pub key: String,
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// An invalid selector requirement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid target selector requirement {key:?}: {message}")]
pub struct SelectorError {
    pub key: String,
    pub message: String,
}

/// True if `target` matches at least one selector (`MatchOne`). An empty list matches everything.
pub fn matches_any(selectors: &[TargetSelector], target: &Target) -> Result<bool, SelectorError> {
    if selectors.is_empty() {
        return Ok(true);
    }
    for selector in selectors {
        if matches(selector, target)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// True if every configured part of `selector` matches `target`.
pub fn matches(selector: &TargetSelector, target: &Target) -> Result<bool, SelectorError> {
    if !selector.targets.is_empty() {
        let name = target.metadata.name.as_deref().unwrap_or_default();
        let namespace = target.metadata.namespace.as_deref().unwrap_or_default();
        let hit = selector.targets.iter().any(|r| {
            r.name == name
                && r.namespace
                    .as_deref()
                    .is_none_or(|ns| ns.is_empty() || ns == namespace)
        });
        if !hit {
            return Ok(false);
        }
    }
    let empty = BTreeMap::new();
    if !selector.annotations.is_empty() {
        let annotations = target.metadata.annotations.as_ref().unwrap_or(&empty);
        for r in &selector.annotations {
            if !requirement_matches(r, annotations)? {
                return Ok(false);
            }
        }
    }
    if !selector.labels.is_empty() {
        let labels = target.metadata.labels.as_ref().unwrap_or(&empty);
        for r in &selector.labels {
            if !requirement_matches(r, labels)? {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// Validates every requirement of every selector (used when the configuration is loaded).
pub fn validate(selectors: &[TargetSelector]) -> Result<(), SelectorError> {
    let empty = BTreeMap::new();
    for s in selectors {
        for r in s.annotations.iter().chain(&s.labels) {
            requirement_matches(r, &empty)?;
        }
    }
    Ok(())
}

fn requirement_matches(
    r: &Requirement,
    map: &BTreeMap<String, String>,
) -> Result<bool, SelectorError> {
    let err = |message: String| SelectorError {
        key: r.key.clone(),
        message,
    };
    validate_qualified_name(&r.key).map_err(err)?;
    let n = r.values.len();
    let value = map.get(&r.key);
    let matched = match r.operator.as_str() {
        "in" | "=" | "==" => {
            if r.operator == "in" && n == 0 {
                return Err(err(
                    "for 'in', 'notin' operators, values set can't be empty".into(),
                ));
            }
            if r.operator != "in" && n != 1 {
                return Err(err(
                    "exact-match compatibility requires one single value".into()
                ));
            }
            validate_values(&r.values).map_err(err)?;
            value.is_some_and(|v| r.values.contains(v))
        }
        "notin" | "!=" => {
            if r.operator == "notin" && n == 0 {
                return Err(err(
                    "for 'in', 'notin' operators, values set can't be empty".into(),
                ));
            }
            if r.operator == "!=" && n != 1 {
                return Err(err(
                    "exact-match compatibility requires one single value".into()
                ));
            }
            validate_values(&r.values).map_err(err)?;
            value.is_none_or(|v| !r.values.contains(v))
        }
        "exists" | "!" => {
            if n != 0 {
                return Err(err(
                    "values set must be empty for exists and does not exist".into(),
                ));
            }
            if r.operator == "exists" {
                value.is_some()
            } else {
                value.is_none()
            }
        }
        "gt" | "lt" => {
            if n != 1 {
                return Err(err(
                    "for 'Gt', 'Lt' operators, exactly one value is required".into(),
                ));
            }
            let bound: i64 = r.values[0].parse().map_err(|_| {
                err("for 'Gt', 'Lt' operators, the value must be an integer".into())
            })?;
            match value.and_then(|v| v.parse::<i64>().ok()) {
                Some(v) if r.operator == "gt" => v > bound,
                Some(v) => v < bound,
                None => false,
            }
        }
        other => return Err(err(format!("{other:?} is not a valid selector operator"))),
    };
    Ok(matched)
}

/// A Kubernetes qualified name: optional DNS-subdomain prefix + `/` + a name of ≤ 63 characters.
fn validate_qualified_name(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let subdomain_ok = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            });
        if !subdomain_ok {
            return Err("prefix part must be a lowercase RFC 1123 subdomain".into());
        }
    }
    if name.is_empty() || name.len() > 63 || !is_label_value(name) {
        return Err(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (at most 63 characters)"
                .into(),
        );
    }
    Ok(())
}

fn validate_values(values: &[String]) -> Result<(), String> {
    for v in values {
        if !v.is_empty() && (v.len() > 63 || !is_label_value(v)) {
            return Err(format!("invalid label value {v:?}"));
        }
    }
    Ok(())
}

fn is_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    b.iter()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(
        name: &str,
        ns: &str,
        annotations: &[(&str, &str)],
        labels: &[(&str, &str)],
    ) -> Target {
        let mut t = Target::default();
        t.metadata.name = Some(name.into());
        t.metadata.namespace = Some(ns.into());
        let map = |kv: &[(&str, &str)]| {
            Some(
                kv.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
        };
        t.metadata.annotations = map(annotations);
        t.metadata.labels = map(labels);
        t
    }

    fn req(key: &str, op: &str, values: &[&str]) -> Requirement {
        Requirement {
            key: key.into(),
            operator: op.into(),
            values: values.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn by_annotation(r: Requirement) -> TargetSelector {
        TargetSelector {
            annotations: vec![r],
            ..Default::default()
        }
    }

    #[test]
    fn no_selectors_match_everything() {
        assert!(matches_any(&[], &target("a", "ns", &[], &[])).unwrap());
        assert!(matches_any(&[TargetSelector::default()], &target("a", "ns", &[], &[])).unwrap());
    }

    #[test]
    fn targets_match_by_name_and_optional_namespace() {
        let sel = |ns: Option<&str>| TargetSelector {
            targets: vec![ObjectReference {
                name: "a".into(),
                namespace: ns.map(Into::into),
            }],
            ..Default::default()
        };
        let t = target("a", "ns", &[], &[]);
        assert!(matches(&sel(None), &t).unwrap());
        assert!(matches(&sel(Some("")), &t).unwrap());
        assert!(matches(&sel(Some("ns")), &t).unwrap());
        assert!(!matches(&sel(Some("other")), &t).unwrap());
        assert!(!matches(&sel(None), &target("b", "ns", &[], &[])).unwrap());
    }

    #[test]
    fn equality_operators_on_annotations_and_labels() {
        let t = target("a", "ns", &[("somekey", "do")], &[("env", "prod")]);
        assert!(matches(&by_annotation(req("somekey", "=", &["do"])), &t).unwrap());
        assert!(!matches(&by_annotation(req("somekey", "=", &["someother"])), &t).unwrap());
        assert!(matches(&by_annotation(req("somekey", "==", &["do"])), &t).unwrap());
        assert!(matches(&by_annotation(req("somekey", "!=", &["x"])), &t).unwrap());
        let labels = TargetSelector {
            labels: vec![req("env", "in", &["dev", "prod"])],
            ..Default::default()
        };
        assert!(matches(&labels, &t).unwrap());
    }

    #[test]
    fn set_and_existence_operators() {
        let t = target("a", "ns", &[("k", "v")], &[]);
        assert!(!matches(&by_annotation(req("k", "notin", &["v"])), &t).unwrap());
        assert!(matches(&by_annotation(req("absent", "notin", &["v"])), &t).unwrap());
        assert!(matches(&by_annotation(req("k", "exists", &[])), &t).unwrap());
        assert!(matches(&by_annotation(req("absent", "!", &[])), &t).unwrap());
        assert!(!matches(&by_annotation(req("k", "!", &[])), &t).unwrap());
    }

    #[test]
    fn numeric_operators() {
        let t = target("a", "ns", &[("n", "5")], &[]);
        assert!(matches(&by_annotation(req("n", "gt", &["4"])), &t).unwrap());
        assert!(!matches(&by_annotation(req("n", "gt", &["5"])), &t).unwrap());
        assert!(matches(&by_annotation(req("n", "lt", &["6"])), &t).unwrap());
        assert!(!matches(&by_annotation(req("absent", "lt", &["6"])), &t).unwrap());
    }

    #[test]
    fn one_failing_requirement_fails_the_selector_but_selectors_are_ored() {
        let t = target("a", "ns", &[("a", "1"), ("b", "2")], &[]);
        let both = TargetSelector {
            annotations: vec![req("a", "=", &["1"]), req("b", "=", &["3"])],
            ..Default::default()
        };
        assert!(!matches(&both, &t).unwrap());
        let other = by_annotation(req("b", "=", &["2"]));
        assert!(matches_any(&[both, other], &t).unwrap());
    }

    #[test]
    fn invalid_requirements_are_errors_not_mismatches() {
        let t = target("a", "ns", &[], &[]);
        assert!(matches(&by_annotation(req("k", "in", &[])), &t).is_err());
        assert!(matches(&by_annotation(req("k", "=", &["a", "b"])), &t).is_err());
        assert!(matches(&by_annotation(req("k", "exists", &["a"])), &t).is_err());
        assert!(matches(&by_annotation(req("k", "gt", &["x"])), &t).is_err());
        assert!(matches(&by_annotation(req("k", "like", &["x"])), &t).is_err());
        assert!(matches(&by_annotation(req("-bad-", "exists", &[])), &t).is_err());
        assert!(validate(&[by_annotation(req("k", "operation", &[]))]).is_err());
    }
}
