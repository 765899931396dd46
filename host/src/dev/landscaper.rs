//! Dev mode plays Landscaper's side of the job protocol, since no Landscaper runs there:
//! a new `status.jobID` when a DeployItem is created, when its generation changes, and when it
//! gets a deletionTimestamp (contract section 3.10, "Trigger").
//!
//! Items of one Landscaper Execution (label `execution.landscaper.gardener.cloud/managed-by`)
//! are triggered in the order their `execution.landscaper.gardener.cloud/dependsOn` annotation
//! gives, as Landscaper's Execution does: an item's job starts once every item it depends on has
//! finished its own job `Succeeded` (a failed or missing one holds its dependents), and an
//! item's delete job starts once no item that depends on it exists any more.
//!
//! Stateless on purpose: every decision is made from the items alone, so a restart loses nothing.
//! It never triggers an item whose current job is unfinished (Landscaper waits too).

use std::sync::Arc;

use futures::TryStreamExt;
use kube::Client;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};

use crate::clock::now;
use crate::landscaper::{DeployItem, Phase};

/// The label Landscaper's Execution puts on the items it manages (the Execution's name).
pub const MANAGED_BY_LABEL: &str = "execution.landscaper.gardener.cloud/managed-by";
/// The label with the item's name in its Execution (the blueprint's `deployItems[].name`).
pub const ITEM_NAME_LABEL: &str = "execution.landscaper.gardener.cloud/name";
/// The annotation listing, comma-separated, the names (in the Execution) an item depends on.
pub const DEPENDS_ON_ANNOTATION: &str = "execution.landscaper.gardener.cloud/dependsOn";

/// Why an item gets a new job, if it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    Created,
    SpecChanged,
    Deleted,
}

/// Decides whether Landscaper would issue a new jobID for `item` now, looking at the item alone.
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

/// [`trigger_for`], holding the job back while the items of the same Execution it depends on
/// (or, for a delete, that depend on it) are not done: `siblings` are the items of its namespace
/// (the item itself may be among them).
pub fn trigger_among(item: &DeployItem, siblings: &[Arc<DeployItem>]) -> Option<Trigger> {
    let trigger = trigger_for(item)?;
    let Some(execution) = execution_of(item) else {
        return Some(trigger);
    };
    let name = label(item, ITEM_NAME_LABEL).unwrap_or_default();
    let same_execution = siblings
        .iter()
        .filter(|s| execution_of(s) == Some(execution) && s.metadata.uid != item.metadata.uid);
    let ready = match trigger {
        // Reverse order: nothing that still exists may depend on an item being deleted.
        Trigger::Deleted => !same_execution
            .clone()
            .any(|s| depends_on(s).any(|d| d == name)),
        // Every item named must exist (Landscaper creates them all first) and be done.
        Trigger::Created | Trigger::SpecChanged => depends_on(item).all(|wanted| {
            same_execution
                .clone()
                .any(|s| label(s, ITEM_NAME_LABEL) == Some(wanted) && settled(s))
        }),
    };
    ready.then_some(trigger)
}

/// A dependency is done when its last job finished `Succeeded` and no new job is due for it.
fn settled(item: &DeployItem) -> bool {
    let s = item.status();
    !s.job_id.is_empty()
        && s.job_id == s.job_id_finished
        && s.phase == Phase::Succeeded
        && trigger_for(item).is_none()
}

fn label<'a>(item: &'a DeployItem, key: &str) -> Option<&'a str> {
    item.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn execution_of(item: &DeployItem) -> Option<(&str, &str)> {
    Some((
        item.metadata.namespace.as_deref().unwrap_or_default(),
        label(item, MANAGED_BY_LABEL)?,
    ))
}

fn depends_on(item: &DeployItem) -> impl Iterator<Item = &str> + Clone {
    item.annotation(DEPENDS_ON_ANNOTATION)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
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

/// Watches every DeployItem and triggers jobs until the stream ends. Every event decides again
/// for the item and for the items of its Execution (one finishing may unblock another); the end
/// of a (re-)list decides for every item, since the store changes only then.
pub async fn run(client: Client) {
    let api: Api<DeployItem> = Api::all(client.clone());
    let (store, writer) = reflector::store();
    let stream =
        reflector::reflector(writer, watcher(api, watcher::Config::default())).default_backoff();
    futures::pin_mut!(stream);
    loop {
        let decide: Vec<Arc<DeployItem>> = match stream.try_next().await {
            Ok(Some(watcher::Event::Apply(item) | watcher::Event::Delete(item))) => {
                candidates(&store, &item)
            }
            Ok(Some(watcher::Event::InitDone)) => store.state(),
            // Listed items reach the store only with InitDone.
            Ok(Some(watcher::Event::Init | watcher::Event::InitApply(_))) => continue,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(error = %crate::apierrors::render_error(&e), "landscaper simulator watch error");
                continue;
            }
        };
        for item in decide {
            let siblings = namespace_items(&store, &item);
            if let Some(trigger) = trigger_among(&item, &siblings) {
                issue(&client, &item, trigger).await;
            }
        }
    }
}

