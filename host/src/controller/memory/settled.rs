//! Settled items: items known to have `jobID == jobIDFinished` at a given resourceVersion
//! (what was called the finished cache). An event for an unchanged settled item costs no read,
//! no lock and no write (contract section 3.4, step 3).
//!
//! Owns: that map, uid → resourceVersion. Must not touch: what "finished" means
//! (`crate::contract::next_step`); only the versions it is told.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::shrink::ShrinkWhenSparse;

#[derive(Default, Debug)]
pub struct SettledItems {
    by_uid: Mutex<HashMap<String, String>>,
}

impl SettledItems {
    /// True if the item `uid` was settled (finished) at exactly `resource_version`.
    pub fn is_settled(&self, uid: &str, resource_version: &str) -> bool {
        self.by_uid
            .lock()
            .expect("settled items poisoned")
            .get(uid)
            .is_some_and(|rv| rv == resource_version)
    }

    /// The item `uid` is finished at `resource_version`.
    pub fn insert(&self, uid: &str, resource_version: &str) {
        self.by_uid
            .lock()
            .expect("settled items poisoned")
            .insert(uid.into(), resource_version.into());
    }

    pub fn remove(&self, uid: &str) {
        let mut by_uid = self.by_uid.lock().expect("settled items poisoned");
        by_uid.remove(uid);
        by_uid.shrink_when_sparse();
    }

    pub fn len(&self) -> usize {
        self.by_uid.lock().expect("settled items poisoned").len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_resource_version_is_finished() {
        let c = SettledItems::default();
        c.insert("u", "5");
        assert!(c.is_settled("u", "5"));
        assert!(!c.is_settled("u", "6"));
        assert!(!c.is_settled("v", "5"));
        c.remove("u");
        assert!(c.is_empty());
    }
}
