//! The dev kubelet's podman runtime: each container of a pod runs as a real container
//! (`podman run`), so init and wait run from the host's own image and main from the item's.
//!
//! A pod spec becomes containers like this:
//! - **Images** are pulled before the pod starts: an image already in podman's storage is not
//!   pulled again unless `imagePullPolicy: Always` (the host's image, loaded with `skopeo`, never
//!   is); registries on `127.0.0.1`/`localhost` are spoken to without TLS verification
//!   (`--tls-verify=false`); the pod's `imagePullSecrets` (`.dockerconfigjson`) are merged into
//!   one auth file (`--authfile`). A failed pull is the kubelet's `ErrImagePull`.
//! - **Volumes**: an `emptyDir` is `<pod dir>/volumes/<name>` (mode 0777: the host's image runs as
//!   uid 65532, others as root) bind-mounted read-write at every mount path; a Secret volume is
//!   written to `<pod dir>/volumes/<name>/<key>` and mounted read-only; a projected volume with a
//!   `serviceAccountToken` source is the pod's API access (below). Other kinds are not mounted.
//! - The **termination log** is the host file `<pod dir>/<container>.termination-log`, mounted at
//!   `terminationMessagePath` (default `/dev/termination-log`).
//! - **Env**: values as given, `fieldRef` `metadata.name|namespace` resolved; paths are real in
//!   the container, nothing is remapped. `command` is the entry point, `args` follow the image.
//! - **Security**: `readOnlyRootFilesystem` → `--read-only`, dropping `ALL` → `--cap-drop all`,
//!   `allowPrivilegeEscalation: false` → `no-new-privileges`. `runAsUser`/`fsGroup` are not
//!   applied: images run as their own user.
//! - **Network**: the host's (`--network host`): the API server and registries are on loopback.
//!   Everything else podman reads from its configuration: `CONTAINERS_CONF` inherited, or the
//!   file an embedder gave [`use_containers_conf`].
//! - Containers are named `deployer-<pod uid>-<container>`, removed when they end (`--rm`), at
//!   the deadline (`rm -f`) and when their run is dropped (the kubelet's runtime ends).
//!
//! **API access**, for the containers that mount the projected token volume (init and wait; main
//! gets none), from the kubeconfig the kubelet gives ([`api_access`]):
//! - *in-cluster*, as on a node, when the cluster is `https://` with `certificate-authority-data`
//!   and the user is a bearer token (the kubelet's own, or the pod ServiceAccount's when it mints
//!   tokens): `token`, `ca.crt` and `namespace` at the volume's mount path
//!   (`/var/run/secrets/kubernetes.io/serviceaccount`), `KUBERNETES_SERVICE_HOST|PORT` set;
//! - *kubeconfig* otherwise (a plain-HTTP loopback server, client certificates, no CA data): the
//!   kubeconfig file is mounted read-only at [`KUBECONFIG_IN_CONTAINER`] and `KUBECONFIG` names it.
//!
//! Owns: turning one pod's containers into podman commands and the host files they mount. Must
//! not touch: the pod's status and lifecycle (the kubelet writes them), images or containers it
//! did not name.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Container, Pod};
use kube::ResourceExt;
use serde_json::{Value, json};

/// Where a mounted kubeconfig is in the containers ([`ApiAccess::Kubeconfig`]).
pub const KUBECONFIG_IN_CONTAINER: &str = "/var/run/deployer-host/kubeconfig";

/// How init and wait reach the API server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiAccess {
    /// As on a node: a ServiceAccount's files and `KUBERNETES_SERVICE_HOST|PORT`.
    InCluster {
        host: String,
        port: u16,
        ca_pem: Vec<u8>,
        token: String,
    },
    /// The kubeconfig file mounted, `KUBECONFIG` set.
    Kubeconfig,
}

