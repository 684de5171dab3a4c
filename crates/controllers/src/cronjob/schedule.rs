//! Cron schedules as upstream reads them (robfig/cron's `ParseStandard`):
//! five fields (minute, hour, day of month, month, day of week) with
//! lists, ranges, steps, names and `?`, the `@yearly`/`@annually`,
//! `@monthly`, `@weekly`, `@daily`/`@midnight` and `@hourly` descriptors,
//! and a `TZ=`/`CRON_TZ=` prefix; times are walked in the schedule's time
//! zone. Also upstream's `mostRecentScheduleTime`: the latest missed
//! start and how many were missed.
//!
//! Pure functions; no I/O.

use std::time::Duration;

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

/// Why a schedule cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The text is not a schedule.
    #[error("{0}")]
    Syntax(String),
    /// The time zone is unknown.
    #[error("unknown time zone {0}")]
    TimeZone(String),
}

/// A parsed schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    minute: u64,
    hour: u64,
    dom: u64,
    month: u64,
    dow: u64,
    /// Day of month or day of week was `*`/`?`: both must match.
    and_days: bool,
    tz: TimeZone,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// Whether `text` starts with a `TZ=`/`CRON_TZ=` prefix.
pub fn has_tz_prefix(text: &str) -> bool {
    text.starts_with("TZ=") || text.starts_with("CRON_TZ=")
}

/// Reads `text` in the time zone named `zone` (the system's when
/// `None`, as kube-controller-manager uses its local time); a `TZ=`
/// prefix in the text wins.
pub fn parse(text: &str, zone: Option<&str>) -> Result<Schedule, Error> {
    let mut text = text.trim();
    let mut zone_name = zone.map(str::to_string);
    if has_tz_prefix(text) {
        let (prefix, rest) = text
            .split_once(char::is_whitespace)
            .ok_or_else(|| Error::Syntax(format!("provided bad location {text}")))?;
        zone_name = Some(
            prefix
                .split_once('=')
                .map(|(_, z)| z.to_string())
                .unwrap_or_default(),
        );
        text = rest.trim();
    }
    let tz = match zone_name.as_deref() {
        // No zone: the controller manager's own, as upstream.
        None | Some("Local") => TimeZone::system(),
        Some("") | Some("UTC") => TimeZone::UTC,
        Some(z) => jiff::tz::db()
            .get(z)
            .map_err(|_| Error::TimeZone(z.to_string()))?,
    };
    let expanded = match text {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        t if t.starts_with('@') => {
            return Err(Error::Syntax(format!("unrecognized descriptor: {t}")))
        }
        t => t,
    };
    let fields: Vec<&str> = expanded.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(Error::Syntax(format!(
            "expected exactly 5 fields, found {}: {expanded}",
            fields.len()
        )));
    }
    let (minute, _) = field(fields[0], 0, 59, &[])?;
    let (hour, _) = field(fields[1], 0, 23, &[])?;
    let (dom, dom_star) = field(fields[2], 1, 31, &[])?;
    let (month, _) = field(fields[3], 1, 12, &MONTHS)?;
    let (mut dow, dow_star) = field(fields[4], 0, 7, &DAYS)?;
    if dow & (1 << 7) != 0 {
        dow |= 1;
    }
    Ok(Schedule {
        minute,
        hour,
        dom,
        month,
        dow,
        and_days: dom_star || dow_star,
        tz,
    })
}

/// One field as a bit set, and whether it was a bare `*`/`?`.
fn field(text: &str, min: u32, max: u32, names: &[&str]) -> Result<(u64, bool), Error> {
    let mut bits = 0u64;
    let mut star = false;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (r, Some(s.parse::<u32>().map_err(|_| bad(part))?)),
            None => (part, None),
        };
        let (start, end) = if range == "*" || range == "?" {
            star |= step.is_none_or(|s| s <= 1);
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a, names, min)?, value(b, names, min)?)
        } else {
            let v = value(range, names, min)?;
            (v, if step.is_some() { max } else { v })
        };
        let step = step.unwrap_or(1);
        if start < min || end > max || start > end || step == 0 {
            return Err(bad(part));
        }
        let mut v = start;
        while v <= end {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok((bits, star))
}

