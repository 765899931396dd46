//! UTC on whole Unix seconds, without a date library: RFC 3339 parsing and the calendar
//! croner needs (`croner::CronDateTime` for [`UtcSecond`]).
//!
//! Owns: the conversions between Unix seconds and the proleptic Gregorian calendar in UTC.
//! Must not touch: clocks (the host's clock comes through `Ctx`).

use core::cmp::Ordering;
use croner::errors::CronError;
use croner::{CivilDate, CivilDateTime, CivilTime, CronDateTime, Resolution, Weekday};

const SECS_PER_DAY: i64 = 86_400;

/// An instant in UTC, in whole seconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct UtcSecond(pub i64);

/// Days since 1970-01-01 of a civil date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

impl CronDateTime for UtcSecond {
    fn to_civil(&self) -> CivilDateTime {
        let (days, secs) = (
            self.0.div_euclid(SECS_PER_DAY),
            self.0.rem_euclid(SECS_PER_DAY),
        );
        let (year, month, day) = civil_from_days(days);
        let secs = secs as u32;
        CivilDateTime::new(
            CivilDate::from_parts_unchecked(year as i32, month, day),
            CivilTime::from_parts_unchecked(secs / 3600, secs % 3600 / 60, secs % 60),
        )
    }

    fn civil_weekday(&self) -> Weekday {
        // 1970-01-01 was a Thursday (4 days from Sunday).
        Weekday::from_days_from_sunday((self.0.div_euclid(SECS_PER_DAY) + 4).rem_euclid(7) as u32)
    }

    fn resolve_civil(&self, civil: CivilDateTime) -> Result<Resolution<Self>, CronError> {
        let days = days_from_civil(i64::from(civil.year()), civil.month(), civil.day());
        let secs = i64::from(civil.hour() * 3600 + civil.minute() * 60 + civil.second());
        Ok(Resolution::Single(UtcSecond(days * SECS_PER_DAY + secs)))
    }

    fn checked_add_seconds(&self, seconds: i64) -> Option<Self> {
        self.0.checked_add(seconds).map(UtcSecond)
    }

    fn cmp_instant(&self, other: &Self) -> Ordering {
        self.0.cmp(&other.0)
    }
}

/// Parses an RFC 3339 timestamp (`2026-03-10T12:02:30Z`, `…T12:02:30.5+01:00`) as Go's
/// `time.RFC3339` does (fractional seconds allowed), into Unix seconds, fraction truncated.
pub fn parse_rfc3339(s: &str) -> Result<i64, String> {
    let bad = || format!("{s:?} is not an RFC 3339 timestamp");
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Result<u32, String> {
        let digits = b.get(from..from + len).ok_or_else(bad)?;
        if !digits.iter().all(u8::is_ascii_digit) {
            return Err(bad());
        }
        Ok(digits.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0')))
    };
    let sep = |at: usize, allowed: &[u8]| {
        b.get(at)
            .filter(|c| allowed.contains(c))
            .map(|_| ())
            .ok_or_else(bad)
    };
    let year = i64::from(num(0, 4)?);
    sep(4, b"-")?;
    let month = num(5, 2)?;
    sep(7, b"-")?;
    let day = num(8, 2)?;
    sep(10, b"Tt")?;
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    sep(13, b":")?;
    sep(16, b":")?;
    let mut rest = 19;
    if b.get(rest) == Some(&b'.') {
        let digits = b[rest + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits == 0 {
            return Err(bad());
        }
        rest += 1 + digits;
    }
    let offset = match b.get(rest) {
        Some(b'Z' | b'z') if b.len() == rest + 1 => 0,
        Some(sign @ (b'+' | b'-')) if b.len() == rest + 6 => {
            sep(rest + 3, b":")?;
            let (h, m) = (num(rest + 1, 2)?, num(rest + 4, 2)?);
            if h > 23 || m > 59 {
                return Err(bad());
            }
            let secs = i64::from(h * 3600 + m * 60);
            if *sign == b'-' { -secs } else { secs }
        }
        _ => return Err(bad()),
    };
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return Err(bad());
    }
    Ok(days_from_civil(year, month, day) * SECS_PER_DAY
        + i64::from(hour * 3600 + minute * 60 + second)
        - offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_timestamps_parse_to_unix_seconds_like_jiff() {
        for ts in [
            "1970-01-01T00:00:00Z",
            "2026-03-10T12:02:30Z",
            "2026-03-10T12:02:30.999Z",
            "2026-03-10t12:02:30.1z",
            "2000-02-29T23:59:59+01:00",
            "2024-12-31T23:00:00-05:30",
            "1969-12-31T23:59:59.5Z",
        ] {
            let expected = ts.to_uppercase().parse::<jiff::Timestamp>().unwrap();
            // jiff floors towards the past for `as_second` only on whole seconds; compare
            // with the floored value.
            let floored = expected.as_millisecond().div_euclid(1000);
            assert_eq!(parse_rfc3339(ts), Ok(floored), "{ts}");
        }
    }

    #[test]
    fn malformed_timestamps_are_rejected() {
        for bad in [
            "",
            "yesterday",
            "2026-03-10",
            "2026-03-10 12:02:30Z",
            "2026-03-10T12:02:30",
            "2026-03-10T12:02:30.Z",
            "2026-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-03-10T24:00:00Z",
            "2026-03-10T12:60:00Z",
            "2026-03-10T12:00:60Z",
            "2026-03-10T12:00:00+0100",
            "2026-03-10T12:00:00Z ",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn calendar_round_trips_and_weekdays() {
        for secs in [
            0,
            951_782_400,
            1_773_144_150,
            -1,
            -86_400 * 366,
            4_102_444_800,
        ] {
            let t = UtcSecond(secs);
            let Resolution::Single(back) = t.resolve_civil(t.to_civil()).unwrap() else {
                panic!("UTC has no folds or gaps");
            };
            assert_eq!(back, t);
        }
        // 2026-03-10 is a Tuesday, 1970-01-01 a Thursday, 1969-12-31 a Wednesday.
        assert_eq!(UtcSecond(1_773_144_150).civil_weekday(), Weekday::Tuesday);
        assert_eq!(UtcSecond(0).civil_weekday(), Weekday::Thursday);
        assert_eq!(UtcSecond(-1).civil_weekday(), Weekday::Wednesday);
    }
}