/// Decides [`ApiAccess`] from a kubeconfig's current context (else its first cluster and user).
pub fn api_access(kubeconfig_yaml: &str) -> anyhow::Result<ApiAccess> {
    use base64::Engine as _;
    let config: serde_yaml::Value =
        serde_yaml::from_str(kubeconfig_yaml).context("parsing the kubeconfig")?;
    let named = |list: &str, name: Option<&serde_yaml::Value>, field: &str| {
        let items = config.get(list)?.as_sequence()?;
        let item = match name {
            Some(n) => items.iter().find(|i| i.get("name") == Some(n)),
            None => items.first(),
        }?;
        item.get(field).cloned()
    };
    let context = config
        .get("current-context")
        .and_then(|c| named("contexts", Some(c), "context"));
    let cluster = named(
        "clusters",
        context.as_ref().and_then(|c| c.get("cluster")),
        "cluster",
    );
    let user = named(
        "users",
        context.as_ref().and_then(|c| c.get("user")),
        "user",
    );
    let text = |v: &Option<serde_yaml::Value>, key: &str| {
        v.as_ref()
            .and_then(|v| v.get(key))
            .and_then(|v| v.as_str())
            .map(str::to_string)
    };
    let (Some(server), Some(ca), Some(token)) = (
        text(&cluster, "server"),
        text(&cluster, "certificate-authority-data"),
        text(&user, "token"),
    ) else {
        return Ok(ApiAccess::Kubeconfig);
    };
    let uri: http::Uri = server.parse().context("the kubeconfig's server")?;
    if uri.scheme_str() != Some("https") {
        return Ok(ApiAccess::Kubeconfig);
    }
    let ca_pem = base64::engine::general_purpose::STANDARD
        .decode(ca.trim())
        .context("the kubeconfig's certificate-authority-data")?;
    Ok(ApiAccess::InCluster {
        host: uri.host().unwrap_or("127.0.0.1").to_string(),
        port: uri.port_u16().unwrap_or(443),
        ca_pem,
        token,
    })
}

/// What a pod volume is on the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostVolume {
    /// A directory (emptyDir read-write, Secret read-only).
    Dir { path: PathBuf, read_only: bool },
    /// The projected ServiceAccount token: the pod's [`ApiAccess`].
    ServiceAccount,
}

/// One pod's host side: its volumes and API access.
#[derive(Clone, Debug)]
pub struct PodSetup {
    pub root: PathBuf,
    pub volumes: BTreeMap<String, HostVolume>,
    pub access: ApiAccess,
    /// The kubeconfig mounted for [`ApiAccess::Kubeconfig`].
    pub kubeconfig: PathBuf,
}

impl PodSetup {
    /// The ServiceAccount directory of [`ApiAccess::InCluster`].
    fn service_account_dir(&self) -> PathBuf {
        self.root.join("serviceaccount")
    }
}

/// Maps the pod's volumes to host paths below `root` (pure: nothing is written).
pub fn volume_map(pod: &Pod, root: &Path) -> BTreeMap<String, HostVolume> {
    let mut map = BTreeMap::new();
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let dir = root.join("volumes").join(&v.name);
        let volume = if v.empty_dir.is_some() {
            HostVolume::Dir {
                path: dir,
                read_only: false,
            }
        } else if v.secret.is_some() {
            HostVolume::Dir {
                path: dir,
                read_only: true,
            }
        } else if v.projected.as_ref().is_some_and(|p| {
            p.sources
                .iter()
                .flatten()
                .any(|s| s.service_account_token.is_some())
        }) {
            HostVolume::ServiceAccount
        } else {
            continue;
        };
        map.insert(v.name.clone(), volume);
    }
    map
}

