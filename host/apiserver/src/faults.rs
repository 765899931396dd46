//! Fault injection (off by default): a probability of 409 Conflict or 500
//! InternalError answers on writes, of 503 ServiceUnavailable and 504 Timeout
//! answers on any request (a timed-out write *was* applied, as when a real
//! server's etcd commit outlives the request), of watch streams dropped
//! mid-way, and a delay before answering requests for chosen resources (a
//! hanging server). `deployer-host apiserver|dev --fault-*` set them by hand.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Probabilities in `0.0..=1.0`; all zero (the default) disables injection.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct FaultConfig {
    /// Delay before a request for one of [`delayed_resources`](Self::delayed_resources) is
    /// handled (get, list, writes; not watches). Zero (the default) disables it.
    pub response_delay: Duration,
    /// Qualified resources the delay applies to (as in [`crate::Stats::requests`], e.g.
    /// `configmaps`, `deployments.apps`); empty = every resource.
    pub delayed_resources: Vec<String>,
    /// Probability that a write (create/update/patch/delete) is answered 409 Conflict without being applied.
    pub write_conflict_probability: f64,
    /// Probability that a write is answered 500 InternalError without being applied.
    pub write_error_probability: f64,
    /// Probability that a request (not a watch) is answered 503 ServiceUnavailable without
    /// being handled.
    pub unavailable_probability: f64,
    /// Probability that a request (not a watch) is answered 504 Timeout; a write is applied
    /// first, so the client cannot tell whether it took effect.
    pub timeout_probability: f64,
    /// Probability, per delivered watch event, that the stream is closed right after it.
    pub watch_drop_probability: f64,
}

impl FaultConfig {
    /// True if any fault is switched on.
    pub fn any(&self) -> bool {
        *self != FaultConfig::default()
    }

    /// Checks every probability is within `0.0..=1.0`.
    pub fn validate(&self) -> Result<(), String> {
        for (name, p) in [
            ("write conflict", self.write_conflict_probability),
            ("write error", self.write_error_probability),
            ("unavailable", self.unavailable_probability),
            ("timeout", self.timeout_probability),
            ("watch drop", self.watch_drop_probability),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("{name} probability {p} is not within 0..=1"));
            }
        }
        Ok(())
    }
}

/// A small lock-free PRNG (splitmix64) for fault rolls.
#[derive(Debug)]
pub struct Dice(AtomicU64);

impl Dice {
    pub fn new(seed: u64) -> Self {
        Dice(AtomicU64::new(seed))
    }
    pub fn next_u64(&self) -> u64 {
        let mut z = self
            .0
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// True with probability `p`.
    pub fn roll(&self, p: f64) -> bool {
        p > 0.0 && ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dice_rolls_come_up_about_as_often_as_asked() {
        let dice = Dice::new(7);
        let hits = (0..100_000).filter(|_| dice.roll(0.05)).count();
        assert!((4_500..5_500).contains(&hits), "{hits} of 100000 at 5 %");
        assert!(!(0..1000).any(|_| dice.roll(0.0)));
        assert!((0..1000).all(|_| dice.roll(1.0)));
    }

    #[test]
    fn probabilities_outside_zero_to_one_are_refused() {
        let bad = FaultConfig {
            timeout_probability: 1.5,
            ..FaultConfig::default()
        };
        assert!(bad.validate().unwrap_err().contains("timeout"));
        assert!(FaultConfig::default().validate().is_ok());
        assert!(!FaultConfig::default().any());
        assert!(bad.any());
    }
}
