//! The `hooks` stages: a release's hooks of one event (`pre-install`, `post-upgrade`, …), run
//! one after the other by weight and name, each awaited until done (Job complete, Pod
//! succeeded), with Helm's delete policies and `last_run` records. Owns: hook order, hook
//! state and hook failure causes. Must not touch: the release's other resources.

use sdk_guest::DeployerError;
use serde_json::Value;

use super::driver::{Driver, Step};
use super::objects::Obj;
use super::state::{Action, Stage, now, permanent};
use crate::release::{self, HookExecution, Release};

fn has_policy(h: &release::Hook, policy: &str) -> bool {
    h.delete_policies.iter().any(|p| p == policy)
}

/// Hook indices of `event` in execution order (weight, then name; stable).
fn hook_order(rel: &Release, event: &str) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..rel.hooks.len())
        .filter(|i| rel.hooks[*i].events.iter().any(|e| e == event))
        .collect();
    idx.sort_by(|a, b| {
        let (x, y) = (&rel.hooks[*a], &rel.hooks[*b]);
        x.weight.cmp(&y.weight).then_with(|| x.name.cmp(&y.name))
    });
    idx
}

/// Where a created hook is.
enum HookState {
    Done,
    Waiting(String),
    Failed(String),
}

impl Driver<'_, '_> {
    fn hook_object(&mut self, i: usize) -> Result<Result<Obj, String>, DeployerError> {
        let manifest = self.rel.hooks[i].manifest.clone();
        Ok(match self.objects(&manifest, false, false)? {
            Ok(mut objs) if !objs.is_empty() => Ok(objs.remove(0)),
            Ok(_) => Err("the hook has no object".into()),
            Err(m) => Err(m),
        })
    }

    fn delete_hook(&mut self, i: usize) -> Result<(), DeployerError> {
        if self.rel.hooks[i].kind == "CustomResourceDefinition" {
            return Ok(());
        }
        if let Ok(o) = self.hook_object(i)? {
            self.ctx.kube_delete(&o.r)?;
        }
        Ok(())
    }

    fn hook_state(&mut self, i: usize) -> Result<HookState, DeployerError> {
        let kind = self.rel.hooks[i].kind.clone();
        if kind != "Job" && kind != "Pod" {
            return Ok(HookState::Done);
        }
        let o = match self.hook_object(i)? {
            Ok(o) => o,
            Err(m) => return Ok(HookState::Failed(m)),
        };
        let Some(live) = self.ctx.kube_get(&o.r)? else {
            return Ok(HookState::Done);
        };
        let name = &o.r.name;
        if kind == "Job" {
            let conditions = live
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for c in &conditions {
                if c["status"] != "True" {
                    continue;
                }
                if c["type"] == "Complete" {
                    return Ok(HookState::Done);
                }
                if c["type"] == "Failed" {
                    return Ok(HookState::Failed(format!(
                        "job {name} failed: {}",
                        c["reason"].as_str().unwrap_or_default()
                    )));
                }
            }
            if live
                .pointer("/status/succeeded")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                >= 1
            {
                return Ok(HookState::Done);
            }
            return Ok(HookState::Waiting(format!(
                "waiting for hook {} to complete",
                o.short()
            )));
        }
        match live.pointer("/status/phase").and_then(Value::as_str) {
            Some("Succeeded") => Ok(HookState::Done),
            Some("Failed") => Ok(HookState::Failed(format!("pod {name} failed"))),
            _ => Ok(HookState::Waiting(format!(
                "waiting for hook {} to succeed",
                o.short()
            ))),
        }
    }

    fn hook_failed(&mut self, event: &str, order: &[usize], next: usize, msg: String) -> Step {
        let i = order[next];
        self.rel.hooks[i].last_run.completed_at = now(self.ctx);
        self.rel.hooks[i].last_run.phase = "Failed".into();
        self.dirty = true;
        if has_policy(&self.rel.hooks[i], "hook-failed")
            && let Err(e) = self.delete_hook(i)
        {
            self.ctx.warn(&format!(
                "error deleting the hook resource on hook failure: {}",
                e.message
            ));
        }
        for &j in &order[..next] {
            if has_policy(&self.rel.hooks[j], "hook-succeeded")
                && let Err(e) = self.delete_hook(j)
            {
                self.ctx.warn(&format!(
                    "cannot delete hook {}: {}",
                    self.rel.hooks[j].name, e.message
                ));
            }
        }
        let cause = match (self.run.action, event) {
            (Action::Install, e) => format!("failed {e}: {msg}"),
            (Action::Upgrade, e) => format!("{e} hooks failed: {msg}"),
            _ => msg,
        };
        Step::Fail(cause)
    }

