//! Dev mode plays Landscaper's side of the job protocol, since no Landscaper runs there:
//! a new `status.jobID` when a DeployItem is created, when its generation changes, and when it
//! gets a deletionTimestamp (contract section 3.10, "Trigger").
//!
//! Stateless on purpose: every decision is made from the item alone, so a restart loses nothing.
//! It never triggers an item whose current job is unfinished (Landscaper waits too).

use futures::TryStreamExt;
use kube::Client;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};

use crate::clock::now;
use crate::landscaper::DeployItem;

/// Why an item gets a new job, if it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    Created,
    SpecChanged,
    Deleted,
}

/// Decides whether Landscaper would issue a new jobID for `item` now.
pub fn trigger_for(item: &DeployItem) -> Option<Trigger> {
    let status = item.status.clone().unwrap_or_default();
    if status.job_id.is_empty() {
        // Never triggered. An item deleted before its first job has no finalizer and is gone.
        return (!item.is_being_deleted()).then_some(Trigger::Created);
    }
    if status.job_id != status.job_id_finished {
        return None;
    }
    if item.is_being_deleted() {
        return (!status.phase.is_deletion()).then_some(Trigger::Deleted);
    }
    let generation = item.metadata.generation.unwrap_or_default();
    (generation != status.observed_generation).then_some(Trigger::SpecChanged)
}

/// Writes a new job onto `item` as Landscaper does: `jobID`, `jobIDGenerationTime`,
/// `transitionTimes = {triggerTime}` in one status write.
pub fn with_new_job(item: &DeployItem) -> DeployItem {
    let mut item = item.clone();
    let mut status = item.status();
    crate::contract::job::issue_job(&mut status, &now());
    item.status = Some(status);
    item
}

/// Watches every DeployItem and triggers jobs until the stream ends.
pub async fn run(client: Client) {
    let api: Api<DeployItem> = Api::all(client.clone());
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects();
    futures::pin_mut!(stream);
    loop {
        let item = match stream.try_next().await {
            Ok(Some(item)) => item,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(error = %e, "landscaper simulator watch error");
                continue;
            }
        };
        let Some(trigger) = trigger_for(&item) else {
            continue;
        };
        let name = item.metadata.name.clone().unwrap_or_default();
        let namespace = item.metadata.namespace.clone().unwrap_or_default();
        let api: Api<DeployItem> = Api::namespaced(client.clone(), &namespace);
        match api
            .replace_status(&name, &PostParams::default(), &with_new_job(&item))
            .await
        {
            Ok(_) => {
                tracing::info!(item = %format!("{namespace}/{name}"), ?trigger, "landscaper: new job")
            }
            // A conflict usually means a newer version exists whose watch event decides again,
            // but not always (a conflict answered by an overloaded server, a 5xx, a timeout):
            // retry from a fresh read, or the item might never get its job.
            Err(e) => {
                tracing::debug!(item = %format!("{namespace}/{name}"), error = %e, "landscaper: trigger failed, retrying");
                tokio::spawn(retry_trigger(api, name));
            }
        }
    }
}

/// Re-reads the item and issues its job if it still needs one, with backoff, until a write
/// succeeds, the item needs no job any more, or it is gone.
async fn retry_trigger(api: Api<DeployItem>, name: String) {
    let mut delay = std::time::Duration::from_millis(50);
    for _ in 0..20 {
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(std::time::Duration::from_secs(2));
        let item = match api.get_opt(&name).await {
            Ok(Some(item)) => item,
            Ok(None) => return,
            Err(_) => continue,
        };
        if trigger_for(&item).is_none() {
            return;
        }
        if api
            .replace_status(&name, &PostParams::default(), &with_new_job(&item))
            .await
            .is_ok()
        {
            return;
        }
    }
    tracing::warn!(item = %name, "landscaper: giving up on a trigger after 20 attempts");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::landscaper::{DeployItemStatus, Phase};

    fn item(job: &str, finished: &str, phase: Phase, generation: i64, observed: i64) -> DeployItem {
        let mut di = DeployItem::default();
        di.metadata.generation = Some(generation);
        di.status = Some(DeployItemStatus {
            job_id: job.into(),
            job_id_finished: finished.into(),
            phase,
            observed_generation: observed,
            ..Default::default()
        });
        di
    }

    fn deleting(mut di: DeployItem) -> DeployItem {
        di.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        di
    }

    #[test]
    fn a_new_item_gets_its_first_job() {
        assert_eq!(trigger_for(&DeployItem::default()), Some(Trigger::Created));
    }

    #[test]
    fn a_running_job_is_never_replaced() {
        assert_eq!(trigger_for(&item("2", "1", Phase::Progressing, 2, 1)), None);
        assert_eq!(
            trigger_for(&deleting(item("2", "1", Phase::Progressing, 1, 1))),
            None
        );
    }

    #[test]
    fn a_spec_change_after_a_finished_job_triggers_once() {
        assert_eq!(
            trigger_for(&item("1", "1", Phase::Succeeded, 2, 1)),
            Some(Trigger::SpecChanged)
        );
        assert_eq!(trigger_for(&item("1", "1", Phase::Succeeded, 2, 2)), None);
    }

    #[test]
    fn deletion_triggers_a_delete_job_once() {
        assert_eq!(
            trigger_for(&deleting(item("1", "1", Phase::Succeeded, 1, 1))),
            Some(Trigger::Deleted)
        );
        assert_eq!(
            trigger_for(&deleting(item("2", "2", Phase::DeleteFailed, 1, 1))),
            None
        );
    }

    #[test]
    fn a_new_job_sets_the_trigger_fields() {
        let updated = with_new_job(&item("1", "1", Phase::Succeeded, 2, 1));
        let s = updated.status();
        assert_ne!(s.job_id, "1");
        assert_eq!(s.job_id_finished, "1");
        assert!(s.job_id_generation_time.is_some());
        assert!(s.transition_times.unwrap().trigger_time.is_some());
    }
}
