//! Wasm component plugins: bindings of the `deployer-hook-plugin` world (a component may
//! export `deployer`, `hooks` or both), the per-invocation store, host imports, and trap
//! classification.
//!
//! Owns: one [`WasmPlugin`] per loaded component (its `InstancePre`, which exports it has,
//! description and limits) and everything that happens inside one invocation: a fresh `Store` with a WASI
//! context that has no preopens, no environment, no arguments and no sockets; a memory
//! limiter; an epoch deadline; async host imports that forward to [`HostServices`].
//! Must not touch: engine/cache management (see `runtime`) or Kubernetes itself.

use crate::api::HookPlugin;
use crate::api::{DeployerPlugin, HostServices, Limits, Op, emit_log, human_bytes};
use sdk_guest::{
    DeployerError, Description, HookInput, HookResult, HookSetup, Invocation, KubeOp, LogLevel,
    ObjectRef, Response,
};
use std::sync::Arc;
use std::time::Instant;
use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Store, Trap, UpdateDeadline};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "deployer-hook-plugin",
        imports: {
            "wasm-deployer:plugin/kubernetes": async,
            "wasm-deployer:plugin/cluster": async,
            "wasm-deployer:plugin/secondary-targets": async,
        },
        exports: { default: async },
    });
}

use bindings::wasm_deployer::plugin as wit;

/// How much of a plugin's stdout/stderr is kept per invocation (logged, and quoted in
/// trap messages).
const STDIO_CAPTURE: usize = 16 << 10;

/// Store data of one invocation.
pub(crate) struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: MemoryLimiter,
    plugin: Arc<str>,
    host: Option<Arc<dyn HostServices>>,
    started: Instant,
    /// End of the invocation deadline; host calls are bounded by it.
    deadline: Instant,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Caps each linear memory at `cap` bytes and remembers whether a growth was refused.
