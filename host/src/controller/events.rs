//! Kubernetes Events on DeployItems: pickup, finish, and every step error (reason and message of
//! `lastError`, as Landscaper's `HandleReconcileResult` emits them).
//!
//! One Event per job step: an event is keyed by the item, its jobID, type, reason and text, so a
//! new job always gets Events of its own whose text names it, while the same error repeated
//! within one job (a step retried every few seconds) only bumps that Event's `series` — as
//! Kubernetes' own recorders do. kube-rs' `Recorder` groups by reason alone, so a new job would
//! only bump the previous job's Event; hence this small recorder.
//!
//! Events are published in the background: they never delay or fail a job, and a failed
//! publish is only logged. Where `events.k8s.io` is forbidden but the core group's `events` are
//! not (Landscaper's `landscaper:deployer` ClusterRole), core Events are written instead.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event as CoreEvent, EventSource, ObjectReference};
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::config::EventMode;
use crate::landscaper::DeployItem;

/// How long a published Event is remembered for its series (kube-rs and client-go use 6 min).
const SERIES_TTL: Duration = Duration::from_secs(6 * 60);
/// Bound on remembered Events; past it the oldest are forgotten (a repeat then starts a new Event).
const MAX_REMEMBERED: usize = 4096;
/// `Event.note` is limited to 1 KiB by the API server.
const MAX_NOTE: usize = 1024;

/// Publishes events about DeployItems.
#[derive(Clone)]
pub struct Events {
    recorder: Option<Arc<Recorder>>,
    mode: EventMode,
}

impl Events {
    pub fn new(client: kube::Client, controller: &str, instance: &str, mode: EventMode) -> Self {
        let recorder = (mode != EventMode::None).then(|| {
            Arc::new(Recorder {
                client,
                controller: controller.to_string(),
                instance: instance.to_string(),
                series: Mutex::new(Series::default()),
                core_events: std::sync::atomic::AtomicBool::new(false),
            })
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
            self.publish(item, "Normal", reason, note);
        }
    }

    /// A Warning event (errors, failed jobs); in modes `all` and `errors`.
    pub fn warning(&self, item: &DeployItem, reason: &str, note: String) {
        if self.mode != EventMode::None {
            self.publish(item, "Warning", reason, note);
        }
    }

    fn publish(&self, item: &DeployItem, type_: &'static str, reason: &str, note: String) {
        let Some(recorder) = self.recorder.clone() else {
            return;
        };
        let regarding = item.object_ref(&());
        // Only the jobID: `status()` would clone the whole status (providerStatus included).
        let job_id = item
            .status
            .as_ref()
            .map(|s| s.job_id.clone())
            .unwrap_or_default();
        // Every note names its job, so `kubectl describe` tells one job's story from the next.
        let note = if job_id.is_empty() || note.contains(&job_id) {
            note
        } else {
            format!("job {job_id}: {note}")
        };
        let key = SeriesKey {
            uid: regarding.uid.clone().unwrap_or_default(),
            job_id,
            type_,
            reason: reason.to_string(),
            note: truncate(note, MAX_NOTE),
        };
        tokio::spawn(async move {
            if let Err(e) = recorder.publish(key, regarding).await {
                tracing::debug!(error = %crate::apierrors::render_error(&e), "publishing event failed");
            }
        });
    }
}

/// What makes two publishes the same Event.
#[derive(Clone, PartialEq, Eq, Hash)]
struct SeriesKey {
    uid: String,
    job_id: String,
    type_: &'static str,
    reason: String,
    note: String,
}

/// A published Event: its name and namespace, how often it occurred, when it was last seen.
struct Published {
    /// `None` while the first publish's create is in flight: repeats then only count, and the
    /// creator writes the series once its Event exists (two creates would be two Events).
    name: Option<String>,
    namespace: String,
    count: i32,
    last_seen: Instant,
}

struct Recorder {
    client: kube::Client,
    controller: String,
    instance: String,
    series: Mutex<Series>,
    /// Set once `events.k8s.io` refused a create with 403 and the core group's Events took it:
    /// a host bound to a role granting only core `events` (Landscaper's `landscaper:deployer`,
    /// which deployer lifecycle management binds) then still reports.
    core_events: std::sync::atomic::AtomicBool,
}

/// Remembered Events, and the order they were first published in. Expiry and eviction take
/// from the front of `order`, so a publish costs O(1) amortized: a scan of every remembered
/// Event per publish cost 4 % of the host's CPU at 6,000 jobs (found by the peer benchmark).
#[derive(Default)]
struct Series {
    by_key: HashMap<SeriesKey, Published>,
    order: VecDeque<SeriesKey>,
}

impl Series {
    /// Forgets expired Events from the oldest on, and the oldest past [`MAX_REMEMBERED`]. One
    /// refreshed by a repeat stops the expiry walk (it is not expired); those behind it are
    /// dropped later, and a repeat of one of them checks its age itself.
    fn prune(&mut self, now: Instant) {
        while let Some(oldest) = self.order.front() {
            let drop = match self.by_key.get(oldest) {
                None => true,
                Some(p) => {
                    now.duration_since(p.last_seen) >= SERIES_TTL
                        || self.by_key.len() >= MAX_REMEMBERED
                }
            };
            if !drop {
                break;
            }
            let oldest = self.order.pop_front().expect("front exists");
            self.by_key.remove(&oldest);
        }
    }

