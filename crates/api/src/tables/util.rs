//! Shared helpers for the printers: reading wire-form JSON the way Go reads
//! a decoded struct (absent and `null` mean the zero value), timestamps, the
//! apimachinery `HumanDuration`, and the label/selector string forms.

use chrono::{DateTime, Datelike, Duration, Utc};
use serde_json::Value;

/// The value at `path`, treating JSON `null` like an absent field.
pub(super) fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter()
        .try_fold(v, |v, key| v.get(*key))
        .filter(|v| !v.is_null())
}

/// The string at `path`, or `""` (Go's zero string).
pub(super) fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    get(v, path).and_then(Value::as_str).unwrap_or("")
}

/// The first non-empty string among several paths (for renamed fields).
pub(super) fn str_any<'a>(v: &'a Value, paths: &[&[&str]]) -> &'a str {
    paths
        .iter()
        .map(|p| str_at(v, p))
        .find(|s| !s.is_empty())
        .unwrap_or("")
}

pub(super) fn int_opt(v: &Value, path: &[&str]) -> Option<i64> {
    get(v, path).and_then(Value::as_i64)
}

/// The integer at `path`, or 0.
pub(super) fn int_at(v: &Value, path: &[&str]) -> i64 {
    int_opt(v, path).unwrap_or(0)
}

pub(super) fn bool_at(v: &Value, path: &[&str]) -> bool {
    get(v, path).and_then(Value::as_bool).unwrap_or(false)
}

/// The array at `path`, or an empty slice.
pub(super) fn arr_at<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    get(v, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// The number of entries of the map or list at `path`.
pub(super) fn len_at(v: &Value, path: &[&str]) -> usize {
    match get(v, path) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

/// The timestamp at `path`; `None` is Go's zero `metav1.Time` (absent,
/// `null`, unparsable, or literally `0001-01-01T00:00:00Z`).
pub(super) fn time_at(v: &Value, path: &[&str]) -> Option<DateTime<Utc>> {
    let t = DateTime::parse_from_rfc3339(str_at(v, path))
        .ok()?
        .with_timezone(&Utc);
    let zero = t.year() == 1 && t.ordinal() == 1 && t.timestamp() % 86_400 == 0;
    (!zero).then_some(t)
}

/// Whether the object has a `metadata.deletionTimestamp`.
pub(super) fn deleting(obj: &Value) -> bool {
    get(obj, &["metadata", "deletionTimestamp"]).is_some()
}

/// The status of the first condition of type `ty` (upstream scans the
/// list and looks at the first match only).
pub(super) fn condition_status<'a>(conditions: &'a [Value], ty: &str) -> Option<&'a str> {
    conditions
        .iter()
        .find(|c| str_at(c, &["type"]) == ty)
        .map(|c| str_at(c, &["status"]))
}

/// Upstream `translateTimestampSince`: `<unknown>` for a zero time, else
/// the human duration since it.
pub(super) fn since(t: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    match t {
        Some(t) => human_duration(now - t),
        None => "<unknown>".to_string(),
    }
}

/// The AGE cell of any object.
pub(super) fn age(obj: &Value, now: DateTime<Utc>) -> String {
    since(time_at(obj, &["metadata", "creationTimestamp"]), now)
}

pub(super) fn name(obj: &Value) -> &str {
    str_at(obj, &["metadata", "name"])
}

/// apimachinery `duration.HumanDuration`: a succinct duration with about
/// two or three significant figures. Up to one second in the future still
/// reads as `0s` (clock skew); further ahead is `<invalid>`.
pub fn human_duration(d: Duration) -> String {
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// `labels.FormatLabels`: the `k=v` strings in sorted order (as strings,
/// so `a.b=1` sorts before `a=1`), comma-joined, or `<none>`.
pub(super) fn format_labels(map: Option<&Value>) -> String {
    let mut pairs: Vec<String> = map
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    pairs.sort_unstable();
    if pairs.is_empty() {
        "<none>".to_string()
    } else {
        pairs.join(",")
    }
}

/// `metav1.LabelSelectorAsSelector(sel).String()`. A missing selector
/// selects nothing and an empty one everything; both print as `""`.
/// `Err` is an operator or value list the apiserver would reject.
pub(super) fn selector_string(sel: Option<&Value>) -> Result<String, ()> {
    let Some(sel) = sel else {
        return Ok(String::new());
    };
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(m) = get(sel, &["matchLabels"]).and_then(Value::as_object) {
        for (k, v) in m {
            if k.is_empty() {
                return Err(());
            }
            reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or(""))));
        }
    }
    for expr in arr_at(sel, &["matchExpressions"]) {
        let key = str_at(expr, &["key"]);
        if key.is_empty() {
            return Err(());
        }
        let mut values: Vec<&str> = arr_at(expr, &["values"])
            .iter()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let text = match str_at(expr, &["operator"]) {
            "In" | "NotIn" if values.is_empty() => return Err(()),
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" | "DoesNotExist" if !values.is_empty() => return Err(()),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => return Err(()),
        };
        reqs.push((key.to_string(), text));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(reqs
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join(","))
}

/// `metav1.FormatLabelSelector`: like [`selector_string`] but `<none>` when
/// empty and `<error>` when invalid.
pub(super) fn format_label_selector(sel: Option<&Value>) -> String {
    match selector_string(sel) {
        Ok(s) if s.is_empty() => "<none>".to_string(),
        Ok(s) => s,
        Err(()) => "<error>".to_string(),
    }
}

/// Upstream `layoutContainerCells`: container names and images, each
/// comma-joined, from a pod spec.
pub(super) fn container_cells(pod_spec: Option<&Value>) -> (String, String) {
    let containers = pod_spec.map_or(&[][..], |s| arr_at(s, &["containers"]));
    let names: Vec<&str> = containers.iter().map(|c| str_at(c, &["name"])).collect();
    let images: Vec<&str> = containers.iter().map(|c| str_at(c, &["image"])).collect();
    (names.join(","), images.join(","))
}

/// Go's `net.JoinHostPort`.
pub(super) fn join_host_port(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}