pub(crate) struct MemoryLimiter {
    cap: usize,
    hit: bool,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.cap {
            self.hit = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

impl wit::types::Host for State {}

impl wit::log::Host for State {
    fn log(&mut self, level: wit::types::LogLevel, message: String) {
        let level = match level {
            wit::types::LogLevel::Trace => LogLevel::Trace,
            wit::types::LogLevel::Debug => LogLevel::Debug,
            wit::types::LogLevel::Info => LogLevel::Info,
            wit::types::LogLevel::Warn => LogLevel::Warn,
            wit::types::LogLevel::Error => LogLevel::Error,
        };
        emit_log(&self.plugin, level, &message);
    }
}

impl wit::clock::Host for State {
    fn now_unix_millis(&mut self) -> u64 {
        unix_millis()
    }

    fn now_rfc3339(&mut self) -> String {
        sdk_guest::format_rfc3339(unix_millis())
    }

    fn monotonic_nanos(&mut self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }
}

impl wit::progress::Host for State {
    fn checkpoint(&mut self, name: String) -> Result<(), wit::types::DeployerError> {
        match &self.host {
            Some(h) => h.checkpoint(&name).map_err(error_to_wit),
            None => Ok(()),
        }
    }

    fn remaining_millis(&mut self) -> Option<u64> {
        self.host
            .as_ref()
            .and_then(|h| h.remaining())
            .map(|d| d.as_millis() as u64)
    }
}

pub(crate) fn ref_from_wit(r: wit::kubernetes::ObjectRef) -> ObjectRef {
    ObjectRef {
        api_version: r.api_version,
        kind: r.kind,
        namespace: r.namespace,
        name: r.name,
    }
}

impl State {
    /// One Kubernetes call on the item's Target cluster.
    pub(crate) async fn kube(
        &mut self,
        op: KubeOp,
    ) -> Result<Option<String>, wit::types::DeployerError> {
        self.kube_on(None, op).await
    }

    /// One Kubernetes call through [`HostServices::kube`] (no `target_name`) or
    /// [`HostServices::kube_on`], bounded by the invocation deadline (a call still running
    /// at the deadline returns `ERR_TIMEOUT`; the outer timeout of the invocation then ends
    /// it).
    pub(crate) async fn kube_on(
        &mut self,
        target_name: Option<String>,
        op: KubeOp,
    ) -> Result<Option<String>, wit::types::DeployerError> {
        let Some(host) = self.host.clone() else {
            return Err(error_to_wit(DeployerError::internal(
                "KubernetesUnavailable",
                "Kubernetes access is not available during describe or in hooks",
            )));
        };
        let call = async {
            match &target_name {
                None => host.kube(op).await,
                Some(name) => host.kube_on(name, op).await,
            }
        };
        match tokio::time::timeout_at(self.deadline.into(), call).await {
            Ok(r) => r.map_err(error_to_wit),
            Err(_) => Err(error_to_wit(DeployerError::timeout(
                "PluginDeadlineExceeded",
                format!(
                    "a Kubernetes call of plugin {:?} did not finish within the invocation deadline",
                    self.plugin
                ),
            ))),
        }
    }
}

impl wit::kubernetes::Host for State {
    async fn get(
        &mut self,
        r: wit::kubernetes::ObjectRef,
    ) -> Result<Option<String>, wit::types::DeployerError> {
        self.kube(KubeOp::Get(ref_from_wit(r))).await
    }

    async fn create(&mut self, object: String) -> Result<String, wit::types::DeployerError> {
        let out = self
            .kube(KubeOp::Create {
                object_json: object,
            })
            .await?;
        Ok(out.unwrap_or_default())
    }

    async fn update(&mut self, object: String) -> Result<String, wit::types::DeployerError> {
        let out = self
            .kube(KubeOp::Update {
                object_json: object,
            })
            .await?;
        Ok(out.unwrap_or_default())
    }

    async fn delete(
        &mut self,
        r: wit::kubernetes::ObjectRef,
    ) -> Result<bool, wit::types::DeployerError> {
        Ok(self.kube(KubeOp::Delete(ref_from_wit(r))).await?.is_some())
    }
}

fn unix_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

// ---- conversions -------------------------------------------------------------------------

/// The shared WIT ↔ model conversions (`landscaper_model::wire`), expanded for these bindings.
pub(crate) mod convert {
    use super::bindings::exports::wasm_deployer::plugin::hooks as wit_hooks;
    use super::bindings::wasm_deployer::plugin::types as wit_types;
    sdk_guest::model::wit_types_conversions!();
    sdk_guest::model::wit_hooks_conversions!();
}
pub(crate) use convert::error_to_wit;
use convert::{
    description_from_wit, error_from_wit, hook_input_to_wit, hook_result_from_wit,
    hook_setup_from_wit, invocation_to_wit, response_from_wit,
};

use bindings::exports::wasm_deployer::plugin::deployer as wit_deployer;
use bindings::exports::wasm_deployer::plugin::hooks as wit_hooks;

/// The plugin answered JSON that does not decode: the plugin's fault.
fn invalid_plugin_json(op: &str, e: sdk_guest::model::wire::WireError) -> DeployerError {
    DeployerError::internal("InvalidPluginResponse", format!("plugin returned {e}"))
        .with_operation(op)
}

// ---- invocation --------------------------------------------------------------------------

/// The compiled, linked form of one component, shared by every plugin loaded from it.
pub(crate) struct Prepared {
    pub(crate) pre: wasmtime::component::InstancePre<State>,
    /// Present if the component exports `deployer`.
    pub(crate) deployer: Option<wit_deployer::GuestIndices>,
    /// Present if the component exports `hooks`.
    pub(crate) hooks: Option<wit_hooks::GuestIndices>,
    pub(crate) sha256: String,
}

impl Prepared {
    /// Finds the exports (by semver: a 1.0 component matches the 1.1 names). A component
    /// that exports neither interface is refused.
    pub(crate) fn new(
        pre: wasmtime::component::InstancePre<State>,
        sha256: String,
        source: &str,
    ) -> anyhow::Result<Self> {
        let deployer = wit_deployer::GuestIndices::new(&pre).ok();
        let hooks = wit_hooks::GuestIndices::new(&pre).ok();
        if deployer.is_none() && hooks.is_none() {
            anyhow::bail!(
                "{source} exports neither wasm-deployer:plugin/deployer nor \
                 wasm-deployer:plugin/hooks (WIT {}); build it for the deployer-plugin, \
                 hook-plugin or deployer-hook-plugin world",
                sdk_guest::WIT_VERSION
            );
        }
        Ok(Prepared {
            pre,
            deployer,
            hooks,
            sha256,
        })
    }
}

/// Captured stdio of one invocation.
struct Stdio {
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
}

impl Stdio {
    fn flush_to_log(&self, plugin: &str) -> String {
        let out = self.stdout.contents();
        if !out.is_empty() {
            tracing::debug!(target: "plugin", plugin, stdout = %String::from_utf8_lossy(&out).trim_end());
        }
        let err = self.stderr.contents();
        let err = String::from_utf8_lossy(&err).trim_end().to_string();
        if !err.is_empty() {
            tracing::warn!(target: "plugin", plugin, stderr = %err);
        }
        err
    }
}
fn new_store(
    engine: &wasmtime::Engine,
    plugin: Arc<str>,
    limits: Limits,
    host: Option<Arc<dyn HostServices>>,
) -> (Store<State>, Stdio) {
    let stdio = Stdio {
        stdout: MemoryOutputPipe::new(STDIO_CAPTURE),
        stderr: MemoryOutputPipe::new(STDIO_CAPTURE),
    };
    // No preopens, no env, no args, no sockets, no stdin: the builder's defaults plus
    // explicitly disabled networking. stdout/stderr go to bounded in-memory pipes.
    let wasi = WasiCtxBuilder::new()
        .stdout(stdio.stdout.clone())
        .stderr(stdio.stderr.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .build();
    let started = Instant::now();
    let deadline = started + limits.deadline;
    let mut store = Store::new(
        engine,
        State {
            wasi,
            table: ResourceTable::new(),
            limiter: MemoryLimiter {
                cap: limits.memory_bytes,
                hit: false,
            },
            plugin,
            host,
            started,
            deadline,
        },
    );
    store.limiter(|s| &mut s.limiter);
    // Every epoch tick (<= 10 ms) either interrupts (deadline passed) or yields to the
    // executor, so a spinning plugin neither outlives its deadline nor starves tokio.
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        Ok(if Instant::now() >= deadline {
            UpdateDeadline::Interrupt
        } else {
            UpdateDeadline::Yield(1)
        })
    });
    (store, stdio)
}

fn last_lines(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Turn a wasmtime error of an invocation into the item's error (`operation`: `reconcile`,
/// `delete`, or the hook type).
fn classify(
    operation: &str,
    plugin: &str,
    limits: Limits,
    err: wasmtime::Error,
    memory_hit: bool,
    stderr: &str,
) -> DeployerError {
    let trap = err.downcast_ref::<Trap>().copied();
    if trap == Some(Trap::Interrupt) {
        return deadline_error(operation, plugin, limits);
    }
    if memory_hit {
        return DeployerError::internal(
            "PluginMemoryLimitExceeded",
            format!(
                "plugin {plugin:?} exceeded its memory limit of {}",
                human_bytes(limits.memory_bytes)
            ),
        )
        .with_operation(operation);
    }
    if let Some(exit) = err.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return DeployerError::internal(
            "PluginExited",
            format!("plugin {plugin:?} called exit({})", exit.0),
        )
        .with_operation(operation);
    }
    let what = match trap {
        Some(t) => format!("plugin {plugin:?} trapped: {t}"),
        None => format!("plugin {plugin:?} failed: {err:#}"),
    };
    let message = if stderr.is_empty() {
        what
    } else {
        format!("{what}; stderr: {}", last_lines(stderr, 1024))
    };
    DeployerError::internal("PluginTrapped", message).with_operation(operation)
}

fn deadline_error(operation: &str, plugin: &str, limits: Limits) -> DeployerError {
    DeployerError::timeout(
        "PluginDeadlineExceeded",
        format!(
            "plugin {plugin:?} did not finish within its deadline of {:?} and was interrupted",
            limits.deadline
        ),
    )
    .with_operation(operation)
}

/// What a component says about itself at load time.
#[derive(Clone)]
pub(crate) struct Described {
    /// From `deployer.describe` (for a hooks-only component: name and version of the hook
    /// setup, no types).
    pub(crate) description: Description,
    /// From `hooks.describe`, if the component exports hooks.
    pub(crate) hook_setup: Option<HookSetup>,
}

/// Call `describe` of each export on a fresh instance (no host services).
pub(crate) async fn describe(
    engine: &wasmtime::Engine,
    prepared: &Prepared,
    source: &str,
    limits: Limits,
) -> anyhow::Result<Described> {
    let (mut store, stdio) = new_store(engine, Arc::from(source), limits, None);
    let call = async {
        let instance = prepared.pre.instantiate_async(&mut store).await?;
        let description = match &prepared.deployer {
            Some(ix) => Some(
                ix.load(&mut store, &instance)?
                    .call_describe(&mut store)
                    .await?,
            ),
            None => None,
        };
        let hook_setup = match &prepared.hooks {
            Some(ix) => Some(
                ix.load(&mut store, &instance)?
                    .call_describe(&mut store)
                    .await?,
            ),
            None => None,
        };
        wasmtime::Result::Ok((description, hook_setup))
    };
    let out = tokio::time::timeout(limits.deadline, call).await;
    let stderr = stdio.flush_to_log(source);
    match out {
        Err(_) => anyhow::bail!(
            "describe of {source} did not finish within {:?}",
            limits.deadline
        ),
        Ok(Err(e)) => {
            let e = classify(
                "describe",
                source,
                limits,
                e,
                store.data().limiter.hit,
                &stderr,
            );
            anyhow::bail!("describe of {source} failed: {}", e.message)
        }
        Ok(Ok((description, hook_setup))) => {
            let hook_setup = hook_setup.map(hook_setup_from_wit);
            let description = match (description, &hook_setup) {
                (Some(d), _) => description_from_wit(d),
                (None, Some(h)) => Description {
                    name: h.name.clone(),
                    version: h.version.clone(),
                    deploy_item_types: Vec::new(),
                    hook_types: h
                        .hook_types
                        .iter()
                        .map(|t| t.as_str().to_string())
                        .collect(),
                },
                (None, None) => unreachable!("Prepared::new refuses components without exports"),
            };
            Ok(Described {
                description,
                hook_setup,
            })
        }
    }
}

/// A deployer plugin backed by a wasm component.
pub struct WasmPlugin {
    pub(crate) engine: wasmtime::Engine,
    pub(crate) prepared: Arc<Prepared>,
    pub(crate) description: Description,
    pub(crate) hook_setup: Option<HookSetup>,
    pub(crate) name: Arc<str>,
    pub(crate) limits: Limits,
    pub(crate) source: String,
    /// Keeps the epoch ticker alive while any plugin exists.
    pub(crate) _ticker: Arc<crate::runtime::EpochTicker>,
}

impl std::fmt::Debug for WasmPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmPlugin")
            .field("description", &self.description)
            .field("source", &self.source)
            .field("sha256", &self.prepared.sha256)
            .field("limits", &self.limits)
            .finish()
    }
}

