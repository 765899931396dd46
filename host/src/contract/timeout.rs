//! The progressing timeout: `spec.timeout` (default 10 min) counted from
//! `status.transitionTimes.initTime`, checked at named checkpoints (contract section 3.9).
//!
//! Deviation from Landscaper, on purpose: `spec.timeout: none` means "no timeout" (as the API
//! documents), whereas Landscaper's code fails at the first checkpoint.

use std::time::Duration;

use jiff::Timestamp;

use super::status::StepError;
use crate::landscaper::{DeployItem, GoDuration, codes, parse_go_duration};

/// The default progressing timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// `spec.timeout`: default 10 min, `none` = no timeout.
fn spec_timeout(item: &DeployItem) -> Result<Option<Duration>, StepError> {
    match item.spec.timeout.as_deref() {
        None | Some("") => Ok(Some(DEFAULT_TIMEOUT)),
        Some(s) => match parse_go_duration(s) {
            Ok(GoDuration::None) => Ok(None),
            Ok(GoDuration::Finite(d)) => Ok(Some(d)),
            Err(e) => Err(StepError::new(
                "TimeoutChecker",
                "InvalidTimeout",
                format!("spec.timeout: {e}"),
            )
            .with_code(codes::CONFIGURATION_PROBLEM)),
        },
    }
}

fn add(start: Timestamp, timeout: Duration) -> Timestamp {
    let span = jiff::SignedDuration::try_from(timeout).unwrap_or(jiff::SignedDuration::MAX);
    start.checked_add(span).unwrap_or(Timestamp::MAX)
}

/// How checkpoints are evaluated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CheckpointMode {
    /// Compare the clock with `initTime + spec.timeout`.
    #[default]
    Standard,
    /// Test hook, like Landscaper's "checkpoint" checker: time out exactly at the named
    /// checkpoint and never elsewhere.
    FailAt(String),
}

/// The progressing-timeout state of one job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgressingTimeout {
    /// `None` = no timeout (`spec.timeout: none`).
    deadline: Option<Timestamp>,
    mode: CheckpointMode,
}

impl ProgressingTimeout {
    /// Reads `spec.timeout` and `transitionTimes.initTime` of a started job.
    pub fn for_item(item: &DeployItem, mode: CheckpointMode) -> Result<Self, StepError> {
        let Some(timeout) = spec_timeout(item)? else {
            return Ok(Self {
                deadline: None,
                mode,
            });
        };
        let init = item
            .status
            .as_ref()
            .and_then(|s| s.transition_times.as_ref())
            .and_then(|t| t.init_time.as_deref())
            .ok_or_else(|| {
                StepError::new(
                    "TimeoutChecker",
                    "StatusNotInitialized",
                    "status not initialized: transitionTimes.initTime is missing",
                )
            })?;
        let init: Timestamp = init.parse().map_err(|e| {
            StepError::new(
                "TimeoutChecker",
                "StatusNotInitialized",
                format!("transitionTimes.initTime {init:?} is not a timestamp: {e}"),
            )
        })?;
        Ok(Self {
            deadline: Some(add(init, timeout)),
            mode,
        })
    }

    /// `spec.timeout` counted from `start` instead of `initTime`: a hook-forced re-apply of a
    /// finished item (no job, so no initTime of its own) gets the item's usual time budget.
    pub fn starting_at(
        item: &DeployItem,
        start: Timestamp,
        mode: CheckpointMode,
    ) -> Result<Self, StepError> {
        Ok(Self {
            deadline: spec_timeout(item)?.map(|t| add(start, t)),
            mode,
        })
    }

    /// No timeout at all.
    pub fn unlimited() -> Self {
        Self {
            deadline: None,
            mode: CheckpointMode::Standard,
        }
    }

