//! The plugin runtime: one wasmtime `Engine`, the epoch ticker, the compiled-artifact cache
//! and plugin loading.
//!
//! Owns: engine configuration (epoch interruption, optimisation level), one linker per grant
//! set (`crate::capabilities`: deployers get every import, hook-only components `log` and
//! `clock`), one `InstancePre` per component keyed by its SHA-256, load statistics, and
//! loading from a directory.
//! Must not touch: invocation details (see `wasm`) and the type → plugin map (see
//! `registry`).

use crate::api::Limits;
use crate::cache::{ArtifactCache, Lookup, engine_hash, sha256};
use crate::capabilities::{self, Grants};
use crate::epoch::EpochTicker;
use crate::wasm::WasmPlugin;
use crate::wasm::invoke::{self as wasm, Prepared};
use crate::wasm::store::State;
use anyhow::{Context, Result, bail};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine};

/// Cranelift optimisation level (part of the engine hash: changing it recompiles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OptLevel {
    /// No optimisation (fastest compile).
    None,
    /// Optimise for speed (default).
    #[default]
    Speed,
    /// Optimise for speed and size.
    SpeedAndSize,
}

/// Runtime configuration.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Directory for compiled artifacts; `None` disables the on-disk cache.
    pub cache_dir: Option<PathBuf>,
    /// Limits for plugins without an entry in `plugin_limits`.
    pub default_limits: Limits,
    /// Per-plugin limits, keyed by the plugin name from `describe`.
    pub plugin_limits: HashMap<String, Limits>,
    /// Epoch tick (deadline granularity). Clamped to at most 10 ms. Default 10 ms.
    pub epoch_tick: Duration,
    /// Cranelift optimisation level.
    pub opt_level: OptLevel,
    /// Instances that may live at once in the pooling allocator (instantiation from a
    /// pre-reserved, copy-on-write slot instead of fresh mappings: ~2.4x faster here); calls
    /// beyond it wait for a slot. 0 = on-demand allocation. Default 256.
    pub instance_slots: usize,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            cache_dir: None,
            default_limits: Limits::default(),
            plugin_limits: HashMap::new(),
            epoch_tick: Duration::from_millis(10),
            opt_level: OptLevel::default(),
            instance_slots: 256,
        }
    }
}

/// How a component was obtained by a load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadOutcome {
    /// Compiled with Cranelift. `cache_rejected` says why a cache file was not used, if one
    /// existed.
    Compiled {
        /// Why an existing cache file was rejected.
        cache_rejected: Option<String>,
    },
    /// Deserialized from a verified cache file.
    CacheHit,
    /// Already loaded in this runtime (same SHA-256): the `InstancePre` was reused.
    Reused,
}

/// One load, for diagnostics and benchmarks.
#[derive(Debug, Clone)]
pub struct LoadRecord {
    /// File path or name given to `load_bytes`.
    pub source: String,
    /// Plugin name from `describe`.
    pub plugin: String,
    /// SHA-256 of the component (hex).
    pub sha256: String,
    /// How the component was obtained.
    pub outcome: LoadOutcome,
    /// Time to compile or deserialize (zero when reused).
    pub prepare_time: Duration,
    /// Total load time including linking and `describe`.
    pub total_time: Duration,
}

/// Load statistics of a runtime.
#[derive(Debug, Clone, Default)]
pub struct RuntimeStats {
    /// Components compiled with Cranelift.
    pub compiled: u64,
    /// Components deserialized from the cache.
    pub cache_hits: u64,
    /// Cache files rejected (foreign, tampered, other engine, ...).
    pub cache_rejected: u64,
    /// Cache files written.
    pub cache_writes: u64,
    /// Loads that reused an already prepared component.
    pub reused: u64,
    /// Total compile time.
    pub compile_time: Duration,
    /// Total deserialize time.
    pub deserialize_time: Duration,
    /// Every load, in order.
    pub loads: Vec<LoadRecord>,
}

/// The pooling allocator for `slots` concurrent component instances. Every memory may grow to
/// 4 GiB (a plugin's own memory cap is the store limiter's job, and delivered plugins may carry
/// larger caps than the configuration knows at start-up); slots are virtual reservations,
/// decommitted when an instance ends.
const KEEP_RESIDENT: usize = 4 << 20;

fn pooling(slots: usize) -> wasmtime::PoolingAllocationConfig {
    let slots = u32::try_from(slots).unwrap_or(u32::MAX);
    let mut pool = wasmtime::PoolingAllocationConfig::default();
    // A Rust WASI 0.2 component instantiates a few core modules (program, adapter, shims),
    // each with at most a memory and a couple of tables.
    pool.total_component_instances(slots)
        .total_core_instances(slots.saturating_mul(8))
        .total_memories(slots.saturating_mul(4))
        .total_tables(slots.saturating_mul(8))
        .max_memory_size(4 << 30)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(KEEP_RESIDENT)
        .pagemap_scan(wasmtime::Enabled::Auto);
    pool
}

