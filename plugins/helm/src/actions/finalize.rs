//! The `finalize` stage: recording a successful action (or the end of an atomic recovery) in
//! the release history. Owns: the final statuses and descriptions of each action. Must not
//! touch: the stages before it, failure (`fail`).

use sdk_guest::DeployerError;

use super::driver::{Driven, Driver};
use super::state::{Action, Outcome, action_error};
use crate::release::Status;

impl Driver<'_, '_> {
    /// Records the outcome; `Err` of the outer result: a Kubernetes error (retried).
    pub(super) fn finalize(&mut self) -> Result<Driven, DeployerError> {
        let name = self.run.release.clone();
        match self.run.action {
            Action::Install | Action::Upgrade => {
                if let Some(prev) = self.run.previous
                    && let Some(mut p) = self.storage.get(self.ctx, &name, prev)?
                {
                    self.set_status(&mut p, Status::Superseded)?;
                }
                let desc = self.run.description.clone().unwrap_or_else(|| {
                    if self.run.action == Action::Install {
                        "Install complete".into()
                    } else {
                        "Upgrade complete".into()
                    }
                });
                self.rel.set_status(Status::Deployed, desc);
                self.record()?;
                Ok(Ok(Outcome::Done(Some(Box::new(self.rel.clone())))))
            }
            Action::Rollback => {
                for mut r in self.storage.history(self.ctx, &name)? {
                    if r.version != self.rel.version && r.info.status == Status::Deployed {
                        self.set_status(&mut r, Status::Superseded)?;
                    }
                }
                self.rel.info.status = Status::Deployed;
                self.record()?;
                if let Some(rec) = &self.run.recovering {
                    return Ok(Err(action_error(
                        rec.failed,
                        format!(
                            "release {name} failed, and has been rolled back due to atomic being set: {}",
                            rec.cause
                        ),
                    )));
                }
                Ok(Ok(Outcome::Done(Some(Box::new(self.rel.clone())))))
            }
            Action::Uninstall => {
                self.rel
                    .set_status(Status::Uninstalled, "Uninstallation complete");
                // Purge the other revisions first: while this one exists, a repeated call
                // resumes here.
                for r in self.storage.history(self.ctx, &name)? {
                    if r.version != self.rel.version {
                        self.storage.delete(self.ctx, &name, r.version)?;
                    }
                }
                self.storage.delete(self.ctx, &name, self.rel.version)?;
                if let Some(rec) = &self.run.recovering {
                    return Ok(Err(action_error(
                        rec.failed,
                        format!(
                            "release {name} failed, and has been uninstalled due to atomic being set: {}",
                            rec.cause
                        ),
                    )));
                }
                Ok(Ok(Outcome::Done(Some(Box::new(self.rel.clone())))))
            }
        }
    }
}