    /// Checks the named checkpoint. Returns the remaining time (`None` = unlimited), or the
    /// `ProgressingTimeout` error with code `ERR_TIMEOUT`.
    pub fn check(&self, checkpoint: &str, now: Timestamp) -> Result<Option<Duration>, StepError> {
        let exceeded = || {
            StepError::new(
                "StandardTimeoutChecker.TimeoutExceeded",
                "ProgressingTimeout",
                format!("timeout at: {checkpoint:?}"),
            )
            .with_code(codes::TIMEOUT)
        };
        if let CheckpointMode::FailAt(name) = &self.mode {
            return if name == checkpoint {
                Err(exceeded())
            } else {
                Ok(Some(DEFAULT_TIMEOUT))
            };
        }
        match self.deadline {
            None => Ok(None),
            Some(deadline) if now >= deadline => Err(exceeded()),
            Some(deadline) => Ok(Some(
                Duration::try_from(deadline.duration_since(now)).unwrap_or_default(),
            )),
        }
    }

    pub fn deadline(&self) -> Option<Timestamp> {
        self.deadline
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::landscaper::{DeployItemStatus, TransitionTimes};

    fn item(timeout: Option<&str>, init: Option<&str>) -> DeployItem {
        let mut di = DeployItem::default();
        di.spec.timeout = timeout.map(Into::into);
        di.status = Some(DeployItemStatus {
            transition_times: Some(TransitionTimes {
                init_time: init.map(Into::into),
                ..Default::default()
            }),
            ..Default::default()
        });
        di
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn default_timeout_is_ten_minutes_from_init_time() {
        let t = ProgressingTimeout::for_item(
            &item(None, Some("2026-01-01T00:00:00Z")),
            CheckpointMode::Standard,
        )
        .unwrap();
        let remaining = t.check("cp", ts("2026-01-01T00:09:00Z")).unwrap();
        assert_eq!(remaining, Some(Duration::from_secs(60)));
        let err = t.check("cp", ts("2026-01-01T00:10:00Z")).unwrap_err();
        assert_eq!(err.reason, "ProgressingTimeout");
        assert_eq!(err.message, "timeout at: \"cp\"");
        assert_eq!(err.codes, vec![codes::TIMEOUT.to_string()]);
    }

    #[test]
    fn custom_timeout_and_none() {
        let t = ProgressingTimeout::for_item(
            &item(Some("30s"), Some("2026-01-01T00:00:00Z")),
            CheckpointMode::Standard,
        )
        .unwrap();
        assert!(t.check("cp", ts("2026-01-01T00:00:31Z")).is_err());
        let none =
            ProgressingTimeout::for_item(&item(Some("none"), None), CheckpointMode::Standard)
                .unwrap();
        assert_eq!(none.check("cp", ts("2099-01-01T00:00:00Z")).unwrap(), None);
    }

    #[test]
    fn missing_init_time_and_bad_timeout_are_errors() {
        let err =
            ProgressingTimeout::for_item(&item(None, None), CheckpointMode::Standard).unwrap_err();
        assert!(err.message.contains("initTime is missing"));
        assert!(!err.is_unrecoverable());
        let err = ProgressingTimeout::for_item(
            &item(Some("soon"), Some("2026-01-01T00:00:00Z")),
            CheckpointMode::Standard,
        )
        .unwrap_err();
        assert!(err.is_unrecoverable());
        assert!(err.message.contains("spec.timeout"), "{}", err.message);
    }

    #[test]
    fn checkpoint_mode_fails_exactly_at_the_named_checkpoint() {
        let t = ProgressingTimeout::for_item(
            &item(None, Some("2026-01-01T00:00:00Z")),
            CheckpointMode::FailAt("b".into()),
        )
        .unwrap();
        assert!(t.check("a", ts("2026-01-01T00:00:00Z")).is_ok());
        assert_eq!(
            t.check("b", ts("2026-01-01T00:00:00Z"))
                .unwrap_err()
                .message,
            "timeout at: \"b\""
        );
    }
}
