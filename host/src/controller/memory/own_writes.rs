//! Own writes: the items this host wrote last: the object each of its DeployItem writes returned, so the
//! watch event that write causes needs no read of the item (contract section 3.4: the full item
//! is read only when the metadata says there may be work).
//!
//! An object at a resourceVersion never changes, and this host's writes of one item are
//! sequential and conditional on the version before them, so when an event names any version
//! this host wrote, the last object it wrote is that version or a later one. A change by someone
//! else after it has its own event, which reconciles again.
//!
//! Owns: that memory, bounded. Must not touch: decisions — a miss only costs a read.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;

use crate::landscaper::DeployItem;
use crate::shrink::ShrinkWhenSparse;

/// Versions remembered per item: the host's writes of one reconcile (pickup, finalizer, finish)
/// and the next, whose events may arrive late.
const VERSIONS_PER_ITEM: usize = 4;

/// Items remembered at most: a miss costs one read, so the bound only caps memory.
const DEFAULT_CAPACITY: usize = 4096;

struct Written {
    /// The resourceVersions this host's writes produced, oldest first.
    versions: VecDeque<String>,
    /// What the newest of them returned.
    item: DeployItem,
}

/// The last object this host wrote, per item uid, until the event of that write is decided.
#[derive(Default)]
pub struct OwnWrites {
    inner: Mutex<Inner>,
    capacity: usize,
}

#[derive(Default)]
struct Inner {
    by_uid: HashMap<String, Written>,
    /// Items whose last write conflicted: a cached copy of them (`itemCache: full`) is behind
    /// the server, so they are read until a read has been decided.
    distrusted: HashSet<String>,
    /// Uids in the order they were first remembered (may name forgotten ones): the oldest
    /// goes first when the bound is reached.
    order: VecDeque<String>,
}

impl Inner {
    /// Once the queue names more forgotten (or repeated) uids than remembered ones, keeps only
    /// the first mention of each remembered uid, and gives the tables' room back: after a burst
    /// of items is decided or deleted, nothing of its size stays. Amortized O(1) per call.
    fn compact(&mut self, capacity: usize) {
        if self.order.len() > (2 * self.by_uid.len() + 32).min(2 * capacity.max(1)) {
            let mut kept = HashSet::with_capacity(self.by_uid.len());
            let old = std::mem::take(&mut self.order);
            for uid in old {
                if self.by_uid.contains_key(&uid) && !kept.contains(&uid) {
                    kept.insert(uid.clone());
                    self.order.push_back(uid);
                }
            }
        }
        self.by_uid.shrink_when_sparse();
        self.distrusted.shrink_when_sparse();
    }
}

impl std::fmt::Debug for OwnWrites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnWrites")
            .field("len", &self.len())
            .finish()
    }
}

