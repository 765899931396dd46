//! The finished-object cache: items known to have `jobID == jobIDFinished` at a given
//! resourceVersion. An event for an unchanged finished item costs no read, no lock and no
//! write (contract section 3.4, step 3).

use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Default, Debug)]
pub struct FinishedCache {
    by_uid: Mutex<HashMap<String, String>>,
}

impl FinishedCache {
    /// True if the item `uid` was finished at exactly `resource_version`.
    pub fn is_finished(&self, uid: &str, resource_version: &str) -> bool {
        self.by_uid
            .lock()
            .expect("finished cache poisoned")
            .get(uid)
            .is_some_and(|rv| rv == resource_version)
    }

    pub fn insert(&self, uid: &str, resource_version: &str) {
        self.by_uid
            .lock()
            .expect("finished cache poisoned")
            .insert(uid.into(), resource_version.into());
    }

    pub fn remove(&self, uid: &str) {
        self.by_uid
            .lock()
            .expect("finished cache poisoned")
            .remove(uid);
    }

    pub fn len(&self) -> usize {
        self.by_uid.lock().expect("finished cache poisoned").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_resource_version_is_finished() {
        let c = FinishedCache::default();
        c.insert("u", "5");
        assert!(c.is_finished("u", "5"));
        assert!(!c.is_finished("u", "6"));
        assert!(!c.is_finished("v", "5"));
        c.remove("u");
        assert!(c.is_empty());
    }
}
