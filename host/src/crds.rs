//! The host's own CRD (`WasmPlugin`), created and kept up to date by the host itself, as
//! Landscaper keeps its CRDs with `crdManagement.deployCrd`.
//!
//! Why not Helm: a CRD as a chart template is owned by the release that installed it, so after
//! `helm uninstall` (the CRD kept) an install under another name, or a second release beside it,
//! fails on its ownership metadata (issue #36). Helm's `crds/` directory owns nothing, but Helm
//! never upgrades it, and Helm 4 server-side applies it on every install: an older chart
//! installed beside a newer release downgrades the CRD, and a newer chart's install fails with
//! an apply conflict once anyone else has written the CRD. So the chart ships the CRD as a plain
//! file (`charts/wasm-deployer/files/`) and Helm never touches it: at start (`deployer-host run`,
//! `crdManagement.deployCrd`, on by default) the host creates the CRD if it is missing and
//! replaces it if the installed one has a lower `wasm-deployer.dev/crd-revision` than the one
//! built in, then waits until the API server serves it. A higher revision (a newer host shares
//! the cluster) is left alone: hosts of two versions side by side never flap the CRD back and
//! forth, and an older host never downgrades it. Helm's ownership metadata a chart of old (the
//! CRD as a template) left on it is dropped on replace.
//!
//!
//! Landscaper's CRDs (DeployItem, Target, Context, SyncObject, LsHealthCheck) are generated from
//! `landscaper-model`'s types ([`landscaper`]); the chart ships them in Helm's `crds/` directory
//! (`charts/wasm-deployer/charts/landscaper-crds/crds/`, written and checked by
//! `deployer-host crds`, which `cargo xtask crds` and `cargo xtask test` run), and dev mode
//! installs them. The host never installs them into a cluster: Landscaper, or the chart, does.
//!
//! Owns: the CRD objects and the chart's files of Landscaper's CRDs. Must not touch: WasmPlugin
//! objects, any other CRD.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};

use crate::apierrors::{self, Lookup};

/// The WasmPlugin CRD the host ships (the chart's `files/` copy, the one dev mode installs).
pub const WASM_PLUGIN_CRD: &str =
    include_str!("../../charts/wasm-deployer/files/wasm-deployer.dev_wasmplugins.yaml");

/// Where the chart keeps Landscaper's CRDs, relative to the repository root.
pub const LANDSCAPER_CRDS_DIR: &str = "charts/wasm-deployer/charts/landscaper-crds/crds";

/// Landscaper's CRDs, generated from `landscaper-model`'s types.
pub fn landscaper() -> Vec<CustomResourceDefinition> {
    landscaper_model::crd::definitions()
        .into_iter()
        .map(|g| g.crd)
        .collect()
}

/// Landscaper's CRDs as the chart's files: `(file name, YAML)`.
pub fn landscaper_files() -> Vec<(String, String)> {
    landscaper_model::crd::definitions()
        .into_iter()
        .map(|g| {
            let yaml = serde_yaml::to_string(&g.crd).expect("a CRD serializes");
            (
                g.file_name,
                format!(
                    "# Generated from landscaper-model's types (sdk-guest/model/src/resources.rs, crd.rs)\n\
                     # by `cargo xtask crds`; `cargo xtask test` checks it is what the code generates. Do not edit.\n\
                     {yaml}"
                ),
            )
        })
        .collect()
}

/// Writes [`landscaper_files`] into `dir` (`check`: only compares), removing any other
/// `.yaml` there. Returns the files that differed (with `check`, an error names them).
pub fn write_landscaper_files(dir: &std::path::Path, check: bool) -> anyhow::Result<Vec<String>> {
    use anyhow::Context as _;
    let files = landscaper_files();
    let mut differing = Vec::new();
    for (name, text) in &files {
        let path = dir.join(name);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            differing.push(name.clone());
            if !check {
                std::fs::create_dir_all(dir)?;
                std::fs::write(&path, text)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
        }
    }
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let name = entry?.file_name().to_string_lossy().to_string();
        if name.ends_with(".yaml") && !files.iter().any(|(n, _)| *n == name) {
            differing.push(format!("{name} (not generated)"));
            if !check {
                std::fs::remove_file(dir.join(&name))?;
            }
        }
    }
    if check && !differing.is_empty() {
        anyhow::bail!(
            "{} is not what landscaper-model generates ({}): run `cargo xtask crds`",
            dir.display(),
            differing.join(", ")
        );
    }
    Ok(differing)
}