/// The engines of this process that have an instance pool (weakly: a dropped runtime's engine
/// leaves), for [`pool_idle_resident_bytes`].
static POOLED_ENGINES: Mutex<Vec<wasmtime::EngineWeak>> = Mutex::new(Vec::new());

/// Memory the instance pools of this process keep resident in slots no instance uses now: the
/// first [`KEEP_RESIDENT`] bytes of each used linear memory and table, zeroed for the next
/// instance instead of given back. It is part of the RSS after every job has ended
/// (docs/scaling.md, "Memory that returns"). Fiber stacks count only where the pool zeroes
/// them, which this pool does not: their pages (about 0.5 MiB after a burst) are not in it.
pub fn pool_idle_resident_bytes() -> u64 {
    let mut engines = POOLED_ENGINES.lock().unwrap_or_else(|e| e.into_inner());
    engines.retain(|weak| weak.upgrade().is_some());
    engines
        .iter()
        .filter_map(|weak| Some(idle_resident(&weak.upgrade()?)))
        .sum()
}

/// What `engine`'s instance pool keeps resident in unused slots (0 without a pool).
fn idle_resident(engine: &Engine) -> u64 {
    engine.pooling_allocator_metrics().map_or(0, |m| {
        (m.unused_memory_bytes_resident()
            + m.unused_table_bytes_resident()
            + m.unused_stack_bytes_resident().unwrap_or(0)) as u64
    })
}

/// A prepared component with the description `describe` returned.
type PreparedEntry = (Arc<Prepared>, wasm::Described);
/// Prepared components by SHA-256. One cell per digest: loads of different plugins compile in
/// parallel (a Python or JavaScript component takes seconds), loads of the same bytes wait for
/// the one compile. A failed load leaves its cell empty, so the next load tries again.
type PreparedMap = HashMap<[u8; 32], Arc<tokio::sync::OnceCell<PreparedEntry>>>;

/// Loads and runs wasm deployer plugins. Create one per process.
pub struct PluginRuntime {
    engine: Engine,
    deployer_linker: Linker<State>,
    hook_linker: Linker<State>,
    config: RuntimeConfig,
    cache: Option<ArtifactCache>,
    prepared: tokio::sync::Mutex<PreparedMap>,
    stats: Mutex<RuntimeStats>,
    ticker: Arc<EpochTicker>,
    slots: crate::wasm::store::Slots,
}

