//! Deployer lifecycle management as Landscaper's documentation walks it, run by the Landscaper
//! that still has it (gardener/landscaper c1317824f, the parent of the commit that removed it):
//! its controller in both modes (lifecycle management and the built-in agent on, as its defaults
//! have them), its stand-alone agent for a second environment, and their Go helm deployers. The
//! host is registered with `charts/landscaper/deployer-registration.yaml` as shipped; Landscaper
//! installs it once per environment from a component in an OCI registry (Debian's
//! `docker-registry` on 127.0.0.1 over HTTPS), and each host then runs as its Deployment says
//! (`test_support::deployments`: a process of this checkout, under the chart's ServiceAccount).
//!
//! The Landscaper cluster is the embedded API server enforcing RBAC (this Landscaper's writes
//! carry JSON nulls kube-apiserver 1.20 refuses). The second environment's host cluster is
//! another embedded server, or with `DEPLOYER_TEST_BACKEND=real` a real kube-apiserver 1.20
//! enforcing RBAC, beside a token controller of the tests' own (it has no controller-manager).
//! Without this Landscaper's binaries (`$REAL_LANDSCAPER_DLM_BIN`) the story says SKIP.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use deployer_host::dev::kubelet::ProcessKubelet;
use deployer_host::landscaper::{DeployItem, Phase};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use test_support::deployments::HostDeployments;
use test_support::real_landscaper::dlm::{self, Agent};
use test_support::real_landscaper::stage::{describe, four_types_deploy_execution};
use test_support::real_landscaper::{
    self as ls, apply, data_object, doc_yaml_blocks, inline_installation, set_operation,
    wait_installation, wait_job_after,
};
use test_support::require_dlm_landscaper;

/// The host binary the Deployments run.
const HOST: &str = env!("CARGO_BIN_EXE_deployer-host");
/// Landscaper's lifecycle-management namespace (its default), in every cluster here.
const LS_NS: &str = "ls-system";
/// The environment of the built-in agent (Landscaper's default) and the second one.
const ENVIRONMENTS: [&str; 2] = ["default", "second"];
/// Where the demo Installations and their items live.
const NS: &str = "default";
/// Where the demo items deploy to, in their environment's cluster.
const APP_NS: &str = "demo-app";
/// Generous: lifecycle management polls every 10 s and waits for deletions every 20 s.
const TIMEOUT: Duration = Duration::from_secs(300);

/// One cluster of the story: its administrator, its kubeconfig (also as a file), and what
/// serves it.
struct Cluster {
    admin: Client,
    kubeconfig: String,
    file: PathBuf,
    serving: Serving,
}

/// What serves a cluster (kept until the story ends).
#[derive(Default)]
struct Serving {
    embedded: Option<(
        embedded_apiserver::ApiServer,
        embedded_apiserver::LoopbackServing,
    )>,
    _real: Option<test_support::RealApiServer>,
    _tokens: Option<test_support::controller_manager::ServiceAccountTokens>,
    _namespaces: Option<test_support::controller_manager::NamespaceFinalizer>,
}

impl Cluster {
    /// The embedded server enforcing RBAC over HTTPS; its token controller fills legacy
    /// ServiceAccount token Secrets, as kube-controller-manager's does.
    async fn embedded(dir: &Path, name: &str) -> Self {
        let server = embedded_apiserver::ApiServer::new(embedded_apiserver::Options {
            rbac: true,
            ..Default::default()
        })
        .expect("embedded API server");
        let serving = server.serve_tls_on_loopback().await.unwrap();
        let kubeconfig = embedded_apiserver::ApiServer::kubeconfig_yaml_tls(
            &serving.url,
            serving.ca_pem(),
            server.admin_token(),
        );
        let serving = Serving {
            embedded: Some((server, serving)),
            ..Serving::default()
        };
        Self::with(dir, name, kubeconfig, serving).await
    }

