//! The seed's aggregation rules for the results of the hooks of one type, and the per-reconcile
//! fold of every stage's aggregate ([`Accumulated`]).
//!
//! Owns: [`aggregate`] (a pure function with property tests) and [`Accumulated`].
//! Must not touch: hook plugins or their registrations (`set.rs` runs them and calls this).

use std::time::Duration;

use sdk_guest::{HookResult, HookType};

/// Aggregates the results of the hooks of one type, exactly as the seed says:
/// all `None` → `None`; exactly one non-`None` → a copy of it; otherwise `abort_reconcile` is
/// OR-ed (AND-ed for `DuringResponsibilityCheck` and `ShouldReconcile`), `requeue` is OR-ed,
/// `requeue_after` is the smallest value > 0, and `requeue == true` forces `requeue_after` to 0
/// (an immediate requeue, represented as `None`).
pub fn aggregate(hook_type: HookType, results: &[Option<HookResult>]) -> Option<HookResult> {
    let present: Vec<&HookResult> = results.iter().flatten().collect();
    match present.as_slice() {
        [] => None,
        [one] => Some(**one),
        many => {
            let abort = if hook_type.inverted_abort() {
                many.iter().all(|r| r.abort_reconcile)
            } else {
                many.iter().any(|r| r.abort_reconcile)
            };
            let requeue = many.iter().any(|r| r.requeue);
            let requeue_after = if requeue {
                None
            } else {
                many.iter()
                    .filter_map(|r| r.requeue_after)
                    .filter(|d| !d.is_zero())
                    .min()
            };
            Some(HookResult {
                abort_reconcile: abort,
                requeue,
                requeue_after,
            })
        }
    }
}

/// The hook result of one reconcile so far: every stage's aggregate is folded in (with the
/// normal rules), so the reconcile ends with one requeue decision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Accumulated(Option<HookResult>);

impl Accumulated {
    /// Folds a stage's aggregate in.
    pub fn add(&mut self, stage: Option<HookResult>) {
        self.0 = aggregate(HookType::End, &[self.0, stage]);
    }

    /// Whether the flow stops after the current stage.
    pub fn aborted(&self) -> bool {
        self.0.is_some_and(|r| r.abort_reconcile)
    }

    /// After `DuringResponsibilityCheck` and `ShouldReconcile` the stage's verdict has been
    /// used; their `abort_reconcile` must not stop later stages.
    pub fn clear_abort(&mut self) {
        if let Some(r) = &mut self.0 {
            r.abort_reconcile = false;
        }
    }