impl OwnWrites {
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }

    pub fn with_capacity(capacity: usize) -> Self {
        OwnWrites {
            inner: Mutex::new(Inner::default()),
            capacity,
        }
    }

    /// Remembers `item` as the API server returned it from this host's write.
    pub fn remember(&self, item: &DeployItem) {
        let (Some(uid), Some(rv)) = (&item.metadata.uid, &item.metadata.resource_version) else {
            return;
        };
        let mut inner = self.inner.lock().expect("own writes poisoned");
        if let Some(w) = inner.by_uid.get_mut(uid) {
            if w.versions.len() == VERSIONS_PER_ITEM {
                w.versions.pop_front();
            }
            w.versions.push_back(rv.clone());
            w.item = item.clone();
            return;
        }
        while inner.by_uid.len() >= self.capacity.max(1) {
            // The oldest goes: its event is the likeliest to have come and gone unclaimed.
            let Some(oldest) = inner.order.pop_front() else {
                break;
            };
            inner.by_uid.remove(&oldest);
        }
        inner.by_uid.insert(
            uid.clone(),
            Written {
                versions: VecDeque::from([rv.clone()]),
                item: item.clone(),
            },
        );
        inner.order.push_back(uid.clone());
        // Uids forgotten or claimed since: keep the queue from outgrowing the map.
        inner.compact(self.capacity);
    }

    /// The newest object this host wrote for `uid`, if `resource_version` is one of its writes
    /// (the item is then at that object's version or later). The event of the newest write
    /// claims the object: once it is decided, nothing of the item is kept.
    pub fn current(&self, uid: &str, resource_version: &str) -> Option<DeployItem> {
        let mut inner = self.inner.lock().expect("own writes poisoned");
        let w = inner.by_uid.get(uid)?;
        if w.versions.back().is_some_and(|v| v == resource_version) {
            let claimed = inner.by_uid.remove(uid).map(|w| w.item);
            inner.compact(self.capacity);
            return claimed;
        }
        w.versions
            .iter()
            .any(|v| v == resource_version)
            .then(|| w.item.clone())
    }

    /// The resourceVersion of the newest write for `uid`, if `resource_version` is one of its
    /// writes.
    pub fn current_version(&self, uid: &str, resource_version: &str) -> Option<String> {
        let inner = self.inner.lock().expect("own writes poisoned");
        let w = inner.by_uid.get(uid)?;
        if w.versions.iter().any(|v| v == resource_version) {
            w.versions.back().cloned()
        } else {
            None
        }
    }

    /// The event naming `resource_version` was decided without the object (the item was known
    /// finished): if that is the newest write, nothing of the item needs keeping.
    pub fn decided(&self, uid: &str, resource_version: &str) {
        let mut inner = self.inner.lock().expect("own writes poisoned");
        if inner
            .by_uid
            .get(uid)
            .is_some_and(|w| w.versions.back().is_some_and(|v| v == resource_version))
        {
            inner.by_uid.remove(uid);
            inner.compact(self.capacity);
        }
    }

    /// The item is gone (or going): nothing of it is kept.
    pub fn forget(&self, uid: &str) {
        let mut inner = self.inner.lock().expect("own writes poisoned");
        inner.by_uid.remove(uid);
        inner.distrusted.remove(uid);
        inner.compact(self.capacity);
    }

    /// Whether a cached copy of the item (`itemCache: full`) at `resource_version` may be
    /// behind the server as far as this host knows: it wrote a version whose event is not
    /// decided yet and this is not one of its versions, or its last write conflicted.
    pub fn may_be_behind(&self, uid: &str, resource_version: &str) -> bool {
        let inner = self.inner.lock().expect("own writes poisoned");
        inner.distrusted.contains(uid)
            || inner
                .by_uid
                .get(uid)
                .is_some_and(|w| !w.versions.iter().any(|v| v == resource_version))
    }

    /// A write of the item conflicted: someone else wrote it since the version it was decided
    /// on. Its next decision reads it.
    pub fn distrust(&self, uid: &str) {
        let mut inner = self.inner.lock().expect("own writes poisoned");
        // Bounded like the rest: a forgotten mark costs one more conflict, never a wrong write.
        if inner.distrusted.len() >= self.capacity.max(1) {
            inner.distrusted.clear();
        }
        inner.distrusted.insert(uid.to_string());
    }

    /// The item was read from the server: whatever it was decided on is current.
    pub fn read(&self, uid: &str) {
        self.inner
            .lock()
            .expect("own writes poisoned")
            .distrusted
            .remove(uid);
    }

    pub fn len(&self) -> usize {
        self.inner.lock().expect("own writes poisoned").by_uid.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(uid: &str, rv: &str, phase: &str) -> DeployItem {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "landscaper.gardener.cloud/v1alpha1", "kind": "DeployItem",
            "metadata": {"name": "di", "namespace": "ns", "uid": uid, "resourceVersion": rv},
            "spec": {"type": "t"},
            "status": {"phase": phase}
        }))
        .unwrap()
    }

    #[test]
    fn a_cached_copy_is_behind_while_a_newer_own_write_or_a_conflict_is_undecided() {
        let w = OwnWrites::new();
        assert!(
            !w.may_be_behind("u", "1"),
            "nothing written: the cache is the best we know"
        );
        w.remember(&item("u", "2", "Progressing"));
        assert!(
            w.may_be_behind("u", "1"),
            "we wrote 2; a copy at 1 is behind"
        );
        assert!(!w.may_be_behind("u", "2"), "one of our versions");
        w.current("u", "2");
        assert!(
            !w.may_be_behind("u", "1"),
            "the newest write's event was decided"
        );
        w.distrust("u");
        assert!(
            w.may_be_behind("u", "5"),
            "a conflict: read until a read is decided"
        );
        w.read("u");
        assert!(!w.may_be_behind("u", "5"));
        w.distrust("u");
        w.forget("u");
        assert!(!w.may_be_behind("u", "5"), "gone: nothing kept");
    }

    #[test]
    fn after_a_burst_is_decided_nothing_of_its_size_stays() {
        let w = OwnWrites::new();
        for i in 0..3_000 {
            w.remember(&item(&format!("u{i}"), "2", "Progressing"));
        }
        for i in 0..3_000 {
            assert!(w.current(&format!("u{i}"), "2").is_some());
        }
        assert!(w.is_empty());
        let inner = w.inner.lock().unwrap();
        assert!(inner.order.len() <= 32, "queue: {}", inner.order.len());
        assert!(
            inner.by_uid.capacity() <= 128,
            "table: {}",
            inner.by_uid.capacity()
        );
    }

    #[test]
    fn items_remembered_again_and_again_do_not_grow_the_queue() {
        let w = OwnWrites::new();
        for job in 0..50 {
            for i in 0..100 {
                w.remember(&item(&format!("u{i}"), &format!("{job}"), "Progressing"));
            }
            // Half the events are decided before the next job: the other half stay remembered.
            for i in 0..50 {
                w.current(&format!("u{i}"), &format!("{job}"));
            }
        }
        let inner = w.inner.lock().unwrap();
        assert_eq!(inner.by_uid.len(), 50);
        assert!(
            inner.order.len() <= 2 * 50 + 32,
            "queue: {}",
            inner.order.len()
        );
    }

    #[test]
    fn an_event_of_an_earlier_own_write_gets_the_newest_object() {
        let w = OwnWrites::new();
        w.remember(&item("u", "2", "Progressing"));
        w.remember(&item("u", "3", "Succeeded"));
        let got = w.current("u", "2").expect("own write");
        assert_eq!(got.metadata.resource_version.as_deref(), Some("3"));
        assert_eq!(w.current_version("u", "2").as_deref(), Some("3"));
        assert_eq!(w.len(), 1, "still waiting for the newest write's event");
    }

    #[test]
    fn the_event_of_the_newest_write_claims_the_object() {
        let w = OwnWrites::new();
        w.remember(&item("u", "2", "Progressing"));
        w.remember(&item("u", "3", "Succeeded"));
        let got = w.current("u", "3").expect("own write");
        assert_eq!(got.metadata.resource_version.as_deref(), Some("3"));
        assert!(w.is_empty(), "nothing kept once decided");
        assert!(
            w.current("u", "3").is_none(),
            "a second event reads the item"
        );

        w.remember(&item("u", "4", "Succeeded"));
        w.decided("u", "3");
        assert_eq!(w.len(), 1, "an older version's event claims nothing");
        w.decided("u", "4");
        assert!(w.is_empty(), "decided without the object: nothing kept");
    }

    #[test]
    fn a_version_someone_else_wrote_is_a_miss() {
        let w = OwnWrites::new();
        w.remember(&item("u", "2", "Progressing"));
        assert!(w.current("u", "7").is_none(), "another writer's version");
        assert!(w.current("v", "2").is_none(), "another item");
        assert!(w.current_version("u", "7").is_none());
    }

    #[test]
    fn only_the_last_writes_are_remembered_and_forget_drops_the_item() {
        let w = OwnWrites::new();
        for rv in 1..=6 {
            w.remember(&item("u", &rv.to_string(), "Progressing"));
        }
        assert!(w.current("u", "2").is_none(), "older than the last four");
        assert!(w.current("u", "3").is_some());
        w.forget("u");
        assert!(w.current("u", "6").is_none());
        assert!(w.is_empty());
    }

    #[test]
    fn the_capacity_bounds_the_items_kept_and_the_oldest_go_first() {
        let w = OwnWrites::with_capacity(2);
        for uid in ["a", "b", "c"] {
            w.remember(&item(uid, "1", "Succeeded"));
        }
        assert_eq!(w.len(), 2);
        assert!(w.current_version("a", "1").is_none(), "the oldest went");
        assert!(w.current_version("b", "1").is_some());
        assert!(w.current_version("c", "1").is_some());
        // Claimed and forgotten uids do not pile up in the order queue.
        for i in 0..100 {
            let uid = format!("x{i}");
            w.remember(&item(&uid, "1", "Succeeded"));
            w.current(&uid, "1").expect("claimed");
        }
        assert!(w.inner.lock().unwrap().order.len() <= 4);
    }
}