/// How long [`ensure_wasm_plugin_crd`] waits for a CRD it wrote to be served.
const ESTABLISHED_WITHIN: std::time::Duration = std::time::Duration::from_secs(60);

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

/// Whether the API server serves the CRD's kind (condition `Established`).
pub fn is_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

/// Creates the WasmPlugin CRD if missing, replaces it if older (see the module doc), and waits
/// until it is served. Transient errors are tried again; a conflict (another replica replaced
/// it meanwhile) is read again.
pub async fn ensure_wasm_plugin_crd(client: &Client) -> anyhow::Result<CrdOutcome> {
    let want = bundled()?;
    let name = want.metadata.name.clone().unwrap_or_default();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let outcome = write_if_older(&api, &want).await?;
    // WasmPlugins are watched right after: a CRD just created is served moments later.
    let deadline = tokio::time::Instant::now() + ESTABLISHED_WITHIN;
    let mut wait = std::time::Duration::from_millis(20);
    loop {
        let crd =
            apierrors::retry_transient(&name, 8, || async { Ok(api.get(&name).await?) }).await?;
        if is_established(&crd) {
            return Ok(outcome);
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "the CRD {name} was not established within {ESTABLISHED_WITHIN:?}: {:?}",
            crd.status.and_then(|s| s.conditions)
        );
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(std::time::Duration::from_secs(1));
    }
}

