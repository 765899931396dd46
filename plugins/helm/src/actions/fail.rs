//! A failed action: the release record becomes `failed` (an uninstall's stays
//! `uninstalling`), and an atomic install or upgrade starts its recovery (uninstall,
//! rollback to the last successful revision) as a new resumable action. Owns: failure
//! descriptions and the choice of recovery. Must not touch: the stages that failed, success
//! (`finalize`).

use std::time::Duration;

use super::driver::{Driven, Driver, drive};
use super::rollback::start_rollback;
use super::state::{Action, ActionState, Flags, Recovery, action_error};
use super::uninstall::start_uninstall;
use crate::release::Status;

impl Driver<'_, '_> {
    /// The release failed with `cause`: record it, recover if atomic, report.
    pub(super) fn fail(mut self, state: &mut ActionState, cause: String) -> Driven {
        state.running = None;
        match self.run.action {
            Action::Install | Action::Upgrade => {
                self.record_failed_release(&cause);
                if !self.run.atomic {
                    return Err(action_error(self.run.action, cause));
                }
                if self.run.action == Action::Install {
                    self.recover_install(state, cause)
                } else {
                    self.recover_upgrade(state, cause)
                }
            }
            Action::Rollback => self.fail_rollback(cause),
            Action::Uninstall => self.fail_uninstall(cause),
        }
    }

    /// Install/upgrade: the pending record becomes `failed` with Helm's description.
    fn record_failed_release(&mut self, cause: &str) {
        let name = self.run.release.clone();
        let desc = if self.run.action == Action::Install {
            format!("Release {name:?} failed: {cause}")
        } else {
            format!("Upgrade {name:?} failed: {cause}")
        };
        self.rel.set_status(Status::Failed, desc);
        if let Err(e) = self.record() {
            self.ctx.warn(&format!(
                "cannot record the failed release {name}: {}",
                e.message
            ));
        }
    }

    /// The atomic recovery's budget: as long as the failed action's.
    fn recovery_budget(&self) -> Option<Duration> {
        self.run
            .deadline
            .map(|d| Duration::from_millis(d.saturating_sub(self.run.started_at)))
    }

    fn recovery(&self, cause: &str) -> Recovery {
        Recovery {
            failed: self.run.action,
            cause: cause.to_string(),
            failed_revision: self.rel.version,
        }
    }

    /// An atomic install failed: uninstall the release.
    fn recover_install(self, state: &mut ActionState, cause: String) -> Driven {
        let name = self.run.release.clone();
        let ns = self.run.namespace.clone();
        self.ctx
            .info("Install failed and atomic is set, uninstalling release");
        let budget = self.recovery_budget();
        let recovery = self.recovery(&cause);
        match start_uninstall(self.ctx, state, &name, &ns, false, budget, Some(recovery)) {
            Ok(true) => drive(self.ctx, state),
            Ok(false) => Err(action_error(
                Action::Install,
                format!(
                    "release {name} failed, and has been uninstalled due to atomic being set: {cause}"
                ),
            )),
            Err(e) => Err(action_error(
                Action::Install,
                format!(
                    "an error occurred while uninstalling the release. original install error: {cause}: {}",
                    e.message
                ),
            )),
        }
    }

    /// An atomic upgrade failed: roll back to the last successful revision.
    fn recover_upgrade(self, state: &mut ActionState, cause: String) -> Driven {
        let name = self.run.release.clone();
        let ns = self.run.namespace.clone();
        self.ctx
            .info("Upgrade failed and atomic is set, rolling back to last successful release");
        let history = match self.storage.history(self.ctx, &name) {
            Ok(h) => h,
            Err(e) => {
                return Err(action_error(
                    Action::Upgrade,
                    format!(
                        "an error occurred while finding last successful release. original upgrade error: {cause}: {}",
                        e.message
                    ),
                ));
            }
        };
        let Some(target) = history
            .iter()
            .rev()
            .find(|r| matches!(r.info.status, Status::Superseded | Status::Deployed))
        else {
            return Err(action_error(
                Action::Upgrade,
                format!(
                    "unable to find a previously successful release when attempting to rollback. original upgrade error: {cause}"
                ),
            ));
        };
        let flags = Flags {
            force: self.run.force,
            max_history: self.run.max_history,
            ..Flags::default()
        };
        let budget = self.recovery_budget();
        let recovery = self.recovery(&cause);
        match start_rollback(
            self.ctx,
            state,
            &name,
            &ns,
            target.version,
            &flags,
            true,
            budget,
            Some(recovery),
        ) {
            Ok(()) => drive(self.ctx, state),
            Err(e) => Err(action_error(
                Action::Upgrade,
                format!(
                    "an error occurred while rolling back the release. original upgrade error: {cause}: {}",
                    e.message
                ),
            )),
        }
    }

    /// A rollback failed (on its own, or as an atomic upgrade's recovery).
    fn fail_rollback(mut self, cause: String) -> Driven {
        let name = self.run.release.clone();
        self.rel
            .set_status(Status::Failed, format!("Rollback {name:?} failed: {cause}"));
        if let Err(e) = self.record() {
            self.ctx.warn(&format!(
                "cannot record the failed rollback {name}: {}",
                e.message
            ));
        }
        Err(match &self.run.recovering {
            Some(rec) => action_error(
                rec.failed,
                format!(
                    "an error occurred while rolling back the release. original upgrade error: {}: {cause}",
                    rec.cause
                ),
            ),
            None => action_error(Action::Rollback, cause),
        })
    }

    /// An uninstall failed (on its own, or as an atomic install's recovery).
    fn fail_uninstall(mut self, cause: String) -> Driven {
        // As Helm: the record stays `uninstalling`; the next uninstall starts over.
        self.flush();
        Err(match &self.run.recovering {
            Some(rec) => action_error(
                rec.failed,
                format!(
                    "an error occurred while uninstalling the release. original install error: {}: {cause}",
                    rec.cause
                ),
            ),
            None => action_error(Action::Uninstall, cause),
        })
    }
}
