//! Schedules as robfig/cron v3 `ParseStandard` and `Every` define them, evaluated in UTC on
//! whole Unix seconds.
//!
//! Owns: parsing a `cron` string (5 fields, descriptors, `@every`, a `TZ=UTC` prefix) and
//! `every` durations, and computing the next activation. Must not touch: the item, the
//! clock or the hook result (`lib.rs`).

use crate::duration::parse_go_duration;
use crate::time::UtcSecond;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

const NANOS_PER_SEC: i64 = 1_000_000_000;

/// A parsed continuous reconcile schedule (robfig `Schedule`).
#[derive(Debug, Clone)]
pub enum Schedule {
    /// A crontab schedule (5 fields or a calendar descriptor), evaluated in UTC.
    Cron(Box<Cron>),
    /// robfig `ConstantDelaySchedule`: `next(t) = t truncated to seconds + delay`.
    Every {
        /// The delay in whole seconds (at least 1).
        delay_secs: i64,
    },
}

impl Schedule {
    /// robfig `Every(d)`: sub-second parts are truncated, anything below one second
    /// becomes one second (so `1500ms` → 1s, `300ms` → 1s, `-5s` → 1s).
    pub fn every(nanos: i64) -> Self {
        Schedule::Every {
            delay_secs: nanos.max(NANOS_PER_SEC) / NANOS_PER_SEC,
        }
    }

    /// The first activation strictly after the second `t` (Unix seconds, UTC); `None` if
    /// the schedule has none (a cron pattern that never matches, e.g. `0 0 30 2 *`).
    ///
    /// Both robfig schedules ignore the sub-second part of their input, so callers pass
    /// whole seconds (floored) and get whole seconds back.
    pub fn next(&self, t: i64) -> Option<i64> {
        match self {
            Schedule::Every { delay_secs } => t.checked_add(*delay_secs),
            Schedule::Cron(cron) => cron
                .find_next_occurrence(&UtcSecond(t), false)
                .ok()
                .map(|next| next.0),
        }
    }
}

/// Parses `spec` as robfig's `ParseStandard` does: an optional `TZ=`/`CRON_TZ=` prefix
/// (only UTC is supported), then a descriptor (`@yearly`, `@annually`, `@monthly`,
/// `@weekly`, `@daily`, `@midnight`, `@hourly`, `@every <duration>`) or exactly five fields
/// (minute hour day-of-month month day-of-week, names allowed in month and day-of-week).
/// Errors are human readable and close to robfig's.
pub fn parse_cron(spec: &str) -> Result<Schedule, String> {
    if spec.is_empty() {
        return Err("empty spec string".into());
    }
    let mut spec = spec;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        let eq = spec.find('=').unwrap_or_default();
        let space = spec
            .find(' ')
            .ok_or_else(|| format!("missing schedule after time zone in {spec:?}"))?;
        let zone = &spec[eq + 1..space];
        if !matches!(
            zone,
            "UTC" | "Etc/UTC" | "Etc/UCT" | "UCT" | "Zulu" | "Etc/Zulu"
        ) {
            return Err(format!(
                "provided bad location {zone}: only UTC is supported (schedules are evaluated in UTC)"
            ));
        }
        spec = spec[space..].trim();
    }
    if spec.starts_with('@') {
        return parse_descriptor(spec);
    }
    let mut fields: Vec<String> = spec.split_whitespace().map(str::to_owned).collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: {spec}",
            fields.len()
        ));
    }
    for (i, field) in fields.iter_mut().enumerate() {
        *field = normalise_field(i, field)?;
    }
    pattern(&fields.join(" "))
}

/// Brings one robfig field into the form croner reads the same way, and rejects croner's
/// extensions that robfig does not know (`L`, `W`, `#`, a `+` prefix).
fn normalise_field(index: usize, field: &str) -> Result<String, String> {
    const DOM: usize = 2;
    const DOW: usize = 4;
    // robfig reads `?` as `*` in every field; croner only in the day fields.
    let mut out = field.replace('?', "*");
    if index == DOM && out.bytes().any(|b| b.is_ascii_alphabetic()) {
        return Err(format!("failed to parse int from {field}"));
    }
    if index == DOW && (out.contains(['#', '+']) || out.to_ascii_uppercase().contains('L')) {
        return Err(format!("failed to parse int from {field}"));
    }
    // robfig keeps a day field with step 1 unrestricted (`*/1` is `*`), which decides
    // whether day-of-month and day-of-week are AND-ed or OR-ed.
    if (index == DOM || index == DOW) && out == "*/1" {
        out = "*".into();
    }
    Ok(out)
}

