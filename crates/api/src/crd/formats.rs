//! The string formats CRD validation checks (upstream keeps kube-openapi's
//! strfmt formats from its supported list and strips the rest, int32,
//! int64, float and double included), with strfmt's rules.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const SUPPORTED: [&str; 24] = [
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

/// The format as validation sees it: itself if supported (go-openapi
/// drops `-` to normalize, so `date-time` is `datetime`), else "".
pub(crate) fn supported(format: &str) -> &str {
    let normalized = format.replace('-', "");
    if SUPPORTED.contains(&normalized.as_str()) {
        format
    } else {
        ""
    }
}

fn hex(s: &str) -> bool {
    s.chars().all(|c| c.is_ascii_hexdigit())
}

fn digits(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_digit())
}

/// Whether `s` is valid in `format` (a supported one).
pub(crate) fn valid(format: &str, s: &str) -> bool {
    match format.replace('-', "").as_str() {
        "bsonobjectid" => s.len() == 24 && hex(s),
        "uri" => uri(s),
        "email" => email(s),
        "hostname" => hostname(s),
        "ipv4" => s.parse::<Ipv4Addr>().is_ok() || ip_with_dot(s),
        "ipv6" => s.contains(':') && s.parse::<Ipv6Addr>().is_ok(),
        "cidr" => cidr(s),
        "mac" => mac(s),
        "uuid" => uuid(s, None),
        "uuid3" => uuid(s, Some('3')),
        "uuid4" => uuid(s, Some('4')),
        "uuid5" => uuid(s, Some('5')),
        "isbn" => isbn10(s) || isbn13(s),
        "isbn10" => isbn10(s),
        "isbn13" => isbn13(s),
        "creditcard" => creditcard(s),
        "ssn" => ssn(s),
        "hexcolor" => {
            let h = s.strip_prefix('#').unwrap_or(s);
            (h.len() == 3 || h.len() == 6) && hex(h)
        }
        "rgbcolor" => rgb(s),
        "byte" => base64(s),
        "date" => date(s),
        "duration" => duration(s),
        "datetime" => datetime(s),
        _ => true,
    }
}

/// net.ParseIP accepts IPv4-mapped forms such as `::ffff:1.2.3.4` for
/// ipv4 (strfmt checks ParseIP and a `.`).
fn ip_with_dot(s: &str) -> bool {
    s.contains('.') && s.parse::<IpAddr>().is_ok()
}

fn uri(s: &str) -> bool {
    // url.ParseRequestURI: an absolute URI, or an absolute path.
    if s.starts_with('/') {
        return !s.contains(char::is_whitespace);
    }
    let Some((scheme, _)) = s.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        && !s.contains(' ')
}

fn email(s: &str) -> bool {
    let addr = match (s.find('<'), s.rfind('>')) {
        (Some(a), Some(b)) if a < b => s.get(a + 1..b).unwrap_or(""),
        _ => s.trim(),
    };
    match addr.rsplit_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !addr.contains(char::is_whitespace)
                && !domain.starts_with('.')
                && !domain.ends_with('.')
        }
        None => false,
    }
}

fn hostname(s: &str) -> bool {
    if s.is_empty() || s.len() > 255 {
        return false;
    }
    let ok_char = |c: char| c.is_alphanumeric() || (!c.is_ascii() && !c.is_whitespace());
    let labels: Vec<&str> = s.split('.').collect();
    if labels.iter().any(|l| l.is_empty() || l.len() > 63) {
        return false;
    }
    if labels.len() == 1 {
        // one label: a letter/digit, then up to 62 more with single dashes.
        return s.chars().next().is_some_and(ok_char)
            && !s.contains("--")
            && !s.ends_with('-')
            && s.chars().all(|c| ok_char(c) || c == '-');
    }
    let (last, rest) = match labels.split_last() {
        Some(x) => x,
        None => return false,
    };
    rest.iter().all(|l| {
        l.chars().next().is_some_and(ok_char)
            && l.chars().last().is_some_and(ok_char)
            && l.chars().all(|c| ok_char(c) || c == '-')
    }) && last.chars().count() >= 2
        && last.chars().all(|c| c.is_alphabetic())
}

