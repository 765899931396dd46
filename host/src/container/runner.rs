//! The programs of the init and wait containers (`deployer-host container init|wait`), run
//! inside the pod with the runner ServiceAccount's token (contract sections 9.4, 9.6).
//!
//! - **init**: reads the provider configuration and the Target from the mounted Secrets, writes
//!   the imports, component descriptor, blueprint content and Target into the shared volume,
//!   and restores the state directory from the newest complete state backup.
//! - **wait**: waits until the `main` container has terminated, backs up the state directory
//!   (even if main failed), and stores the exports file in the export Secret.
//!
//! Every path comes from the environment the pod spec sets (`pod::paths` are the defaults), so
//! the programs run as well outside a pod (tests run them as plain processes).
//!
//! Owns: the in-pod side of the container contract. Must not touch: anything but the item's
//! own Secrets and pod in the pod's namespace.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::config::ProviderConfiguration;
use super::objects::{delete_opt, upsert};
use super::pod::{ANNOTATION_COUNT, ANNOTATION_NUM, ANNOTATION_UUID, ItemKey, LABEL_TYPE, paths};
use super::state;
use crate::landscaper::parse_go_duration;

fn env_path(name: &str, default: &str) -> PathBuf {
    PathBuf::from(std::env::var(name).unwrap_or_else(|_| default.to_string()))
}

fn env_required(name: &str) -> anyhow::Result<String> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .with_context(|| format!("environment variable {name} is not set"))
}

/// The pod's paths, from the environment.
struct Paths {
    imports: PathBuf,
    exports: PathBuf,
    component_descriptor: PathBuf,
    target: PathBuf,
    content: PathBuf,
    state: PathBuf,
}

impl Paths {
    fn from_env() -> Self {
        Paths {
            imports: env_path("IMPORTS_PATH", paths::IMPORTS),
            exports: env_path("EXPORTS_PATH", paths::EXPORTS),
            component_descriptor: env_path(
                "COMPONENT_DESCRIPTOR_PATH",
                paths::COMPONENT_DESCRIPTOR,
            ),
            target: env_path("TARGET_PATH", paths::TARGET),
            content: env_path("CONTENT_PATH", paths::CONTENT),
            state: env_path("STATE_PATH", paths::STATE),
        }
    }
}

/// The item and namespace the program works for.
struct Scope {
    key: ItemKey,
    pod_namespace: String,
    identity: String,
}

impl Scope {
    fn from_env() -> anyhow::Result<Self> {
        Ok(Scope {
            key: ItemKey {
                namespace: env_required("DEPLOY_ITEM_NAMESPACE")?,
                name: env_required("DEPLOY_ITEM_NAME")?,
            },
            pod_namespace: env_required("POD_NAMESPACE")?,
            identity: std::env::var("DEPLOYER_ID").unwrap_or_default(),
        })
    }

    fn secrets(&self, client: &Client) -> Api<Secret> {
        Api::namespaced(client.clone(), &self.pod_namespace)
    }

    fn meta(&self, kind: &str) -> ObjectMeta {
        let mut labels = self.key.labels(&self.identity);
        labels.insert(LABEL_TYPE.into(), kind.into());
        ObjectMeta {
            namespace: Some(self.pod_namespace.clone()),
            labels: Some(labels),
            annotations: Some(self.key.annotations()),
            ..Default::default()
        }
    }
}

/// Writes `bytes` to `path`, creating its directory.
fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// Writes a blueprint filesystem (`{name: content | {directory}}`) below `dir`.
fn write_filesystem(dir: &Path, fs: &Value) -> anyhow::Result<()> {
    super::config::check_filesystem(fs, "blueprint.inline.filesystem")
        .map_err(anyhow::Error::msg)?;
    for (name, value) in fs.as_object().into_iter().flatten() {
        let path = dir.join(name);
        match value {
            Value::String(text) => write(&path, text.as_bytes())?,
            Value::Object(_) => write_filesystem(&path, value)?,
            _ => unreachable!("checked above"),
        }
    }
    std::fs::create_dir_all(dir)?;
    Ok(())
}

/// `deployer-host container init`.
pub async fn init() -> anyhow::Result<()> {
    let p = Paths::from_env();
    let config_path = env_path("CONFIGURATION_PATH", paths::CONFIGURATION);
    let raw = std::fs::read(&config_path).with_context(|| {
        format!(
            "reading the provider configuration {}",
            config_path.display()
        )
    })?;
    let config: ProviderConfiguration = serde_json::from_slice(&raw).with_context(|| {
        format!(
            "parsing the provider configuration {}",
            config_path.display()
        )
    })?;
    config.validate().map_err(anyhow::Error::msg)?;

    for dir in [&p.state, &p.content] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    for file in [&p.imports, &p.exports, &p.component_descriptor, &p.target] {
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
    }
    if let Some(imports) = &config.import_values {
        write(&p.imports, &serde_json::to_vec(imports)?)?;
    }
    if let Some(list) = config
        .component_descriptor
        .as_ref()
        .and_then(|c| c.get(super::RESOLVED_LIST))
    {
        // `componentDescriptor.ref`, resolved by the host (with its references).
        write(&p.component_descriptor, &serde_json::to_vec(list)?)?;
    } else if let Some(inline) = config
        .component_descriptor
        .as_ref()
        .and_then(|c| c.get("inline"))
    {
        // A resolved component descriptor list, as Landscaper writes it.
        let list = json!({"meta": {"schemaVersion": "v2"}, "components": [inline]});
        write(&p.component_descriptor, &serde_json::to_vec(&list)?)?;
    }
    if let Some(fs) = config
        .blueprint
        .as_ref()
        .and_then(|b| b.pointer("/inline/filesystem"))
    {
        write_filesystem(&p.content, fs)?;
    }
    let target_source = env_path("TARGET_SOURCE_PATH", paths::TARGET_SOURCE);
    let target = std::fs::read(&target_source)
        .with_context(|| format!("reading the target {}", target_source.display()))?;
    write(&p.target, &target)?;

    let scope = Scope::from_env()?;
    let client = client().await?;
    let secrets = scope.secrets(&client);
    let backups = secrets
        .list(&ListParams::default().labels(&scope.key.selector(Some("state"))))
        .await
        .context("listing the state Secrets")?
        .items;
    if let Some((uuid, bytes)) = state::newest_backup(&backups) {
        state::unpack(&bytes, &p.state).context("restoring the state")?;
        eprintln!("init: restored state backup {uuid} ({} bytes)", bytes.len());
    }
    eprintln!("init: inputs written");
    Ok(())
}

