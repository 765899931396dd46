//! Worker usage: how many reconciles run at once. At ≥ 70 % of the configured workers the host
//! logs "worker threads of controller" with the count, as Landscaper does (diagnostic only);
//! the current count is exported as a gauge.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug)]
pub struct WorkerCounter {
    controller: String,
    max: u64,
    in_use: AtomicU64,
}

/// Decrements the counter when dropped.
pub struct WorkerGuard<'a>(&'a WorkerCounter);

impl Drop for WorkerGuard<'_> {
    fn drop(&mut self) {
        self.0.in_use.fetch_sub(1, Ordering::Relaxed);
    }
}

impl WorkerCounter {
    pub fn new(controller: &str, max: usize) -> Self {
        Self {
            controller: controller.into(),
            max: max.max(1) as u64,
            in_use: AtomicU64::new(0),
        }
    }

    /// Counts one running reconcile until the guard drops.
    pub fn enter(&self) -> WorkerGuard<'_> {
        let n = self.in_use.fetch_add(1, Ordering::Relaxed) + 1;
        if n * 100 >= self.max * 70 {
            tracing::info!(
                controller = %self.controller,
                usedWorkerThreads = n,
                maxWorkerThreads = self.max,
                "worker threads of controller {}",
                self.controller
            );
        }
        WorkerGuard(self)
    }

    pub fn in_use(&self) -> u64 {
        self.in_use.load(Ordering::Relaxed)
    }

    pub fn max(&self) -> u64 {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_running_reconciles() {
        let c = WorkerCounter::new("deployitems", 4);
        let a = c.enter();
        let b = c.enter();
        assert_eq!(c.in_use(), 2);
        drop(a);
        assert_eq!(c.in_use(), 1);
        drop(b);
        assert_eq!(c.in_use(), 0);
    }
}
