//! Native plugins: an `sdk_guest::Deployer` compiled into the host, behind the same
//! [`DeployerPlugin`] trait as wasm components.
//!
//! Owns: running a native deployer on a blocking thread with a [`NativeHost`] bridge to the
//! invocation's [`HostServices`], under the same deadline as wasm plugins. Used for the
//! native mock (benchmarks, differential test).
//! Must not touch: isolation — native code is trusted; a native plugin that loops keeps its
//! blocking thread (the item still fails with `ERR_TIMEOUT` at the deadline).

use crate::api::{DeployerPlugin, HookPlugin, HostServices, Limits, NoopHost, Op, emit_log};
use sdk_guest::{
    Ctx, Deployer, DeployerError, Description, FetchRequest, Fetched, HookInput, HookResult,
    HookSetup, Hooks, Invocation, KubeOp, LogLevel, NativeHost, Response,
};
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// An `sdk_guest::Deployer` run natively.
pub struct NativePlugin<D> {
    description: Description,
    limits: Limits,
    _deployer: PhantomData<fn() -> D>,
}

impl<D: Deployer + 'static> Default for NativePlugin<D> {
    fn default() -> Self {
        Self::new()
    }
}

impl<D: Deployer + 'static> NativePlugin<D> {
    /// Wrap `D` (calls `D::describe()` once) with default [`Limits`].
    pub fn new() -> Self {
        Self::with_limits(Limits::default())
    }

    /// Wrap `D` with the given limits (only the deadline applies natively).
    pub fn with_limits(limits: Limits) -> Self {
        NativePlugin {
            description: D::describe(),
            limits,
            _deployer: PhantomData,
        }
    }

    async fn run(
        &self,
        op: Op,
        inv: Invocation,
        host: Arc<dyn HostServices>,
    ) -> Result<Response, DeployerError> {
        let bridge = Bridge {
            host,
            handle: tokio::runtime::Handle::current(),
            plugin: self.description.name.clone(),
        };
        let task = tokio::task::spawn_blocking(move || {
            let ctx = Ctx::native(&bridge);
            match op {
                Op::Reconcile => D::reconcile(&ctx, inv),
                Op::Delete => D::delete(&ctx, inv),
            }
        });
        match tokio::time::timeout(self.limits.deadline, task).await {
            Err(_) => Err(DeployerError::timeout(
                "PluginDeadlineExceeded",
                format!(
                    "plugin {:?} did not finish within its deadline of {:?}",
                    self.description.name, self.limits.deadline
                ),
            )
            .with_operation(op.name())),
            Ok(Err(join)) => Err(DeployerError::internal(
                "PluginPanicked",
                format!("plugin {:?} panicked: {join}", self.description.name),
            )
            .with_operation(op.name())),
            Ok(Ok(r)) => r.map_err(|e| e.or_operation(op.name())),
        }
    }
}

#[async_trait::async_trait]
impl<D: Deployer + 'static> DeployerPlugin for NativePlugin<D> {
    fn description(&self) -> &Description {
        &self.description
    }

    fn origin(&self) -> String {
        format!("native ({})", std::any::type_name::<D>())
    }

    async fn reconcile(
        &self,
        inv: Invocation,
        host: Arc<dyn HostServices>,
    ) -> Result<Response, DeployerError> {
        self.run(Op::Reconcile, inv, host).await
    }

    async fn delete(
        &self,
        inv: Invocation,
        host: Arc<dyn HostServices>,
    ) -> Result<Response, DeployerError> {
        self.run(Op::Delete, inv, host).await
    }
}

/// Blocking [`NativeHost`] over async [`HostServices`]; lives on a blocking thread.
struct Bridge {
    host: Arc<dyn HostServices>,
    handle: tokio::runtime::Handle,
    plugin: String,
}

impl NativeHost for Bridge {
    fn log(&self, level: LogLevel, message: &str) {
        emit_log(&self.plugin, level, message);
    }

    fn checkpoint(&self, name: &str) -> Result<(), DeployerError> {
        self.host.checkpoint(name)
    }

    fn remaining(&self) -> Option<Duration> {
        self.host.remaining()
    }

    fn kube(&self, op: KubeOp) -> Result<Option<String>, DeployerError> {
        self.handle.block_on(self.host.kube(op))
    }
    fn kube_on(&self, target_name: &str, op: KubeOp) -> Result<Option<String>, DeployerError> {
        self.handle.block_on(self.host.kube_on(target_name, op))
    }
    fn fetch(&self, request: FetchRequest) -> Result<Fetched, DeployerError> {
        match request {
            // The guest SDK asks for OCM resources as a request like a download; the host
            // answers them with its own capability (WIT `ocm`), as for a wasm plugin.
            FetchRequest::Ocm {
                resource_key,
                layer_media_types,
            } => self
                .handle
                .block_on(self.host.ocm_resource(&resource_key, &layer_media_types)),
            request => self.handle.block_on(self.host.fetch(request)),
        }
    }
}

/// An `sdk_guest::Hooks` implementation run natively (tests, benchmarks).
pub struct NativeHooks<H> {
    setup: HookSetup,
    limits: Limits,
    _hooks: PhantomData<fn() -> H>,
}

impl<H: Hooks + 'static> Default for NativeHooks<H> {
    fn default() -> Self {
        NativeHooks {
            setup: H::describe(),
            limits: Limits::default(),
            _hooks: PhantomData,
        }
    }
}

#[async_trait::async_trait]
impl<H: Hooks + 'static> HookPlugin for NativeHooks<H> {
    fn setup(&self) -> &HookSetup {
        &self.setup
    }

    fn origin(&self) -> String {
        format!("native ({})", std::any::type_name::<H>())
    }

    async fn run_hook(&self, input: HookInput) -> Result<Option<HookResult>, DeployerError> {
        let bridge = Bridge {
            host: Arc::new(NoopHost),
            handle: tokio::runtime::Handle::current(),
            plugin: self.setup.name.clone(),
        };
        let hook_type = input.hook_type;
        let task = tokio::task::spawn_blocking(move || H::run(&Ctx::native(&bridge), input));
        match tokio::time::timeout(self.limits.deadline, task).await {
            Err(_) => Err(DeployerError::timeout(
                "PluginDeadlineExceeded",
                format!(
                    "hook {:?} did not finish within its deadline of {:?}",
                    self.setup.name, self.limits.deadline
                ),
            )),
            Ok(Err(join)) => Err(DeployerError::internal(
                "PluginPanicked",
                format!("hook {:?} panicked: {join}", self.setup.name),
            )),
            Ok(Ok(r)) => r.map_err(|e| e.or_operation(hook_type.as_str())),
        }
    }
}