impl std::fmt::Debug for PluginRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginRuntime")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl PluginRuntime {
    /// Create the engine, the linker, the epoch ticker and (if configured) the cache.
    pub fn new(config: RuntimeConfig) -> Result<Arc<Self>> {
        let mut cfg = Config::new();
        cfg.epoch_interruption(true);
        // Profiling aid (docs/benchmarks.md, "Profiling"): `perf` then names the JIT-compiled
        // plugin functions through /tmp/perf-<pid>.map.
        if std::env::var_os("WASM_DEPLOYER_PERFMAP").is_some() {
            cfg.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        cfg.cranelift_opt_level(match config.opt_level {
            OptLevel::None => wasmtime::OptLevel::None,
            OptLevel::Speed => wasmtime::OptLevel::Speed,
            OptLevel::SpeedAndSize => wasmtime::OptLevel::SpeedAndSize,
        });
        let (engine, slots) = match config.instance_slots {
            0 => (Engine::new(&cfg)?, 0),
            n => {
                let mut pooled = cfg.clone();
                pooled
                    .allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pooling(n)));
                // The pool reserves address space up front; where that is refused (a tight
                // `ulimit -v`), fall back to on-demand allocation rather than not starting.
                match Engine::new(&pooled) {
                    Ok(engine) => {
                        POOLED_ENGINES
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push(engine.weak());
                        (engine, n)
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "instance pool unavailable: allocating on demand");
                        (Engine::new(&cfg)?, 0)
                    }
                }
            }
        };

        let deployer_linker = capabilities::linker(&engine, Grants::Deployer)?;
        let hook_linker = capabilities::linker(&engine, Grants::HookOnly)?;

        let cache = match &config.cache_dir {
            Some(dir) => Some(ArtifactCache::open(dir, engine_hash(&engine))?),
            None => None,
        };
        let tick = config.epoch_tick.min(Duration::from_millis(10));
        let ticker = Arc::new(EpochTicker::start(engine.clone(), tick)?);
        Ok(Arc::new(PluginRuntime {
            engine,
            deployer_linker,
            hook_linker,
            config,
            cache,
            prepared: tokio::sync::Mutex::new(HashMap::new()),
            stats: Mutex::new(RuntimeStats::default()),
            ticker,
            slots: crate::wasm::store::Slots::new(slots),
        }))
    }

    /// The wasmtime engine (shared by all plugins).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// What this runtime's instance pool keeps resident in slots no instance uses now (see
    /// [`pool_idle_resident_bytes`], the sum over the process).
    pub fn pool_idle_resident_bytes(&self) -> u64 {
        idle_resident(&self.engine)
    }

    /// A snapshot of the load statistics.
    pub fn stats(&self) -> RuntimeStats {
        self.stats.lock().expect("stats lock").clone()
    }

    /// Limits for the plugin named `name`.
    pub fn limits_for(&self, name: &str) -> Limits {
        self.config
            .plugin_limits
            .get(name)
            .copied()
            .unwrap_or(self.config.default_limits)
    }

    /// Load one component from memory. `source_name` is used in logs and errors. Calls
    /// `describe` once and validates the answer.
    pub async fn load_bytes(&self, source_name: &str, bytes: &[u8]) -> Result<Arc<WasmPlugin>> {
        self.load_bytes_with_limits(source_name, bytes, None).await
    }

    /// Like [`PluginRuntime::load_bytes`], with `limits` instead of the configured ones (a
    /// plugin declared with limits of its own, e.g. by a `WasmPlugin` object).
    pub async fn load_bytes_with_limits(
        &self,
        source_name: &str,
        bytes: &[u8],
        limits: Option<Limits>,
    ) -> Result<Arc<WasmPlugin>> {
        let started = Instant::now();
        let sha = sha256(bytes);
        let cell = self.prepared.lock().await.entry(sha).or_default().clone();
        let mut fresh = None;
        let entry = cell
            .get_or_try_init(|| async {
                let (component, outcome, prepare_time) =
                    self.obtain(source_name, &sha, bytes).await?;
                let grants = Grants::of(&component, &self.engine);
                let linker = match grants {
                    Grants::Deployer => &self.deployer_linker,
                    Grants::HookOnly => &self.hook_linker,
                };
                let pre = linker
                    .instantiate_pre(&component)
                    .map_err(|e| {
                        // Say why in the terms of our versioning rules (`wit/deployer.wit`):
                        // a newer minor may add an interface this host does not have.
                        let built = crate::wasm::wit_version_of(&self.engine, &component);
                        match built {
                            Some(v)
                                if crate::wasm::version_key(&v)
                                    > crate::wasm::version_key(sdk_guest::WIT_VERSION) =>
                            {
                                anyhow::Error::from(e).context(format!(
                                    "the plugin was built against wasm-deployer:plugin@{v}, newer than \
                                     this host's {host}, and uses an interface or function {host} does \
                                     not have: upgrade the host, or build the plugin against the {host} WIT",
                                    host = sdk_guest::WIT_VERSION
                                ))
                            }
                            _ => anyhow::Error::from(e),
                        }
                    })
                    .with_context(|| match grants {
                        Grants::Deployer => format!("linking plugin {source_name}"),
                        Grants::HookOnly => format!(
                            "linking hook plugin {source_name} (a component that exports only \
                             hooks is granted log and clock, no Kubernetes or progress imports)"
                        ),
                    })?;
                let component = Prepared::new(pre, hex::encode(sha), source_name)?;
                let described = wasm::describe(
                    &self.engine,
                    &component,
                    source_name,
                    self.config.default_limits,
                    &self.slots,
                )
                .await?;
                validate(source_name, &described, component.deployer.is_some())?;
                fresh = Some((outcome, prepare_time));
                anyhow::Ok((Arc::new(component), described))
            })
            .await?
            .clone();
        let (outcome, prepare_time) = fresh.unwrap_or((LoadOutcome::Reused, Duration::ZERO));
        let (prepared, described) = entry;
        let wasm::Described {
            description,
            hook_setup,
        } = described;
        let limits = limits.unwrap_or_else(|| self.limits_for(&description.name));
        let plugin = Arc::new(WasmPlugin {
            engine: self.engine.clone(),
            name: Arc::from(description.name.as_str()),
            description,
            hook_setup,
            prepared,
            limits,
            source: source_name.to_string(),
            calls: Default::default(),
            _ticker: self.ticker.clone(),
            slots: self.slots.clone(),
        });
        let record = LoadRecord {
            source: source_name.to_string(),
            plugin: plugin.description.name.clone(),
            sha256: plugin.sha256().to_string(),
            outcome,
            prepare_time,
            total_time: started.elapsed(),
        };
        tracing::info!(
            plugin = %record.plugin,
            version = %plugin.description.version,
            types = ?plugin.description.deploy_item_types,
            hooks = ?plugin.hook_setup().map(|h| &h.hook_types),
            source = %record.source,
            outcome = ?record.outcome,
            prepare_ms = record.prepare_time.as_secs_f64() * 1e3,
            "loaded plugin"
        );
        let mut stats = self.stats.lock().expect("stats lock");
        if record.outcome == LoadOutcome::Reused {
            stats.reused += 1;
        }
        stats.loads.push(record);
        Ok(plugin)
    }

    /// Compile the component or take it from the cache.
    async fn obtain(
        &self,
        source: &str,
        sha: &[u8; 32],
        bytes: &[u8],
    ) -> Result<(Component, LoadOutcome, Duration)> {
        // A core module (version 1, layer 0) parses as wasm but is no component: say what to do.
        if bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[4..8] == [1, 0, 0, 0] {
            bail!(
                "{source} is a core WebAssembly module, not a component: build the plugin for \
                 wasm32-wasip2 (or wrap a wasip1 module with `wasm-tools component new` and the \
                 WASI preview1 reactor adapter)"
            );
        }
        if bytes.len() < 4 || bytes[..4] != *b"\0asm" {
            bail!("{source} is not WebAssembly (no \\0asm header)");
        }
        let mut rejected = None;
        if let Some(cache) = &self.cache {
            match cache.read(sha) {
                Lookup::Hit(artifact) => {
                    let t = Instant::now();
                    // SAFETY: the artifact was written by this runtime (HMAC-verified with our
                    // key) for this engine configuration and this component hash.
                    match unsafe { Component::deserialize(&self.engine, &artifact) } {
                        Ok(c) => {
                            let d = t.elapsed();
                            let mut s = self.stats.lock().expect("stats lock");
                            s.cache_hits += 1;
                            s.deserialize_time += d;
                            return Ok((c, LoadOutcome::CacheHit, d));
                        }
                        Err(e) => rejected = Some(format!("deserialize failed: {e}")),
                    }
                }
                Lookup::Miss => {}
                Lookup::Rejected(r) => rejected = Some(r),
            }
            if let Some(r) = &rejected {
                tracing::warn!(source, reason = %r, "ignoring cached artifact; recompiling");
                self.stats.lock().expect("stats lock").cache_rejected += 1;
            }
        }
        let engine = self.engine.clone();
        let owned = bytes.to_vec();
        let t = Instant::now();
        let component = tokio::task::spawn_blocking(move || Component::new(&engine, &owned))
            .await
            .context("compile task")?
            .map_err(anyhow::Error::from)
            .with_context(|| format!("compiling {source}"))?;
        let d = t.elapsed();
        {
            let mut s = self.stats.lock().expect("stats lock");
            s.compiled += 1;
            s.compile_time += d;
        }
        if let Some(cache) = &self.cache {
            let written = component
                .serialize()
                .map_err(anyhow::Error::from)
                .and_then(|artifact: Vec<u8>| cache.write(sha, &artifact));
            match written {
                Ok(()) => self.stats.lock().expect("stats lock").cache_writes += 1,
                Err(e) => tracing::warn!(source, error = %e, "could not write compiled artifact"),
            }
        }
        Ok((
            component,
            LoadOutcome::Compiled {
                cache_rejected: rejected,
            },
            d,
        ))
    }

    /// Load every `*.wasm` file in `dir` (sorted by file name). Other files are ignored.
    /// Fails on the first component that cannot be loaded. Check for conflicting types with
    /// [`crate::PluginRegistry::new`].
    pub async fn load_dir(&self, dir: &Path) -> Result<Vec<Arc<WasmPlugin>>> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir)
            .with_context(|| format!("reading plugin directory {}", dir.display()))?
        {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "wasm") && path.is_file() {
                files.push(path);
            }
        }
        files.sort();
        let mut plugins = Vec::with_capacity(files.len());
        for path in files {
            let bytes =
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            plugins.push(self.load_bytes(&path.display().to_string(), &bytes).await?);
        }
        Ok(plugins)
    }
}

fn validate(source: &str, described: &wasm::Described, deployer: bool) -> Result<()> {
    let d = &described.description;
    if d.name.trim().is_empty() {
        bail!("plugin {source}: describe returned an empty name");
    }
    if let Some(h) = &described.hook_setup {
        if h.hook_types.is_empty() {
            bail!(
                "plugin {source} ({}): hooks.describe lists no hook types",
                h.name
            );
        }
        if deployer && h.name != d.name {
            bail!(
                "plugin {source}: deployer.describe says {:?} but hooks.describe says {:?}; \
                 one component has one name",
                d.name,
                h.name
            );
        }
    }
    if !deployer {
        return Ok(());
    }
    if d.deploy_item_types.is_empty() {
        bail!(
            "plugin {source} ({}): describe lists no deploy item types",
            d.name
        );
    }
    if let Some(t) = d.deploy_item_types.iter().find(|t| t.trim().is_empty()) {
        bail!("plugin {source} ({}): empty deploy item type {t:?}", d.name);
    }
    Ok(())
}