    /// The live series of `key`, if it is remembered and not expired.
    fn live(&mut self, key: &SeriesKey, now: Instant) -> Option<&mut Published> {
        self.by_key
            .get_mut(key)
            .filter(|p| now.duration_since(p.last_seen) < SERIES_TTL)
    }

    fn insert(&mut self, key: SeriesKey, published: Published) {
        if self.by_key.insert(key.clone(), published).is_none() {
            self.order.push_back(key);
        }
    }

    fn remove(&mut self, key: &SeriesKey) {
        // (its place in `order` goes when it reaches the front)
        self.by_key.remove(key);
    }

    fn get_mut(&mut self, key: &SeriesKey) -> Option<&mut Published> {
        self.by_key.get_mut(key)
    }
}

impl Recorder {
    async fn publish(&self, key: SeriesKey, regarding: ObjectReference) -> kube::Result<()> {
        let now = Instant::now();
        let repeat = {
            let mut series = self.series.lock().expect("event series lock");
            series.prune(now);
            let namespace = regarding
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            match series.live(&key, now) {
                Some(p) => {
                    p.count += 1;
                    p.last_seen = now;
                    Some(
                        p.name
                            .clone()
                            .map(|name| (name, p.namespace.clone(), p.count)),
                    )
                }
                None => {
                    series.insert(
                        key.clone(),
                        Published {
                            name: None,
                            namespace,
                            count: 1,
                            last_seen: now,
                        },
                    );
                    None
                }
            }
        };
        let time = MicroTime(Timestamp::now());
        match repeat {
            // A repeat while the first create is in flight: counted, written by the creator.
            Some(None) => return Ok(()),
            Some(Some((name, namespace, count))) => {
                return self.patch_series(&name, &namespace, count, time).await;
            }
            None => {}
        }
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let item_name = regarding.name.clone().unwrap_or_default();
        let event = Event {
            metadata: ObjectMeta {
                // Unique per publish, readable in `kubectl get events` (as client-go names them).
                name: Some(format!(
                    "{item_name}.{:x}",
                    uuid::Uuid::new_v4().as_u128() as u64
                )),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            event_time: Some(time),
            type_: Some(key.type_.to_string()),
            reason: Some(key.reason.clone()),
            note: Some(key.note.clone()),
            action: Some("Reconcile".into()),
            regarding: Some(regarding),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            ..Default::default()
        };
        let created = match self.create(&namespace, event).await {
            Ok(created) => created,
            Err(e) => {
                self.series.lock().expect("event series lock").remove(&key);
                return Err(e);
            }
        };
        let name = created;
        let repeats = {
            let mut series = self.series.lock().expect("event series lock");
            match series.get_mut(&key) {
                Some(p) => {
                    p.name = Some(name.clone());
                    p.count
                }
                None => 1,
            }
        };
        if repeats > 1 {
            // Repeats arrived while the Event was being created.
            let time = MicroTime(Timestamp::now());
            return self.patch_series(&name, &namespace, repeats, time).await;
        }
        Ok(())
    }

    fn uses_core_events(&self) -> bool {
        self.core_events.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Creates `event` (of `events.k8s.io`, or its core-group form once that group was
    /// refused); returns its name.
    async fn create(&self, namespace: &str, event: Event) -> kube::Result<String> {
        if !self.uses_core_events() {
            let events: Api<Event> = Api::namespaced(self.client.clone(), namespace);
            match events.create(&PostParams::default(), &event).await {
                Ok(created) => return Ok(created.metadata.name.unwrap_or_default()),
                Err(kube::Error::Api(e)) if e.code == 403 => {
                    tracing::info!(
                        "events.k8s.io Events are forbidden to this host here; publishing core Events (v1) instead"
                    );
                    self.core_events
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                }
                Err(e) => return Err(e),
            }
        }
        let core: Api<CoreEvent> = Api::namespaced(self.client.clone(), namespace);
        core.create(&PostParams::default(), &core_event(event))
            .await
            .map(|created| created.metadata.name.unwrap_or_default())
    }

    async fn patch_series(
        &self,
        name: &str,
        namespace: &str,
        count: i32,
        time: MicroTime,
    ) -> kube::Result<()> {
        if self.uses_core_events() {
            let events: Api<CoreEvent> = Api::namespaced(self.client.clone(), namespace);
            let patch = json!({ "count": count, "lastTimestamp": Time(time.0) });
            return events
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ());
        }
        let events: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let patch = json!({ "series": EventSeries { count, last_observed_time: time } });
        events
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
    }
}

/// The core group's (v1) form of `event`, as client-go's legacy recorder writes it: a count and
/// first/last timestamps instead of a series.
fn core_event(event: Event) -> CoreEvent {
    let time = event.event_time.map(|t| Time(t.0));
    CoreEvent {
        metadata: event.metadata,
        involved_object: event.regarding.unwrap_or_default(),
        reason: event.reason,
        message: event.note,
        type_: event.type_,
        action: event.action,
        count: Some(1),
        first_timestamp: time.clone(),
        last_timestamp: time,
        source: Some(EventSource {
            component: event.reporting_controller.clone(),
            host: None,
        }),
        reporting_component: event.reporting_controller,
        reporting_instance: event.reporting_instance,
        ..Default::default()
    }
}

/// Cuts `s` to at most `max` bytes on a character boundary.
fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: usize) -> SeriesKey {
        SeriesKey {
            uid: format!("u-{i}"),
            job_id: "j".into(),
            type_: "Normal",
            reason: "PickedUp".into(),
            note: String::new(),
        }
    }