/// Writes the pod's host files: volume directories (Secret volumes with `secrets`' data, by
/// volume name), the ServiceAccount files or a readable copy of `kubeconfig`.
pub fn prepare(
    pod: &Pod,
    root: &Path,
    secrets: &BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    kubeconfig: &Path,
) -> anyhow::Result<PodSetup> {
    let text = std::fs::read_to_string(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let volumes = volume_map(pod, root);
    for (name, volume) in &volumes {
        let HostVolume::Dir { path, read_only } = volume else {
            continue;
        };
        std::fs::create_dir_all(path)?;
        let mode = if *read_only { 0o755 } else { 0o777 };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
        for (key, data) in secrets.get(name).into_iter().flatten() {
            write_readable(&path.join(key), data)?;
        }
    }
    let setup = PodSetup {
        root: root.to_path_buf(),
        volumes,
        access: api_access(&text)?,
        kubeconfig: root.join("kubeconfig.mounted"),
    };
    match &setup.access {
        ApiAccess::InCluster { ca_pem, token, .. } => {
            let dir = setup.service_account_dir();
            std::fs::create_dir_all(&dir)?;
            write_readable(&dir.join("token"), token.as_bytes())?;
            write_readable(&dir.join("ca.crt"), ca_pem)?;
            let ns = pod.namespace().unwrap_or_default();
            write_readable(&dir.join("namespace"), ns.as_bytes())?;
        }
        ApiAccess::Kubeconfig => write_readable(&setup.kubeconfig, text.as_bytes())?,
    }
    Ok(setup)
}

fn write_readable(path: &Path, data: &[u8]) -> anyhow::Result<()> {
    std::fs::write(path, data).with_context(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))?;
    Ok(())
}

/// The merged auth file of the pod's pull secrets' `.dockerconfigjson`s, at `<root>/auth.json`;
/// `None` without any.
pub fn write_authfile(root: &Path, docker_configs: &[Vec<u8>]) -> anyhow::Result<Option<PathBuf>> {
    let mut auths = serde_json::Map::new();
    for config in docker_configs {
        let config: Value = serde_json::from_slice(config).context("a .dockerconfigjson")?;
        for (registry, auth) in config["auths"].as_object().into_iter().flatten() {
            auths.insert(registry.clone(), auth.clone());
        }
    }
    if auths.is_empty() {
        return Ok(None);
    }
    let path = root.join("auth.json");
    std::fs::write(&path, serde_json::to_vec(&json!({"auths": auths}))?)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    Ok(Some(path))
}

/// The registry host of an image reference (`docker.io` for a short name), without its port.
fn registry_host(image: &str) -> &str {
    match image.split_once('/') {
        Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => {
            match first.rsplit_once(':') {
                Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
                _ => first,
            }
        }
        _ => "docker.io",
    }
}

/// Whether podman may talk to the image's registry without TLS verification (loopback only).
pub fn insecure_registry(image: &str) -> bool {
    matches!(registry_host(image), "127.0.0.1" | "localhost" | "[::1]")
}

/// The `podman pull` arguments for `image`.
pub fn pull_args(image: &str, authfile: Option<&Path>) -> Vec<String> {
    let mut args = vec!["pull".to_string(), "--quiet".into()];
    if insecure_registry(image) {
        args.push("--tls-verify=false".into());
    }
    if let Some(file) = authfile {
        args.push(format!("--authfile={}", file.display()));
    }
    args.push(image.into());
    args
}

/// The `containers.conf` this process' kubelets give podman, if its embedder chose one.
static CONTAINERS_CONF: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Gives every podman command of this process' kubelets `path` as `CONTAINERS_CONF` (the
/// first call wins). Embedders (tests) use it instead of setting the process' environment,
/// which other threads may be reading.
pub fn use_containers_conf(path: &Path) {
    let _ = CONTAINERS_CONF.set(path.to_path_buf());
}

fn podman() -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("podman");
    cmd.stdin(Stdio::null()).kill_on_drop(true);
    if let Some(conf) = CONTAINERS_CONF.get() {
        cmd.env("CONTAINERS_CONF", conf);
    }
    cmd
}