impl WasmPlugin {
    /// SHA-256 (hex) of the component bytes.
    pub fn sha256(&self) -> &str {
        &self.prepared.sha256
    }

    /// Where the component was loaded from (file path or the name given to `load_bytes`).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The limits applied to each invocation.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Whether the component exports `deployer` (it may export only `hooks`). Only then is
    /// it a [`DeployerPlugin`].
    pub fn exports_deployer(&self) -> bool {
        self.prepared.deployer.is_some()
    }

    /// The hook setup, if the component exports `hooks`.
    pub fn hook_setup(&self) -> Option<&HookSetup> {
        self.hook_setup.as_ref()
    }

    /// Create a fresh store and instance without calling anything (benchmarks: splits the
    /// invocation cost into instantiate vs call). Not part of the stable API.
    #[doc(hidden)]
    pub async fn instantiate_only(&self) -> anyhow::Result<()> {
        let (mut store, _stdio) = new_store(&self.engine, self.name.clone(), self.limits, None);
        self.prepared.pre.instantiate_async(&mut store).await?;
        Ok(())
    }

    async fn invoke(
        &self,
        op: Op,
        inv: Invocation,
        host: Arc<dyn HostServices>,
    ) -> Result<Response, DeployerError> {
        let limits = self.limits;
        let (mut store, stdio) = new_store(&self.engine, self.name.clone(), limits, Some(host));
        let wit_inv = invocation_to_wit(&inv).map_err(|e| {
            DeployerError::internal("EncodeInvocation", e.to_string()).with_operation(op.name())
        })?;
        drop(inv);
        let prepared = &self.prepared;
        let Some(indices) = &prepared.deployer else {
            return Err(DeployerError::internal(
                "NotADeployer",
                format!("plugin {:?} exports no deployer", self.name),
            )
            .with_operation(op.name()));
        };
        let call = async {
            let instance = prepared.pre.instantiate_async(&mut store).await?;
            let d = indices.load(&mut store, &instance)?;
            match op {
                Op::Reconcile => d.call_reconcile(&mut store, &wit_inv).await,
                Op::Delete => d.call_delete(&mut store, &wit_inv).await,
            }
        };
        let out = tokio::time::timeout(limits.deadline, call).await;
        let stderr = stdio.flush_to_log(&self.name);
        let result = match out {
            Err(_) => Err(deadline_error(op.name(), &self.name, limits)),
            Ok(Err(e)) => Err(classify(
                op.name(),
                &self.name,
                limits,
                e,
                store.data().limiter.hit,
                &stderr,
            )),
            Ok(Ok(Ok(r))) => response_from_wit(r).map_err(|e| invalid_plugin_json(op.name(), e)),
            Ok(Ok(Err(e))) => Err(error_from_wit(e).or_operation(op.name())),
        };
        if let Err(e) = &result {
            tracing::debug!(plugin = %self.name, op = op.name(), error = %e, "plugin invocation failed");
        }
        result
    }
}

