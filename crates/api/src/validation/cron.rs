//! CronJob schedules and time zones, checked as kube-apiserver 1.33 does:
//! `cron.ParseStandard` of robfig/cron v3 (five fields, `@` descriptors,
//! an optional `TZ=`/`CRON_TZ=` prefix) with its error strings, and
//! Go's `time.LoadLocation` against the system zone database. Only
//! whether a schedule parses matters here; nothing is scheduled.

use std::path::Path;

/// (name, minimum, maximum, names) of the five standard fields.
const FIELDS: &[(u32, u32, &[&str])] = &[
    (0, 59, &[]),
    (0, 23, &[]),
    (1, 31, &[]),
    (
        1,
        12,
        &[
            "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
        ],
    ),
    (0, 6, &["sun", "mon", "tue", "wed", "thu", "fri", "sat"]),
];

/// What robfig/cron's `ParseStandard` says about `spec`, if it fails.
pub fn parse_standard(spec: &str) -> Result<(), String> {
    if spec.is_empty() {
        return Err("empty spec string".into());
    }
    let mut spec = spec;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        // Go slices spec[eq+1:i] with i the first space; without one the
        // slice panics and the parser's recover reports it.
        let eq = spec.find('=').unwrap_or(0);
        let Some(space) = spec.find(' ') else {
            return Err(format!(
                "runtime error: slice bounds out of range [{}:-1]",
                eq + 1
            ));
        };
        let location = spec.get(eq + 1..space).unwrap_or_default();
        if let Err(e) = load_location(location) {
            return Err(format!("provided bad location {location}: {e}"));
        }
        spec = spec.get(space..).unwrap_or_default().trim();
    }
    if spec.starts_with('@') {
        return descriptor(spec);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    for (field, (min, max, names)) in fields.iter().zip(FIELDS) {
        for expr in field.split(',').filter(|e| !e.is_empty()) {
            range(expr, *min, *max, names)?;
        }
    }
    Ok(())
}

fn descriptor(spec: &str) -> Result<(), String> {
    match spec {
        "@yearly" | "@annually" | "@monthly" | "@weekly" | "@daily" | "@midnight" | "@hourly" => {
            Ok(())
        }
        _ => match spec.strip_prefix("@every ") {
            Some(d) => go_duration(d)
                .map_err(|e| format!("failed to parse duration {spec}: {e}"))
                .map(|_| ()),
            None => Err(format!("unrecognized descriptor: {spec}")),
        },
    }
}

fn range(expr: &str, min: u32, max: u32, names: &[&str]) -> Result<(), String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step
        .first()
        .copied()
        .unwrap_or_default()
        .split('-')
        .collect();
    let first = low_and_high.first().copied().unwrap_or_default();
    let (start, mut end) = if first == "*" || first == "?" {
        (u64::from(min), u64::from(max))
    } else {
        let start = int_or_name(first, names)?;
        let end = match low_and_high.len() {
            1 => start,
            2 => int_or_name(low_and_high.get(1).copied().unwrap_or_default(), names)?,
            _ => return Err(format!("too many hyphens: {expr}")),
        };
        (start, end)
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = must_parse_int(range_and_step.get(1).copied().unwrap_or_default())?;
            if low_and_high.len() == 1 {
                end = u64::from(max);
            }
            step
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < u64::from(min) {
        return Err(format!(
            "beginning of range ({start}) below minimum ({min}): {expr}"
        ));
    }
    if end > u64::from(max) {
        return Err(format!(
            "end of range ({end}) above maximum ({max}): {expr}"
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    Ok(())
}

fn int_or_name(expr: &str, names: &[&str]) -> Result<u64, String> {
    let lower = expr.to_ascii_lowercase();
    if let Some(i) = names.iter().position(|n| *n == lower) {
        let offset = if names.len() == 12 { 1 } else { 0 };
        return Ok(i as u64 + offset);
    }
    must_parse_int(expr)
}

/// Go's `strconv.Atoi`, with robfig's wrapping of its errors.
fn must_parse_int(expr: &str) -> Result<u64, String> {
    let digits = expr.strip_prefix(['+', '-']).unwrap_or(expr);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing {expr:?}: invalid syntax"
        ));
    }
    let Ok(n) = expr.parse::<i64>() else {
        return Err(format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing {expr:?}: value out of range"
        ));
    };
    if n < 0 {
        return Err(format!("negative number ({n}) not allowed: {expr}"));
    }
    u64::try_from(n).map_err(|_| format!("negative number ({n}) not allowed: {expr}"))
}

/// Go's `time.ParseDuration`, as far as whether it parses.
fn go_duration(s: &str) -> Result<f64, String> {
    let invalid = || format!("time: invalid duration {s:?}");
    let mut rest = s.strip_prefix(['+', '-']).unwrap_or(s);
    if rest == "0" {
        return Ok(0.0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total = 0.0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(number_len);
        if number.is_empty() || number == "." {
            return Err(invalid());
        }
        let value: f64 = number.parse().map_err(|_| invalid())?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(format!("time: missing unit in duration {s:?}")),
            other => return Err(format!("time: unknown unit {other:?} in duration {s:?}")),
        };
        total += value * scale;
        rest = tail;
    }
    Ok(total)
}

/// Go's `time.LoadLocation`: "" and "UTC" are UTC, "Local" the local zone,
/// anything else a file of the zone database.
pub fn load_location(name: &str) -> Result<(), String> {
    if name.is_empty() || name == "UTC" || name == "Local" {
        return Ok(());
    }
    if name.split('/').any(|p| p == "..") || name.starts_with('/') || name.starts_with('\\') {
        return Err("time: invalid location name".into());
    }
    let roots = [
        "/usr/share/zoneinfo",
        "/usr/share/lib/zoneinfo",
        "/usr/lib/locale/TZ",
    ];
    if roots
        .iter()
        .any(|root| Path::new(root).join(name).is_file())
    {
        Ok(())
    } else {
        Err(format!("unknown time zone {name}"))
    }
}

/// Upstream `validTimeZoneCharacters`: `^[A-Za-z\.\-_0-9+]{1,14}$`.
pub fn valid_time_zone_part(part: &str) -> bool {
    (1..=14).contains(&part.len())
        && part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn robfig_messages() {
        assert!(parse_standard("*/5 * * * *").is_ok());
        assert!(parse_standard("0 0 1 jan-mar MON").is_ok());
        assert!(parse_standard("@hourly").is_ok());
        assert!(parse_standard("@every 1h30m").is_ok());
        assert_eq!(
            parse_standard("bogus").unwrap_err(),
            "expected exactly 5 fields, found 1: [bogus]"
        );
        assert_eq!(
            parse_standard("61 * * * *").unwrap_err(),
            "end of range (61) above maximum (59): 61"
        );
        assert_eq!(
            parse_standard("x * * * *").unwrap_err(),
            "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax"
        );
        assert_eq!(
            parse_standard("* * 0 * *").unwrap_err(),
            "beginning of range (0) below minimum (1): 0"
        );
        assert_eq!(
            parse_standard("5-1 * * * *").unwrap_err(),
            "beginning of range (5) beyond end of range (1): 5-1"
        );
        assert_eq!(
            parse_standard("@often").unwrap_err(),
            "unrecognized descriptor: @often"
        );
        assert_eq!(parse_standard("").unwrap_err(), "empty spec string");
        assert!(parse_standard("TZ=UTC 0 * * * *").is_ok());
    }
}