    /// Runs the hooks of the current `Hooks` stage as far as possible.
    pub(super) fn hooks(&mut self) -> Result<Step, DeployerError> {
        let Stage::Hooks {
            event,
            mut next,
            mut running,
        } = self.run.stage.clone()
        else {
            return Ok(Step::Next);
        };
        let order = hook_order(&self.rel, &event);
        loop {
            self.set_hooks_stage(&event, next, running);
            if next >= order.len() {
                return self.hooks_succeeded(&order);
            }
            if !running {
                if let Some(step) = self.start_hook(&event, &order, next)? {
                    return Ok(step);
                }
                running = true;
                self.set_hooks_stage(&event, next, running);
            }
            if let Some(step) = self.await_hook(&event, &order, next)? {
                return Ok(step);
            }
            next += 1;
            running = false;
        }
    }

    fn set_hooks_stage(&mut self, event: &str, next: usize, running: bool) {
        self.run.stage = Stage::Hooks {
            event: event.to_string(),
            next,
            running,
        };
    }

    /// Every hook of the event succeeded: delete those with `hook-succeeded`, in reverse.
    fn hooks_succeeded(&mut self, order: &[usize]) -> Result<Step, DeployerError> {
        for &i in order.iter().rev() {
            if has_policy(&self.rel.hooks[i], "hook-succeeded") {
                self.delete_hook(i)?;
            }
        }
        Ok(Step::Next)
    }

    /// Creates hook `order[next]` (after deleting its previous run, `before-hook-creation`);
    /// `Some` when the stage must answer now instead (pending, failed).
    fn start_hook(
        &mut self,
        event: &str,
        order: &[usize],
        next: usize,
    ) -> Result<Option<Step>, DeployerError> {
        let i = order[next];
        if self.rel.hooks[i].delete_policies.is_empty() {
            self.rel.hooks[i].delete_policies = vec!["before-hook-creation".into()];
            self.dirty = true;
        }
        let o = match self.hook_object(i)? {
            Ok(o) => o,
            Err(m) => {
                let path = self.rel.hooks[i].path.clone();
                return Ok(Some(self.hook_failed(
                    event,
                    order,
                    next,
                    format!("unable to build kubernetes object for {event} hook {path}: {m}"),
                )));
            }
        };
        if has_policy(&self.rel.hooks[i], "before-hook-creation")
            && self.rel.hooks[i].kind != "CustomResourceDefinition"
            && self.ctx.kube_delete(&o.r)?
            && self.ctx.kube_get(&o.r)?.is_some()
        {
            return Ok(Some(Step::Pending(format!(
                "waiting for the previous hook {} to be deleted",
                o.short()
            ))));
        }
        self.rel.hooks[i].last_run = HookExecution {
            started_at: now(self.ctx),
            completed_at: String::new(),
            phase: "Running".into(),
        };
        self.record()?;
        self.rel.hooks[i].last_run.phase = "Unknown".into();
        self.dirty = true;
        if let Err(e) = self.ctx.kube_create(&o.value) {
            if !permanent(&e) && e.reason != "AlreadyExists" {
                return Err(e);
            }
            let path = self.rel.hooks[i].path.clone();
            return Ok(Some(self.hook_failed(
                event,
                order,
                next,
                format!("warning: Hook {event} {path} failed: {}", e.message),
            )));
        }
        Ok(None)
    }

    /// Looks at the running hook `order[next]`: `None` when it succeeded (recorded), else
    /// what the stage answers (pending, failed, timed out).
    fn await_hook(
        &mut self,
        event: &str,
        order: &[usize],
        next: usize,
    ) -> Result<Option<Step>, DeployerError> {
        let i = order[next];
        match self.hook_state(i)? {
            HookState::Done => {
                self.rel.hooks[i].last_run.completed_at = now(self.ctx);
                self.rel.hooks[i].last_run.phase = "Succeeded".into();
                self.dirty = true;
                Ok(None)
            }
            HookState::Failed(msg) => Ok(Some(self.hook_failed(event, order, next, msg))),
            HookState::Waiting(msg) if self.timed_out() => Ok(Some(self.hook_failed(
                event,
                order,
                next,
                format!("timed out waiting for the condition: {msg}"),
            ))),
            HookState::Waiting(msg) => Ok(Some(Step::Pending(msg))),
        }
    }
}
