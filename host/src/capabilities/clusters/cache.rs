//! Which cluster clients the host keeps: the policy, without I/O (time is passed in).
//!
//! A client is kept while something live uses it, and released
//! - when the last Target that used it is deleted, or resolves to another kubeconfig (a rotated
//!   token or certificate makes a new client, so the old one must go at once);
//! - when nobody has used it for the idle timeout;
//! - beyond the maximum, least recently used first.
//!
//! Clients registered in-process (tests, dev mode) are pinned: never released. Releasing only
//! drops the cache's handle: an invocation still using the client keeps it until it ends.
//!
//! Owns: the entries, their users and their age. Must not touch: building clients or calling
//! clusters (`super::connect`, `super::cluster`).

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use crate::shrink::ShrinkWhenSparse;

/// Why an entry was released (the metric's label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// Its last Target was deleted or now names another kubeconfig.
    Target,
    /// Unused for the idle timeout.
    Idle,
    /// The cache was full; it was the least recently used.
    Capacity,
}

impl Release {
    pub fn label(self) -> &'static str {
        match self {
            Release::Target => "target",
            Release::Idle => "idle",
            Release::Capacity => "capacity",
        }
    }
}

struct Entry<V> {
    value: V,
    last_used: Instant,
    /// Targets whose latest kubeconfig is this one.
    users: usize,
    pinned: bool,
}

/// Entries by key (`K`: the kubeconfig's identity), with the Targets (`U`) that use them.
pub struct Cache<K, U, V> {
    entries: HashMap<K, Entry<V>>,
    users: HashMap<U, K>,
    max: usize,
    idle: Duration,
}