    /// The second environment's host cluster: another embedded server, or the real
    /// kube-apiserver with the tests' stand-ins for two of kube-controller-manager's
    /// controllers (service-account tokens, namespace finalization).
    async fn second(dir: &Path) -> Self {
        if test_support::backend() == test_support::Backend::Embedded {
            return Self::embedded(dir, "second").await;
        }
        let real = test_support::RealApiServer::start("RBAC");
        let kubeconfig = real.kubeconfig.clone();
        let tokens = test_support::controller_manager::ServiceAccountTokens::start(
            real.client().await,
            Some(real.ca_pem()),
        );
        let namespaces =
            test_support::controller_manager::NamespaceFinalizer::start(real.client().await);
        let serving = Serving {
            _real: Some(real),
            _tokens: Some(tokens),
            _namespaces: Some(namespaces),
            ..Serving::default()
        };
        Self::with(dir, "second", kubeconfig, serving).await
    }

    async fn with(dir: &Path, name: &str, kubeconfig: String, serving: Serving) -> Self {
        let file = dir.join(format!("{name}.kubeconfig"));
        std::fs::write(&file, &kubeconfig).unwrap();
        let admin = test_support::client_for(&kubeconfig).await;
        let me = Self {
            admin,
            kubeconfig,
            file,
            serving,
        };
        me.namespace(LS_NS).await;
        me
    }

    async fn namespace(&self, name: &str) {
        let ns = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        match Api::<Namespace>::all(self.admin.clone())
            .create(&PostParams::default(), &ns)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("namespace {name}: {e}"),
        }
    }

    /// A process kubelet for the container deployer's pods in `ls-system` (the release
    /// namespace, where the chart has them run), until `stop`.
    fn run_pods(&self, dir: &Path, stop: &tokio::sync::watch::Sender<bool>) {
        let mut rx = stop.subscribe();
        tokio::spawn(
            ProcessKubelet {
                client: self.admin.clone(),
                namespace: LS_NS.into(),
                kubeconfig: self.file.clone(),
                binary: HOST.into(),
                work_dir: dir.join(format!(
                    "pods-{}",
                    self.file.file_stem().unwrap().to_string_lossy()
                )),
                mint_tokens: true,
            }
            .run(async move {
                let _ = rx.wait_for(|s| *s).await;
            }),
        );
    }
}

fn ls_objects(c: &Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    ls::ls_api(c, kind, plural, LS_NS)
}