/// The items to decide for after an event on `touched`: its current version (if it still
/// exists) and, when it belongs to an Execution, every other item of that Execution.
fn candidates(store: &Store<DeployItem>, touched: &DeployItem) -> Vec<Arc<DeployItem>> {
    match execution_of(touched) {
        Some(execution) => store
            .state()
            .into_iter()
            .filter(|i| execution_of(i) == Some(execution))
            .collect(),
        None => store
            .get(&reflector::ObjectRef::from_obj(touched))
            .into_iter()
            .collect(),
    }
}

fn namespace_items(store: &Store<DeployItem>, item: &DeployItem) -> Vec<Arc<DeployItem>> {
    let ns = item.metadata.namespace.as_deref();
    store
        .state()
        .into_iter()
        .filter(|i| i.metadata.namespace.as_deref() == ns)
        .collect()
}

async fn issue(client: &Client, item: &DeployItem, trigger: Trigger) {
    let name = item.metadata.name.clone().unwrap_or_default();
    let namespace = item.metadata.namespace.clone().unwrap_or_default();
    let api: Api<DeployItem> = Api::namespaced(client.clone(), &namespace);
    match api
        .replace_status(&name, &PostParams::default(), &with_new_job(item))
        .await
    {
        Ok(_) => {
            tracing::info!(item = %format!("{namespace}/{name}"), ?trigger, "landscaper: new job")
        }
        // A conflict usually means a newer version exists whose watch event decides again,
        // but not always (a conflict answered by an overloaded server, a 5xx, a timeout):
        // retry from a fresh read, or the item might never get its job.
        Err(e) => {
            tracing::debug!(item = %format!("{namespace}/{name}"), error = %crate::apierrors::render_error(&e), "landscaper: trigger failed, retrying");
            tokio::spawn(retry_trigger(api, name));
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
        // Cheap first (usually a newer version already has its job), then as `run` decides.
        if trigger_for(&item).is_none() {
            return;
        }
        let siblings: Vec<Arc<DeployItem>> = match api.list(&Default::default()).await {
            Ok(list) => list.items.into_iter().map(Arc::new).collect(),
            Err(_) => continue,
        };
        if trigger_among(&item, &siblings).is_none() {
            // Held back by its Execution's order: a later event decides again.
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

    /// An item `name` of Execution `exec` depending on `deps`.
    fn in_execution(mut di: DeployItem, exec: &str, name: &str, deps: &str) -> Arc<DeployItem> {
        di.metadata.namespace = Some("ns".into());
        di.metadata.uid = Some(format!("uid-{name}"));
        di.metadata.labels = Some(
            [
                (MANAGED_BY_LABEL.to_string(), exec.to_string()),
                (ITEM_NAME_LABEL.to_string(), name.to_string()),
            ]
            .into(),
        );
        di.metadata.annotations =
            Some([(DEPENDS_ON_ANNOTATION.to_string(), deps.to_string())].into());
        Arc::new(di)
    }

    #[test]
    fn an_item_waits_until_every_item_it_depends_on_succeeded() {
        let new = || DeployItem::default();
        let a = in_execution(new(), "e", "a", "");
        let b = in_execution(new(), "e", "b", "a");
        let c = in_execution(new(), "e", "c", "a, b");
        let all = [a.clone(), b.clone(), c.clone()];
        assert_eq!(trigger_among(&a, &all), Some(Trigger::Created));
        assert_eq!(trigger_among(&b, &all), None, "a has not run");
        // a running, then failed: b still waits (Landscaper stops at a failed item)
        let a_running = in_execution(item("1", "", Phase::Progressing, 1, 1), "e", "a", "");
        assert_eq!(trigger_among(&b, &[a_running, b.clone()]), None);
        let a_failed = in_execution(item("1", "1", Phase::Failed, 1, 1), "e", "a", "");
        assert_eq!(trigger_among(&b, &[a_failed, b.clone()]), None);
        // a succeeded: b starts, c still waits for b
        let a_done = in_execution(item("1", "1", Phase::Succeeded, 1, 1), "e", "a", "");
        let all = [a_done.clone(), b.clone(), c.clone()];
        assert_eq!(trigger_among(&b, &all), Some(Trigger::Created));
        assert_eq!(trigger_among(&c, &all), None);
        // an item of another Execution with the same name does not count
        let other = in_execution(item("1", "1", Phase::Succeeded, 1, 1), "f", "b", "");
        assert_eq!(trigger_among(&c, &[a_done, other, c.clone()]), None);
        // an item outside any Execution is decided alone
        assert_eq!(trigger_among(&new(), &all), Some(Trigger::Created));
    }

    #[test]
    fn an_item_is_deleted_only_after_every_item_that_depends_on_it_is_gone() {
        let done = |name: &str, deps: &str| {
            in_execution(
                deleting(item("1", "1", Phase::Succeeded, 1, 1)),
                "e",
                name,
                deps,
            )
        };
        let a = done("a", "");
        let b = done("b", "a");
        assert_eq!(trigger_among(&a, &[a.clone(), b.clone()]), None, "b exists");
        assert_eq!(
            trigger_among(&b, &[a.clone(), b.clone()]),
            Some(Trigger::Deleted)
        );
        assert_eq!(
            trigger_among(&a, std::slice::from_ref(&a)),
            Some(Trigger::Deleted)
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
