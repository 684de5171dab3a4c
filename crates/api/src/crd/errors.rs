//! Field errors worded as apimachinery's `field.Error` prints them
//! (`Invalid value: "x": detail`, `Forbidden: detail`, `Too many: 5: ...`),
//! and the value formatting Go's `%v`/`%q` gives JSON values.

use serde_json::Value;

use crate::validation::FieldError;

/// How Go's field error shows a bad value: strings quoted, numbers and
/// booleans bare, null as "null", maps and slices as `%#v`.
pub(crate) fn show(value: &Value) -> String {
    match value {
        Value::String(s) => quote(s),
        Value::Null => "\"null\"".into(),
        Value::Number(n) => go_number(n),
        Value::Bool(b) => b.to_string(),
        other => go_sharp_v(other),
    }
}

/// Go's `%#v` of a `[]string`.
pub(crate) fn go_strings(list: &[String]) -> String {
    let inner: Vec<String> = list.iter().map(|s| quote(s)).collect();
    format!("[]string{{{}}}", inner.join(", "))
}

/// An Invalid error whose value is already formatted.
pub(crate) fn invalid_shown(field: &str, shown: &str, detail: &str) -> FieldError {
    error(
        "FieldValueInvalid",
        field,
        with_detail(&format!("Invalid value: {shown}"), detail),
    )
}

/// Go's `%q` of a string (JSON escaping is close enough for printable text).
pub(crate) fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// Go's `%v` of a float64/int64 JSON number.
pub(crate) fn go_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    go_float(n.as_f64().unwrap_or(0.0))
}

/// Go's `%v` of a float64 (strconv 'g', shortest): exponent form when
/// the decimal exponent is below -4 or at least 6 (`1e+06`,
/// `1.5e-07`), plain digits otherwise.
pub(crate) fn go_float(f: f64) -> String {
    if f == 0.0 {
        return "0".into();
    }
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let sci = format!("{f:e}");
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return sci;
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        return format!("{f}");
    }
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

fn error(reason: &'static str, field: &str, message: String) -> FieldError {
    FieldError {
        reason,
        field: field.to_string(),
        message,
    }
}

pub(crate) fn required(field: &str, detail: &str) -> FieldError {
    error(
        "FieldValueRequired",
        field,
        with_detail("Required value", detail),
    )
}

pub(crate) fn forbidden(field: &str, detail: &str) -> FieldError {
    error(
        "FieldValueForbidden",
        field,
        with_detail("Forbidden", detail),
    )
}

pub(crate) fn invalid(field: &str, value: &Value, detail: &str) -> FieldError {
    error(
        "FieldValueInvalid",
        field,
        with_detail(&format!("Invalid value: {}", show(value)), detail),
    )
}

pub(crate) fn invalid_str(field: &str, value: &str, detail: &str) -> FieldError {
    invalid(field, &Value::String(value.to_string()), detail)
}

pub(crate) fn type_invalid(field: &str, value: &Value, detail: &str) -> FieldError {
    error(
        "FieldValueTypeInvalid",
        field,
        with_detail(&format!("Invalid value: {}", show(value)), detail),
    )
}

pub(crate) fn duplicate(field: &str, value: &Value) -> FieldError {
    error(
        "FieldValueDuplicate",
        field,
        format!("Duplicate value: {}", show(value)),
    )
}

/// `field.Duplicate` of an unstructured value: scalars as `%v`/`%q`, maps
/// and slices as Go's `%#v` (`map[string]interface {}{"name":"a"}`).
pub(crate) fn duplicate_go(field: &str, value: &Value) -> FieldError {
    let shown = match value {
        Value::Object(_) | Value::Array(_) => go_sharp_v(value),
        other => show(other),
    };
    error(
        "FieldValueDuplicate",
        field,
        format!("Duplicate value: {shown}"),
    )
}

/// Go's `%#v` of an unstructured JSON value.
pub(crate) fn go_sharp_v(value: &Value) -> String {
    match value {
        Value::Null => "interface {}(nil)".into(),
        Value::String(s) => quote(s),
        Value::Number(n) => go_number(n),
        Value::Bool(b) => b.to_string(),
        Value::Array(a) => {
            let inner: Vec<String> = a.iter().map(go_sharp_v).collect();
            format!("[]interface {{}}{{{}}}", inner.join(", "))
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .into_iter()
                .map(|k| {
                    let v = m.get(k).map(go_sharp_v).unwrap_or_default();
                    format!("{}:{v}", quote(k))
                })
                .collect();
            format!("map[string]interface {{}}{{{}}}", inner.join(", "))
        }
    }
}

pub(crate) fn not_supported(field: &str, value: &Value, supported: &[String]) -> FieldError {
    let list = supported
        .iter()
        .map(|s| quote(s))
        .collect::<Vec<_>>()
        .join(", ");
    let head = format!("Unsupported value: {}", show(value));
    let detail = if list.is_empty() {
        String::new()
    } else {
        format!("supported values: {list}")
    };
    error("FieldValueNotSupported", field, with_detail(&head, &detail))
}

pub(crate) fn too_long(field: &str, max: i64) -> FieldError {
    let detail = if max >= 0 {
        format!("may not be more than {max} bytes")
    } else {
        "value is too long".into()
    };
    error("FieldValueTooLong", field, format!("Too long: {detail}"))
}

pub(crate) fn too_many(field: &str, actual: i64, max: i64) -> FieldError {
    let detail = if max >= 0 {
        format!("must have at most {max} items")
    } else {
        "has too many items".into()
    };
    let head = if actual >= 0 {
        format!("Too many: {actual}")
    } else {
        "Too many".into()
    };
    error("FieldValueTooMany", field, format!("{head}: {detail}"))
}

fn with_detail(head: &str, detail: &str) -> String {
    if detail.is_empty() {
        head.to_string()
    } else {
        format!("{head}: {detail}")
    }
}

/// `a.b` / `a[key]` / `a[0]` path building as `field.Path` prints it.
pub(crate) fn child(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_string()
    } else {
        format!("{base}.{name}")
    }
}

pub(crate) fn key(base: &str, k: &str) -> String {
    format!("{base}[{k}]")
}

pub(crate) fn index(base: &str, i: usize) -> String {
    format!("{base}[{i}]")
}