#[async_trait::async_trait]
impl HookPlugin for WasmPlugin {
    fn setup(&self) -> &HookSetup {
        static NONE: std::sync::OnceLock<HookSetup> = std::sync::OnceLock::new();
        self.hook_setup
            .as_ref()
            .unwrap_or_else(|| NONE.get_or_init(HookSetup::default))
    }

    fn origin(&self) -> String {
        DeployerPlugin::origin(self)
    }

    async fn run_hook(&self, input: HookInput) -> Result<Option<HookResult>, DeployerError> {
        let operation = input.hook_type.as_str();
        let Some(indices) = &self.prepared.hooks else {
            return Err(DeployerError::internal(
                "NotAHook",
                format!("plugin {:?} exports no hooks", self.name),
            )
            .with_operation(operation));
        };
        let limits = self.limits;
        let (mut store, stdio) = new_store(&self.engine, self.name.clone(), limits, None);
        let wit_input = hook_input_to_wit(&input);
        let call = async {
            let instance = self.prepared.pre.instantiate_async(&mut store).await?;
            indices
                .load(&mut store, &instance)?
                .call_run(&mut store, &wit_input)
                .await
        };
        let out = tokio::time::timeout(limits.deadline, call).await;
        let stderr = stdio.flush_to_log(&self.name);
        match out {
            Err(_) => Err(deadline_error(operation, &self.name, limits)),
            Ok(Err(e)) => Err(classify(
                operation,
                &self.name,
                limits,
                e,
                store.data().limiter.hit,
                &stderr,
            )),
            Ok(Ok(Ok(r))) => Ok(r.map(hook_result_from_wit)),
            Ok(Ok(Err(e))) => Err(error_from_wit(e).or_operation(operation)),
        }
    }
}

#[async_trait::async_trait]
impl DeployerPlugin for WasmPlugin {
    fn description(&self) -> &Description {
        &self.description
    }

    fn origin(&self) -> String {
        format!(
            "wasm component {} (sha256 {})",
            self.source,
            &self.prepared.sha256[..12]
        )
    }

    async fn reconcile(
        &self,
        inv: Invocation,
        host: Arc<dyn HostServices>,
    ) -> Result<Response, DeployerError> {
        self.invoke(Op::Reconcile, inv, host).await
    }

    async fn delete(
        &self,
        inv: Invocation,
        host: Arc<dyn HostServices>,
    ) -> Result<Response, DeployerError> {
        self.invoke(Op::Delete, inv, host).await
    }
}
