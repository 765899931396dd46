//! Extension hooks: the hook types, their results, and how several results are aggregated
//! (the seed `extension-hooks.txt`; contract section 4).
//!
//! This module is the pure core: [`HookType`], [`HookResult`] and [`aggregate`]. Running hook
//! plugins at their points of the flow builds on it. Where the seed and Landscaper's code
//! disagree (the code drops `Requeue`), the seed is followed.

use std::time::Duration;

/// The points of the reconcile flow where hooks run, in flow order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HookType {
    Start,
    DuringResponsibilityCheck,
    AfterResponsibilityCheck,
    ShouldReconcile,
    BeforeAnyReconcile,
    BeforeAbort,
    BeforeForceReconcile,
    BeforeDelete,
    BeforeReconcile,
    End,
}

impl HookType {
    pub const ALL: [HookType; 10] = [
        HookType::Start,
        HookType::DuringResponsibilityCheck,
        HookType::AfterResponsibilityCheck,
        HookType::ShouldReconcile,
        HookType::BeforeAnyReconcile,
        HookType::BeforeAbort,
        HookType::BeforeForceReconcile,
        HookType::BeforeDelete,
        HookType::BeforeReconcile,
        HookType::End,
    ];

    /// The exact string Landscaper uses.
    pub fn as_str(self) -> &'static str {
        match self {
            HookType::Start => "Start",
            HookType::DuringResponsibilityCheck => "DuringResponsibilityCheck",
            HookType::AfterResponsibilityCheck => "AfterResponsibilityCheck",
            HookType::ShouldReconcile => "ShouldReconcile",
            HookType::BeforeAnyReconcile => "BeforeAnyReconcile",
            HookType::BeforeAbort => "BeforeAbort",
            HookType::BeforeForceReconcile => "BeforeForceReconcile",
            HookType::BeforeDelete => "BeforeDelete",
            HookType::BeforeReconcile => "BeforeReconcile",
            HookType::End => "End",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// For these two types `AbortReconcile` is AND-ed: `false` means "enforce continuation".
    pub fn inverted_abort(self) -> bool {
        matches!(
            self,
            HookType::DuringResponsibilityCheck | HookType::ShouldReconcile
        )
    }
}

/// What one hook (or an aggregate of hooks) says about the reconcile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HookResult {
    /// Stop the reconcile after this stage (with the two special types' semantics).
    pub abort_reconcile: bool,
    /// Requeue the item.
    pub requeue: bool,
    /// Requeue after this delay; `None` (or zero) = unset.
    pub requeue_after: Option<Duration>,
}

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

/// The outcome of running the hooks of one type: the aggregate, or the first hook error (then
/// the results are discarded and the reconcile returns an empty result with the error).
pub type HookOutcome<E> = Result<Option<HookResult>, E>;

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
}