fn value(text: &str, names: &[&str], offset: u32) -> Result<u32, Error> {
    if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(text)) {
        return Ok(u32::try_from(i).unwrap_or(0) + offset);
    }
    text.parse::<u32>().map_err(|_| bad(text))
}

fn bad(part: &str) -> Error {
    Error::Syntax(format!("failed to parse int from {part}"))
}

impl Schedule {
    /// The time zone the schedule is read in.
    pub fn time_zone(&self) -> &TimeZone {
        &self.tz
    }

    fn day_matches(&self, t: DateTime) -> bool {
        let dom = self.dom & (1 << t.day()) != 0;
        let dow = self.dow & (1 << t.weekday().to_sunday_zero_offset()) != 0;
        if self.and_days {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// The first start strictly after `after` (`None` within five years).
    pub fn next(&self, after: Timestamp) -> Option<Timestamp> {
        let local = after.to_zoned(self.tz.clone()).datetime();
        let mut t = local
            .with()
            .second(0)
            .subsec_nanosecond(0)
            .build()
            .ok()?
            .checked_add(1.minute())
            .ok()?;
        let limit = t.year() + 5;
        while t.year() <= limit {
            if self.month & (1 << t.month()) == 0 {
                t = t
                    .first_of_month()
                    .checked_add(1.month())
                    .ok()?
                    .with()
                    .hour(0)
                    .minute(0)
                    .build()
                    .ok()?;
                continue;
            }
            if !self.day_matches(t) {
                t = t
                    .date()
                    .checked_add(1.day())
                    .ok()?
                    .to_datetime(jiff::civil::Time::midnight());
                continue;
            }
            if self.hour & (1 << t.hour()) == 0 {
                t = t
                    .with()
                    .minute(0)
                    .build()
                    .ok()?
                    .checked_add(1.hour())
                    .ok()?;
                continue;
            }
            if self.minute & (1 << t.minute()) == 0 {
                t = t.checked_add(1.minute()).ok()?;
                continue;
            }
            let at = self.tz.to_ambiguous_timestamp(t).compatible().ok()?;
            if at > after {
                return Some(at);
            }
            t = t.checked_add(1.minute()).ok()?;
        }
        None
    }
}

/// The latest start in (`earliest`, `now`] and how many starts fell in
/// it (upstream's `mostRecentScheduleTime`: the count is estimated from
/// the interval between the first two when there are many).
pub fn most_recent(
    schedule: &Schedule,
    earliest: Timestamp,
    now: Timestamp,
) -> Result<(Option<Timestamp>, i64), Error> {
    let Some(t1) = schedule.next(earliest) else {
        return Ok((None, 0));
    };
    if now < t1 {
        return Ok((None, 0));
    }
    let Some(t2) = schedule.next(t1) else {
        return Ok((Some(t1), 1));
    };
    if now < t2 {
        return Ok((Some(t1), 1));
    }
    let interval = t2.duration_since(t1).as_secs();
    if interval < 1 {
        return Err(Error::Syntax(
            "time difference between two schedules is less than 1 second".into(),
        ));
    }
    let elapsed = now.duration_since(t1).as_secs();
    let missed = elapsed / interval + 1;
    // Start two intervals before the estimate and walk forward, so that
    // irregular schedules land on a real start time.
    let back = (missed - 2).max(0).saturating_mul(interval);
    let mut t = t1
        .checked_add(Duration::from_secs(back.unsigned_abs()))
        .unwrap_or(t1);
    if t > t1 {
        t = t.checked_sub(Duration::from_secs(1)).unwrap_or(t);
    }
    let mut recent = t1;
    while let Some(n) = schedule.next(t).filter(|n| *n <= now) {
        recent = n;
        t = n;
    }
    Ok((Some(recent), missed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn fields_lists_ranges_steps_and_names() {
        let s = parse("*/15 9-17 * * mon-fri", Some("UTC")).unwrap();
        // Saturday 2026-01-03 → Monday 09:00.
        assert_eq!(
            s.next(ts("2026-01-03T10:00:00Z")),
            Some(ts("2026-01-05T09:00:00Z"))
        );
        assert_eq!(
            s.next(ts("2026-01-05T09:00:00Z")),
            Some(ts("2026-01-05T09:15:00Z"))
        );
        assert_eq!(
            s.next(ts("2026-01-05T17:45:00Z")),
            Some(ts("2026-01-06T09:00:00Z"))
        );
        let s = parse("0 0 1,15 * *", Some("UTC")).unwrap();
        assert_eq!(
            s.next(ts("2026-02-02T00:00:00Z")),
            Some(ts("2026-02-15T00:00:00Z"))
        );
        assert!(parse("0 0 * *", Some("UTC")).is_err());
        assert!(parse("61 * * * *", Some("UTC")).is_err());
    }

    #[test]
    fn day_of_month_and_week_are_either_unless_one_is_a_star() {
        // Either the 13th or a Friday.
        let s = parse("0 0 13 * 5", Some("UTC")).unwrap();
        assert_eq!(
            s.next(ts("2026-01-01T00:00:00Z")),
            Some(ts("2026-01-02T00:00:00Z"))
        );
        assert_eq!(
            s.next(ts("2026-01-10T00:00:00Z")),
            Some(ts("2026-01-13T00:00:00Z"))
        );
        // Sunday as 7.
        let s = parse("0 0 * * 7", Some("UTC")).unwrap();
        assert_eq!(
            s.next(ts("2026-01-01T00:00:00Z")),
            Some(ts("2026-01-04T00:00:00Z"))
        );
    }

    #[test]
    fn descriptors() {
        let s = parse("@hourly", Some("UTC")).unwrap();
        assert_eq!(
            s.next(ts("2026-01-01T10:30:00Z")),
            Some(ts("2026-01-01T11:00:00Z"))
        );
        let s = parse("@yearly", Some("UTC")).unwrap();
        assert_eq!(
            s.next(ts("2026-03-01T00:00:00Z")),
            Some(ts("2027-01-01T00:00:00Z"))
        );
        let s = parse("@weekly", Some("UTC")).unwrap();
        assert_eq!(
            s.next(ts("2026-01-01T00:00:00Z")),
            Some(ts("2026-01-04T00:00:00Z"))
        );
        assert!(parse("@every 5m", Some("UTC")).is_err());
    }

    #[test]
    fn time_zones_from_the_spec_or_a_prefix() {
        let s = parse("0 9 * * *", Some("Europe/Berlin")).unwrap();
        // 09:00 CET is 08:00 UTC in winter, 07:00 UTC in summer.
        assert_eq!(
            s.next(ts("2026-01-10T12:00:00Z")),
            Some(ts("2026-01-11T08:00:00Z"))
        );
        assert_eq!(
            s.next(ts("2026-07-10T12:00:00Z")),
            Some(ts("2026-07-11T07:00:00Z"))
        );
        let s = parse("CRON_TZ=America/New_York 30 2 * * *", Some("UTC")).unwrap();
        assert_eq!(
            s.next(ts("2026-01-10T12:00:00Z")),
            Some(ts("2026-01-11T07:30:00Z"))
        );
        // 02:30 does not exist on 2026-03-08 in New York: it runs at 03:30 EDT.
        assert_eq!(
            s.next(ts("2026-03-07T12:00:00Z")),
            Some(ts("2026-03-08T07:30:00Z"))
        );
        assert_eq!(
            parse("TZ=Nowhere/Atlantis * * * * *", None).unwrap_err(),
            Error::TimeZone("Nowhere/Atlantis".into())
        );
    }

    #[test]
    fn missed_starts_are_counted_and_the_latest_one_found() {
        let s = parse("* * * * *", Some("UTC")).unwrap();
        let created = ts("2026-01-01T00:00:30Z");
        assert_eq!(
            most_recent(&s, created, ts("2026-01-01T00:00:59Z")).unwrap(),
            (None, 0)
        );
        assert_eq!(
            most_recent(&s, created, ts("2026-01-01T00:01:10Z")).unwrap(),
            (Some(ts("2026-01-01T00:01:00Z")), 1)
        );
        let (t, n) = most_recent(&s, created, ts("2026-01-01T03:00:30Z")).unwrap();
        assert_eq!((t, n), (Some(ts("2026-01-01T03:00:00Z")), 180));
        // An irregular schedule still lands on a real start.
        let s = parse("30 6-16/4 * * 1-5", Some("UTC")).unwrap();
        let (t, _) =
            most_recent(&s, ts("2026-01-05T00:00:00Z"), ts("2026-01-09T12:00:00Z")).unwrap();
        assert_eq!(t, Some(ts("2026-01-09T10:30:00Z")));
    }
}
