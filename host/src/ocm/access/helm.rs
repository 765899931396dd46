//! `helm`: chart `helmChart` (`name:version`) of the Helm repository `helmRepository` — an
//! `oci://` repository (the chart is `<repository>/<name>:<version>`) or a classic one
//! (`index.yaml`, the entry with exactly that version, its first URL, the index's digest).
//!
//! Owns: the spec and reading a repository index. Must not touch: downloading.

use serde::Deserialize;
use serde_json::Value;

/// The layer media types of a chart in an OCI registry.
pub const CHART_LAYERS: [&str; 2] = [
    "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
    "application/tar+gzip",
];

/// The spec of a `helm` access.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Helm {
    #[serde(default, deserialize_with = "super::fields::string_or_empty")]
    pub helm_repository: String,
    #[serde(default, deserialize_with = "super::fields::string_or_empty")]
    pub helm_chart: String,
}

impl Helm {
    /// The repository URL as given (trimmed).
    pub fn repository(&self) -> &str {
        self.helm_repository.trim()
    }

    /// The chart as given (trimmed).
    pub fn chart(&self) -> &str {
        self.helm_chart.trim()
    }

    /// The chart's name and version, if `helmChart` is `name:version`.
    pub fn name_and_version(&self) -> Option<(&str, &str)> {
        self.chart()
            .rsplit_once(':')
            .filter(|(n, v)| !n.is_empty() && !v.is_empty())
    }
}

/// The reference of chart `name` `version` in the OCI repository `oci` (without `oci://`): a
/// `+` in the version is `_` in the tag, as Helm pushes it.
pub fn oci_reference(oci: &str, name: &str, version: &str) -> String {
    format!(
        "{}/{name}:{}",
        oci.trim_end_matches('/'),
        version.replace('+', "_")
    )
}

/// The entry of chart `name` with exactly `version` in a repository `index`; else the versions
/// the index has.
pub fn index_entry<'i>(
    index: &'i Value,
    name: &str,
    version: &str,
) -> Result<&'i Value, Vec<String>> {
    let entries = index["entries"][name]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    entries
        .iter()
        .find(|e| e["version"].as_str() == Some(version))
        .ok_or_else(|| {
            entries
                .iter()
                .filter_map(|e| e["version"].as_str().map(str::to_string))
                .collect()
        })
}

/// The archive URL of an index `entry` (its first URL, relative to `base` unless absolute) and
/// its digest, if the index gives one.
pub fn archive(base: &str, entry: &Value) -> (String, Option<String>) {
    let url = entry["urls"][0].as_str().unwrap_or_default();
    let url = if url.contains("://") {
        url.to_string()
    } else {
        format!(
            "{base}/{}",
            url.trim_start_matches("./").trim_start_matches('/')
        )
    };
    let digest = entry["digest"]
        .as_str()
        .filter(|d| !d.is_empty())
        .map(str::to_string);
    (url, digest)
}
