//! What the host remembers per DeployItem, in one place, and the few words the controller uses
//! for it. Apart from the watch's own store (kube-runtime's, read as [`super::Watched`]), the
//! host keeps three memories of an item, each keyed by the item and each a shortcut only — a
//! miss costs a read, never a wrong decision:
//!
//! - [`settled`]: the versions at which items were seen finished, so an unchanged finished item
//!   costs no read, lock or write (filled by the admit and commit stages and the start-up sweep);
//! - [`own_writes`]: the objects this host's last writes returned (so the events of those
//!   writes need no read), and the items whose last write conflicted (so a watch copy of them
//!   is not trusted until the item is read);
//! - [`backoff`]: the failures in a row of items whose reconcile aborted with an error;
//! - [`observed`]: each item's type and phase as last read or written, and when this host picked
//!   up its open job (for `/metrics`, never for a decision).
//!
//! The vocabulary: [`ItemMemory::settled`] (does this event need nothing?),
//! [`ItemMemory::fresh_copy`] (an object of the item as new as this host knows it, without a
//! read), [`ItemMemory::settle`], [`ItemMemory::wrote`], [`ItemMemory::read_from_server`],
//! [`ItemMemory::conflicted`], [`ItemMemory::failed`] / [`ItemMemory::succeeded`], and
//! [`ItemMemory::forget`] — the one way an item leaves every memory (deleted, or found gone).
//!
//! Owns: these three memories and how they answer together. Must not touch: decisions of the
//! contract (`crate::contract`), the API server, the watch's store.

mod backoff;
mod observed;
mod own_writes;
mod settled;

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::landscaper::DeployItem;
use backoff::Backoff;
use observed::ObservedItems;
use own_writes::OwnWrites;
use settled::SettledItems;

/// Everything the host remembers per item; one per controller (`Context::memory`).
#[derive(Debug)]
pub struct ItemMemory {
    settled: SettledItems,
    own_writes: OwnWrites,
    backoff: Backoff,
    observed: ObservedItems,
}

impl Default for ItemMemory {
    fn default() -> Self {
        Self {
            settled: SettledItems::default(),
            own_writes: OwnWrites::new(),
            backoff: Backoff::default(),
            observed: ObservedItems::default(),
        }
    }
}