    fn published(at: Instant) -> Published {
        Published {
            name: Some("e".into()),
            namespace: "default".into(),
            count: 1,
            last_seen: at,
        }
    }

    #[test]
    fn remembered_events_are_bounded_and_the_oldest_go_first() {
        let mut series = Series::default();
        let now = Instant::now();
        for i in 0..MAX_REMEMBERED + 10 {
            series.prune(now);
            series.insert(key(i), published(now));
        }
        assert_eq!(series.by_key.len(), MAX_REMEMBERED);
        assert!(
            series.live(&key(0), now).is_none(),
            "the oldest is forgotten"
        );
        assert!(series.live(&key(MAX_REMEMBERED + 9), now).is_some());
        assert!(series.order.len() <= MAX_REMEMBERED + 1);
    }

    #[test]
    fn an_expired_series_is_not_continued() {
        let mut series = Series::default();
        let start = Instant::now();
        series.insert(key(1), published(start));
        series.insert(key(2), published(start));
        // key 1 is refreshed by a repeat; key 2 is not.
        series.get_mut(&key(1)).unwrap().last_seen = start + SERIES_TTL;
        let later = start + SERIES_TTL + Duration::from_secs(1);
        series.prune(later);
        assert!(series.live(&key(1), later).is_some());
        // key 2 sits behind the refreshed key 1 but is expired: a repeat starts a new Event.
        assert!(series.live(&key(2), later).is_none());
        let much_later = later + SERIES_TTL;
        series.prune(much_later);
        assert!(series.by_key.is_empty() && series.order.is_empty());
    }

    #[test]
    fn notes_are_cut_to_the_api_servers_limit_on_a_character_boundary() {
        assert_eq!(truncate("short".into(), 1024), "short");
        let long = "é".repeat(600); // 1200 bytes
        let cut = truncate(long, 1024);
        assert_eq!(cut.len(), 1024);
        assert!(cut.chars().all(|c| c == 'é'));
    }
}