fn parse_descriptor(spec: &str) -> Result<Schedule, String> {
    // robfig matches descriptors case-sensitively.
    let fields = match spec {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        _ => {
            if let Some(duration) = spec.strip_prefix("@every ") {
                let nanos = parse_go_duration(duration)
                    .map_err(|e| format!("failed to parse duration {spec}: {e}"))?;
                return Ok(Schedule::every(nanos));
            }
            return Err(format!("unrecognized descriptor: {spec}"));
        }
    };
    pattern(fields)
}

fn pattern(fields: &str) -> Result<Schedule, String> {
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        // robfig reads `5/15` as `5-59/15`.
        .sloppy_ranges(true)
        .build()
        .parse(fields)
        .map(|cron| Schedule::Cron(Box::new(cron)))
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(rfc3339: &str) -> i64 {
        crate::time::parse_rfc3339(rfc3339).unwrap()
    }

    fn next(spec: &str, from: &str) -> Option<i64> {
        parse_cron(spec).unwrap().next(at(from))
    }

    #[test]
    fn standard_patterns_step_to_the_next_match_in_utc() {
        let from = "2026-03-10T12:02:30Z";
        assert_eq!(next("*/5 * * * *", from), Some(at("2026-03-10T12:05:00Z")));
        assert_eq!(next("0 9 * * MON", from), Some(at("2026-03-16T09:00:00Z")));
        assert_eq!(next("5/15 * * * *", from), Some(at("2026-03-10T12:05:00Z")));
        assert_eq!(next("0 0 ? * *", from), Some(at("2026-03-11T00:00:00Z")));
        // Strictly after: a matching instant is not its own next activation.
        assert_eq!(
            next("*/5 * * * *", "2026-03-10T12:05:00Z"),
            Some(at("2026-03-10T12:10:00Z"))
        );
    }

    #[test]
    fn restricted_day_of_month_and_day_of_week_are_or_ed_like_robfig() {
        // 2026-03-10 is a Tuesday: the 13th (Friday) comes after Wednesday the 11th.
        let from = "2026-03-10T12:00:00Z";
        assert_eq!(next("0 0 13 * WED", from), Some(at("2026-03-11T00:00:00Z")));
        // `*/1` keeps the day of month unrestricted, so the weekday alone decides.
        assert_eq!(
            next("0 0 */1 * FRI", from),
            Some(at("2026-03-13T00:00:00Z"))
        );
    }

    #[test]
    fn descriptors_and_every() {
        let from = "2026-03-10T12:02:30Z";
        assert_eq!(next("@yearly", from), Some(at("2027-01-01T00:00:00Z")));
        assert_eq!(next("@annually", from), Some(at("2027-01-01T00:00:00Z")));
        assert_eq!(next("@monthly", from), Some(at("2026-04-01T00:00:00Z")));
        assert_eq!(next("@weekly", from), Some(at("2026-03-15T00:00:00Z")));
        assert_eq!(next("@daily", from), Some(at("2026-03-11T00:00:00Z")));
        assert_eq!(next("@midnight", from), Some(at("2026-03-11T00:00:00Z")));
        assert_eq!(next("@hourly", from), Some(at("2026-03-10T13:00:00Z")));
        assert_eq!(next("@every 90s", from), Some(at("2026-03-10T12:04:00Z")));
        assert_eq!(
            next("@every 1500ms", from),
            Some(at("2026-03-10T12:02:31Z"))
        );
        assert_eq!(
            next("TZ=UTC 0 6 * * *", from),
            Some(at("2026-03-11T06:00:00Z"))
        );
    }

    #[test]
    fn a_pattern_that_never_matches_has_no_next_activation() {
        assert_eq!(next("0 0 30 2 *", "2026-03-10T12:00:00Z"), None);
    }

    #[test]
    fn what_parse_standard_rejects_is_rejected() {
        for bad in [
            "",
            "* * * *",
            "0 * * * * *",
            "61 * * * *",
            "* * 32 * *",
            "*/0 * * * *",
            "0 0 L * *",
            "0 0 15W * *",
            "0 0 * * 5L",
            "0 0 * * 5#2",
            "0 0 1 * +MON",
            "@Daily",
            "@fortnightly",
            "@every 10",
            "TZ=Europe/Berlin 0 6 * * *",
            "TZ=UTC",
            "hello world",
        ] {
            assert!(parse_cron(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn every_truncates_to_whole_seconds_with_a_one_second_minimum() {
        let delay = |nanos| match Schedule::every(nanos) {
            Schedule::Every { delay_secs } => delay_secs,
            Schedule::Cron(_) => unreachable!(),
        };
        assert_eq!(delay(90 * NANOS_PER_SEC), 90);
        assert_eq!(delay(2_900_000_000), 2);
        assert_eq!(delay(300_000_000), 1);
        assert_eq!(delay(-5 * NANOS_PER_SEC), 1);
    }
}
