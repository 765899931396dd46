//! The host's one clock reading: "now" as a Kubernetes timestamp.
//!
//! Owns: formatting the current time the way every status field and SyncObject expects it
//! (RFC 3339, whole seconds). Contract functions never call it: they take `now` as an argument
//! so every rule is tested with fixed times; the controller, locking and dev mode call it.

/// Now, as a Kubernetes timestamp (RFC 3339, seconds).
pub fn now() -> String {
    let now = jiff::Timestamp::now();
    jiff::Timestamp::from_second(now.as_second())
        .unwrap_or(now)
        .to_string()
}

/// Seconds from a Kubernetes timestamp to now (`None`: not a timestamp, or in the future).
pub fn seconds_since(timestamp: &str) -> Option<f64> {
    let then: jiff::Timestamp = timestamp.parse().ok()?;
    let secs = jiff::Timestamp::now().duration_since(then).as_secs_f64();
    (secs >= 0.0).then_some(secs)
}

#[cfg(test)]
mod tests {
    #[test]
    fn now_has_whole_seconds_and_utc() {
        let n = super::now();
        assert!(n.ends_with('Z') && !n.contains('.'), "{n}");
    }

    #[test]
    fn seconds_since_a_past_timestamp_and_none_for_garbage_or_the_future() {
        let s = super::seconds_since("2020-01-01T00:00:00Z").unwrap();
        assert!(s > 1e8, "{s}");
        assert_eq!(super::seconds_since("yesterday"), None);
        assert_eq!(super::seconds_since("2999-01-01T00:00:00Z"), None);
    }
}