/// Makes `c`'s image available: pulled unless present (or `imagePullPolicy: Always`).
/// `Err`: podman's message, as a kubelet's `ErrImagePull` carries it.
pub async fn pull(c: &Container, authfile: Option<&Path>) -> Result<(), String> {
    let image = c.image.clone().unwrap_or_default();
    if c.image_pull_policy.as_deref() != Some("Always") {
        let exists = podman()
            .args(["image", "exists", &image])
            .status()
            .await
            .is_ok_and(|s| s.success());
        if exists {
            return Ok(());
        }
    }
    let out = podman()
        .args(pull_args(&image, authfile))
        .output()
        .await
        .map_err(|e| format!("running podman: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let why = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("podman pull failed");
    Err(format!("failed to pull image \"{image}\": {why}"))
}

/// The image's ID as a kubelet on containerd reports it (`imageID`):
/// `<repository>@<manifest digest>`. For an image of a registry the digest is the registry's
/// (`skopeo inspect`): podman's own record of an image it also has locally may name a digest
/// the registry never served. For an image only in podman's storage (`localhost/…`, the host's
/// image loaded from its layout), podman's record. `None`: neither tells.
pub async fn image_id(image: &str, authfile: Option<&Path>) -> Option<String> {
    let repository = repository_of(image);
    let from_registry = async {
        if image.starts_with("localhost/") {
            return None;
        }
        let mut cmd = tokio::process::Command::new("skopeo");
        cmd.stdin(Stdio::null()).kill_on_drop(true);
        cmd.args(["inspect", "--format", "{{.Digest}}"]);
        if insecure_registry(image) {
            cmd.arg("--tls-verify=false");
        }
        if let Some(file) = authfile {
            cmd.arg(format!("--authfile={}", file.display()));
        }
        let out = cmd.arg(format!("docker://{image}")).output().await.ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let digest = match from_registry.await {
        Some(d) if d.starts_with("sha256:") => d,
        _ => {
            let out = podman()
                .args(["image", "inspect", "--format", "{{.Digest}}", image])
                .output()
                .await
                .ok()?;
            let d = String::from_utf8_lossy(&out.stdout).trim().to_string();
            (out.status.success() && d.starts_with("sha256:")).then_some(d)?
        }
    };
    Some(format!("{repository}@{digest}"))
}

/// An image reference without its tag or digest.
fn repository_of(image: &str) -> &str {
    let image = image.split_once('@').map_or(image, |(r, _)| r);
    match image.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => repo,
        _ => image,
    }
}

/// The name of `c`'s container: unique per pod and container.
pub fn container_name(pod: &Pod, c: &Container) -> String {
    format!("deployer-{}-{}", pod.uid().unwrap_or_default(), c.name)
}

/// The host file that is `c`'s termination log, created writable for any user.
pub fn termination_log(root: &Path, c: &Container) -> anyhow::Result<PathBuf> {
    let path = root.join(format!("{}.termination-log", c.name));
    std::fs::write(&path, b"")?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))?;
    Ok(path)
}

/// The `PATH` container runtimes give an image that sets none (podman 4.3 gives none).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Whether `image`'s configuration sets `PATH` (else [`run_args`] gives [`DEFAULT_PATH`]).
pub async fn image_sets_path(image: &str) -> bool {
    let out = podman()
        .args([
            "image",
            "inspect",
            "--format={{range .Config.Env}}{{println .}}{{end}}",
        ])
        .arg(image)
        .output()
        .await;
    out.is_ok_and(|o| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .any(|l| l.starts_with("PATH="))
    })
}

