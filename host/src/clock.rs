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

#[cfg(test)]
mod tests {
    #[test]
    fn now_has_whole_seconds_and_utc() {
        let n = super::now();
        assert!(n.ends_with('Z') && !n.contains('.'), "{n}");
    }
}
