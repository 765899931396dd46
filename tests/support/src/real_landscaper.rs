//! The real Gardener Landscaper (`../shared/tools/real-landscaper`: its controller in both modes)
//! as a partner of the stories, and helpers to read what it writes (Installations, Executions,
//! DataObjects), which the host never reads.
//!
//! Optional: this repository neither ships nor builds Landscaper. Its binaries (Landscaper's public
//! source, v0.99.0-dev, built outside the repository) are found by the tool in
//! `$REAL_LANDSCAPER_BIN` (`docs/real-landscaper.md`). Without them every test that needs them
//! prints one `SKIP` line naming the variable and returns — in CI too, where they are absent.

pub mod dlm;
pub mod stage;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// The tool script, beside the repository.
pub fn tool() -> PathBuf {
    crate::workspace().join("../shared/tools/real-landscaper/real-landscaper")
}

/// The path of one of Landscaper's binaries (`landscaper-controller`, `integration.test`, ...), as
/// `real-landscaper path NAME` finds it in `$REAL_LANDSCAPER_BIN`; `None` when it is absent, with
/// one `SKIP` line per test binary that names the variable.
pub fn built(name: &str) -> Option<PathBuf> {
    let out = Command::new(tool()).arg("path").arg(name).output();
    let why = match out {
        Ok(out) if out.status.success() => {
            return Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
        }
        Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_string(),
        Err(e) => format!("{} cannot run ({e})", tool().display()),
    };
    // Once per test binary, and past the test harness' capture (a passing test's `eprintln!` is
    // never shown), so that a run without the binaries says so in its output.
    static SAID: OnceLock<()> = OnceLock::new();
    SAID.get_or_init(|| {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "SKIP: the real Landscaper is not available: {why}; see docs/real-landscaper.md"
        );
    });
    None
}

/// Returns from the story, saying why, unless the real Landscaper can drive it: it is built, and
/// the stories run on the embedded API server (this Landscaper writes JSON nulls a kube-apiserver
/// 1.20 refuses; see `docs/real-landscaper.md`).
#[macro_export]
macro_rules! require_real_landscaper {
    () => {
        if $crate::backend() == $crate::Backend::Real {
            eprintln!(
                "SKIP on the real API server: this Landscaper's status writes carry JSON nulls kube-apiserver 1.20 refuses"
            );
            return;
        }
        if $crate::real_landscaper::built("landscaper-controller").is_none() {
            return;
        }
    };
}

/// Landscaper installs its own CRDs when it starts, over ours. This puts back the CRDs this
/// project generates (`deployer_host::crds::landscaper`) for the kinds the chart ships, so that
/// every write Landscaper makes to them afterwards is judged by our schemas: a field they lack
/// would be pruned, and the story would fail.
fn put_back_our_crds(kubeconfig: &Path) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let kubeconfig = kubeconfig.to_path_buf();
    // A thread of its own: `start` may run on a runtime's blocking thread, where no second
    // runtime may block.
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let file = kube::config::Kubeconfig::read_from(&kubeconfig).expect("kubeconfig");
            let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
                .await
                .expect("kubeconfig");
            let api: Api<CustomResourceDefinition> =
                Api::all(Client::try_from(config).expect("client"));
            for mut crd in deployer_host::crds::landscaper() {
                let name = crd.metadata.name.clone().unwrap_or_default();
                let current = api.get(&name).await.expect("Landscaper installed the CRD");
                crd.metadata.resource_version = current.metadata.resource_version;
                api.replace(&name, &PostParams::default(), &crd)
                    .await
                    .unwrap_or_else(|e| panic!("putting back our CRD {name}: {e}"));
            }
        })
    })
    .join()
    .expect("putting back our CRDs");
}

/// Both modes of the Landscaper controller against one API server; stopped when dropped.
pub struct RealLandscaper {
    dir: tempfile::TempDir,
}

impl RealLandscaper {
    /// Starts the controller against `kubeconfig` (a file) and waits until both modes run their
    /// controllers. `pickup_timeout` is Landscaper's `deployItemTimeouts.pickup` ("30s").
    ///
    /// Both modes install Landscaper's CRDs at start; started together on an empty server, one
    /// may lose the race (`failed to handle CRDs: ... already exists`) and exit. The tool's
    /// `start` can say `ready` before that: so this waits for both to log "starting the
    /// controllers", and starts again (the CRDs then exist) if one of them ended.
    pub fn start(kubeconfig: &Path, pickup_timeout: &str) -> Self {
        Self::start_with_env(kubeconfig, pickup_timeout, &[])
    }

