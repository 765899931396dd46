//! Where a chart comes from (contract 7.2): `chart.archive.raw`, `chart.archive.remote.url`,
//! `chart.helmChartRepo` (an `index.yaml` and a version constraint resolved as Helm resolves
//! it) and `chart.ref` (OCI, Helm's chart media types). Downloads go through the host's
//! `fetch` capability (WIT 1.2): the plugin has no sockets, and the host applies its allowlist,
//! size limit, the Context's credentials and its cache (a chart whose digest the index names
//! is downloaded once).
//!
//! Owns: turning `chart` into a loaded [`helm_engine::Chart`] and saying exactly what is wrong
//! when it cannot. Must not touch: rendering or the cluster.

use base64::Engine as _;
use helm_engine::Chart;
use helm_engine::funcs::semver::{Constraints, Version};
use sdk_guest::{Ctx, DeployerError, codes};
use serde_json::Value;

use crate::config::{self, Chart as ChartSpec};

/// Helm's OCI chart layer media type (and the legacy one Helm still reads).
pub const HELM_CHART_LAYER: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
/// The legacy chart layer media type.
pub const LEGACY_CHART_LAYER: &str = "application/tar+gzip";

/// Operation and reason of chart errors (Landscaper: `Template` / `GetHelmChart`).
const OPERATION: &str = "Template";
const REASON: &str = "GetHelmChart";

fn config_error(message: String) -> DeployerError {
    DeployerError::configuration(REASON, message).with_operation(OPERATION)
}

/// A download failed: a missing chart, version or tag is a configuration problem (it will
/// not appear by retrying the same job); unreachable servers are retried.
fn fetch_error(what: &str, e: DeployerError) -> DeployerError {
    let mut e = DeployerError {
        operation: OPERATION.into(),
        message: format!("{what}: {}", e.message),
        ..e
    };
    if e.reason == "NotFound" && !e.has_code(codes::CONFIGURATION_PROBLEM) {
        e.codes.push(codes::CONFIGURATION_PROBLEM.into());
    }
    e
}

/// The loaded chart and where it came from (for messages and the provider status).
pub struct Loaded {
    /// The chart.
    pub chart: Chart,
    /// `sha256:<hex>` of the archive, if it came as one.
    pub digest: String,
    /// Human-readable origin.
    pub origin: String,
}

fn load(bytes: &[u8], origin: String, digest: String) -> Result<Loaded, DeployerError> {
    let chart = Chart::load_tgz(bytes)
        .map_err(|e| config_error(format!("{origin} is not a valid chart archive: {e}")))?;
    Ok(Loaded {
        chart,
        digest,
        origin,
    })
}

fn sha256(data: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(data)))
}

/// Resolves `spec` to a chart, in Landscaper's precedence: archive, ref, helmChartRepo,
/// fromResource, resourceRef.
pub fn resolve(ctx: &Ctx, spec: &ChartSpec) -> Result<Loaded, DeployerError> {
    if let Some(archive) = &spec.archive {
        if let Some(raw) = archive.raw.as_deref().filter(|r| !r.trim().is_empty()) {
            let compact: String = raw.split_whitespace().collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(compact.as_bytes())
                .map_err(|e| {
                    config_error(format!("spec.config.chart.archive.raw is not base64: {e}"))
                })?;
            let digest = sha256(&bytes);
            return load(&bytes, "chart.archive.raw".into(), digest);
        }
        if let Some(remote) = &archive.remote {
            let url = remote.url.trim();
            let fetched = ctx
                .http_get(url, None)
                .map_err(|e| fetch_error(&format!("downloading chart archive {url}"), e))?;
            return load(&fetched.data, url.to_string(), fetched.digest);
        }
    }
    if let Some(reference) = spec.r#ref.as_deref().filter(|r| !r.trim().is_empty()) {
        return from_oci(ctx, reference.trim());
    }
    if let Some(repo) = &spec.helm_chart_repo {
        return from_repository(ctx, repo);
    }
    if spec.from_resource.is_some() {
        return Err(config_error(
            "chart.fromResource is no longer supported (as in Landscaper): use chart.ref, chart.archive or chart.helmChartRepo".into(),
        ));
    }
    if let Some(key) = spec
        .resource_ref
        .as_deref()
        .filter(|r| !r.trim().is_empty())
    {
        return from_resource_ref(ctx, key.trim());
    }
    Err(config_error("no chart was provided".into()))
}

/// `oci://`-less reference `host/repository:tag[@digest]`; the tag is mandatory.
fn from_oci(ctx: &Ctx, reference: &str) -> Result<Loaded, DeployerError> {
    let reference = reference.strip_prefix("oci://").unwrap_or(reference);
    let name_part = reference.split('@').next().unwrap_or(reference);
    let last = name_part.rsplit('/').next().unwrap_or(name_part);
    if !name_part.contains('/') || !last.contains(':') {
        return Err(config_error(format!(
            "no tag specified in reference {reference:?}: chart.ref must be host/repository:tag"
        )));
    }
    let fetched = ctx
        .oci_pull(reference, &[HELM_CHART_LAYER, LEGACY_CHART_LAYER])
        .map_err(|e| fetch_error(&format!("pulling chart {reference}"), e))?;
    load(&fetched.data, reference.to_string(), fetched.digest)
}

