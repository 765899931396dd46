//! Kubernetes Events on DeployItems: pickup, finish, and every step error (reason and message of
//! `lastError`, as Landscaper's `HandleReconcileResult` emits them).
//!
//! Events are published in the background: they never delay or fail a job, and a failed
//! publish is only logged.

use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::config::EventMode;
use crate::landscaper::DeployItem;

/// Publishes events about DeployItems.
#[derive(Clone)]
pub struct Events {
    recorder: Option<Recorder>,
    mode: EventMode,
}

impl Events {
    pub fn new(client: kube::Client, controller: &str, instance: &str, mode: EventMode) -> Self {
        let recorder = (mode != EventMode::None).then(|| {
            Recorder::new(
                client,
                Reporter {
                    controller: controller.to_string(),
                    instance: Some(instance.to_string()),
                },
            )
        });
        Self { recorder, mode }
    }

    pub fn disabled() -> Self {
        Self {
            recorder: None,
            mode: EventMode::None,
        }
    }

    /// A Normal event (pickup, finish); only in mode `all`.
    pub fn normal(&self, item: &DeployItem, reason: &str, note: String) {
        if self.mode == EventMode::All {
            self.publish(item, EventType::Normal, reason, note);
        }
    }

    /// A Warning event (errors, failed jobs); in modes `all` and `errors`.
    pub fn warning(&self, item: &DeployItem, reason: &str, note: String) {
        if self.mode != EventMode::None {
            self.publish(item, EventType::Warning, reason, note);
        }
    }

    fn publish(&self, item: &DeployItem, type_: EventType, reason: &str, note: String) {
        let Some(recorder) = self.recorder.clone() else {
            return;
        };
        let reference = item.object_ref(&());
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: "Reconcile".into(),
            secondary: None,
        };
        tokio::spawn(async move {
            if let Err(e) = recorder.publish(&event, &reference).await {
                tracing::debug!(error = %e, "publishing event failed");
            }
        });
    }
}
