//! The items this host wrote last: the object each of its DeployItem writes returned, so the
//! watch event that write causes needs no read of the item (contract section 3.4: the full item
//! is read only when the metadata says there may be work).
//!
//! An object at a resourceVersion never changes, and this host's writes of one item are
//! sequential and conditional on the version before them, so when an event names any version
//! this host wrote, the last object it wrote is that version or a later one. A change by someone
//! else after it has its own event, which reconciles again.
//!
//! Owns: that memory, bounded. Must not touch: decisions — a miss only costs a read.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use crate::landscaper::DeployItem;

/// Versions remembered per item: the host's writes of one reconcile (pickup, finalizer, finish)
/// and the next, whose events may arrive late.
const VERSIONS_PER_ITEM: usize = 4;

/// Items remembered at most: a miss costs one read, so the bound only caps memory.
const DEFAULT_CAPACITY: usize = 1024;

struct Written {
    /// The resourceVersions this host's writes produced, oldest first.
    versions: VecDeque<String>,
    /// What the newest of them returned.
    item: DeployItem,
}

/// The last object this host wrote, per item uid.
#[derive(Default)]
pub struct WrittenItems {
    by_uid: Mutex<HashMap<String, Written>>,
    capacity: usize,
}

impl std::fmt::Debug for WrittenItems {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WrittenItems")
            .field("len", &self.len())
            .finish()
    }
}

impl WrittenItems {
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }

    pub fn with_capacity(capacity: usize) -> Self {
        WrittenItems {
            by_uid: Mutex::new(HashMap::new()),
            capacity,
        }
    }

    /// Remembers `item` as the API server returned it from this host's write.
    pub fn remember(&self, item: &DeployItem) {
        let (Some(uid), Some(rv)) = (&item.metadata.uid, &item.metadata.resource_version) else {
            return;
        };
        let mut map = self.by_uid.lock().expect("written items poisoned");
        if let Some(w) = map.get_mut(uid) {
            if w.versions.len() == VERSIONS_PER_ITEM {
                w.versions.pop_front();
            }
            w.versions.push_back(rv.clone());
            w.item = item.clone();
            return;
        }
        if map.len() >= self.capacity {
            // Any entry will do: the one dropped costs a read if its event comes.
            if let Some(k) = map.keys().next().cloned() {
                map.remove(&k);
            }
        }
        map.insert(
            uid.clone(),
            Written {
                versions: VecDeque::from([rv.clone()]),
                item: item.clone(),
            },
        );
    }

    /// The newest object this host wrote for `uid`, if `resource_version` is one of its writes
    /// (the item is then at that object's version or later).
    pub fn current(&self, uid: &str, resource_version: &str) -> Option<DeployItem> {
        let map = self.by_uid.lock().expect("written items poisoned");
        let w = map.get(uid)?;
        w.versions
            .iter()
            .any(|v| v == resource_version)
            .then(|| w.item.clone())
    }

    /// The resourceVersion of the newest write for `uid`, if `resource_version` is one of its
    /// writes.
    pub fn current_version(&self, uid: &str, resource_version: &str) -> Option<String> {
        let map = self.by_uid.lock().expect("written items poisoned");
        let w = map.get(uid)?;
        if w.versions.iter().any(|v| v == resource_version) {
            w.versions.back().cloned()
        } else {
            None
        }
    }

    /// The item is gone (or going): nothing of it is kept.
    pub fn forget(&self, uid: &str) {
        self.by_uid
            .lock()
            .expect("written items poisoned")
            .remove(uid);
    }

    pub fn len(&self) -> usize {
        self.by_uid.lock().expect("written items poisoned").len()
    }

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
    fn an_event_of_any_own_write_gets_the_newest_object() {
        let w = WrittenItems::new();
        w.remember(&item("u", "2", "Progressing"));
        w.remember(&item("u", "3", "Succeeded"));
        for rv in ["2", "3"] {
            let got = w.current("u", rv).expect("own write");
            assert_eq!(got.metadata.resource_version.as_deref(), Some("3"));
            assert_eq!(w.current_version("u", rv).as_deref(), Some("3"));
        }
    }

    #[test]
    fn a_version_someone_else_wrote_is_a_miss() {
        let w = WrittenItems::new();
        w.remember(&item("u", "2", "Progressing"));
        assert!(w.current("u", "7").is_none(), "another writer's version");
        assert!(w.current("v", "2").is_none(), "another item");
        assert!(w.current_version("u", "7").is_none());
    }

    #[test]
    fn only_the_last_writes_are_remembered_and_forget_drops_the_item() {
        let w = WrittenItems::new();
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
    fn the_capacity_bounds_the_items_kept() {
        let w = WrittenItems::with_capacity(2);
        for uid in ["a", "b", "c"] {
            w.remember(&item(uid, "1", "Succeeded"));
        }
        assert_eq!(w.len(), 2);
        assert!(w.current("c", "1").is_some(), "the newest is kept");
    }
}