fn cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    match ip.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => bits <= 32,
        Ok(IpAddr::V6(_)) => bits <= 128,
        Err(_) => false,
    }
}

fn mac(s: &str) -> bool {
    let groups_ok = |sep: char| {
        let parts: Vec<&str> = s.split(sep).collect();
        [6, 8, 20].contains(&parts.len()) && parts.iter().all(|p| p.len() == 2 && hex(p))
    };
    if s.contains(':') {
        return groups_ok(':');
    }
    if s.contains('-') {
        return groups_ok('-');
    }
    let parts: Vec<&str> = s.split('.').collect();
    [3, 4, 10].contains(&parts.len()) && parts.iter().all(|p| p.len() == 4 && hex(p))
}

fn uuid(s: &str, version: Option<char>) -> bool {
    let compact: String = s.chars().filter(|c| *c != '-').collect();
    if compact.len() != 32 || !hex(&compact) {
        return false;
    }
    // dashes only at the canonical places, each optional.
    let mut groups = Vec::new();
    let mut cur = 0;
    for c in s.chars() {
        if c == '-' {
            groups.push(cur);
            cur = 0;
        } else {
            cur += 1;
        }
    }
    groups.push(cur);
    let mut pos = 0;
    let canon = [8, 12, 16, 20];
    let mut acc = 0;
    for g in groups.iter().take(groups.len().saturating_sub(1)) {
        acc += g;
        while pos < canon.len() && canon.get(pos).is_some_and(|c| *c < acc) {
            pos += 1;
        }
        if canon.get(pos) != Some(&acc) {
            return false;
        }
        pos += 1;
    }
    let lower = compact.to_ascii_lowercase();
    match version {
        None => true,
        Some(v) => {
            let ver = lower.chars().nth(12) == Some(v);
            let variant = v == '3' || lower.chars().nth(16).is_some_and(|c| "89ab".contains(c));
            ver && variant
        }
    }
}

fn isbn_digits(s: &str) -> String {
    s.chars().filter(|c| *c != '-' && *c != ' ').collect()
}

fn isbn10(s: &str) -> bool {
    let d = isbn_digits(s);
    if d.len() != 10 {
        return false;
    }
    let mut sum = 0;
    for (i, c) in d.chars().enumerate() {
        let v = match c {
            '0'..='9' => c as u32 - '0' as u32,
            'X' if i == 9 => 10,
            _ => return false,
        };
        sum += (10 - i as u32) * v;
    }
    sum.is_multiple_of(11)
}

fn isbn13(s: &str) -> bool {
    let d = isbn_digits(s);
    if d.len() != 13 || !digits(&d) {
        return false;
    }
    let sum: u32 = d
        .chars()
        .enumerate()
        .map(|(i, c)| (c as u32 - '0' as u32) * if i % 2 == 0 { 1 } else { 3 })
        .sum();
    sum.is_multiple_of(10)
}

fn creditcard(s: &str) -> bool {
    let d: String = s.chars().filter(char::is_ascii_digit).collect();
    let ok_prefix = match d.len() {
        13 | 16 if d.starts_with('4') => true,
        16 => {
            d.get(0..2).is_some_and(|p| ("51".."56").contains(&p))
                || d.starts_with("6011")
                || d.starts_with("65")
                || d.starts_with("35")
        }
        15 => {
            d.starts_with("34")
                || d.starts_with("37")
                || d.starts_with("2131")
                || d.starts_with("1800")
        }
        14 => {
            d.get(0..3).is_some_and(|p| ("300".."306").contains(&p))
                || d.starts_with("36")
                || d.starts_with("38")
        }
        _ => false,
    };
    ok_prefix
}

