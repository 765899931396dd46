//! Per-item exponential backoff after a failed reconcile (kube-runtime / controller-rs habit):
//! a lasting error (a 403, an unreachable API) no longer retries every item every second.
//!
//! Owns: the failure count per item and the delay it implies. Must not touch: the contract's
//! own requeues (polling an unfinished job, hook requeues) — only errors that abort a reconcile
//! come here; a successful reconcile resets the item.

use std::collections::HashMap;

use crate::shrink::ShrinkWhenSparse;
use std::sync::Mutex;
use std::time::Duration;

/// The delay after the `failures`-th consecutive failure: `base · 2^(failures-1)`, at most `cap`.
pub fn delay(base: Duration, cap: Duration, failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(31);
    base.saturating_mul(1u32 << exponent).min(cap)
}

/// Consecutive failures per item key (`namespace/name`).
#[derive(Debug)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    failures: Mutex<HashMap<String, u32>>,
}

impl Default for Backoff {
    /// 500 ms, doubling, capped at 5 minutes (controller-rs' error requeue).
    fn default() -> Self {
        Self::new(Duration::from_millis(500), Duration::from_secs(300))
    }
}

impl Backoff {
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self {
            base,
            cap,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Records a failure of `key` and returns how long to wait before the next attempt.
    pub fn failed(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let n = failures.entry(key.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        delay(self.base, self.cap, *n)
    }

    /// Forgets the failures of `key` (it reconciled successfully).
    pub fn succeeded(&self, key: &str) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if !failures.is_empty() {
            failures.remove(key);
            failures.shrink_when_sparse();
        }
    }

    /// Items currently backing off.
    pub fn len(&self) -> usize {
        self.failures.lock().map(|f| f.len()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn delays_double_from_the_base_up_to_the_cap() {
        let d: Vec<_> = (1..=6).map(|n| delay(100 * MS, 1000 * MS, n)).collect();
        assert_eq!(d, [100, 200, 400, 800, 1000, 1000].map(|m| m * MS));
        assert_eq!(
            delay(100 * MS, 1000 * MS, u32::MAX),
            1000 * MS,
            "no overflow"
        );
    }

    #[test]
    fn failures_count_per_item_and_success_resets() {
        let b = Backoff::new(100 * MS, 10_000 * MS);
        assert_eq!(b.failed("ns/a"), 100 * MS);
        assert_eq!(b.failed("ns/a"), 200 * MS);
        assert_eq!(
            b.failed("ns/b"),
            100 * MS,
            "another item starts at the base"
        );
        b.succeeded("ns/a");
        assert_eq!(b.failed("ns/a"), 100 * MS);
        assert_eq!(b.len(), 2);
    }
}
