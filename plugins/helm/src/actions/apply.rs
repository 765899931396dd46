//! The `apply` and `wait` stages: the release's objects applied with server-side apply (or
//! replaced with `force`), the replaced release's objects it no longer has deleted (unless
//! `keep`), and the wait until every object exists and is ready. Owns: applying and
//! readiness. Must not touch: hooks, release records.

use std::collections::BTreeSet;

use manifest_applier::readiness::object_ready;
use sdk_guest::{DeployerError, PatchType};

use super::driver::{Driver, Step};
use super::objects::Obj;
use super::objects::{default_port_protocols, keep_policy};
use super::state::{FIELD_MANAGER, RESOURCE_POLICY_ANNOTATION};

impl Driver<'_, '_> {
    fn apply_object(&self, o: &Obj) -> Result<(), DeployerError> {
        let wrap = |verb: &str, e: DeployerError| DeployerError {
            message: format!("failed to {verb} {}: {}", o.describe(), e.message),
            ..e
        };
        if self.run.force {
            match self.ctx.kube_get(&o.r).map_err(|e| wrap("get", e))? {
                Some(live) => {
                    let mut v = o.value.clone();
                    if let Some(rv) = live.pointer("/metadata/resourceVersion") {
                        v["metadata"]["resourceVersion"] = rv.clone();
                    }
                    self.ctx.kube_update(&v).map_err(|e| wrap("replace", e))?;
                }
                None => {
                    self.ctx
                        .kube_create(&o.value)
                        .map_err(|e| wrap("create", e))?;
                }
            }
            return Ok(());
        }
        let mut body = o.value.clone();
        default_port_protocols(&mut body);
        self.ctx
            .kube_patch(&o.r, &body, PatchType::Apply, Some(FIELD_MANAGER), true)
            .map_err(|e| wrap("apply", e))?;
        Ok(())
    }

    /// Applies the release's objects; deletes those of the replaced release it no longer has.
    pub(super) fn apply(&mut self) -> Result<Step, DeployerError> {
        let manifest = self.rel.manifest.clone();
        let objects = match self.objects(&manifest, true, false)? {
            Ok(o) => o,
            Err(m) => {
                return Ok(Step::Fail(format!(
                    "unable to build kubernetes objects from new release manifest: {m}"
                )));
            }
        };
        for o in &objects {
            self.apply_object(o)?;
        }
        let Some(previous) = self.run.previous else {
            return Ok(Step::Next);
        };
        let Some(prev) = self.storage.get(self.ctx, &self.run.release, previous)? else {
            return Ok(Step::Next);
        };
        let old = match self.objects(&prev.manifest, false, true)? {
            Ok(o) => o,
            Err(m) => {
                self.ctx.warn(&format!(
                    "cannot read the manifest of revision {previous}, nothing is deleted: {m}"
                ));
                return Ok(Step::Next);
            }
        };
        let keys: BTreeSet<_> = objects.iter().map(Obj::key).collect();
        for o in old.iter().filter(|o| !keys.contains(&o.key())) {
            let Some(live) = self.ctx.kube_get(&o.r)? else {
                continue;
            };
            if keep_policy(&live) {
                self.ctx.info(&format!(
                    "skipping delete of {} due to annotation [{RESOURCE_POLICY_ANNOTATION}=keep]",
                    o.short()
                ));
                continue;
            }
            self.ctx.kube_delete(&o.r)?;
        }
        Ok(Step::Next)
    }

    pub(super) fn wait_ready(&mut self) -> Result<Step, DeployerError> {
        let manifest = self.rel.manifest.clone();
        let objects = match self.objects(&manifest, false, false)? {
            Ok(o) => o,
            Err(m) => return Ok(Step::Fail(m)),
        };
        for o in &objects {
            match self.ctx.kube_get(&o.r)? {
                None => return Ok(Step::Pending(format!("{} does not exist", o.short()))),
                Some(live) => {
                    if let Err(why) = object_ready(&live) {
                        return Ok(Step::Pending(format!("{} is not ready: {why}", o.short())));
                    }
                }
            }
        }
        Ok(Step::Next)
    }
}
