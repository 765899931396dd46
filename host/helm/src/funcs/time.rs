//! Sprig date functions (`now date dateInZone htmlDate unixEpoch toDate duration ago …`) with Go
//! reference-layout formatting, in UTC (wasm has no time zone database).

use std::collections::HashMap;
use std::rc::Rc;

use super::args::{arg_str, to_i64, want, want_min};
use crate::template::{Func, FuncError};
use crate::value::{Object, Value};

/// A `time.Time` (UTC).
#[derive(Debug, Clone, Copy)]
pub struct Time {
    secs: i64,
    nanos: u32,
}

impl Object for Time {
    fn type_name(&self) -> &'static str {
        "time.Time"
    }
    fn field(&self, name: &str) -> Option<Value> {
        match name {
            "Unix" => Some(Value::Int(self.secs)),
            "Year" => Some(Value::Int(civil(self.secs).0)),
            "String" => Some(Value::from(self.go_string())),
            _ => None,
        }
    }
    fn to_value(&self) -> Value {
        Value::from(self.go_string())
    }
}

impl Time {
    fn now() -> Time {
        #[allow(clippy::disallowed_methods)]
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Time {
            secs: d.as_secs() as i64,
            nanos: d.subsec_nanos(),
        }
    }
    fn go_string(&self) -> String {
        format(self, "2006-01-02 15:04:05.999999999 -0700 MST")
    }
}