    /// [`RealLandscaper::start`] with more environment for the tool and the controller (e.g.
    /// `LANDSCAPER_ARGS`, `SSL_CERT_FILE`).
    pub fn start_with_env(kubeconfig: &Path, pickup_timeout: &str, env: &[(&str, String)]) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("real-landscaper-")
            .tempdir()
            .expect("tempdir");
        let me = Self { dir };
        for attempt in 1..=3 {
            let out = Command::new(tool())
                .arg("start")
                .arg(me.dir.path())
                .arg(kubeconfig)
                .env("LANDSCAPER_PICKUP_TIMEOUT", pickup_timeout)
                .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
                .output()
                .expect("running real-landscaper start");
            let said_ready =
                out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ready");
            if said_ready && me.wait_running(Duration::from_secs(60)) {
                put_back_our_crds(kubeconfig);
                return me;
            }
            eprintln!(
                "real-landscaper start, attempt {attempt}: not running; {}{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                me.log_tail(5)
            );
            let _ = Command::new(tool()).arg("stop").arg(me.dir.path()).status();
        }
        panic!("the real Landscaper did not start:\n{}", me.log_tail(30));
    }

    /// Whether both modes got to run their controllers within `timeout`, and still run.
    fn wait_running(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let alive = ["main", "central"].iter().all(|m| {
                std::fs::read_to_string(self.dir.path().join(format!("{m}.pid")))
                    .ok()
                    .is_some_and(|pid| {
                        Path::new("/proc").join(pid.trim()).exists()
                            && !std::fs::read_to_string(
                                Path::new("/proc").join(pid.trim()).join("stat"),
                            )
                            .unwrap_or_default()
                            .contains(") Z ")
                    })
            });
            if !alive {
                return false;
            }
            let started = ["main.log", "central.log"].iter().all(|l| {
                std::fs::read_to_string(self.dir.path().join(l))
                    .unwrap_or_default()
                    .contains("starting the controllers")
            });
            if started {
                return true;
            }
            if std::time::Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// How many lines of both controllers' logs contain `text`.
    pub fn log_count(&self, text: &str) -> usize {
        ["main.log", "central.log"]
            .iter()
            .map(|name| {
                std::fs::read_to_string(self.dir.path().join(name))
                    .unwrap_or_default()
                    .lines()
                    .filter(|l| l.contains(text))
                    .count()
            })
            .sum()
    }

    /// The last `lines` lines of both controllers' logs (for failure messages).
    pub fn log_tail(&self, lines: usize) -> String {
        let mut out = String::new();
        for name in ["main.log", "central.log"] {
            let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
            let all: Vec<&str> = text.lines().collect();
            let from = all.len().saturating_sub(lines);
            out.push_str(&format!("--- {name}\n{}\n", all[from..].join("\n")));
        }
        out
    }
}

impl Drop for RealLandscaper {
    fn drop(&mut self) {
        let _ = Command::new(tool())
            .arg("stop")
            .arg(self.dir.path())
            .status();
        if std::thread::panicking() {
            eprintln!("{}", self.log_tail(40));
        }
    }
}

/// `landscaper.gardener.cloud/v1alpha1` resources the host never reads.
pub fn ls_api(client: &Client, kind: &str, plural: &str, namespace: &str) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "landscaper.gardener.cloud".into(),
        version: "v1alpha1".into(),
        api_version: "landscaper.gardener.cloud/v1alpha1".into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    Api::namespaced_with(client.clone(), namespace, &ar)
}

pub fn installations(client: &Client, namespace: &str) -> Api<DynamicObject> {
    ls_api(client, "Installation", "installations", namespace)
}

pub fn executions(client: &Client, namespace: &str) -> Api<DynamicObject> {
    ls_api(client, "Execution", "executions", namespace)
}

pub fn data_objects(client: &Client, namespace: &str) -> Api<DynamicObject> {
    ls_api(client, "DataObject", "dataobjects", namespace)
}