/// `chart.resourceRef`: Landscaper's global resource key of an OCM resource, read by the host
/// from the Context's component repository (WIT `ocm`, 1.3). A chart stored as an OCI artifact
/// yields its chart layer; a local blob is the archive itself.
fn from_resource_ref(ctx: &Ctx, key: &str) -> Result<Loaded, DeployerError> {
    let fetched = ctx
        .ocm_resource(key, &[HELM_CHART_LAYER, LEGACY_CHART_LAYER])
        .map_err(|e| fetch_error("chart.resourceRef", e))?;
    let origin = match &fetched.ocm {
        Some(o) => format!(
            "resource {} of component version {}:{}",
            o.name, o.component_name, o.component_version
        ),
        None => "chart.resourceRef".into(),
    };
    load(&fetched.data, origin, fetched.digest)
}

/// A classic chart repository: `index.yaml`, the version Helm would pick, the archive.
fn from_repository(ctx: &Ctx, repo: &config::HelmChartRepo) -> Result<Loaded, DeployerError> {
    let base = config::normalise_repo_url(&repo.helm_chart_repo_url);
    let index_url = format!("{base}/index.yaml");
    let index = ctx
        .http_get(&index_url, None)
        .map_err(|e| fetch_error(&format!("cannot download repository index for {base}"), e))?;
    let text = String::from_utf8_lossy(&index.data);
    let index = helm_engine::yaml::parse(&text)
        .map(|v| helm_engine::json::to_serde(&v))
        .map_err(|e| {
            config_error(format!(
                "repository index {index_url} is not valid YAML: {e}"
            ))
        })?;
    let name = repo.helm_chart_name.trim();
    let entries = index["entries"][name].as_array().ok_or_else(|| {
        config_error(format!(
            "no chart name found: chart {name:?} is not in the repository {base}"
        ))
    })?;
    let entry = pick_version(entries, repo.helm_chart_version.trim())
        .map_err(|e| config_error(format!("chart {name:?} in repository {base}: {e}")))?;
    let version = entry["version"].as_str().unwrap_or_default();
    let url = entry["urls"][0].as_str().ok_or_else(|| {
        config_error(format!(
            "chart {name:?} version {version} in repository {base} has no download URL"
        ))
    })?;
    let url = absolute(&base, url);
    let digest = entry["digest"].as_str().filter(|d| !d.is_empty());
    let fetched = ctx
        .http_get(&url, digest)
        .map_err(|e| fetch_error(&format!("downloading chart {name} {version} from {url}"), e))?;
    load(
        &fetched.data,
        format!("{name} {version} from {base}"),
        fetched.digest,
    )
}

/// A chart URL from an index: absolute as is, else relative to the repository.
fn absolute(base: &str, url: &str) -> String {
    if url.contains("://") {
        url.to_string()
    } else {
        format!(
            "{base}/{}",
            url.trim_start_matches("./").trim_start_matches('/')
        )
    }
}