fn cluster_scoped(c: &Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    let ar = kube::api::ApiResource {
        group: "landscaper.gardener.cloud".into(),
        version: "v1alpha1".into(),
        api_version: "landscaper.gardener.cloud/v1alpha1".into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    Api::all_with(c.clone(), &ar)
}

/// Polls `f` until it gives `Some`, or panics with `what` and the last `explain()`.
async fn eventually<T, F, Fut>(what: &str, explain: impl Fn() -> String, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out: {what}\n{}",
            explain()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The demo items of Installation `name` (in [`NS`]) by their blueprint name.
async fn demo_items(c: &Client, name: &str) -> BTreeMap<String, DeployItem> {
    Api::<DeployItem>::namespaced(c.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|i| {
            i.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.name.starts_with(name))
        })
        .filter_map(|i| {
            let n = i
                .metadata
                .labels
                .as_ref()?
                .get("execution.landscaper.gardener.cloud/name")?
                .clone();
            Some((n, i))
        })
        .collect()
}

/// Runs a job of the demo Installation `name` and asserts every item Succeeded, run by the host
/// of environment `env` and no other.
async fn demo_job_succeeds(c: &Client, name: &str, env: &str, previous: Option<&str>) -> String {
    let (inst, phase) = wait_job_after(c, NS, name, previous, TIMEOUT).await;
    let items = demo_items(c, name).await;
    assert_eq!(
        phase,
        "Succeeded",
        "{name}: {}\n{}",
        ls::status(&inst),
        describe(&items)
    );
    assert_eq!(
        items.keys().collect::<Vec<_>>(),
        ["chart", "check", "config", "job"]
    );
    for (item, i) in &items {
        let st = i.status();
        assert_eq!(st.phase, Phase::Succeeded, "{name}/{item}");
        assert_eq!(
            st.deployer.map(|d| d.identity),
            Some(format!("wasm-deployer-{env}")),
            "{name}/{item} is served by the host of environment {env} only"
        );
    }
    ls::status(&inst)["jobID"].as_str().unwrap().to_string()
}

/// The deployed revision of Helm release `name` in `ls-system` (its `owner=helm` Secrets), after
/// asserting that every earlier revision is superseded; `None` when there is none.
async fn deployed_revision(c: &Client, name: &str) -> Option<u32> {
    let mut revisions: Vec<(u32, String)> = Api::<Secret>::namespaced(c.clone(), LS_NS)
        .list(&ListParams::default().labels(&format!("owner=helm,name={name}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|s| {
            let l = s.metadata.labels.unwrap_or_default();
            (l["version"].parse().unwrap(), l["status"].clone())
        })
        .collect();
    revisions.sort();
    let (last, status) = revisions.pop()?;
    assert_eq!(status, "deployed", "{name}: {revisions:?}");
    assert!(
        revisions.iter().all(|(_, s)| s == "superseded"),
        "{name}: {revisions:?}"
    );
    Some(last)
}

fn image_of(d: &Deployment) -> String {
    d.spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .image
        .clone()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_landscaper_with_lifecycle_management_and_two_environments_when_the_shipped_registration_is_applied_upgraded_and_deleted_then_each_environment_runs_its_own_host_serving_only_its_items_and_nothing_is_left()
 {
    require_dlm_landscaper!();
    let dir = tempfile::tempdir().unwrap();
    // Given an OCI registry over HTTPS (a CA of the story's own, which Landscaper, its agents
    // and our tooling trust) holding the component at v0.1.0 and v0.2.0,
    let cert = embedded_apiserver::tls::ServingCert::generate(&[]).unwrap();
    let Some(registry) = test_support::registry::start_registry_tls_anonymous(&cert) else {
        return;
    };
    let addr = registry.addr.clone();
    test_support::ocm::trust(&addr, cert.ca_pem());
    let ca = dir.path().join("registry-ca.pem");
    std::fs::write(&ca, cert.ca_pem()).unwrap();
    let on_registry = |text: &str| text.replace("registry.example.com", &addr);
    let walk = doc_yaml_blocks(
        "install.md",
        "\n## 4. Installed by Landscaper's deployer lifecycle management",
        &on_registry,
    );
    let context = walk.get("Context").expect("the section's Context");
    let sub_path = context["repositoryContext"]["subPath"].as_str().unwrap();
    for version in ["0.1.0", "0.2.0"] {
        ls::publish_shipped_component(&addr, sub_path, version).await;
    }
    // the Landscaper cluster (the embedded server, RBAC enforced) and the second environment's
    // host cluster,
    let a = Cluster::embedded(dir.path(), "landscaper").await;
    let b = Cluster::second(dir.path()).await;
    let clusters = [&a, &b];
    let trust = vec![("SSL_CERT_FILE", ca.display().to_string())];
    // Landscaper with its defaults: lifecycle management on, and its built-in agent, which
    // registers `Environment/default` with the Landscaper cluster as its host cluster,
    let landscaper = tokio::task::spawn_blocking({
        let (file, trust) = (a.file.clone(), trust.clone());
        move || dlm::start_landscaper(&file, &trust)
    })
    .await
    .unwrap();
    // and the stand-alone agent of environment `second` in its host cluster, configured as the
    // section says,
    let mut agent_config = walk
        .get("AgentConfiguration")
        .expect("the section's AgentConfiguration")
        .clone();
    assert_eq!(agent_config["namespace"], LS_NS);
    agent_config["name"] = json!("second");
    let agent = Agent::start(
        &serde_yaml::to_string(&agent_config).unwrap(),
        &a.file,
        &b.file,
        &trust,
    );
    // and each host cluster runs the host Deployments there, and the container deployer's pods.
    let hosts: Vec<HostDeployments> = clusters
        .iter()
        .map(|c| HostDeployments::start(c.admin.clone(), &c.kubeconfig, HOST.as_ref()))
        .collect();
    let (stop_pods, _) = tokio::sync::watch::channel(false);
    for c in clusters {
        c.run_pods(dir.path(), &stop_pods);
    }
    let c = &a.admin;
    let explain = || {
        format!(
            "{}\n--- agent\n{}",
            landscaper.log_tail(15),
            agent.log_tail(15)
        )
    };

    // 1. Each agent registered its Environment, with its host Target: annotated for its
    //    environment and as deployer-only.
    for env in ENVIRONMENTS {
        let environment = eventually(&format!("Environment {env}"), explain, || async {
            cluster_scoped(c, "Environment", "environments")
                .get_opt(env)
                .await
                .unwrap()
        })
        .await;
        assert!(
            environment
                .metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == "finalizer.agent.landscaper.gardener.cloud"),
            "{env}: the agent's finalizer"
        );
        let target = eventually(&format!("host Target {env}"), explain, || async {
            ls_objects(c, "Target", "targets")
                .get_opt(env)
                .await
                .unwrap()
        })
        .await;
        let annotations = target.metadata.annotations.unwrap_or_default();
        assert_eq!(annotations["landscaper.gardener.cloud/environment"], env);
        assert_eq!(
            annotations["landscaper.gardener.cloud/deployer-only"],
            "true"
        );
    }
    assert!(agent.running(), "the agent runs:\n{}", agent.log_tail(20));

    // 2. When the section's Context and the shipped registration (only the registry adapted)
    //    are applied,
    eventually("Context ls-system/default", explain, || async {
        ls_objects(c, "Context", "contexts")
            .get_opt("default")
            .await
            .unwrap()
    })
    .await;
    apply(&ls_objects(c, "Context", "contexts"), context.clone()).await;
    let registration: Value = serde_yaml::from_str(&on_registry(
        &std::fs::read_to_string(
            test_support::workspace().join("charts/landscaper/deployer-registration.yaml"),
        )
        .unwrap(),
    ))
    .unwrap();
    let types: Vec<&str> = registration["spec"]["types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "landscaper.gardener.cloud/mock",
            "landscaper.gardener.cloud/kubernetes-manifest",
            "landscaper.gardener.cloud/helm",
            "landscaper.gardener.cloud/container"
        ],
        "every type the host serves"
    );
    let registrations = cluster_scoped(c, "DeployerRegistration", "deployerregistrations");
    apply(&registrations, registration.clone()).await;
    // then Landscaper creates one Installation per environment with every import the blueprint
    // takes, and each succeeds: the environment's agent installed the host's chart.
    let mut installs = BTreeMap::new();
    for env in ENVIRONMENTS {
        let name = format!("wasm-deployer-{env}");
        let inst = wait_installation(c, LS_NS, &name, TIMEOUT, |i| {
            ls::job_finished(i) && ls::status(i)["phase"] == "Succeeded"
        })
        .await;
        let spec = &inst.data["spec"];
        let targets: Vec<(&str, &str)> = spec["imports"]["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["name"].as_str().unwrap(), t["target"].as_str().unwrap()))
            .collect();
        assert_eq!(
            targets,
            [
                ("cluster", format!("#{env}").as_str()),
                ("landscaperCluster", format!("#{name}").as_str())
            ]
        );
        let mappings = &spec["importDataMappings"];
        assert_eq!(mappings["releaseName"], name.as_str());
        assert_eq!(mappings["releaseNamespace"], LS_NS);
        assert_eq!(mappings["identity"], name.as_str());
        assert_eq!(
            mappings["targetSelectors"][0]["annotations"][0]["values"][0],
            env
        );
        assert_eq!(mappings["values"]["deployer"]["controller"]["workers"], 30);
        installs.insert(
            env,
            ls::status(&inst)["jobID"].as_str().unwrap().to_string(),
        );
        // Its one helm item was the agent's helm deployer's, not a host's.
        let item = Api::<DeployItem>::namespaced(c.clone(), LS_NS)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|i| {
                i.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.name.starts_with(&name))
            })
            .expect("the Installation's helm item");
        assert_eq!(
            item.status().deployer.map(|d| d.identity),
            Some(format!("agent-helm-deployer-{env}"))
        );
    }

    let mut revisions = BTreeMap::new();
    // 3. The host runs in each environment's host cluster as its Deployment says, with the
    //    environment's identity and target selectors, reaching the Landscaper cluster as the
    //    ServiceAccount Landscaper made for it.
    for (env, (cluster, running)) in ENVIRONMENTS.iter().zip(clusters.iter().zip(&hosts)) {
        let name = format!("wasm-deployer-{env}");
        // (a release per job: Landscaper reconciles the Installation more than once)
        let revision = deployed_revision(&cluster.admin, &name)
            .await
            .expect("a deployed release");
        revisions.insert(*env, revision);
        let deployment = Api::<Deployment>::namespaced(cluster.admin.clone(), LS_NS)
            .get(&name)
            .await
            .expect("the host's Deployment");
        assert_eq!(
            image_of(&deployment),
            format!("{addr}/wasm-deployer/deployer-host:0.1.0")
        );
        let up = eventually(&format!("the host of {env} runs"), explain, || async {
            running
                .running()
                .into_iter()
                .find(|h| h.deployment == format!("{LS_NS}/{name}"))
        })
        .await;
        assert_eq!(up.starts, 1);
        let secrets = Api::<Secret>::namespaced(cluster.admin.clone(), LS_NS);
        let config = secrets.get(&format!("{name}-config")).await.unwrap();
        let config: deployer_host::config::HostConfig =
            serde_yaml::from_slice(&config.data.unwrap()["config.yaml"].0).unwrap();
        assert_eq!(config.identity.as_deref(), Some(name.as_str()));
        let selectors = serde_json::to_value(&config.target_selectors).unwrap();
        assert_eq!(
            selectors[0]["annotations"],
            json!([
                {"key": "landscaper.gardener.cloud/environment", "operator": "=", "values": [env]},
                {"key": "landscaper.gardener.cloud/deployer-only", "operator": "!"},
            ]),
            "{env}: the environment's selector, never its host Target"
        );
        let kubeconfig = secrets
            .get(&format!("{name}-landscaper-kubeconfig"))
            .await
            .expect("the Landscaper cluster's kubeconfig");
        let kubeconfig: Value =
            serde_yaml::from_slice(&kubeconfig.data.unwrap()["kubeconfig"].0).unwrap();
        let token = kubeconfig["users"][0]["user"]["token"]
            .as_str()
            .expect("a bearer token");
        let user = a
            .serving
            .embedded
            .as_ref()
            .unwrap()
            .0
            .user_for_token(token)
            .expect("the token authenticates in the Landscaper cluster");
        assert_eq!(user.name, format!("system:serviceaccount:{LS_NS}:{name}"));
    }

    // 4. Each environment's items, of every type, are served by its host and no other.
    for (env, cluster) in ENVIRONMENTS.iter().zip(clusters) {
        let target = format!("app-{env}");
        apply(
            &ls::ls_api(c, "Target", "targets", NS),
            json!({
                "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "Target",
                "metadata": {"name": target, "namespace": NS,
                             "annotations": {"landscaper.gardener.cloud/environment": env}},
                "spec": {"type": "landscaper.gardener.cloud/kubernetes-cluster",
                         "config": {"kubeconfig": cluster.kubeconfig}},
            }),
        )
        .await;
    }
    apply(
        &ls::data_objects(c, NS),
        data_object("color", NS, json!("blue")),
    )
    .await;
    let mut demo_jobs = BTreeMap::new();
    for env in ENVIRONMENTS {
        apply(
            &ls::installations(c, NS),
            inline_installation(
                NS,
                &format!("app-{env}"),
                &format!("demo-{env}"),
                &[("color", "color")],
                &[],
                &four_types_deploy_execution(APP_NS),
                None,
            ),
        )
        .await;
    }
    for env in ENVIRONMENTS {
        let job = demo_job_succeeds(c, &format!("demo-{env}"), env, None).await;
        demo_jobs.insert(env, job);
    }

    // 6. When the registration's component version is upgraded, both installations run again,
    //    the hosts roll to the new image, and still serve their environments.
    registrations
        .patch(
            "wasm-deployer",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"installationTemplate": {"componentDescriptor": {"ref": {"version": "v0.2.0"}}}}})),
        )
        .await
        .unwrap();
    for (env, (cluster, running)) in ENVIRONMENTS.iter().zip(clusters.iter().zip(&hosts)) {
        let name = format!("wasm-deployer-{env}");
        // (the Deployment's new image first: a job started before the upgrade may end after it)
        let deployments = Api::<Deployment>::namespaced(cluster.admin.clone(), LS_NS);
        eventually(&format!("{name} has the new image"), explain, || async {
            let d = deployments.get_opt(&name).await.unwrap()?;
            (image_of(&d) == format!("{addr}/wasm-deployer/deployer-host:0.2.0")).then_some(())
        })
        .await;
        let inst = wait_installation(c, LS_NS, &name, TIMEOUT, |i| {
            ls::job_finished(i)
                && i.data["spec"]["componentDescriptor"]["ref"]["version"] == "v0.2.0"
                && ls::status(i)["jobID"].as_str() != Some(installs[env].as_str())
        })
        .await;
        assert_eq!(
            ls::status(&inst)["phase"],
            "Succeeded",
            "{}",
            ls::status(&inst)
        );
        let revision = deployed_revision(&cluster.admin, &name).await.unwrap();
        assert!(revision > revisions[env], "{name}: upgraded");
        eventually(&format!("the host of {env} rolled"), explain, || async {
            running
                .running()
                .into_iter()
                .find(|h| h.deployment == format!("{LS_NS}/{name}") && h.image.ends_with(":0.2.0"))
        })
        .await;
    }
    for env in ENVIRONMENTS {
        let name = format!("demo-{env}");
        set_operation(c, NS, &name, "reconcile").await;
        demo_job_succeeds(c, &name, env, Some(demo_jobs[env].as_str())).await;
    }

    // 6. When the demo Installations and then the registration are deleted,
    for env in ENVIRONMENTS {
        ls::installations(c, NS)
            .delete(&format!("demo-{env}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    for env in ENVIRONMENTS {
        eventually(&format!("demo-{env} is gone"), explain, || async {
            ls::installations(c, NS)
                .get_opt(&format!("demo-{env}"))
                .await
                .unwrap()
                .is_none()
                .then_some(())
        })
        .await;
    }
    registrations
        .delete("wasm-deployer", &DeleteParams::default())
        .await
        .unwrap();
    // then both installations, their releases and hosts are removed,
    eventually("the registration is gone", explain, || async {
        registrations
            .get_opt("wasm-deployer")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    for (env, (cluster, running)) in ENVIRONMENTS.iter().zip(clusters.iter().zip(&hosts)) {
        let name = format!("wasm-deployer-{env}");
        eventually(&format!("{name} is uninstalled"), explain, || async {
            let inst = ls::installations(c, LS_NS).get_opt(&name).await.unwrap();
            let deployment = Api::<Deployment>::namespaced(cluster.admin.clone(), LS_NS)
                .get_opt(&name)
                .await
                .unwrap();
            (inst.is_none()
                && deployment.is_none()
                && deployed_revision(&cluster.admin, &name).await.is_none()
                && running.running().is_empty())
            .then_some(())
        })
        .await;
    }
    // and nothing is left held: no Landscaper object waits on a finalizer.
    for (kind, plural) in [
        ("Installation", "installations"),
        ("Execution", "executions"),
        ("DeployItem", "deployitems"),
        ("Target", "targets"),
    ] {
        for ns in [LS_NS, NS] {
            let held: Vec<String> = ls::ls_api(c, kind, plural, ns)
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter(|o| o.metadata.deletion_timestamp.is_some())
                .map(|o| o.metadata.name.unwrap_or_default())
                .collect();
            assert!(held.is_empty(), "{kind}s held in {ns}: {held:?}");
        }
    }
    stop_pods.send_replace(true);
    drop(agent);
}