/// Creates (or replaces) an object of `api` from JSON.
pub async fn apply(api: &Api<DynamicObject>, obj: Value) -> DynamicObject {
    let name = obj["metadata"]["name"].as_str().unwrap().to_string();
    let obj: DynamicObject = serde_json::from_value(obj).unwrap();
    match api.get_opt(&name).await.unwrap() {
        None => api.create(&PostParams::default(), &obj).await.unwrap(),
        Some(old) => {
            let mut obj = obj;
            obj.metadata.resource_version = old.metadata.resource_version;
            api.replace(&name, &PostParams::default(), &obj)
                .await
                .unwrap()
        }
    }
}

/// A DataObject whose data is `data` (Landscaper's data import).
pub fn data_object(name: &str, namespace: &str, data: Value) -> Value {
    json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "DataObject",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    })
}

/// Sets `landscaper.gardener.cloud/operation` on an Installation (`reconcile`, `interrupt`).
pub async fn set_operation(client: &Client, namespace: &str, installation: &str, op: &str) {
    installations(client, namespace)
        .patch(
            installation,
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"annotations": {"landscaper.gardener.cloud/operation": op}}
            })),
        )
        .await
        .expect("annotate Installation");
}

/// The Installation's `status` (empty object if none yet).
pub fn status(obj: &DynamicObject) -> Value {
    obj.data.get("status").cloned().unwrap_or(json!({}))
}

/// Whether the Installation's current job is finished (`jobIDFinished == jobID`, non-empty),
/// Landscaper's own definition.
pub fn job_finished(obj: &DynamicObject) -> bool {
    let s = status(obj);
    let job = s["jobID"].as_str().unwrap_or("");
    !job.is_empty() && s["jobIDFinished"].as_str() == Some(job)
}

