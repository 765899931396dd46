//! The host's own CRD (`WasmPlugin`), kept up to date by the host itself, as Landscaper keeps
//! its CRDs with `crdManagement.deployCrd`.
//!
//! Why: the chart ships the CRD in Helm's `crds/` directory (its `wasmplugin-crd` subchart), so
//! no release owns it and any number of releases install, uninstall and install again side by
//! side — but Helm never upgrades what `crds/` created. So at start (`deployer-host run`, with
//! `crdManagement.deployCrd`, on by default) the host creates the CRD if it is missing and
//! replaces it if the installed one has a lower `wasm-deployer.dev/crd-revision` than the one
//! built in. A higher revision (a newer host shares the cluster) is left alone: hosts of two
//! versions side by side never flap the CRD back and forth. Helm's ownership metadata a chart
//! of old (the CRD as a template) left on it is dropped on replace.
//!
//! Owns: the CRD object. Must not touch: WasmPlugin objects, any other CRD.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};

use crate::apierrors::{self, Lookup};

/// The WasmPlugin CRD the host ships (the chart's `crds/` file, the one dev mode installs).
pub const WASM_PLUGIN_CRD: &str = include_str!(
    "../../charts/wasm-deployer/charts/wasmplugin-crd/crds/wasm-deployer.dev_wasmplugins.yaml"
);

/// The annotation with a CRD's revision: bumped with every change of the CRD file.
pub const REVISION_ANNOTATION: &str = "wasm-deployer.dev/crd-revision";

/// What [`ensure_wasm_plugin_crd`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CrdOutcome {
    /// It was missing; created at `revision`.
    Created { revision: u64 },
    /// Replaced: it had revision `from` (0: none), now `to`.
    Upgraded { from: u64, to: u64 },
    /// Installed at the host's revision already.
    UpToDate { revision: u64 },
    /// Installed at a higher revision than the host's (a newer host manages it): left alone.
    Newer { installed: u64, bundled: u64 },
}

/// The revision of a CRD (0 when it has none: CRDs shipped before revisions).
pub fn revision(crd: &CustomResourceDefinition) -> u64 {
    crd.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION_ANNOTATION))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// The built-in WasmPlugin CRD.
pub fn bundled() -> anyhow::Result<CustomResourceDefinition> {
    Ok(serde_yaml::from_str(WASM_PLUGIN_CRD)?)
}

/// Helm's marks of ownership: a CRD kept from a templated install still names the release.
fn is_helm_ownership(key: &str) -> bool {
    key.starts_with("meta.helm.sh/")
}

/// Creates the WasmPlugin CRD if missing, replaces it if older (see the module doc). Transient
/// errors are tried again; a conflict (another replica replaced it meanwhile) is read again.
pub async fn ensure_wasm_plugin_crd(client: &Client) -> anyhow::Result<CrdOutcome> {
    let want = bundled()?;
    let name = want.metadata.name.clone().unwrap_or_default();
    let bundled_revision = revision(&want);
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    apierrors::retry_transient(&name, 8, || async {
        let installed = loop {
            match apierrors::get(&api, &name).await? {
                Lookup::Found(crd) => break crd,
                Lookup::Missing => match api.create(&PostParams::default(), &want).await {
                    Ok(_) => {
                        return Ok(CrdOutcome::Created {
                            revision: bundled_revision,
                        });
                    }
                    // Another replica created it meanwhile: read it.
                    Err(kube::Error::Api(s)) if s.reason == "AlreadyExists" => continue,
                    Err(e) => return Err(e.into()),
                },
                Lookup::KindNotServed => anyhow::bail!(
                    "the cluster serves no CustomResourceDefinitions (apiextensions.k8s.io/v1)"
                ),
            }
        };
        let installed_revision = revision(&installed);
        if installed_revision == bundled_revision {
            return Ok(CrdOutcome::UpToDate {
                revision: bundled_revision,
            });
        }
        if installed_revision > bundled_revision {
            return Ok(CrdOutcome::Newer {
                installed: installed_revision,
                bundled: bundled_revision,
            });
        }
        let mut replacement = want.clone();
        let meta = &mut replacement.metadata;
        meta.resource_version = installed.metadata.resource_version.clone();
        let mut labels = installed.metadata.labels.clone().unwrap_or_default();
        if labels
            .get("app.kubernetes.io/managed-by")
            .map(String::as_str)
            == Some("Helm")
        {
            labels.remove("app.kubernetes.io/managed-by");
        }
        labels.extend(meta.labels.clone().unwrap_or_default());
        meta.labels = (!labels.is_empty()).then_some(labels);
        let mut annotations = installed.metadata.annotations.clone().unwrap_or_default();
        annotations.retain(|k, _| !is_helm_ownership(k));
        annotations.extend(meta.annotations.clone().unwrap_or_default());
        meta.annotations = Some(annotations);
        api.replace(&name, &PostParams::default(), &replacement)
            .await?;
        Ok(CrdOutcome::Upgraded {
            from: installed_revision,
            to: bundled_revision,
        })
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::Digest as _;

    /// The CRD's spec as it was at its revision: a change of the CRD must bump
    /// `wasm-deployer.dev/crd-revision` (or older hosts' clusters never get it), then update
    /// this pair.
    const REVISION: u64 = 2;
    const SPEC_SHA256: &str = "e1a8268e3dcca86bcdbbbf0513df282bb95af4e936d7ce3fd873e28e7d9e4878";

    #[test]
    fn the_crd_file_bumps_its_revision_with_every_change_of_its_spec() {
        let crd = bundled().unwrap();
        let spec = serde_json::to_vec(&crd.spec).unwrap();
        let sha = hex::encode(sha2::Sha256::digest(&spec));
        assert_eq!(
            (revision(&crd), sha.as_str()),
            (REVISION, SPEC_SHA256),
            "the WasmPlugin CRD changed: bump {REVISION_ANNOTATION} in its file and set REVISION \
             and SPEC_SHA256 here to the new values"
        );
    }

    #[test]
    fn a_crd_without_a_revision_is_revision_zero() {
        let mut crd = bundled().unwrap();
        crd.metadata.annotations = None;
        assert_eq!(revision(&crd), 0);
    }
}