/// The create-or-replace of [`ensure_wasm_plugin_crd`].
async fn write_if_older(
    api: &Api<CustomResourceDefinition>,
    want: &CustomResourceDefinition,
) -> anyhow::Result<CrdOutcome> {
    let name = want.metadata.name.clone().unwrap_or_default();
    let bundled_revision = revision(want);
    apierrors::retry_transient(&name, 8, || async {
        let installed = loop {
            match apierrors::get(api, &name).await? {
                Lookup::Found(crd) => break crd,
                Lookup::Missing => match api.create(&PostParams::default(), want).await {
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
    fn the_charts_landscaper_crds_are_what_the_model_generates() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(LANDSCAPER_CRDS_DIR);
        write_landscaper_files(&dir, true).unwrap();
    }

    #[tokio::test]
    async fn the_generated_landscaper_crds_install_and_serve_landscaper_objects() {
        // Given the generated CRDs installed through the API (as Helm's crds/ does),
        let (server, api) = server();
        for crd in landscaper() {
            api.create(&PostParams::default(), &crd).await.unwrap();
        }
        // when an item as Landscaper writes it, a status as a deployer writes it, and fields
        // nobody defined arrive,
        let client = server.client();
        let items: Api<landscaper_model::DeployItem> = Api::namespaced(client.clone(), "default");
        let item: landscaper_model::DeployItem = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "a", "namespace": "default"},
            "spec": {"type": "landscaper.gardener.cloud/mock", "target": {"name": "t"},
                     "onDelete": {"skipUninstallIfClusterRemoved": true},
                     "config": {"apiVersion": "mock.deployer.landscaper.gardener.cloud/v1alpha1",
                                "kind": "ProviderConfiguration", "phase": "Succeeded"},
                     "typo": 1}
        }))
        .unwrap();
        let created = items.create(&PostParams::default(), &item).await.unwrap();
        let mut with_status = created.clone();
        with_status.status = Some(landscaper_model::DeployItemStatus {
            phase: landscaper_model::Phase::Succeeded,
            observed_generation: 1,
            job_id: "j".into(),
            job_id_finished: "j".into(),
            last_reconcile_time: Some("2026-01-01T00:00:00Z".into()),
            ..Default::default()
        });
        let written = items
            .replace_status("a", &PostParams::default(), &with_status)
            .await
            .unwrap();
        // then what the model names is kept, the config whole, and the unknown field pruned.
        assert_eq!(written.spec.on_delete, created.spec.on_delete);
        assert!(created.spec.on_delete.is_some());
        assert_eq!(created.spec.config, item.spec.config);
        assert!(!created.spec.extra.contains_key("typo"));
        let status = written.status.unwrap();
        assert_eq!(
            (status.job_id.as_str(), status.phase.as_str()),
            ("j", "Succeeded")
        );
    }

    #[test]
    fn a_crd_without_a_revision_is_revision_zero() {
        let mut crd = bundled().unwrap();
        crd.metadata.annotations = None;
        assert_eq!(revision(&crd), 0);
    }

    fn server() -> (embedded_apiserver::ApiServer, Api<CustomResourceDefinition>) {
        let server = embedded_apiserver::ApiServer::new(Default::default()).unwrap();
        let api = Api::all(server.client());
        (server, api)
    }

    /// The bundled CRD at `revision` (none: `None`), with `annotations` added.
    fn at_revision(
        revision: Option<u64>,
        annotations: &[(&str, &str)],
    ) -> CustomResourceDefinition {
        let mut crd = bundled().unwrap();
        let a = crd.metadata.annotations.get_or_insert_default();
        a.remove(REVISION_ANNOTATION);
        if let Some(r) = revision {
            a.insert(REVISION_ANNOTATION.into(), r.to_string());
        }
        for (k, v) in annotations {
            a.insert(k.to_string(), v.to_string());
        }
        crd
    }

    #[tokio::test]
    async fn a_missing_crd_is_created_served_and_then_left_as_it_is() {
        let (_server, api) = server();
        let outcome = ensure_wasm_plugin_crd(&api.clone().into_client())
            .await
            .unwrap();
        assert_eq!(outcome, CrdOutcome::Created { revision: REVISION });
        let created = api.get("wasmplugins.wasm-deployer.dev").await.unwrap();
        assert!(is_established(&created));
        // A second host (or a restart) finds it up to date and writes nothing.
        let outcome = ensure_wasm_plugin_crd(&api.clone().into_client())
            .await
            .unwrap();
        assert_eq!(outcome, CrdOutcome::UpToDate { revision: REVISION });
        let after = api.get("wasmplugins.wasm-deployer.dev").await.unwrap();
        assert_eq!(
            after.metadata.resource_version,
            created.metadata.resource_version
        );
    }

    #[tokio::test]
    async fn an_older_crd_is_replaced_and_loses_the_helm_ownership_of_a_templated_install() {
        let (_server, api) = server();
        let mut old = at_revision(
            None,
            &[
                ("meta.helm.sh/release-name", "wasm-deployer"),
                ("meta.helm.sh/release-namespace", "ls-system"),
                ("someone.example/note", "kept"),
            ],
        );
        old.metadata.labels = Some(
            [
                ("app.kubernetes.io/managed-by", "Helm"),
                ("team", "platform"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        );
        old.spec.versions[0].additional_printer_columns = None;
        api.create(&PostParams::default(), &old).await.unwrap();
        let outcome = ensure_wasm_plugin_crd(&api.clone().into_client())
            .await
            .unwrap();
        assert_eq!(
            outcome,
            CrdOutcome::Upgraded {
                from: 0,
                to: REVISION
            }
        );
        let now = api.get("wasmplugins.wasm-deployer.dev").await.unwrap();
        assert_eq!(revision(&now), REVISION);
        assert_eq!(now.spec, bundled().unwrap().spec);
        let annotations = now.metadata.annotations.unwrap();
        assert!(
            !annotations.keys().any(|k| k.starts_with("meta.helm.sh/")),
            "{annotations:?}"
        );
        assert_eq!(annotations["someone.example/note"], "kept");
        let labels = now.metadata.labels.unwrap();
        assert_eq!(
            labels.into_iter().collect::<Vec<_>>(),
            vec![("team".to_string(), "platform".to_string())]
        );
    }

    #[tokio::test]
    async fn a_newer_crd_is_never_downgraded() {
        let (_server, api) = server();
        let mut newer = at_revision(Some(REVISION + 1), &[]);
        newer.spec.versions[0]
            .additional_printer_columns
            .get_or_insert_default()
            .push(
                serde_json::from_value(serde_json::json!(
                    {"name": "Newer", "type": "string", "jsonPath": ".status.newer"}
                ))
                .unwrap(),
            );
        let created = api.create(&PostParams::default(), &newer).await.unwrap();
        let outcome = ensure_wasm_plugin_crd(&api.clone().into_client())
            .await
            .unwrap();
        assert_eq!(
            outcome,
            CrdOutcome::Newer {
                installed: REVISION + 1,
                bundled: REVISION
            }
        );
        let after = api.get("wasmplugins.wasm-deployer.dev").await.unwrap();
        assert_eq!(
            after.metadata.resource_version,
            created.metadata.resource_version
        );
        assert_eq!(after.spec, newer.spec);
    }
}