/// `podman run` arguments for `c` (pure: [`prepare`] wrote the files they name); `default_path`:
/// its image sets no `PATH`.
pub fn run_args(
    pod: &Pod,
    c: &Container,
    setup: &PodSetup,
    termination_log: &Path,
    default_path: bool,
) -> Vec<String> {
    let mut a: Vec<String> = ["run", "--rm", "--pull=never", "--network=host"]
        .map(String::from)
        .into();
    a.push(format!("--name={}", container_name(pod, c)));
    if let Some(sc) = &c.security_context {
        if sc.read_only_root_filesystem == Some(true) {
            a.push("--read-only".into());
        }
        let drop = sc.capabilities.as_ref().and_then(|c| c.drop.as_ref());
        if drop.is_some_and(|d| d.iter().any(|c| c == "ALL")) {
            a.push("--cap-drop=all".into());
        }
        if sc.allow_privilege_escalation == Some(false) {
            a.push("--security-opt=no-new-privileges".into());
        }
    }
    let mut env: Vec<(String, String)> = Vec::new();
    if default_path {
        env.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    for m in c.volume_mounts.iter().flatten() {
        let ro = if m.read_only == Some(true) { ":ro" } else { "" };
        match setup.volumes.get(&m.name) {
            Some(HostVolume::Dir { path, read_only }) => {
                let ro = if *read_only { ":ro" } else { ro };
                a.push(format!("--volume={}:{}{ro}", path.display(), m.mount_path));
            }
            Some(HostVolume::ServiceAccount) => match &setup.access {
                ApiAccess::InCluster { .. } => a.push(format!(
                    "--volume={}:{}:ro",
                    setup.service_account_dir().display(),
                    m.mount_path
                )),
                ApiAccess::Kubeconfig => {
                    a.push(format!(
                        "--volume={}:{KUBECONFIG_IN_CONTAINER}:ro",
                        setup.kubeconfig.display()
                    ));
                    env.push(("KUBECONFIG".into(), KUBECONFIG_IN_CONTAINER.into()));
                }
            },
            None => {}
        }
    }
    let log_path = c
        .termination_message_path
        .as_deref()
        .unwrap_or("/dev/termination-log");
    a.push(format!("--volume={}:{log_path}", termination_log.display()));
    if let ApiAccess::InCluster { host, port, .. } = &setup.access {
        env.push(("KUBERNETES_SERVICE_HOST".into(), host.clone()));
        env.push(("KUBERNETES_SERVICE_PORT".into(), port.to_string()));
    }
    for e in c.env.iter().flatten() {
        let field = e.value_from.as_ref().and_then(|f| f.field_ref.as_ref());
        let value = match (&e.value, field.map(|f| f.field_path.as_str())) {
            (Some(v), _) => v.clone(),
            (None, Some("metadata.name")) => pod.name_any(),
            (None, Some("metadata.namespace")) => pod.namespace().unwrap_or_default(),
            _ => String::new(),
        };
        env.push((e.name.clone(), value));
    }
    a.extend(env.into_iter().map(|(k, v)| format!("--env={k}={v}")));
    if let Some(command) = &c.command {
        a.push(format!("--entrypoint={}", json!(command)));
    }
    a.push(c.image.clone().unwrap_or_default());
    a.extend(c.args.iter().flatten().cloned());
    a
}

/// Removes a container when dropped, unless disarmed: nothing outlives its run.
struct Removal(Option<String>);

impl Drop for Removal {
    fn drop(&mut self) {
        if let Some(name) = self.0.take() {
            let _ = std::process::Command::new("podman")
                .args(["rm", "--force", "--time=0", "--ignore", &name])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Runs `podman <args>` (from [`run_args`]) attached: the container's output and exit status.
/// `None`: killed and removed at `deadline`.
pub async fn run(
    args: &[String],
    name: &str,
    deadline: Option<Duration>,
) -> anyhow::Result<Option<Output>> {
    let mut removal = Removal(Some(name.to_string()));
    let child = podman()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running podman")?;
    let waited = child.wait_with_output();
    let output = match deadline {
        None => waited.await?,
        Some(d) => match tokio::time::timeout(d, waited).await {
            Ok(out) => out?,
            Err(_) => {
                let _ = podman()
                    .args(["rm", "--force", "--time=0", "--ignore", name])
                    .output()
                    .await;
                removal.0 = None;
                return Ok(None);
            }
        },
    };
    // `--rm`: podman removed it.
    removal.0 = None;
    Ok(Some(output))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Pod {
        let input = crate::container::pod::PodInput {
            item: &crate::container::pod::ItemKey {
                namespace: "default".into(),
                name: "echo".into(),
            },
            generation: 1,
            job_id: "job",
            operation: crate::container::pod::Operation::Reconcile,
            image: "127.0.0.1:5000/test/sh:1".into(),
            command: Some(vec!["sh".into(), "-c".into()]),
            args: Some(vec!["echo hi".into()]),
            resources: None,
            active_deadline_seconds: Some(30),
            pull_secret: true,
        };
        let settings = crate::container::config::ContainerConfig {
            namespace: Some("pods".into()),
            host_image: Some("localhost/deployer-host:test".into()),
            ..Default::default()
        }
        .settings("")
        .unwrap();
        let mut pod = crate::container::pod::pod(&input, &settings);
        pod.metadata.name = Some("echo-x1".into());
        pod.metadata.uid = Some("u1".into());
        pod
    }

    fn kubeconfig(server: &str, ca: bool, user: &str) -> String {
        let ca = if ca {
            "    certificate-authority-data: UEVN\n"
        } else {
            ""
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n{ca}users:\n- name: u\n  user: {user}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
        )
    }

    fn setup(access: ApiAccess) -> PodSetup {
        let root = PathBuf::from("/pods/echo-x1");
        PodSetup {
            volumes: volume_map(&pod(), &root),
            root,
            access,
            kubeconfig: "/pods/echo-x1/kubeconfig.mounted".into(),
        }
    }

    #[test]
    fn an_https_server_with_a_ca_and_a_token_is_reached_in_cluster_anything_else_by_kubeconfig() {
        let access = api_access(&kubeconfig("https://127.0.0.1:6443", true, "{token: t}")).unwrap();
        assert_eq!(
            access,
            ApiAccess::InCluster {
                host: "127.0.0.1".into(),
                port: 6443,
                ca_pem: b"PEM".to_vec(),
                token: "t".into()
            }
        );
        for (server, ca, user) in [
            ("http://127.0.0.1:8080", true, "{token: t}"),
            ("https://127.0.0.1:6443", false, "{token: t}"),
            (
                "https://127.0.0.1:6443",
                true,
                "{client-certificate-data: X, client-key-data: Y}",
            ),
        ] {
            let text = kubeconfig(server, ca, user);
            assert_eq!(api_access(&text).unwrap(), ApiAccess::Kubeconfig, "{text}");
        }
    }

    #[test]
    fn volumes_map_to_pod_directories_and_the_token_volume_to_api_access() {
        let map = volume_map(&pod(), Path::new("/pods/p"));
        assert_eq!(
            map["shared-volume"],
            HostVolume::Dir {
                path: "/pods/p/volumes/shared-volume".into(),
                read_only: false
            }
        );
        assert_eq!(
            map["configuration"],
            HostVolume::Dir {
                path: "/pods/p/volumes/configuration".into(),
                read_only: true
            }
        );
        assert_eq!(map["runner-token"], HostVolume::ServiceAccount);
    }

    #[test]
    fn main_runs_its_image_with_the_shared_volume_and_no_credentials() {
        let pod = pod();
        let main = &pod.spec.as_ref().unwrap().containers[0];
        let access = ApiAccess::InCluster {
            host: "127.0.0.1".into(),
            port: 6443,
            ca_pem: vec![],
            token: "t".into(),
        };
        let args = run_args(
            &pod,
            main,
            &setup(access),
            Path::new("/pods/echo-x1/main.log"),
            true,
        );
        let has = |s: &str| args.iter().any(|a| a == s);
        assert_eq!(
            &args[..4],
            ["run", "--rm", "--pull=never", "--network=host"]
        );
        assert!(has("--name=deployer-u1-main"));
        assert!(has(
            "--volume=/pods/echo-x1/volumes/shared-volume:/data/ls/shared"
        ));
        assert!(has("--volume=/pods/echo-x1/main.log:/dev/termination-log"));
        assert!(has("--env=POD_NAME=echo-x1") && has("--env=POD_NAMESPACE=pods"));
        assert!(has("--env=OPERATION=RECONCILE"));
        assert!(has(&format!("--env=PATH={DEFAULT_PATH}")));
        assert!(!args.iter().any(|a| a.contains("serviceaccount")));
        assert!(!args.iter().any(|a| a.contains("KUBECONFIG")));
        let image = args.iter().position(|a| a == "127.0.0.1:5000/test/sh:1");
        assert_eq!(args[image.unwrap() - 1], r#"--entrypoint=["sh","-c"]"#);
        assert_eq!(args.last().unwrap(), "echo hi");
    }

    #[test]
    fn init_gets_the_api_in_cluster_or_by_kubeconfig_and_runs_hardened() {
        let pod = pod();
        let init = &pod.spec.as_ref().unwrap().init_containers.as_ref().unwrap()[0];
        let access = ApiAccess::InCluster {
            host: "127.0.0.1".into(),
            port: 6443,
            ca_pem: vec![],
            token: "t".into(),
        };
        let args = run_args(&pod, init, &setup(access), Path::new("/l"), false);
        let has = |s: &str| args.iter().any(|a| a == s);
        assert!(has("--read-only") && has("--cap-drop=all"));
        assert!(!args.iter().any(|a| a.starts_with("--env=PATH=")));
        assert!(has("--security-opt=no-new-privileges"));
        assert!(has(
            "--volume=/pods/echo-x1/serviceaccount:/var/run/secrets/kubernetes.io/serviceaccount:ro"
        ));
        assert!(has(
            "--volume=/pods/echo-x1/volumes/configuration:/data/ls/internal:ro"
        ));
        assert!(has("--env=KUBERNETES_SERVICE_HOST=127.0.0.1"));
        assert!(has("--env=KUBERNETES_SERVICE_PORT=6443"));
        let image = args
            .iter()
            .position(|a| a == "localhost/deployer-host:test");
        assert_eq!(
            args[image.unwrap() - 1],
            r#"--entrypoint=["deployer-host","container","init"]"#
        );

        let args = run_args(
            &pod,
            init,
            &setup(ApiAccess::Kubeconfig),
            Path::new("/l"),
            false,
        );
        let has = |s: &str| args.iter().any(|a| a == s);
        assert!(has(&format!(
            "--volume=/pods/echo-x1/kubeconfig.mounted:{KUBECONFIG_IN_CONTAINER}:ro"
        )));
        assert!(has(&format!("--env=KUBECONFIG={KUBECONFIG_IN_CONTAINER}")));
        assert!(!has("--env=KUBERNETES_SERVICE_HOST=127.0.0.1"));
    }

    #[test]
    fn an_image_id_names_the_repository_without_tag_or_digest() {
        assert_eq!(
            repository_of("127.0.0.1:5000/test/sh:1"),
            "127.0.0.1:5000/test/sh"
        );
        assert_eq!(
            repository_of("127.0.0.1:5000/test/sh"),
            "127.0.0.1:5000/test/sh"
        );
        assert_eq!(repository_of("busybox@sha256:ab"), "busybox");
        assert_eq!(
            repository_of("localhost/wasm-deployer:0.1.0"),
            "localhost/wasm-deployer"
        );
    }

    #[test]
    fn only_loopback_registries_are_pulled_without_tls_verification() {
        assert_eq!(
            pull_args("127.0.0.1:5000/test/sh:1", Some(Path::new("/a.json"))),
            [
                "pull",
                "--quiet",
                "--tls-verify=false",
                "--authfile=/a.json",
                "127.0.0.1:5000/test/sh:1"
            ]
        );
        assert!(insecure_registry("localhost/deployer-host:test"));
        assert!(!insecure_registry("registry.example:5000/team/app:1"));
        assert!(!insecure_registry("alpine:3.19"));
        assert!(!insecure_registry("127.0.0.1.example/x:1"));
    }
}