impl<K: Clone + Eq + Hash, U: Clone + Eq + Hash, V: Clone> Cache<K, U, V> {
    pub fn new(max: usize, idle: Duration) -> Self {
        Self {
            entries: HashMap::new(),
            users: HashMap::new(),
            max: max.max(1),
            idle,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn contains(&self, key: &K) -> bool {
        self.entries.contains_key(key)
    }

    /// The entry of `key`, used now by `user` (if any). Also returns what that use released:
    /// the entry `user` used before, when this was its last user.
    pub fn get(&mut self, key: &K, user: Option<&U>, now: Instant) -> (Option<V>, Vec<V>) {
        let Some(entry) = self.entries.get_mut(key) else {
            return (None, Vec::new());
        };
        entry.last_used = now;
        let value = entry.value.clone();
        let released = user.map(|u| self.bind(u, key)).unwrap_or_default();
        (Some(value), released)
    }

    /// Adds `value` for `key` (replacing an entry of that key), used now by `user`. Returns the
    /// entries released to make room or by the user's move.
    pub fn insert(
        &mut self,
        key: K,
        value: V,
        user: Option<&U>,
        pinned: bool,
        now: Instant,
    ) -> Vec<(V, Release)> {
        let users = self.entries.get(&key).map(|e| e.users).unwrap_or(0);
        self.entries.insert(
            key.clone(),
            Entry {
                value,
                last_used: now,
                users,
                pinned,
            },
        );
        let mut released: Vec<(V, Release)> = user
            .map(|u| self.bind(u, &key))
            .unwrap_or_default()
            .into_iter()
            .map(|v| (v, Release::Target))
            .collect();
        while self.entries.len() > self.max {
            let lru = self
                .entries
                .iter()
                .filter(|(k, e)| !e.pinned && **k != key)
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone());
            let Some(lru) = lru else { break };
            if let Some(v) = self.remove(&lru) {
                released.push((v, Release::Capacity));
            }
        }
        released
    }

    /// `user` (a Target) is gone: its entry goes too unless another user or pin holds it.
    pub fn forget(&mut self, user: &U) -> Option<V> {
        let key = self.users.remove(user)?;
        let released = self.unuse(&key);
        self.users.shrink_when_sparse();
        released
    }

    /// Releases every unpinned entry unused since `now - idle`.
    pub fn sweep(&mut self, now: Instant) -> Vec<V> {
        let idle = self.idle;
        let expired: Vec<K> = self
            .entries
            .iter()
            .filter(|(_, e)| !e.pinned && now.saturating_duration_since(e.last_used) >= idle)
            .map(|(k, _)| k.clone())
            .collect();
        // `remove` shrinks the entries as they go; the users' table shrinks once here.
        let released = expired.iter().filter_map(|k| self.remove(k)).collect();
        self.users.shrink_when_sparse();
        released
    }

    /// Records that `user` now uses `key`; releases its previous entry if nobody else uses it.
    fn bind(&mut self, user: &U, key: &K) -> Vec<V> {
        let previous = self.users.insert(user.clone(), key.clone());
        if previous.as_ref() == Some(key) {
            return Vec::new();
        }
        if let Some(entry) = self.entries.get_mut(key) {
            entry.users += 1;
        }
        previous
            .and_then(|old| self.unuse(&old))
            .into_iter()
            .collect()
    }

    /// One user fewer for `key`; the entry goes when that was the last and it is not pinned.
    fn unuse(&mut self, key: &K) -> Option<V> {
        let entry = self.entries.get_mut(key)?;
        entry.users = entry.users.saturating_sub(1);
        if entry.users == 0 && !entry.pinned {
            return self.remove(key);
        }
        None
    }

    fn remove(&mut self, key: &K) -> Option<V> {
        let entry = self.entries.remove(key)?;
        if entry.users > 0 {
            self.users.retain(|_, k| k != key);
        }
        self.entries.shrink_when_sparse();
        Some(entry.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestCache = Cache<&'static str, &'static str, &'static str>;

    fn cache(max: usize) -> (TestCache, Instant) {
        (Cache::new(max, Duration::from_secs(60)), Instant::now())
    }

    #[test]
    fn a_rotated_kubeconfig_releases_the_old_client_at_once() {
        let (mut c, t0) = cache(10);
        c.insert("kubeconfig-v1", "client-v1", Some(&"ns/target"), false, t0);
        let released = c.insert("kubeconfig-v2", "client-v2", Some(&"ns/target"), false, t0);
        assert_eq!(released, vec![("client-v1", Release::Target)]);
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn a_client_two_targets_share_stays_until_both_have_moved_on() {
        let (mut c, t0) = cache(10);
        c.insert("shared", "client", Some(&"ns/a"), false, t0);
        assert_eq!(c.get(&"shared", Some(&"ns/b"), t0).0, Some("client"));
        assert_eq!(c.forget(&"ns/a"), None, "ns/b still uses it");
        assert_eq!(c.forget(&"ns/b"), Some("client"));
        assert_eq!(c.len(), 0);
        assert_eq!(c.forget(&"ns/b"), None, "forgetting twice is harmless");
    }

    #[test]
    fn idle_clients_are_swept_and_pinned_ones_stay() {
        let (mut c, t0) = cache(10);
        c.insert("used", "u", None, false, t0);
        c.insert("idle", "i", None, false, t0);
        c.insert("registered", "r", None, true, t0);
        c.get(&"used", None, t0 + Duration::from_secs(50));
        let swept = c.sweep(t0 + Duration::from_secs(61));
        assert_eq!(swept, vec!["i"]);
        assert_eq!(c.len(), 2);
        assert!(c.sweep(t0 + Duration::from_secs(3600)).contains(&"u"));
        assert_eq!(c.len(), 1, "the pinned client stays");
    }

    #[test]
    fn beyond_the_maximum_the_least_recently_used_goes() {
        let (mut c, t0) = cache(2);
        c.insert("a", "a", None, false, t0);
        c.insert("b", "b", None, false, t0 + Duration::from_secs(1));
        c.get(&"a", None, t0 + Duration::from_secs(2));
        let released = c.insert("c", "c", None, false, t0 + Duration::from_secs(3));
        assert_eq!(released, vec![("b", Release::Capacity)]);
        assert!(c.get(&"a", None, t0).0.is_some());
        assert!(c.get(&"c", None, t0).0.is_some());
    }

    #[test]
    fn a_capacity_release_unbinds_its_users() {
        let (mut c, t0) = cache(1);
        c.insert("a", "a", Some(&"ns/x"), false, t0);
        c.insert("b", "b", Some(&"ns/y"), false, t0 + Duration::from_secs(1));
        // ns/x's entry went for capacity; ns/x coming back with a new kubeconfig releases nothing
        // twice and keeps b, which ns/y uses.
        let released = c.insert(
            "a2",
            "a2",
            Some(&"ns/x"),
            false,
            t0 + Duration::from_secs(2),
        );
        assert_eq!(released, vec![("b", Release::Capacity)]);
        assert_eq!(c.forget(&"ns/y"), None, "b is gone already");
    }
}