/// Polls the Installation until `pred` holds, or panics with its status after `timeout`.
pub async fn wait_installation(
    client: &Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
    pred: impl Fn(&DynamicObject) -> bool,
) -> DynamicObject {
    let api = installations(client, namespace);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let current = api.get_opt(name).await.expect("get Installation");
        if let Some(inst) = &current
            && pred(inst)
        {
            return inst.clone();
        }
        if tokio::time::Instant::now() > deadline {
            panic!(
                "timed out waiting for Installation {namespace}/{name}; last state:\n{}",
                serde_yaml::to_string(&current.map(|c| status(&c))).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the Installation's job with a different id than `previous` is finished and
/// returns it with its `status.phase`.
pub async fn wait_job_after(
    client: &Client,
    namespace: &str,
    name: &str,
    previous: Option<&str>,
    timeout: Duration,
) -> (DynamicObject, String) {
    let inst = wait_installation(client, namespace, name, timeout, |i| {
        job_finished(i) && status(i)["jobID"].as_str() != previous
    })
    .await;
    let phase = status(&inst)["phase"].as_str().unwrap_or("").to_string();
    (inst, phase)
}

/// An Installation `name` in `namespace` with an inline blueprint (no component descriptor),
/// annotated `operation: reconcile`: it imports the Target `cluster` (bound to the Target
/// `target`) and the data imports `data` (name -> DataObject), exports `exports` (name ->
/// DataObject); `deploy` and `export` are the GoTemplates of its deploy and export executions.
pub fn inline_installation(
    namespace: &str,
    target: &str,
    name: &str,
    data: &[(&str, &str)],
    exports: &[(&str, &str)],
    deploy: &str,
    export: Option<&str>,
) -> Value {
    let mut blueprint = json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "Blueprint",
        "jsonSchema": "https://json-schema.org/draft/2019-09/schema",
        "imports": [{"name": "cluster", "targetType": "landscaper.gardener.cloud/kubernetes-cluster"}],
        "exports": exports.iter().map(|(n, _)| json!({"name": n, "type": "data", "schema": {"type": "string"}})).collect::<Vec<_>>(),
        "deployExecutions": [{"name": "default", "type": "GoTemplate", "template": deploy}],
    });
    for (n, _) in data {
        blueprint["imports"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": n, "type": "data", "schema": {"type": "string"}}));
    }
    if let Some(export) = export {
        blueprint["exportExecutions"] =
            json!([{"name": "default", "type": "GoTemplate", "template": export}]);
    }
    json!({
        "apiVersion": "landscaper.gardener.cloud/v1alpha1",
        "kind": "Installation",
        "metadata": {
            "name": name, "namespace": namespace,
            "annotations": {"landscaper.gardener.cloud/operation": "reconcile"},
        },
        "spec": {
            "imports": {
                "targets": [{"name": "cluster", "target": target}],
                "data": data.iter().map(|(n, d)| json!({"name": n, "dataRef": d})).collect::<Vec<_>>(),
            },
            "exports": {
                "data": exports.iter().map(|(n, d)| json!({"name": n, "dataRef": d})).collect::<Vec<_>>(),
            },
            "blueprint": {"inline": {"filesystem": {
                "blueprint.yaml": serde_yaml::to_string(&blueprint).unwrap(),
            }}},
        },
    })
}

/// The YAML blocks of `docs/<doc>` from the line starting `start` to the next `## ` heading, by
/// `kind`, each rewritten by `rewrite` (where the registry is) before it is parsed.
pub fn doc_yaml_blocks(
    doc: &str,
    start: &str,
    rewrite: &dyn Fn(&str) -> String,
) -> std::collections::BTreeMap<String, Value> {
    let text = std::fs::read_to_string(crate::workspace().join("docs").join(doc))
        .unwrap_or_else(|e| panic!("docs/{doc}: {e}"));
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("docs/{doc} has no {start:?}"));
    let section = &text[from + start.len()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut blocks = std::collections::BTreeMap::new();
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        let Some(indent) = line.strip_suffix("```yaml").map(str::len) else {
            continue;
        };
        let mut yaml = String::new();
        for line in lines.by_ref() {
            if line.trim() == "```" {
                break;
            }
            yaml.push_str(line.get(indent..).unwrap_or(""));
            yaml.push('\n');
        }
        let value: Value = serde_yaml::from_str(&rewrite(&yaml))
            .unwrap_or_else(|e| panic!("a YAML block of docs/{doc}: {e}\n{yaml}"));
        blocks.insert(value["kind"].as_str().unwrap().to_string(), value);
    }
    blocks
}

/// The image reference of the resource `resource` of `descriptor` (a component in the registry
/// at `addr`), as (repository, tag).
pub fn component_reference(descriptor: &Value, addr: &str, resource: &str) -> (String, String) {
    let r = descriptor["component"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == resource)
        .unwrap_or_else(|| panic!("the component has no {resource}"));
    let image = r["access"]["imageReference"].as_str().unwrap();
    let (repository, tag) = image
        .strip_prefix(&format!("{addr}/"))
        .unwrap()
        .rsplit_once(':')
        .unwrap();
    (repository.to_string(), tag.to_string())
}

/// The component `github.com/wasm-deployer/wasm-deployer` at `version` (`0.1.0`, ...) pushed to
/// the registry at `addr` as docs/install.md's step 1 pushes it: the chart, the blueprint and
/// the descriptor of `charts/landscaper/` (`registry.example.com` read as `addr`, `0.1.0` as
/// `version`), the descriptor under the repository's `sub_path`. Returns the descriptor.
pub async fn publish_shipped_component(addr: &str, sub_path: &str, version: &str) -> Value {
    use crate::ocm::{push_blueprint, push_chart, push_descriptor, tgz};
    let shipped = std::fs::read_to_string(
        crate::workspace().join("charts/landscaper/component-descriptor.yaml"),
    )
    .unwrap();
    let descriptor: Value = serde_yaml::from_str(
        &shipped
            .replace("registry.example.com", addr)
            .replace("0.1.0", version),
    )
    .unwrap();
    let (chart_repository, chart_tag) =
        component_reference(&descriptor, addr, "wasm-deployer-chart");
    let chart_dir = crate::workspace().join("charts/wasm-deployer");
    push_chart(
        addr,
        &chart_repository,
        &chart_tag,
        crate::chart_repo::package(&chart_dir, &chart_tag),
    )
    .await;
    let (blueprint_repository, blueprint_tag) =
        component_reference(&descriptor, addr, "wasm-deployer-blueprint");
    let blueprint =
        std::fs::read(crate::workspace().join("charts/landscaper/blueprint/blueprint.yaml"))
            .unwrap();
    push_blueprint(
        addr,
        &blueprint_repository,
        &blueprint_tag,
        tgz(&[("blueprint.yaml", &blueprint)]),
    )
    .await;
    push_descriptor(addr, None, sub_path, &descriptor, vec![]).await;
    descriptor
}
