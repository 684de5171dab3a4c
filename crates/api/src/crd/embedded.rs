//! Checks of embedded resources (`x-kubernetes-embedded-resource`), as
//! upstream's schema/objectmeta `validateEmbeddedResource`: apiVersion and
//! kind required and well-formed, metadata a valid ObjectMeta.

use serde_json::{Map, Value};

use super::errors as fe;
use crate::validation::{meta, names, FieldError};

/// Findings for the embedded object `x` at `path`.
pub(crate) fn validate(path: &str, x: &Map<String, Value>) -> Vec<FieldError> {
    let mut out = Vec::new();
    if !x.contains_key("apiVersion") {
        out.push(fe::required(
            &fe::child(path, "apiVersion"),
            "must not be empty",
        ));
    }
    if !x.contains_key("kind") {
        out.push(fe::required(&fe::child(path, "kind"), "must not be empty"));
    }
    for (k, v) in x {
        let at = fe::child(path, k);
        match k.as_str() {
            "apiVersion" => match v.as_str() {
                None => out.push(fe::invalid(&at, v, "must be a string")),
                Some("") => out.push(fe::invalid(&at, v, "must not be empty")),
                Some(s) if s.matches('/').count() > 1 => out.push(fe::invalid(
                    &at,
                    v,
                    &format!("unexpected GroupVersion string: {s}"),
                )),
                Some(_) => {}
            },
            "kind" => match v.as_str() {
                None => out.push(fe::invalid(&at, v, "must be a string")),
                Some("") => out.push(fe::invalid(&at, v, "must not be empty")),
                Some(s) => {
                    let errs = names::dns1035_label(&s.to_lowercase());
                    if !errs.is_empty() {
                        out.push(fe::invalid(
                            &at,
                            v,
                            &format!(
                                "may have mixed case, but should otherwise match: {}",
                                errs.join(",")
                            ),
                        ));
                    }
                }
            },
            "metadata" => out.extend(metadata(&at, v)),
            _ => {}
        }
    }
    out
}

fn metadata(at: &str, v: &Value) -> Vec<FieldError> {
    let Some(m) = v.as_object() else {
        if v.is_null() {
            return Vec::new();
        }
        return vec![fe::invalid(at, v, "expected object, got different type")];
    };
    let mut out = Vec::new();
    for (field, want) in [
        ("name", "string"),
        ("namespace", "string"),
        ("generateName", "string"),
    ] {
        if let Some(x) = m.get(field) {
            if !x.is_string() && !x.is_null() {
                out.push(fe::invalid(
                    &fe::child(at, field),
                    x,
                    &format!("must be a {want}"),
                ));
            }
        }
    }
    if !out.is_empty() {
        return out;
    }
    let name = m.get("name").and_then(Value::as_str).unwrap_or("");
    if !name.is_empty() {
        for msg in path_segment(name) {
            out.push(fe::invalid_str(&fe::child(at, "name"), name, &msg));
        }
    }
    if let Some(ns) = m
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        for msg in names::dns1123_label(ns) {
            out.push(fe::invalid_str(&fe::child(at, "namespace"), ns, &msg));
        }
    }
    out.extend(meta::object_meta(Some(v), at));
    out
}

/// apimachinery's path.ValidatePathSegmentName.
fn path_segment(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    let mut out = Vec::new();
    for bad in ["/", "%"] {
        if name.contains(bad) {
            out.push(format!("may not contain '{bad}'"));
        }
    }
    out
}
