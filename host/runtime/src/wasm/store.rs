//! The store of one invocation: a fresh `Store` with a WASI context that grants nothing (no
//! preopens, environment, arguments, sockets or stdin), bounded in-memory stdout/stderr, a
//! memory limiter and the epoch deadline; the [`State`] every capability works on.
//!
//! Owns: what one instance may use. Must not touch: calling the instance (`invoke`) or any
//! capability's behaviour (`crate::capabilities`).

use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Store, UpdateDeadline};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::api::{HostServices, Limits};

/// How much of a plugin's stdout/stderr is kept per invocation (logged, and quoted in
/// trap messages).
const STDIO_CAPTURE: usize = 16 << 10;

/// Store data of one invocation.
pub(crate) struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    http_ctx: wasmtime_wasi_http::WasiHttpCtx,
    /// Outgoing HTTP (WIT 1.5): the grant check, limits and what ended it.
    pub(crate) http: crate::capabilities::http::HttpGate,
    pub(crate) limiter: MemoryLimiter,
    /// The plugin's name, for logs and messages.
    pub(crate) plugin: Arc<str>,
    /// The invocation's host services; `None` during `describe` and in hooks.
    pub(crate) host: Option<Arc<dyn HostServices>>,
    /// When the invocation started (the plugin's monotonic clock).
    pub(crate) started: Instant,
    /// End of the invocation deadline; host calls are bounded by it.
    pub(crate) deadline: Instant,
    /// This store's slot in the instance pool, released when the store drops.
    _slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// The slots of the pooling instance allocator: one permit per live store, so a burst of calls
/// waits for a free slot instead of failing to instantiate when the pool is full. `None`:
/// on-demand allocation, no bound.
#[derive(Clone, Debug, Default)]
pub(crate) struct Slots(Option<Arc<tokio::sync::Semaphore>>);

impl Slots {
    pub(crate) fn new(n: usize) -> Self {
        Slots((n > 0).then(|| Arc::new(tokio::sync::Semaphore::new(n))))
    }

    /// Waits for a free slot (immediately `None` without a pool).
    pub(crate) async fn acquire(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        match &self.0 {
            // The semaphore is never closed.
            Some(s) => s.clone().acquire_owned().await.ok(),
            None => None,
        }
    }
}

impl wasmtime_wasi_http::WasiHttpView for State {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView {
            hooks: &mut self.http,
            table: &mut self.table,
            ctx: &mut self.http_ctx,
        }
    }
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
    /// A growth past the cap was refused.
    pub(crate) hit: bool,
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

/// Captured stdio of one invocation.
pub(crate) struct Stdio {
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
}

impl Stdio {
    pub(crate) fn flush_to_log(&self, plugin: &str) -> String {
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
/// Busy epoch ticks (wasm executing, not waiting on a host call) before an invocation counts
/// as CPU-bound and is throttled: about 250 ms of computation at the 10 ms tick.
const THROTTLE_AFTER_BUSY_TICKS: u32 = 25;
/// The sleep per tick of a throttled invocation (a third of a core at the 10 ms tick).
const THROTTLE_SLEEP: std::time::Duration = std::time::Duration::from_millis(20);

/// Network connections or binds plugins attempted (and were denied) in this process.
pub static DENIED_NETWORK_ATTEMPTS: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

pub(crate) fn new_store(
    engine: &wasmtime::Engine,
    plugin: Arc<str>,
    limits: Limits,
    host: Option<Arc<dyn HostServices>>,
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
) -> (Store<State>, Stdio) {
    let stdio = Stdio {
        stdout: MemoryOutputPipe::new(STDIO_CAPTURE),
        stderr: MemoryOutputPipe::new(STDIO_CAPTURE),
    };
    // No preopens, no env, no args, no stdin, no name lookup, no UDP: the builder's defaults.
    // TCP sockets may be created but every address a plugin binds or connects to is denied by
    // the check, which logs the attempt (in the invocation's span: plugin and item) so a plugin
    // that tries the network shows up in the item's log. stdout/stderr go to bounded in-memory
    // pipes.
    let denied_plugin = plugin.clone();
    let wasi = WasiCtxBuilder::new()
        .stdout(stdio.stdout.clone())
        .stderr(stdio.stderr.clone())
        .allow_tcp(true)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .socket_addr_check(move |addr, usage| {
            DENIED_NETWORK_ATTEMPTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(plugin = %denied_plugin, %addr, ?usage, "denied: plugins get no network");
            Box::pin(async { false })
        })
        .build();
    let started = Instant::now();
    let deadline = started + limits.deadline;
    let http = crate::capabilities::http::HttpGate::new(plugin.clone(), host.clone(), deadline);
    let mut store = Store::new(
        engine,
        State {
            wasi,
            table: ResourceTable::new(),
            http_ctx: wasmtime_wasi_http::WasiHttpCtx::new(),
            http,
            limiter: MemoryLimiter {
                cap: limits.memory_bytes,
                hit: false,
            },
            plugin,
            host,
            started,
            deadline,
            _slot: slot,
        },
    );
    store.limiter(|s| &mut s.limiter);
    // Every epoch tick (<= 10 ms) either interrupts (deadline passed) or yields to the
    // executor, so a spinning plugin neither outlives its deadline nor starves tokio. The
    // callback only runs while wasm executes, so it also counts the invocation's busy ticks:
    // past THROTTLE_AFTER_BUSY_TICKS (a CPU-bound plugin: a loop, a runaway render) each tick
    // also sleeps, capping the plugin at about a third of a core until its deadline, so one
    // runaway item does not take a core from every other item's jobs.
    store.set_epoch_deadline(1);
    let mut busy_ticks: u32 = 0;
    store.epoch_deadline_callback(move |ctx| {
        busy_ticks = busy_ticks.saturating_add(1);
        let now = Instant::now();
        // A refused HTTP request ends the invocation at once (capabilities::http).
        Ok(if now >= deadline || ctx.data().http.refused() {
            UpdateDeadline::Interrupt
        } else if busy_ticks > THROTTLE_AFTER_BUSY_TICKS {
            // Never past the deadline: it is checked again right after.
            let nap = THROTTLE_SLEEP.min(deadline - now);
            UpdateDeadline::YieldCustom(1, Box::pin(tokio::time::sleep(nap)))
        } else {
            UpdateDeadline::Yield(1)
        })
    });
    (store, stdio)
}
