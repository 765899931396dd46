//! Collections that grew in a burst give their room back once mostly empty: a thousand items
//! or Target clusters deleted must not leave each per-item table at its peak's size for the
//! life of the process (docs/scaling.md, "Memory that returns"). Those tables are made during
//! the burst, between its short-lived allocations, and the pages they sit on stay resident.
//!
//! Owns: the rule — shrink to twice the length once at most a quarter is used (so a table
//! shrinks only after losing half its entries since it last grew or shrank: amortized O(1) per
//! removal). Must not touch: what the collections hold.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, Hash};

/// Below this capacity a table is left as it is: too small to matter.
const KEEP: usize = 64;

fn sparse(len: usize, capacity: usize) -> bool {
    capacity > KEEP && len <= capacity / 4
}

/// Gives a collection's spare room back once it is at most a quarter full.
pub trait ShrinkWhenSparse {
    fn shrink_when_sparse(&mut self);
}

impl<K: Eq + Hash, V, S: BuildHasher> ShrinkWhenSparse for HashMap<K, V, S> {
    fn shrink_when_sparse(&mut self) {
        if sparse(self.len(), self.capacity()) {
            self.shrink_to(self.len() * 2);
        }
    }
}

impl<T: Eq + Hash, S: BuildHasher> ShrinkWhenSparse for HashSet<T, S> {
    fn shrink_when_sparse(&mut self) {
        if sparse(self.len(), self.capacity()) {
            self.shrink_to(self.len() * 2);
        }
    }
}

impl<T> ShrinkWhenSparse for VecDeque<T> {
    fn shrink_when_sparse(&mut self) {
        if sparse(self.len(), self.capacity()) {
            self.shrink_to(self.len() * 2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_emptied_after_a_burst_gives_its_room_back_and_a_busy_one_keeps_it() {
        let mut map: HashMap<u32, String> = (0..10_000).map(|i| (i, i.to_string())).collect();
        let peak = map.capacity();
        for i in 0..5_000 {
            map.remove(&i);
            map.shrink_when_sparse();
        }
        assert!(
            map.capacity() >= peak / 2,
            "half full: kept for the next burst"
        );
        for i in 5_000..10_000 {
            map.remove(&i);
            map.shrink_when_sparse();
        }
        assert!(map.capacity() <= KEEP * 2, "empty: {}", map.capacity());

        let mut queue: VecDeque<u32> = (0..10_000).collect();
        queue.clear();
        queue.shrink_when_sparse();
        assert_eq!(queue.capacity(), 0);

        let mut small: HashSet<u32> = (0..40).collect();
        let capacity = small.capacity();
        small.clear();
        small.shrink_when_sparse();
        assert_eq!(small.capacity(), capacity, "too small to matter");
    }
}