fn civil(secs: i64) -> (i64, u32, u32, u32, u32, u32, u32) {
    let days = secs.div_euclid(86400);
    let rem = secs.rem_euclid(86400);
    // Howard Hinnant's civil_from_days
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = if m <= 2 { y + 1 } else { y };
    let wd = ((days + 4).rem_euclid(7)) as u32; // 1970-01-01 was a Thursday
    (
        y,
        m,
        d,
        (rem / 3600) as u32,
        ((rem % 3600) / 60) as u32,
        (rem % 60) as u32,
        wd,
    )
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 } as i64;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// Formats with a Go reference layout.
fn format(t: &Time, layout: &str) -> String {
    let (y, mo, d, h, mi, s, wd) = civil(t.secs);
    let mut out = String::new();
    let mut rest = layout;
    type Tok<'a> = (&'a str, &'a dyn Fn(&mut String));
    let toks: &[Tok] = &[
        ("January", &|o: &mut String| {
            o.push_str(MONTHS[mo as usize - 1])
        }),
        ("Jan", &|o: &mut String| {
            o.push_str(&MONTHS[mo as usize - 1][..3])
        }),
        ("Monday", &|o: &mut String| o.push_str(DAYS[wd as usize])),
        ("Mon", &|o: &mut String| o.push_str(&DAYS[wd as usize][..3])),
        ("MST", &|o: &mut String| o.push_str("UTC")),
        ("2006", &|o: &mut String| o.push_str(&format!("{y:04}"))),
        ("-07:00", &|o: &mut String| o.push_str("+00:00")),
        ("-0700", &|o: &mut String| o.push_str("+0000")),
        ("-07", &|o: &mut String| o.push_str("+00")),
        ("Z07:00", &|o: &mut String| o.push('Z')),
        ("Z0700", &|o: &mut String| o.push('Z')),
        (".000000000", &|o: &mut String| {
            o.push_str(&format!(".{:09}", t.nanos))
        }),
        (".999999999", &|o: &mut String| {
            if t.nanos > 0 {
                o.push_str(format!(".{:09}", t.nanos).trim_end_matches('0'))
            }
        }),
        (".000000", &|o: &mut String| {
            o.push_str(&format!(".{:06}", t.nanos / 1000))
        }),
        (".000", &|o: &mut String| {
            o.push_str(&format!(".{:03}", t.nanos / 1_000_000))
        }),
        ("01", &|o: &mut String| o.push_str(&format!("{mo:02}"))),
        ("02", &|o: &mut String| o.push_str(&format!("{d:02}"))),
        ("_2", &|o: &mut String| o.push_str(&format!("{d:>2}"))),
        ("06", &|o: &mut String| {
            o.push_str(&format!("{:02}", y % 100))
        }),
        ("15", &|o: &mut String| o.push_str(&format!("{h:02}"))),
        ("03", &|o: &mut String| {
            o.push_str(&format!("{:02}", if h % 12 == 0 { 12 } else { h % 12 }))
        }),
        ("04", &|o: &mut String| o.push_str(&format!("{mi:02}"))),
        ("05", &|o: &mut String| o.push_str(&format!("{s:02}"))),
        ("PM", &|o: &mut String| {
            o.push_str(if h >= 12 { "PM" } else { "AM" })
        }),
        ("pm", &|o: &mut String| {
            o.push_str(if h >= 12 { "pm" } else { "am" })
        }),
        ("1", &|o: &mut String| o.push_str(&mo.to_string())),
        ("2", &|o: &mut String| o.push_str(&d.to_string())),
        ("3", &|o: &mut String| {
            o.push_str(&(if h % 12 == 0 { 12 } else { h % 12 }).to_string())
        }),
        ("4", &|o: &mut String| o.push_str(&mi.to_string())),
        ("5", &|o: &mut String| o.push_str(&s.to_string())),
    ];
    'outer: while !rest.is_empty() {
        for (tok, f) in toks {
            if rest.starts_with(tok) {
                f(&mut out);
                rest = &rest[tok.len()..];
                continue 'outer;
            }
        }
        let c = rest.chars().next().unwrap();
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

fn to_time(v: &Value) -> Time {
    match v {
        Value::Obj(o) if o.type_name() == "time.Time" => {
            let secs = to_i64(&o.field("Unix").unwrap_or_default());
            Time { secs, nanos: 0 }
        }
        Value::Int(i) => Time { secs: *i, nanos: 0 },
        Value::Float(f) => Time {
            secs: *f as i64,
            nanos: 0,
        },
        _ => Time::now(),
    }
}

fn parse_date(layout: &str, s: &str) -> Option<Time> {
    // supports the common "2006-01-02" and RFC3339-like layouts
    let _ = layout;
    let (date, time) = s.split_once(['T', ' ']).unwrap_or((s, ""));
    let mut dp = date.split('-');
    let y: i64 = dp.next()?.parse().ok()?;
    let m: u32 = dp.next()?.parse().ok()?;
    let d: u32 = dp.next()?.parse().ok()?;
    let mut secs = days_from_civil(y, m, d) * 86400;
    if !time.is_empty() {
        let t = time.trim_end_matches('Z');
        let mut tp = t.split(':');
        let h: i64 = tp.next()?.parse().ok()?;
        let mi: i64 = tp.next().unwrap_or("0").parse().ok()?;
        let sec: f64 = tp.next().unwrap_or("0").parse().ok()?;
        secs += h * 3600 + mi * 60 + sec as i64;
    }
    Some(Time { secs, nanos: 0 })
}

fn go_duration(secs: i64) -> String {
    if secs == 0 {
        return "0s".into();
    }
    let neg = secs < 0;
    let s = secs.unsigned_abs();
    let (h, m, sec) = (s / 3600, (s % 3600) / 60, s % 60);
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    if h > 0 {
        out.push_str(&format!("{h}h{m}m{sec}s"));
    } else if m > 0 {
        out.push_str(&format!("{m}m{sec}s"));
    } else {
        out.push_str(&format!("{sec}s"));
    }
    out
}

pub(super) fn register(m: &mut HashMap<&'static str, Func>) {
    m.insert("now", |_, _| Ok(Value::Obj(Rc::new(Time::now()))));
    m.insert("date", |_, a| {
        want("date", a, 2)?;
        Ok(Value::from(format(&to_time(&a[1]), arg_str(&a[0])?)))
    });
    m.insert("dateInZone", |_, a| {
        want("dateInZone", a, 3)?;
        Ok(Value::from(format(&to_time(&a[1]), arg_str(&a[0])?)))
    });
    m.insert("htmlDate", |_, a| {
        want("htmlDate", a, 1)?;
        Ok(Value::from(format(&to_time(&a[0]), "2006-01-02")))
    });
    m.insert("htmlDateInZone", |_, a| {
        want("htmlDateInZone", a, 2)?;
        Ok(Value::from(format(&to_time(&a[0]), "2006-01-02")))
    });
    m.insert("unixEpoch", |_, a| {
        want("unixEpoch", a, 1)?;
        Ok(Value::from(to_time(&a[0]).secs.to_string()))
    });
    m.insert("toDate", |_, a| {
        want("toDate", a, 2)?;
        let t = parse_date(arg_str(&a[0])?, arg_str(&a[1])?).unwrap_or(Time {
            secs: -62135596800,
            nanos: 0,
        });
        Ok(Value::Obj(Rc::new(t)))
    });
    m.insert("mustToDate", |_, a| {
        want("mustToDate", a, 2)?;
        let t = parse_date(arg_str(&a[0])?, arg_str(&a[1])?)
            .ok_or_else(|| FuncError::call(format!("parsing time {:?}", a[1].to_go_string())))?;
        Ok(Value::Obj(Rc::new(t)))
    });
    m.insert("duration", |_, a| {
        want("duration", a, 1)?;
        Ok(Value::from(go_duration(to_i64(&a[0]))))
    });
    m.insert("durationRound", |_, a| {
        want("durationRound", a, 1)?;
        Ok(Value::from(go_duration(to_i64(&a[0]))))
    });
    m.insert("ago", |_, a| {
        want("ago", a, 1)?;
        let t = to_time(&a[0]);
        Ok(Value::from(go_duration(Time::now().secs - t.secs)))
    });
    m.insert("dateModify", |_, a| {
        want_min("dateModify", a, 2)?;
        Ok(a[1].clone())
    });
    m.insert("mustDateModify", |_, a| {
        want_min("mustDateModify", a, 2)?;
        Ok(a[1].clone())
    });
}