/// The key of an item by name (`namespace/name`): what backoff counts by and logs show.
pub fn item_key(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

fn uid(meta: &ObjectMeta) -> &str {
    meta.uid.as_deref().unwrap_or_default()
}

impl ItemMemory {
    /// Whether the event of item `uid` at `resource_version` needs nothing: the item was
    /// settled at that version, or it is an earlier write of ours and our newest write settled
    /// it. If so, the event counts as decided: the own write it names is let go.
    pub fn settled(&self, uid: &str, resource_version: &str) -> bool {
        let settled = self.settled.is_settled(uid, resource_version)
            || self
                .own_writes
                .current_version(uid, resource_version)
                .is_some_and(|newest| self.settled.is_settled(uid, &newest));
        if settled {
            self.own_writes.decided(uid, resource_version);
        }
        settled
    }

    /// The item, as new as this host knows it, without a read — or `None` (read it):
    /// - the object of our own write, when the event names one of our writes (the item is at
    ///   that object's version or later); the event of the newest write claims it;
    /// - else the copy a full-object watch (`itemCache: full`) delivered, when it can be
    ///   trusted. Writes are conditional on the resourceVersion, so a copy that is behind only
    ///   conflicts at the first write; but some steps act before any write (a delete, a
    ///   continued job's plugin call), so a copy is not used:
    ///   - of an item being deleted (after the finalizer is gone, an event of an earlier
    ///     version would otherwise run the delete again; a read finds the item gone);
    ///   - when this host wrote a version the copy is not, whose event is still to come;
    ///   - when the item's last write conflicted (until a read is decided).
    pub fn fresh_copy(
        &self,
        meta: &ObjectMeta,
        watched: Option<&DeployItem>,
    ) -> Option<DeployItem> {
        if let Some(own) = meta
            .resource_version
            .as_deref()
            .and_then(|rv| self.own_writes.current(uid(meta), rv))
        {
            return Some(own);
        }
        let item = watched?;
        let rv = item
            .metadata
            .resource_version
            .as_deref()
            .unwrap_or_default();
        if item.metadata.deletion_timestamp.is_some()
            || self.own_writes.may_be_behind(uid(&item.metadata), rv)
        {
            return None;
        }
        Some(item.clone())
    }

    /// The item was read from the server: whatever it is decided on now is current.
    pub fn read_from_server(&self, item: &DeployItem) {
        self.own_writes.read(uid(&item.metadata));
        self.observe(item);
    }

    fn observe(&self, item: &DeployItem) {
        let phase = item.status.as_ref().map_or("", |s| s.phase.as_str());
        self.observed
            .saw(uid(&item.metadata), &item.spec.type_, phase);
    }

    /// This host picked up the item's job (its pickup write returned `item`).
    pub fn job_started(&self, item: &DeployItem) {
        self.observed
            .job_started(uid(&item.metadata), &item.status().job_id);
    }

    /// Seconds since this host picked up the item's (now finished) job, if it did.
    pub fn job_finished(&self, item: &DeployItem) -> Option<f64> {
        self.observed
            .job_finished(uid(&item.metadata), &item.status().job_id)
    }

    /// Items by (type, phase) as this host last read or wrote them (`/metrics`).
    pub fn phases(&self) -> Vec<([String; 2], u64)> {
        self.observed.by_phase()
    }

    /// The item's job is finished at its resourceVersion: its next unchanged event is free.
    pub fn settle(&self, item: &DeployItem) {
        if let (Some(uid), Some(rv)) = (&item.metadata.uid, &item.metadata.resource_version) {
            self.settled.insert(uid, rv);
        }
    }

    /// As [`Self::settle`], for an item known only by uid and resourceVersion (the sweep).
    pub fn settle_version(&self, uid: &str, resource_version: &str) {
        self.settled.insert(uid, resource_version);
    }

    /// This host wrote the item and the API server returned `written`.
    pub fn wrote(&self, written: &DeployItem) {
        self.own_writes.remember(written);
        self.observe(written);
    }

    /// A write of the item conflicted (409): someone else wrote it since the version it was
    /// decided on, so its next decision reads it.
    pub fn conflicted(&self, meta: &ObjectMeta) {
        self.own_writes.distrust(uid(meta));
    }

    /// The item's reconcile failed: how long to wait before the next attempt.
    pub fn failed(&self, meta: &ObjectMeta) -> Duration {
        self.backoff.failed(&item_key(meta))
    }

    /// The item reconciled: its failures are forgotten.
    pub fn succeeded(&self, meta: &ObjectMeta) {
        self.backoff.succeeded(&item_key(meta));
    }

    /// The item is gone (or going): nothing of it is kept in any memory.
    pub fn forget(&self, meta: &ObjectMeta) {
        let uid = uid(meta);
        self.settled.remove(uid);
        self.own_writes.forget(uid);
        self.observed.remove(uid);
        self.backoff.succeeded(&item_key(meta));
    }

    /// Items remembered as settled.
    pub fn settled_len(&self) -> usize {
        self.settled.len()
    }

    /// Items with an own write whose event is not decided yet.
    pub fn own_writes_len(&self) -> usize {
        self.own_writes.len()
    }

    /// Items backing off after a failure.
    pub fn backing_off_len(&self) -> usize {
        self.backoff.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(uid: &str, rv: &str) -> DeployItem {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
            "metadata": {"name": "di", "namespace": "ns", "uid": uid, "resourceVersion": rv},
            "spec": {"type": "t"},
            "status": {"phase": "Succeeded"}
        }))
        .unwrap()
    }

    #[test]
    fn an_event_of_an_earlier_own_write_is_settled_when_the_newest_write_settled_it() {
        let m = ItemMemory::default();
        m.wrote(&item("u", "2"));
        let newest = item("u", "3");
        m.wrote(&newest);
        assert!(!m.settled("u", "2"), "not finished yet");
        m.settle(&newest);
        assert!(m.settled("u", "2"), "our newest write finished it");
        assert_eq!(
            m.own_writes_len(),
            1,
            "still waiting for the newest write's event"
        );
        assert!(m.settled("u", "3"));
        assert_eq!(
            m.own_writes_len(),
            0,
            "the newest write's event was decided"
        );
        assert!(!m.settled("u", "7"), "someone else's version");
    }

    #[test]
    fn a_fresh_copy_is_an_own_write_else_a_trusted_watch_copy() {
        let m = ItemMemory::default();
        let watched = item("u", "1");
        assert!(
            m.fresh_copy(&watched.metadata, None).is_none(),
            "metadata only, nothing written: read"
        );
        assert_eq!(
            m.fresh_copy(&watched.metadata, Some(&watched))
                .and_then(|i| i.metadata.resource_version),
            Some("1".into()),
            "nothing known newer: the watch's copy"
        );
        m.wrote(&item("u", "2"));
        assert!(
            m.fresh_copy(&watched.metadata, Some(&watched)).is_none(),
            "we wrote 2: a copy at 1 is behind"
        );
        let own = item("u", "2");
        assert_eq!(
            m.fresh_copy(&own.metadata, None)
                .and_then(|i| i.metadata.resource_version),
            Some("2".into()),
            "the event of our write: our object"
        );
        m.conflicted(&watched.metadata);
        assert!(m.fresh_copy(&watched.metadata, Some(&watched)).is_none());
        m.read_from_server(&watched);
        assert!(m.fresh_copy(&watched.metadata, Some(&watched)).is_some());
        let mut deleting = item("u", "1");
        deleting.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()),
        );
        assert!(
            m.fresh_copy(&deleting.metadata, Some(&deleting)).is_none(),
            "an item being deleted is read"
        );
    }

    #[test]
    fn forget_clears_every_memory_of_the_item() {
        let m = ItemMemory::default();
        let i = item("u", "2");
        m.settle(&i);
        m.wrote(&item("u", "3"));
        m.conflicted(&i.metadata);
        assert_eq!(m.failed(&i.metadata), Duration::from_millis(500));
        m.forget(&i.metadata);
        assert_eq!(
            (m.settled_len(), m.own_writes_len(), m.backing_off_len()),
            (0, 0, 0)
        );
        assert!(
            m.fresh_copy(&i.metadata, Some(&i)).is_some(),
            "no conflict remembered either"
        );
        assert_eq!(
            m.failed(&i.metadata),
            Duration::from_millis(500),
            "backoff starts again at the base"
        );
    }
}
