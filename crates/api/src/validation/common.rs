//! Checks the cluster-level kinds share (networking, discovery, CSI,
//! node, certificates, flowcontrol, admissionregistration), in
//! apimachinery's words: label selectors (`ValidateLabelSelector`), port
//! numbers and names (`IsValidPortNum`, `IsValidPortName`), wildcard
//! subdomains, IP and CIDR syntax, and the `Forbidden`, `Duplicate`,
//! `Too many` and immutability findings. Works on wire-form JSON.

use std::net::IpAddr;

use serde_json::Value;

use super::{invalid, meta, names, FieldError};

/// `field.Forbidden(path, detail)`.
pub(crate) fn forbidden(field: impl Into<String>, detail: &str) -> FieldError {
    FieldError {
        reason: "FieldValueForbidden",
        field: field.into(),
        message: format!("Forbidden: {detail}"),
    }
}

/// `field.Required(path, detail)` with a detail.
pub(crate) fn required_because(field: impl Into<String>, detail: &str) -> FieldError {
    let message = if detail.is_empty() {
        "Required value".to_string()
    } else {
        format!("Required value: {detail}")
    };
    FieldError {
        reason: "FieldValueRequired",
        field: field.into(),
        message,
    }
}

/// `field.Duplicate(path, value)` for a string.
pub(crate) fn duplicate(field: impl Into<String>, value: &str) -> FieldError {
    FieldError {
        reason: "FieldValueDuplicate",
        field: field.into(),
        message: format!("Duplicate value: \"{value}\""),
    }
}

/// `field.TooMany(path, actual, max)`.
pub(crate) fn too_many(field: impl Into<String>, actual: usize, max: usize) -> FieldError {
    FieldError {
        reason: "FieldValueTooMany",
        field: field.into(),
        message: format!("Too many: {actual}: must have at most {max} items"),
    }
}

/// `field.Invalid` with the value already shown as Go prints it.
pub(crate) fn invalid_shown(field: impl Into<String>, shown: &str, detail: &str) -> FieldError {
    FieldError {
        reason: "FieldValueInvalid",
        field: field.into(),
        message: format!("Invalid value: {shown}: {detail}"),
    }
}

/// `field.Invalid(path, s, msg)` for a string value.
pub(crate) fn invalid_str(field: impl Into<String>, value: &str, detail: &str) -> FieldError {
    invalid(field.into(), &Value::from(value), detail)
}

/// `ValidateImmutableField` for a value shown as JSON would (strings
/// quoted, absent as `null`).
pub(crate) fn immutable(field: impl Into<String>, new: Option<&Value>) -> FieldError {
    invalid(
        field.into(),
        new.unwrap_or(&Value::from("null")),
        "field is immutable",
    )
}

pub(crate) fn str_at<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get(field).and_then(Value::as_str)
}

/// The elements of an array field (none when absent or not an array).
pub(crate) fn items<'a>(v: &'a Value, field: &str) -> &'a [Value] {
    v.get(field)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Whether a field is set in Go terms: present and not null.
pub(crate) fn present(v: &Value, field: &str) -> bool {
    v.get(field).is_some_and(|f| !f.is_null())
}

/// Go's `apiequality.Semantic.DeepEqual` on wire JSON, near enough:
/// absent, null and empty lists or maps are equal.
pub(crate) fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    let empty = |v: Option<&Value>| match v {
        None | Some(Value::Null) => true,
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(m)) => m.is_empty(),
        _ => false,
    };
    if empty(a) && empty(b) {
        return true;
    }
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            x.keys().chain(y.keys()).all(|k| same(x.get(k), y.get(k)))
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(Some(p), Some(q)))
        }
        (a, b) => a == b,
    }
}

/// `IsValidPortNum`.
pub(crate) fn port_num(n: i64) -> Option<&'static str> {
    (!(1..=65535).contains(&n)).then_some("must be between 1 and 65535, inclusive")
}

/// `IsValidPortName` (IANA_SVC_NAME).
pub(crate) fn port_name(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push("must be no more than 15 characters".to_string());
    }
    if !port
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !port.bytes().any(|b| b.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

const WILDCARD_SUBDOMAIN: &str = "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character (e.g. '*.example.com', regex used for validation is '\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// `IsWildcardDNS1123Subdomain`.
pub(crate) fn wildcard_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    let ok = value
        .strip_prefix("*.")
        .is_some_and(|rest| names::dns1123_subdomain(rest).is_empty());
    if !ok {
        errs.push(WILDCARD_SUBDOMAIN.to_string());
    }
    errs
}