/// Helm's `IndexFile.Get`: an exact version match first, else the newest entry that satisfies
/// the constraint (an empty constraint: the newest non-prerelease).
pub fn pick_version<'a>(entries: &'a [Value], constraint: &str) -> Result<&'a Value, String> {
    let mut versions: Vec<(&Value, Version)> = entries
        .iter()
        .filter_map(|e| {
            let v = e["version"].as_str()?;
            Version::parse(v).ok().map(|parsed| (e, parsed))
        })
        .collect();
    // Newest first, as Helm's SortEntries.
    versions.sort_by(|a, b| b.1.compare(&a.1));
    if !constraint.is_empty()
        && let Some(e) = entries
            .iter()
            .find(|e| e["version"].as_str() == Some(constraint))
    {
        return Ok(e);
    }
    let wanted = if constraint.is_empty() {
        "*"
    } else {
        constraint
    };
    let constraints = Constraints::parse(wanted)
        .map_err(|e| format!("invalid version constraint {constraint:?}: {e}"))?;
    versions
        .into_iter()
        .find(|(_, v)| constraints.check(v))
        .map(|(e, _)| e)
        .ok_or_else(|| {
            let available: Vec<&str> = entries
                .iter()
                .filter_map(|e| e["version"].as_str())
                .collect();
            format!(
                "no chart version found for {constraint:?} (available: {})",
                available.join(", ")
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entries() -> Vec<Value> {
        ["1.2.3", "1.10.0", "2.0.0-rc.1", "1.9.9", "0.1.0"]
            .iter()
            .map(|v| json!({"version": v}))
            .collect()
    }

    fn pick(c: &str) -> Result<String, String> {
        let e = entries();
        pick_version(&e, c).map(|v| v["version"].as_str().unwrap().to_string())
    }

    #[test]
    fn versions_resolve_as_helm_resolves_them() {
        assert_eq!(pick("").unwrap(), "1.10.0", "newest stable");
        assert_eq!(pick("1.2.3").unwrap(), "1.2.3", "exact");
        assert_eq!(pick("~1.9").unwrap(), "1.9.9");
        assert_eq!(pick("^1.2").unwrap(), "1.10.0");
        assert_eq!(pick(">=1.0.0 <1.5").unwrap(), "1.2.3");
        assert_eq!(
            pick("2.0.0-rc.1").unwrap(),
            "2.0.0-rc.1",
            "exact prerelease"
        );
        assert_eq!(pick(">=2.0.0-0").unwrap(), "2.0.0-rc.1");
        let e = pick("3.x").unwrap_err();
        assert!(
            e.contains("no chart version found") && e.contains("1.10.0"),
            "{e}"
        );
        assert!(
            pick("=>bad")
                .unwrap_err()
                .contains("invalid version constraint")
        );
    }

    #[test]
    fn relative_chart_urls_are_resolved_against_the_repository() {
        assert_eq!(
            absolute("http://h/r", "c-1.0.0.tgz"),
            "http://h/r/c-1.0.0.tgz"
        );
        assert_eq!(absolute("http://h/r", "https://x/c.tgz"), "https://x/c.tgz");
    }

    #[test]
    fn a_reference_without_tag_is_refused() {
        let host = sdk_guest::NullHost;
        let ctx = Ctx::native(&host);
        for r in ["registry.io/charts/nginx", "nginx:1.0"] {
            let e = from_oci(&ctx, r).err().expect(r);
            assert!(e.message.contains("no tag specified"), "{r}: {}", e.message);
            assert!(e.has_code(codes::CONFIGURATION_PROBLEM));
        }
    }

    #[test]
    fn raw_archives_that_are_not_charts_say_so() {
        let host = sdk_guest::NullHost;
        let ctx = Ctx::native(&host);
        let spec = ChartSpec {
            archive: Some(config::Archive {
                raw: Some("not base64!".into()),
                remote: None,
            }),
            ..Default::default()
        };
        let e = resolve(&ctx, &spec).err().unwrap();
        assert!(e.message.contains("is not base64"), "{}", e.message);
        let spec = ChartSpec {
            archive: Some(config::Archive {
                raw: Some(base64::engine::general_purpose::STANDARD.encode(b"plain")),
                remote: None,
            }),
            ..Default::default()
        };
        let e = resolve(&ctx, &spec).err().unwrap();
        assert!(
            e.message.contains("not a valid chart archive"),
            "{}",
            e.message
        );
        assert!(e.has_code(codes::CONFIGURATION_PROBLEM));
    }

    /// A host that answers OCM requests as the host's reader would, and records them.
    struct OcmHost(std::sync::Mutex<Vec<sdk_guest::FetchRequest>>);

    impl sdk_guest::NativeHost for OcmHost {
        fn log(&self, _level: sdk_guest::LogLevel, _message: &str) {}
        fn checkpoint(&self, _name: &str) -> Result<(), DeployerError> {
            Ok(())
        }
        fn remaining(&self) -> Option<std::time::Duration> {
            None
        }
        fn kube(&self, _op: sdk_guest::KubeOp) -> Result<Option<String>, DeployerError> {
            Ok(None)
        }
        fn fetch(
            &self,
            request: sdk_guest::FetchRequest,
        ) -> Result<sdk_guest::Fetched, DeployerError> {
            self.0.lock().unwrap().push(request.clone());
            match request {
                sdk_guest::FetchRequest::Ocm { resource_key, .. } if resource_key == "good" => {
                    Ok(sdk_guest::Fetched {
                        data: b"not a chart".to_vec(),
                        ocm: Some(sdk_guest::OcmOrigin {
                            component_name: "example.com/app".into(),
                            component_version: "1.0.0".into(),
                            name: "chart".into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    })
                }
                _ => Err(DeployerError::configuration(
                    "ResourceNotFound",
                    "component version example.com/app:1.0.0 has no resource name=nope",
                )
                .with_operation("ocm")),
            }
        }
    }

    #[test]
    fn a_resource_ref_is_asked_of_the_host_with_helms_chart_layer_types() {
        let host = OcmHost(Default::default());
        let ctx = Ctx::native(&host);
        let spec = |key: &str| ChartSpec {
            resource_ref: Some(key.into()),
            ..Default::default()
        };
        let e = resolve(&ctx, &spec("good")).err().unwrap();
        assert!(
            e.message
                .contains("resource chart of component version example.com/app:1.0.0 is not a valid chart archive"),
            "{}",
            e.message
        );
        assert_eq!(
            host.0.lock().unwrap()[0],
            sdk_guest::FetchRequest::Ocm {
                resource_key: "good".into(),
                layer_media_types: vec![HELM_CHART_LAYER.into(), LEGACY_CHART_LAYER.into()],
            }
        );
        let e = resolve(&ctx, &spec("nope")).err().unwrap();
        assert!(e.has_code(codes::CONFIGURATION_PROBLEM));
        assert_eq!(e.operation, OPERATION);
        assert!(
            e.message
                .starts_with("chart.resourceRef: component version"),
            "{}",
            e.message
        );
    }
}