/// A client with retries: in a fresh pod the token may take a moment.
async fn client() -> anyhow::Result<Client> {
    let mut delay = Duration::from_millis(500);
    let mut last = None;
    for _ in 0..6 {
        match Client::try_default().await {
            Ok(c) => return Ok(c),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(delay).await;
        delay *= 2;
    }
    Err(last
        .map(anyhow::Error::from)
        .unwrap_or_else(|| anyhow::anyhow!("no client")))
    .context("creating a Kubernetes client (in-cluster or KUBECONFIG)")
}

/// The exit code of `main`, once it has terminated.
fn main_exit_code(pod: &Pod) -> Option<i32> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == "main")?
        .state
        .as_ref()?
        .terminated
        .as_ref()
        .map(|t| t.exit_code)
}

/// `deployer-host container wait`.
pub async fn wait() -> anyhow::Result<()> {
    let p = Paths::from_env();
    let scope = Scope::from_env()?;
    let pod_name = env_required("POD_NAME")?;
    let poll = std::env::var("WAIT_POLL_INTERVAL")
        .ok()
        .and_then(|s| match parse_go_duration(&s) {
            Ok(crate::landscaper::GoDuration::Finite(d)) if !d.is_zero() => Some(d),
            _ => None,
        })
        .unwrap_or(Duration::from_secs(2));
    let client = client().await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &scope.pod_namespace);
    let exit_code = loop {
        match pods.get_opt(&pod_name).await {
            Ok(Some(pod)) => {
                if let Some(code) = main_exit_code(&pod) {
                    break code;
                }
            }
            Ok(None) => bail!("pod {pod_name} not found"),
            Err(e) => eprintln!("wait: reading pod {pod_name}: {e} (retrying)"),
        }
        tokio::time::sleep(poll).await;
    };
    // The state is kept even when main failed: it is the program's own record of what it did.
    backup_state(&client, &scope, &p.state).await?;
    if exit_code != 0 {
        bail!("main container exited with code {exit_code}");
    }
    match std::fs::read(&p.exports) {
        Ok(bytes) => {
            let mut secret = Secret {
                metadata: scope.meta("export"),
                data: Some(BTreeMap::from([("config".to_string(), ByteString(bytes))])),
                ..Default::default()
            };
            secret.metadata.name = Some(scope.key.export_secret());
            upsert(&scope.secrets(&client), &secret)
                .await
                .context("writing the export Secret")?;
            eprintln!("wait: exports stored");
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => eprintln!("wait: no exports"),
        Err(e) => return Err(e).context(format!("reading {}", p.exports.display())),
    }
    Ok(())
}

/// Stores the state directory as a new backup, then removes the older ones.
async fn backup_state(client: &Client, scope: &Scope, dir: &Path) -> anyhow::Result<()> {
    let Some(bytes) = state::pack(dir).context("packing the state")? else {
        return Ok(());
    };
    let secrets = scope.secrets(client);
    let uuid = uuid::Uuid::new_v4().to_string();
    let chunks: Vec<&[u8]> = bytes.chunks(state::CHUNK).collect();
    for (num, chunk) in chunks.iter().enumerate() {
        let mut meta = scope.meta("state");
        meta.generate_name = Some(scope.key.state_prefix());
        let annotations = meta.annotations.get_or_insert_default();
        annotations.insert(ANNOTATION_UUID.into(), uuid.clone());
        annotations.insert(ANNOTATION_NUM.into(), num.to_string());
        annotations.insert(ANNOTATION_COUNT.into(), chunks.len().to_string());
        let secret = Secret {
            metadata: meta,
            data: Some(BTreeMap::from([(
                "config".to_string(),
                ByteString(chunk.to_vec()),
            )])),
            ..Default::default()
        };
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .context("writing a state Secret")?;
    }
    let all = secrets
        .list(&ListParams::default().labels(&scope.key.selector(Some("state"))))
        .await
        .context("listing the state Secrets")?;
    for old in all
        .items
        .iter()
        .filter(|s| s.annotations().get(ANNOTATION_UUID).map(String::as_str) != Some(uuid.as_str()))
    {
        delete_opt(&secrets, &old.name_any())
            .await
            .context("deleting an old state Secret")?;
    }
    eprintln!(
        "wait: state stored ({} bytes, {} Secret(s))",
        bytes.len(),
        chunks.len()
    );
    Ok(())
}

/// Runs `program` and writes its error to the termination log, so `kubectl describe pod` and
/// the DeployItem's error show it.
pub async fn run_and_report(
    program: impl std::future::Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    let result = program.await;
    if let Err(e) = &result {
        let log =
            std::env::var("TERMINATION_LOG").unwrap_or_else(|_| "/dev/termination-log".into());
        let _ = std::fs::write(log, format!("{e:#}"));
    }
    result
}
