//! `helm install` / `helm upgrade` (which one: Helm's rule on the release history): render
//! once against the Target, create the chart's CRDs and the namespace, check ownership, write
//! the pending record, then drive the action. Owns: starting an install or upgrade. Must not
//! touch: its stages (the driver's), rendering itself (`helm-engine`).

use std::collections::BTreeSet;

use helm_engine::render::Rendered;
use helm_engine::{RenderOptions, render};
use sdk_guest::{Ctx, DeployerError, ObjectRef};
use serde_json::{Value, json};

use super::driver::{done_release, drive};
use super::objects::check_ownership;
use super::objects::{BuildError, Discovery, Obj};
use super::resume::{Resume, resume, unblock};
use super::state::{
    Action, ActionState, ERR_PENDING, Flags, Outcome, POLL, Request, Running, action_error,
    config_error, deadline, first_stage, is_empty_values, now, retry,
};
use crate::release::{self, Info, Release, Status, Storage};

/// Installs the chart as release `req.release_name`, or upgrades the release; resumes the
/// action in `state` if there is one. See the module documentation.
pub fn install_or_upgrade(
    ctx: &Ctx,
    req: &Request,
    state: &mut ActionState,
) -> Result<Outcome<Box<Release>>, DeployerError> {
    let name = req.release_name;
    let ours = |run: &Running| match run.action {
        Action::Install | Action::Upgrade | Action::Rollback => true,
        Action::Uninstall => run.recovering.is_some(),
    };
    match resume(ctx, state, name, req.namespace, ours)? {
        Resume::Drive => return drive(ctx, state).map(|o| done_release(o, name)),
        Resume::Retry(m) => return Ok(retry(m)),
        Resume::Fresh => {}
    }
    let storage = Storage::new(req.namespace);
    let history = storage.history(ctx, name)?;
    let plan = Plan::new(ctx, req, &storage, &history)?;
    let rendered = plan.render(ctx, req)?;
    let manifest = rendered.manifest();
    let mut disc = Discovery::default();
    let objects = match plan.build_objects(ctx, &mut disc, &rendered.crds, &manifest)? {
        Ok(objects) => objects,
        Err(waiting) => return Ok(waiting),
    };
    plan.check_ownership(ctx, &mut disc, &objects)?;
    if plan.install && plan.flags.create_namespace {
        create_namespace(ctx, req.namespace).map_err(|e| plan.op_error(e))?;
    }
    plan.record_pending(ctx, &storage, req, manifest, &rendered)?;
    state.running = Some(plan.running(ctx));
    drive(ctx, state).map(|o| done_release(o, name))
}

/// A fresh install or upgrade, decided from the release history.
struct Plan<'h, 'r> {
    name: &'r str,
    ns: &'r str,
    action: Action,
    install: bool,
    flags: &'r Flags,
    /// The latest record.
    last: Option<&'h Release>,
    /// Upgrade: the revision being replaced (the deployed one, else the latest).
    current: Option<&'h Release>,
    /// The new revision.
    revision: i64,
    /// The values to store and render with (an upgrade without values reuses the previous).
    values: Value,
}

impl<'h, 'r> Plan<'h, 'r> {
    /// Helm's choice: install when there is no release, or only failed installs / an
    /// uninstalled release; otherwise upgrade. Refuses a release living in another namespace
    /// and a pending latest record (unblocking it).
    fn new(
        ctx: &Ctx,
        req: &'r Request,
        storage: &Storage,
        history: &'h [Release],
    ) -> Result<Self, DeployerError> {
        if history.is_empty() {
            refuse_release_elsewhere(ctx, storage, req)?;
        }
        let last = history.last();
        if let Some(last) = last
            && last.info.status.is_pending()
        {
            unblock(ctx, storage, history);
            return Err(action_error(Action::Upgrade, ERR_PENDING.into()));
        }
        let ever_deployed = history
            .iter()
            .any(|r| matches!(r.info.status, Status::Deployed | Status::Superseded));
        let install = match last {
            None => true,
            Some(l) => {
                matches!(l.info.status, Status::Uninstalled | Status::Uninstalling)
                    || !ever_deployed
            }
        };
        let current = if install {
            None
        } else {
            history
                .iter()
                .rev()
                .find(|r| r.info.status == Status::Deployed)
                .or(last)
        };
        // Values: an upgrade without values reuses the previous ones (Helm's reuseValues).
        let mut values = req.values.clone();
        if let Some(cur) = current
            && is_empty_values(&values)
            && !is_empty_values(&cur.config)
        {
            values = cur.config.clone();
        }
        Ok(Plan {
            name: req.release_name,
            ns: req.namespace,
            action: if install {
                Action::Install
            } else {
                Action::Upgrade
            },
            install,
            flags: if install { &req.install } else { &req.upgrade },
            last,
            current,
            revision: last.map(|l| l.version).unwrap_or(0) + 1,
            values,
        })
    }

