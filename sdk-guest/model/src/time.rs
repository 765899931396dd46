//! Tiny, dependency-free time formatting shared by guests and the host.
//!
//! Owns: RFC 3339 formatting of Unix milliseconds. Must not touch: clocks (see `ctx`).

/// Format Unix milliseconds as RFC 3339 UTC with seconds precision (`2026-01-01T00:00:00Z`),
/// the form Kubernetes uses for timestamps.
pub fn format_rfc3339(unix_millis: u64) -> String {
    let secs = unix_millis / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if mo <= 2 { y + 1 } else { y };
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}Z")
}

#[cfg(test)]
mod tests {
    use super::format_rfc3339;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(format_rfc3339(1_767_225_599_999), "2025-12-31T23:59:59Z");
        assert_eq!(format_rfc3339(1_767_225_600_000), "2026-01-01T00:00:00Z");
    }
}