/// Go's `netutils.ParseIPSloppy`: an IPv4 address may have leading zeros.
pub(crate) fn parse_ip(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut octets = [0u8; 4];
    for (o, p) in octets.iter_mut().zip(&parts) {
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *o = p.parse().ok()?;
    }
    Some(IpAddr::from(octets))
}

/// A CIDR as `netutils.ParseCIDRSloppy` reads it: the network address and
/// the prefix length.
pub(crate) fn parse_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (ip, len) = s.split_once('/')?;
    let ip = parse_ip(ip)?;
    if len.is_empty() || len.len() > 3 || !len.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let len: u8 = len.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (len <= max).then_some((ip, len))
}

/// Whether `inner` lies within the network `outer`.
pub(crate) fn cidr_contains(outer: (IpAddr, u8), ip: IpAddr) -> bool {
    match (outer.0, ip) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(outer.1)).unwrap_or(0);
            u32::from(a) & mask == u32::from(b) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(outer.1)).unwrap_or(0);
            u128::from(a) & mask == u128::from(b) & mask
        }
        _ => false,
    }
}

pub(crate) const CIDR_MESSAGE: &str =
    "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";
pub(crate) const IP_MESSAGE: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";

/// `ValidateLabelSelector` of the selector at `path` (nothing when absent).
pub(crate) fn label_selector(sel: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(sel) = sel.filter(|s| !s.is_null()) else {
        return errors;
    };
    if let Some(labels) = sel.get("matchLabels").and_then(Value::as_object) {
        errors.extend(meta::label_map(labels, &format!("{path}.matchLabels")));
    }
    for (i, expr) in items(sel, "matchExpressions").iter().enumerate() {
        let at = format!("{path}.matchExpressions[{i}]");
        let values = items(expr, "values");
        match str_at(expr, "operator").unwrap_or_default() {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errors.push(required_because(
                        format!("{at}.values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errors.push(forbidden(
                        format!("{at}.values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            other => errors.push(invalid_str(
                format!("{at}.operator"),
                other,
                "not a valid selector operator",
            )),
        }
        let key = str_at(expr, "key").unwrap_or_default();
        for m in names::qualified_name(key) {
            errors.push(invalid_str(format!("{at}.key"), key, &m));
        }
        for (j, v) in values.iter().enumerate() {
            let v = v.as_str().unwrap_or_default();
            for m in names::label_value(v) {
                errors.push(invalid_str(format!("{at}.values[{j}]"), v, &m));
            }
        }
    }
    errors
}

/// Object names: `NameIsDNSSubdomain` findings for `value` at `path`.
pub(crate) fn subdomain_at(errors: &mut Vec<FieldError>, path: &str, value: &str) {
    for m in names::dns1123_subdomain(value) {
        errors.push(invalid_str(path, value, &m));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ports_cidrs_and_selectors() {
        assert!(port_name("http").is_empty());
        assert_eq!(
            port_name("80"),
            vec!["must contain at least one letter (a-z)"]
        );
        assert_eq!(port_num(0), Some("must be between 1 and 65535, inclusive"));
        assert!(wildcard_subdomain("*.example.com").is_empty());
        assert!(!wildcard_subdomain("a.*.com").is_empty());
        assert_eq!(parse_cidr("10.0.0.0/8").map(|c| c.1), Some(8));
        assert!(parse_cidr("10.0.0.0/33").is_none());
        assert!(parse_cidr("bogus").is_none());
        let outer = parse_cidr("10.0.0.0/8").unwrap();
        assert!(cidr_contains(outer, "10.1.0.0".parse().unwrap()));
        assert!(!cidr_contains(outer, "11.0.0.0".parse().unwrap()));
        let e = label_selector(
            Some(&json!({"matchExpressions": [{"key": "a", "operator": "In"}]})),
            "spec.podSelector",
        );
        assert_eq!(e[0].field, "spec.podSelector.matchExpressions[0].values");
        assert_eq!(
            e[0].message,
            "Required value: must be specified when `operator` is 'In' or 'NotIn'"
        );
    }
}