    /// A Kubernetes error, marked with this action's operation.
    fn op_error(&self, e: DeployerError) -> DeployerError {
        e.or_operation(self.action.operation().0)
    }

    /// Renders the chart once, against the Target cluster as Helm's install/upgrade does
    /// (`.Capabilities`, `lookup`).
    fn render(&self, ctx: &Ctx, req: &Request) -> Result<Rendered, DeployerError> {
        let cluster = crate::cluster::TargetCluster::read(ctx).map_err(|e| self.op_error(e))?;
        let opts = cluster.options(RenderOptions {
            release_name: self.name.into(),
            namespace: self.ns.into(),
            values_files: if self.values.is_null() {
                Vec::new()
            } else {
                vec![self.values.to_string()]
            },
            include_crds: false,
            is_upgrade: !self.install,
            revision: self.revision,
            skip_schema_validation: self.flags.skip_schema_validation,
            // Helm 3's document split, as Landscaper's helm deployer (Helm 3) renders: a chart
            // whose template ends in `\n---` keeps no trailing newline in its last value.
            split_mode: helm_engine::sort::SplitMode::Legacy,
            ..Default::default()
        });
        render(req.chart, &opts)
            .map_err(|e| config_error(self.action, "RenderChart", e.to_string()))
    }

    /// The chart's CRDs (install only), then the manifest's objects; `Err(pending)` while
    /// CRDs just created are not served yet.
    fn build_objects(
        &self,
        ctx: &Ctx,
        disc: &mut Discovery,
        crds: &[(String, String)],
        manifest: &str,
    ) -> Result<Result<Vec<Obj>, Outcome<Box<Release>>>, DeployerError> {
        let mut crds_created = Vec::new();
        if self.install {
            crds_created = install_crds(ctx, disc, crds).map_err(|e| DeployerError {
                operation: self.action.operation().0.into(),
                ..e
            })?;
        }
        let (name, ns) = (self.name, self.ns);
        match disc.build(ctx, manifest, ns, Some((name, ns)), false) {
            Ok(o) => Ok(Ok(o)),
            Err(BuildError::Kube(e)) => Err(self.op_error(e)),
            Err(BuildError::Invalid(msg)) if !crds_created.is_empty() => {
                Ok(Err(Outcome::Pending {
                    retry_after: POLL,
                    message: format!(
                        "waiting for the chart's CRDs ({}) to be served: {msg}",
                        crds_created.join(", ")
                    ),
                }))
            }
            Err(BuildError::Invalid(msg)) => Err(action_error(
                self.action,
                format!("unable to build kubernetes objects from release manifest: {msg}"),
            )),
        }
    }