fn ssn(s: &str) -> bool {
    let b = s.as_bytes();
    let d = |r: std::ops::Range<usize>| s.get(r).is_some_and(digits);
    match b.len() {
        9 => digits(s),
        10 => {
            (d(0..3) && d(4..6) && d(6..10) && matches!(b.get(3), Some(b'-' | b' ')))
                || (d(0..3) && d(3..5) && d(6..10) && matches!(b.get(5), Some(b'-' | b' ')))
        }
        11 => {
            d(0..3)
                && d(4..6)
                && d(7..11)
                && matches!(b.get(3), Some(b'-' | b' '))
                && matches!(b.get(6), Some(b'-' | b' '))
        }
        _ => false,
    }
}

fn rgb(s: &str) -> bool {
    let Some(inner) = s.strip_prefix("rgb(").and_then(|r| r.strip_suffix(')')) else {
        return false;
    };
    let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| p.len() <= 3 && digits(p) && p.parse::<u32>().is_ok_and(|n| n <= 255))
}

fn base64(s: &str) -> bool {
    if !s.len().is_multiple_of(4) {
        return false;
    }
    let body = s.trim_end_matches('=');
    if s.len() - body.len() > 2 {
        return false;
    }
    body.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/')
}

fn date(s: &str) -> bool {
    chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok() && s.len() == 10
}

fn duration(s: &str) -> bool {
    if go_duration(s) {
        return true;
    }
    // strfmt's fallback: a number and a unit, spaces allowed between.
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim_start();
    const UNITS: [&str; 26] = [
        "ns",
        "us",
        "µs",
        "ms",
        "s",
        "m",
        "h",
        "d",
        "w",
        "nanosecond",
        "nanoseconds",
        "microsecond",
        "microseconds",
        "millisecond",
        "milliseconds",
        "second",
        "seconds",
        "sec",
        "secs",
        "minute",
        "minutes",
        "hour",
        "hours",
        "day",
        "days",
        "week",
    ];
    digits(num) && (UNITS.contains(&unit) || unit == "weeks" || unit == "hr" || unit == "hrs")
}

/// time.ParseDuration.
fn go_duration(s: &str) -> bool {
    let mut t = s.strip_prefix(['-', '+']).unwrap_or(s);
    if t == "0" {
        return true;
    }
    if t.is_empty() {
        return false;
    }
    while !t.is_empty() {
        let n = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, rest) = t.split_at(n);
        if num.is_empty() || num == "." {
            return false;
        }
        let u = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let (unit, rest) = rest.split_at(u);
        if !["ns", "us", "µs", "μs", "ms", "s", "m", "h"].contains(&unit) {
            return false;
        }
        t = rest;
    }
    true
}

fn datetime(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_ascii_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    let (Some(d), Some(time)) = (parts.first(), parts.get(1)) else {
        return false;
    };
    if !date(d) {
        return false;
    }
    // ^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$
    let b = time.as_bytes();
    let two = |i: usize| time.get(i..i + 2).filter(|x| digits(x));
    let (Some(h), Some(m), Some(sec)) = (two(0), two(3), two(6)) else {
        return false;
    };
    if b.get(2) != Some(&b':') || b.get(5) != Some(&b':') {
        return false;
    }
    let mut rest = time.get(8..).unwrap_or("");
    if rest.len() > 1 && !rest.starts_with('z') && !rest.starts_with(['+', '-']) {
        let frac = rest.get(1..).unwrap_or("");
        let n = frac
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(frac.len());
        if n == 0 {
            return false;
        }
        rest = frac.get(n..).unwrap_or("");
    }
    let zone_ok = rest == "z"
        || (rest.len() == 6
            && rest.starts_with(['+', '-'])
            && rest.get(1..3).is_some_and(digits)
            && rest.get(3..4) == Some(":")
            && rest.get(4..6).is_some_and(digits));
    zone_ok && h <= "23" && m <= "59" && sec <= "59"
}
