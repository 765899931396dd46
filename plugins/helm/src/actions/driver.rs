//! The driver: walks the stages of the action in the state (hooks, apply, wait, delete,
//! finalize) as far as they go, answering "pending" when a stage must wait and turning a
//! transient error into a retry and a permanent one into the release's failure. Owns: the
//! stage loop and the release record in flight. Must not touch: what each stage does (its
//! own file), starting actions.

use sdk_guest::{Ctx, DeployerError};

use super::objects::{BuildError, Discovery, Obj};
use super::state::{
    ActionState, Outcome, POLL, RETRY, Running, Stage, action_error, after, permanent, retry,
};
use crate::release::{self, Release, Status, Storage};

/// What driving an action answers: `Done(None)` when an uninstall found no release.
pub(super) type Driven = Result<Outcome<Option<Box<Release>>>, DeployerError>;

/// What a stage answers.
pub(super) enum Step {
    /// Done: on to the next stage.
    Next,
    /// Not yet (why).
    Pending(String),
    /// The release failed (cause).
    Fail(String),
}

/// One action being driven: its state, its release record (`dirty`: changed in memory, not
/// written yet) and discovery cached for this call.
pub(super) struct Driver<'c, 'a> {
    pub(super) ctx: &'c Ctx<'a>,
    pub(super) storage: Storage,
    pub(super) run: Running,
    pub(super) rel: Release,
    pub(super) dirty: bool,
    pub(super) disc: Discovery,
}

/// Drives the action in `state` as far as it goes.
pub(super) fn drive(ctx: &Ctx, state: &mut ActionState) -> Driven {
    let Some(run) = state.running.clone() else {
        return Err(DeployerError::internal(
            "NoAction",
            "no Helm action in flight",
        ));
    };
    let storage = Storage::new(&run.namespace);
    let rel = match storage.get(ctx, &run.release, run.revision) {
        Ok(Some(r)) => r,
        Ok(None) => {
            state.running = None;
            return Err(action_error(
                run.action,
                format!(
                    "release record {} disappeared during the {:?} action",
                    release::secret_name(&run.release, run.revision),
                    run.action
                ),
            ));
        }
        Err(e) if permanent(&e) => {
            state.running = None;
            return Err(e.or_operation(run.action.operation().0));
        }
        Err(e) => return Ok(retry(format!("retrying after error: {}", e.message))),
    };
    let mut d = Driver {
        ctx,
        storage,
        run,
        rel,
        dirty: false,
        disc: Discovery::default(),
    };
    loop {
        let stage = d.run.stage.clone();
        let step = match &stage {
            Stage::Hooks { .. } => d.hooks(),
            Stage::Apply => d.apply(),
            Stage::Wait if d.run.wait => d.wait_ready(),
            Stage::Delete => d.delete(),
            Stage::WaitDeleted if d.run.wait => d.wait_deleted(),
            Stage::Wait | Stage::WaitDeleted => Ok(Step::Next),
            Stage::Finalize => match d.finalize() {
                Ok(result) => {
                    state.running = None;
                    return result;
                }
                Err(e) => Err(e),
            },
        };
        let step = match step {
            Ok(s) => s,
            Err(e) if permanent(&e) => Step::Fail(e.message),
            Err(e) => {
                if d.timed_out() {
                    Step::Fail(format!(
                        "timed out waiting for the condition: {}",
                        e.message
                    ))
                } else {
                    d.flush();
                    state.running = Some(d.run);
                    return Ok(Outcome::Pending {
                        retry_after: RETRY,
                        message: format!("retrying after error: {}", e.message),
                    });
                }
            }
        };
        match step {
            Step::Next => d.run.stage = after(d.run.action, &d.run.stage),
            Step::Pending(msg) if !d.timed_out() => {
                d.flush();
                state.running = Some(d.run);
                return Ok(Outcome::Pending {
                    retry_after: POLL,
                    message: msg,
                });
            }
            Step::Pending(msg) => {
                return d.fail(state, format!("timed out waiting for the condition: {msg}"));
            }
            Step::Fail(cause) => return d.fail(state, cause),
        }
    }
}

impl Driver<'_, '_> {
    pub(super) fn timed_out(&self) -> bool {
        self.run
            .deadline
            .is_some_and(|d| self.ctx.now_unix_millis() >= d)
    }

    /// Writes in-memory changes of the record (hook runs) before answering "pending".
    pub(super) fn flush(&mut self) {
        if self.dirty {
            match self.storage.update(self.ctx, &self.rel) {
                Ok(()) => self.dirty = false,
                Err(e) => self.ctx.warn(&format!(
                    "cannot record release {}: {}",
                    self.rel.secret_name(),
                    e.message
                )),
            }
        }
    }

    pub(super) fn record(&mut self) -> Result<(), DeployerError> {
        self.storage.update(self.ctx, &self.rel)?;
        self.dirty = false;
        Ok(())
    }

    pub(super) fn objects(
        &mut self,
        manifest: &str,
        owned: bool,
        lenient: bool,
    ) -> Result<Result<Vec<Obj>, String>, DeployerError> {
        let owner = owned.then_some((self.rel.name.as_str(), self.rel.namespace.as_str()));
        let ns = if self.rel.namespace.is_empty() {
            self.run.namespace.clone()
        } else {
            self.rel.namespace.clone()
        };
        match self.disc.build(self.ctx, manifest, &ns, owner, lenient) {
            Ok(o) => Ok(Ok(o)),
            Err(BuildError::Kube(e)) => Err(e),
            Err(BuildError::Invalid(m)) => Ok(Err(m)),
        }
    }

    pub(super) fn set_status(
        &mut self,
        rel: &mut Release,
        status: Status,
    ) -> Result<(), DeployerError> {
        if rel.info.status != status {
            rel.info.status = status;
            self.storage.update(self.ctx, rel)?;
        }
        Ok(())
    }
}

/// An install/upgrade/rollback answers the release (`Done(None)` cannot happen there but
/// reads as a release of that name).
pub(super) fn done_release(o: Outcome<Option<Box<Release>>>, name: &str) -> Outcome<Box<Release>> {
    match o {
        Outcome::Done(Some(rel)) => Outcome::Done(rel),
        Outcome::Done(None) => Outcome::Done(Box::new(Release {
            name: name.into(),
            ..Default::default()
        })),
        Outcome::Pending {
            retry_after,
            message,
        } => Outcome::Pending {
            retry_after,
            message,
        },
    }
}