    /// Helm's ownership check: every object of an install, the objects new to an upgrade,
    /// must not exist yet or carry this release's ownership metadata (unless
    /// `take_ownership`).
    fn check_ownership(
        &self,
        ctx: &Ctx,
        disc: &mut Discovery,
        objects: &[Obj],
    ) -> Result<(), DeployerError> {
        let known: BTreeSet<_> = match self.current {
            Some(cur) => match disc.build(ctx, &cur.manifest, self.ns, None, true) {
                Ok(objs) => objs.iter().map(Obj::key).collect(),
                Err(BuildError::Kube(e)) => return Err(self.op_error(e)),
                Err(BuildError::Invalid(_)) => BTreeSet::new(),
            },
            None => BTreeSet::new(),
        };
        for o in objects.iter().filter(|o| !known.contains(&o.key())) {
            let Some(live) = ctx.kube_get(&o.r).map_err(|e| self.op_error(e))? else {
                continue;
            };
            if self.flags.take_ownership {
                continue;
            }
            if let Err(why) = check_ownership(&live, self.name, self.ns) {
                return Err(action_error(
                    self.action,
                    format!(
                        "rendered manifests contain a resource that already exists. Unable to continue with {}: {} exists and cannot be imported into the current release: {why}",
                        if self.install { "install" } else { "update" },
                        o.describe()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Writes the pending record (history pruned first; an install over an old release
    /// supersedes its latest record unless that failed).
    fn record_pending(
        &self,
        ctx: &Ctx,
        storage: &Storage,
        req: &Request,
        manifest: String,
        rendered: &Rendered,
    ) -> Result<(), DeployerError> {
        if self.flags.max_history > 0 {
            storage.prune(ctx, self.name, self.flags.max_history - 1)?;
        }
        if self.install
            && let Some(last) = self.last
            && last.info.status != Status::Failed
        {
            let mut last = last.clone();
            last.set_status(Status::Superseded, "superseded by new release");
            storage.update(ctx, &last)?;
        }
        storage.create(ctx, &self.pending_release(ctx, req, manifest, rendered))
    }

    fn pending_release(
        &self,
        ctx: &Ctx,
        req: &Request,
        manifest: String,
        rendered: &Rendered,
    ) -> Release {
        let now_text = now(ctx);
        Release {
            name: self.name.into(),
            namespace: self.ns.into(),
            chart: release::chart_json(req.chart),
            config: self.values.clone(),
            manifest,
            hooks: rendered
                .hooks
                .iter()
                .map(release::Hook::from_rendered)
                .collect(),
            version: self.revision,
            info: Info {
                first_deployed: self
                    .current
                    .map(|c| c.info.first_deployed.clone())
                    .unwrap_or_else(|| now_text.clone()),
                last_deployed: now_text,
                status: self.action.pending_status(),
                description: if self.install {
                    "Initial install underway".into()
                } else {
                    "Preparing upgrade".into()
                },
                notes: rendered.notes.clone(),
                ..Default::default()
            },
            // Written as Helm 3 writes releases (no apply method): Helm 4 then upgrades this
            // release with client-side apply, which cannot conflict with our field manager.
            apply_method: String::new(),
            labels: self.last.map(|l| l.labels.clone()).unwrap_or_default(),
            ..Default::default()
        }
    }

    /// The action's state, at its first stage.
    fn running(&self, ctx: &Ctx) -> Running {
        let flags = self.flags;
        Running {
            action: self.action,
            release: self.name.into(),
            namespace: self.ns.into(),
            revision: self.revision,
            previous: self.current.map(|c| c.version),
            stage: first_stage(self.action),
            started_at: ctx.now_unix_millis(),
            deadline: deadline(ctx, flags.timeout),
            wait: flags.wait || flags.atomic,
            atomic: flags.atomic,
            force: flags.force,
            max_history: flags.max_history,
            description: None,
            recovering: None,
        }
    }
}

/// A new release must not share its name with one stored in another namespace only.
fn refuse_release_elsewhere(
    ctx: &Ctx,
    storage: &Storage,
    req: &Request,
) -> Result<(), DeployerError> {
    let (name, ns) = (req.release_name, req.namespace);
    match storage.find_elsewhere(ctx, name) {
        Ok(Some(other)) => Err(config_error(
            Action::Install,
            "ReleaseInOtherNamespace",
            format!(
                "release {name:?} not found in namespace {ns:?}: a release of that name exists in namespace {other:?}"
            ),
        )),
        Ok(None) => Ok(()),
        Err(e) => {
            ctx.debug(&format!(
                "cannot look for release {name} in other namespaces: {}",
                e.message
            ));
            Ok(())
        }
    }
}

/// Creates the chart's CRDs that do not exist yet (never updates them); returns the names of
/// those created.
fn install_crds(
    ctx: &Ctx,
    disc: &mut Discovery,
    crds: &[(String, String)],
) -> Result<Vec<String>, DeployerError> {
    let mut created = Vec::new();
    for (path, content) in crds {
        let objects = match disc.build(ctx, content, "", None, false) {
            Ok(o) => o,
            Err(BuildError::Kube(e)) => return Err(e),
            Err(BuildError::Invalid(msg)) => {
                return Err(DeployerError::configuration(
                    "InstallCRDs",
                    format!("failed to install CRD {path}: {msg}"),
                ));
            }
        };
        for o in objects {
            if ctx.kube_get(&o.r)?.is_some() {
                ctx.debug(&format!("CRD {} is already present. Skipping.", o.r.name));
                continue;
            }
            match ctx.kube_create(&o.value) {
                Ok(_) => created.push(o.r.name.clone()),
                Err(e) if e.reason == "AlreadyExists" => {}
                Err(e) => {
                    return Err(DeployerError {
                        message: format!("failed to install CRD {path}: {}", e.message),
                        ..e
                    });
                }
            }
        }
    }
    Ok(created)
}

fn create_namespace(ctx: &Ctx, ns: &str) -> Result<(), DeployerError> {
    let r = ObjectRef {
        api_version: "v1".into(),
        kind: "Namespace".into(),
        namespace: None,
        name: ns.into(),
    };
    if ctx.kube_get(&r)?.is_some() {
        return Ok(());
    }
    let object = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": ns, "labels": {"name": ns}},
    });
    match ctx.kube_create(&object) {
        Ok(_) => Ok(()),
        Err(e) if e.reason == "AlreadyExists" => Ok(()),
        Err(e) => Err(e),
    }
}
