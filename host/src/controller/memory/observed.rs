//! What `/metrics` reports of items: each item's type and phase as this host last read or
//! wrote it, and when this host picked up its open job (so a job's duration is measured to the
//! millisecond, not from `initTime`'s whole seconds).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::shrink::ShrinkWhenSparse;

/// Per item uid: (type, phase) and the open job this host picked up, with when.
#[derive(Debug, Default)]
pub struct ObservedItems {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    items: HashMap<String, Observed>,
    /// Each type once: the host serves few types and many items.
    kinds: Vec<Arc<str>>,
}

#[derive(Debug)]
struct Observed {
    /// Shared with every item of the type: the host serves few types and many items.
    kind: Arc<str>,
    phase: String,
    job: Option<(String, Instant)>,
}

impl ObservedItems {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn saw(&self, uid: &str, kind: &str, phase: &str) {
        let mut guard = self.lock();
        let Inner { items, kinds } = &mut *guard;
        if let Some(o) = items.get_mut(uid) {
            if o.phase != phase {
                o.phase = phase.to_string();
            }
            return;
        }
        let kind = match kinds.iter().find(|k| &***k == kind) {
            Some(k) => k.clone(),
            None => {
                kinds.push(Arc::from(kind));
                kinds[kinds.len() - 1].clone()
            }
        };
        items.insert(
            uid.to_string(),
            Observed {
                kind,
                phase: phase.to_string(),
                job: None,
            },
        );
    }

    pub fn job_started(&self, uid: &str, job_id: &str) {
        if let Some(o) = self.lock().items.get_mut(uid) {
            o.job = Some((job_id.to_string(), Instant::now()));
        }
    }

    /// Seconds since this host picked up job `job_id` of the item, if it did; the job is let go.
    pub fn job_finished(&self, uid: &str, job_id: &str) -> Option<f64> {
        let mut m = self.lock();
        let o = m.items.get_mut(uid)?;
        match o.job.take() {
            Some((id, at)) if id == job_id => Some(at.elapsed().as_secs_f64()),
            _ => None,
        }
    }

    pub fn remove(&self, uid: &str) {
        let mut m = self.lock();
        m.items.remove(uid);
        m.items.shrink_when_sparse();
    }

    /// Items by (type, phase).
    pub fn by_phase(&self) -> Vec<([String; 2], u64)> {
        let mut counts: HashMap<(&str, &str), u64> = HashMap::new();
        let m = self.lock();
        for o in m.items.values() {
            *counts.entry((&o.kind, &o.phase)).or_default() += 1;
        }
        let mut out: Vec<_> = counts
            .into_iter()
            .map(|((k, p), n)| ([k.to_string(), p.to_string()], n))
            .collect();
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_count_by_their_last_phase_and_leave_when_removed() {
        let o = ObservedItems::default();
        o.saw("a", "mock", "Init");
        o.saw("b", "mock", "Succeeded");
        o.saw("a", "mock", "Succeeded");
        o.saw("c", "helm", "Failed");
        assert_eq!(
            o.by_phase(),
            vec![
                (["helm".into(), "Failed".into()], 1),
                (["mock".into(), "Succeeded".into()], 2)
            ]
        );
        o.remove("b");
        o.remove("c");
        assert_eq!(o.by_phase(), vec![(["mock".into(), "Succeeded".into()], 1)]);
    }

    #[test]
    fn a_job_is_timed_from_its_pickup_only_for_the_same_job() {
        let o = ObservedItems::default();
        o.saw("a", "mock", "Init");
        o.job_started("a", "j1");
        assert_eq!(o.job_finished("a", "j2"), None);
        o.job_started("a", "j1");
        assert!(o.job_finished("a", "j1").is_some_and(|s| s < 5.0));
        assert_eq!(o.job_finished("a", "j1"), None, "a job is timed once");
    }
}