    /// When to look at the item again: the flow's own answer (`None` = only on change),
    /// shortened by what the hooks asked for (`requeue` = now).
    pub fn requeue(&self, flow: Option<Duration>) -> Option<Duration> {
        let hooks = match self.0 {
            Some(r) if r.requeue => Some(Duration::ZERO),
            Some(r) => r.requeue_after.filter(|d| !d.is_zero()),
            None => None,
        };
        match (flow, hooks) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn result() -> impl Strategy<Value = Option<HookResult>> {
        proptest::option::of(
            (
                any::<bool>(),
                any::<bool>(),
                proptest::option::of(0u64..5_000),
            )
                .prop_map(|(abort, requeue, after)| HookResult {
                    abort_reconcile: abort,
                    requeue,
                    requeue_after: after.map(Duration::from_millis),
                }),
        )
    }

    fn result_without_requeue() -> impl Strategy<Value = Option<HookResult>> {
        result().prop_map(|r| {
            r.map(|r| HookResult {
                requeue: false,
                ..r
            })
        })
    }

    fn hook_type() -> impl Strategy<Value = HookType> {
        proptest::sample::select(HookType::ALL.to_vec())
    }

    proptest! {
        #[test]
        fn all_nil_is_nil(t in hook_type(), n in 0usize..6) {
            prop_assert_eq!(aggregate(t, &vec![None; n]), None);
        }

        #[test]
        fn exactly_one_result_is_copied(t in hook_type(), r in result().prop_filter("some", Option::is_some), nils in 0usize..4, at in 0usize..5) {
            let mut results = vec![None; nils];
            results.insert(at.min(nils), r);
            prop_assert_eq!(aggregate(t, &results), r);
        }

        #[test]
        fn abort_is_or_except_for_the_two_special_types(t in hook_type(), rs in proptest::collection::vec(result(), 2..6)) {
            let present: Vec<HookResult> = rs.iter().flatten().copied().collect();
            prop_assume!(present.len() >= 2);
            let agg = aggregate(t, &rs).unwrap();
            let expected = if t == HookType::DuringResponsibilityCheck || t == HookType::ShouldReconcile {
                present.iter().all(|r| r.abort_reconcile)
            } else {
                present.iter().any(|r| r.abort_reconcile)
            };
            prop_assert_eq!(agg.abort_reconcile, expected);
        }

        #[test]
        fn requeue_is_or_and_forces_an_immediate_requeue(t in hook_type(), rs in proptest::collection::vec(result(), 2..6)) {
            let present: Vec<HookResult> = rs.iter().flatten().copied().collect();
            prop_assume!(present.len() >= 2);
            let agg = aggregate(t, &rs).unwrap();
            prop_assert_eq!(agg.requeue, present.iter().any(|r| r.requeue));
            if agg.requeue {
                prop_assert_eq!(agg.requeue_after, None);
            }
        }

        #[test]
        fn requeue_after_is_the_smallest_positive_value(t in hook_type(), rs in proptest::collection::vec(result_without_requeue(), 2..6)) {
            let present: Vec<HookResult> = rs.iter().flatten().copied().collect();
            prop_assume!(present.len() >= 2);
            let agg = aggregate(t, &rs).unwrap();
            let positive: Vec<Duration> = present.iter().filter_map(|r| r.requeue_after).filter(|d| !d.is_zero()).collect();
            prop_assert_eq!(agg.requeue_after, positive.iter().min().copied());
            if let Some(d) = agg.requeue_after {
                prop_assert!(!d.is_zero());
                prop_assert!(positive.iter().all(|p| *p >= d));
            }
        }
    }

    #[test]
    fn hook_type_names_are_landscapers() {
        for t in HookType::ALL {
            assert_eq!(HookType::parse(t.as_str()), Some(t));
        }
        assert_eq!(HookType::parse("Abort"), None);
    }

    #[test]
    fn examples_from_the_seed() {
        let r = |abort, requeue, after: Option<u64>| {
            Some(HookResult {
                abort_reconcile: abort,
                requeue,
                requeue_after: after.map(Duration::from_secs),
            })
        };
        // ShouldReconcile: one hook says "continue" → continuation is enforced.
        assert!(
            !aggregate(
                HookType::ShouldReconcile,
                &[r(true, false, None), r(false, false, None)]
            )
            .unwrap()
            .abort_reconcile
        );
        // Any other type: one abort aborts.
        assert!(
            aggregate(
                HookType::End,
                &[r(true, false, None), r(false, false, None)]
            )
            .unwrap()
            .abort_reconcile
        );
        // Smallest positive delay wins; zero counts as unset.
        assert_eq!(
            aggregate(
                HookType::End,
                &[
                    r(false, false, Some(0)),
                    r(false, false, Some(30)),
                    r(false, false, Some(10))
                ]
            )
            .unwrap()
            .requeue_after,
            Some(Duration::from_secs(10))
        );
    }

    fn r(abort: bool, requeue: bool, after_ms: Option<u64>) -> Option<HookResult> {
        Some(HookResult {
            abort_reconcile: abort,
            requeue,
            requeue_after: after_ms.map(Duration::from_millis),
        })
    }

    #[test]
    fn accumulated_stages_combine_with_the_flows_own_requeue() {
        let mut acc = Accumulated::default();
        assert_eq!(acc.requeue(None), None, "no hooks: the flow decides");
        assert_eq!(
            acc.requeue(Some(Duration::from_secs(5))),
            Some(Duration::from_secs(5))
        );
        acc.add(r(false, false, Some(30_000)));
        assert_eq!(acc.requeue(None), Some(Duration::from_secs(30)));
        assert_eq!(
            acc.requeue(Some(Duration::from_secs(5))),
            Some(Duration::from_secs(5))
        );
        acc.add(r(false, false, Some(2_000)));
        assert_eq!(
            acc.requeue(None),
            Some(Duration::from_secs(2)),
            "smallest wins"
        );
        acc.add(r(false, true, None));
        assert_eq!(
            acc.requeue(Some(Duration::from_secs(5))),
            Some(Duration::ZERO),
            "requeue = now"
        );
    }

    #[test]
    fn abort_stops_until_a_special_stage_has_used_it() {
        let mut acc = Accumulated::default();
        acc.add(None);
        assert!(!acc.aborted());
        acc.add(r(true, false, Some(1_000)));
        assert!(acc.aborted());
        acc.clear_abort();
        assert!(!acc.aborted());
        assert_eq!(
            acc.requeue(None),
            Some(Duration::from_secs(1)),
            "the requeue stays"
        );
    }
}
