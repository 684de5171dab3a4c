//! ObjectMeta validation (upstream `ValidateObjectMeta`): label and
//! annotation keys and values, the annotations' total size, finalizer
//! names and owner references, with upstream's field paths and wording.
//! Names themselves are checked where the object is created.

use serde_json::Value;

use super::names;
use super::{invalid, required, FieldError};

/// Most bytes all annotations of one object may hold, keys included.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// Finalizers that need no domain prefix.
const STANDARD_FINALIZERS: &[&str] = &["kubernetes", "orphan", "foregroundDeletion"];

/// Validates `obj.metadata` (labels, annotations, finalizers, owners) at
/// `path` (`metadata`, or `spec.template.metadata`).
pub fn object_meta(meta: Option<&Value>, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(meta) = meta else {
        return errors;
    };
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        errors.extend(label_map(labels, &format!("{path}.labels")));
    }
    if let Some(annotations) = meta.get("annotations").and_then(Value::as_object) {
        let at = format!("{path}.annotations");
        let mut total = 0;
        for (k, v) in annotations {
            for m in names::qualified_name(&k.to_ascii_lowercase()) {
                errors.push(invalid(at.clone(), &Value::from(k.as_str()), &m));
            }
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > TOTAL_ANNOTATION_SIZE_LIMIT {
            errors.push(too_long(at, TOTAL_ANNOTATION_SIZE_LIMIT));
        }
    }
    if let Some(finalizers) = meta.get("finalizers").and_then(Value::as_array) {
        errors.extend(finalizer_names(finalizers, &format!("{path}.finalizers")));
    }
    if let Some(owners) = meta.get("ownerReferences").and_then(Value::as_array) {
        let at = format!("{path}.ownerReferences");
        let mut controllers = 0;
        for o in owners {
            for (field, what) in [
                ("apiVersion", "version"),
                ("kind", "kind"),
                ("name", "name"),
                ("uid", "uid"),
            ] {
                if o.get(field)
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    errors.push(invalid(
                        format!("{at}.{field}"),
                        &Value::from(""),
                        &format!("{what} must not be empty"),
                    ));
                }
            }
            if o.get("controller").and_then(Value::as_bool) == Some(true) {
                controllers += 1;
            }
        }
        if controllers > 1 {
            errors.push(FieldError {
                reason: "FieldValueInvalid",
                field: at,
                message: "Invalid value: \"\": Only one reference can have Controller set to true"
                    .into(),
            });
        }
    }
    errors
}

/// Finalizer names at `path` (metadata.finalizers, a Namespace's
/// spec.finalizers): qualified names, and one without a `/` must be a
/// standard one (upstream's `validateFinalizerName`).
pub fn finalizer_names(finalizers: &[Value], path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, f) in finalizers.iter().enumerate() {
        let name = f.as_str().unwrap_or_default();
        let at = format!("{path}[{i}]");
        let errs = names::qualified_name(name);
        if !errs.is_empty() {
            errors.extend(errs.iter().map(|m| invalid(at.clone(), f, m)));
        } else if !name.contains('/') && !STANDARD_FINALIZERS.contains(&name) {
            errors.push(invalid(
                at,
                f,
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
    errors
}

/// Label keys and values of `labels` at `path`.
pub fn label_map(labels: &serde_json::Map<String, Value>, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (k, v) in labels {
        for m in names::qualified_name(k) {
            errors.push(invalid(path.to_string(), &Value::from(k.as_str()), &m));
        }
        let value = v.as_str().unwrap_or_default();
        for m in names::label_value(value) {
            errors.push(invalid(path.to_string(), v, &m));
        }
    }
    errors
}

/// `Too long: must have at most N bytes`.
pub fn too_long(field: String, limit: usize) -> FieldError {
    FieldError {
        reason: "FieldValueTooLong",
        field,
        message: format!("Too long: must have at most {limit} bytes"),
    }
}

/// `Required value` at `field` (re-exported for kind validators).
pub fn required_at(field: &str) -> FieldError {
    required(field.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metadata_findings() {
        let meta = json!({
            "labels": {"bad key!": "v", "ok": "x".repeat(64)},
            "annotations": {"bad/key/x": "1"},
            "finalizers": ["bad finalizer!", "plain", "example.com/ok", "kubernetes"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p"}],
        });
        let errors = object_meta(Some(&meta), "metadata");
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            vec![
                "metadata.labels",
                "metadata.labels",
                "metadata.annotations",
                "metadata.finalizers[0]",
                "metadata.finalizers[1]",
                "metadata.ownerReferences.uid",
            ]
        );
        assert!(errors[0]
            .message
            .starts_with("Invalid value: \"bad key!\": name part must consist"));
        assert!(errors[1]
            .message
            .ends_with(": must be no more than 63 characters"));
        assert_eq!(
            errors[4].message,
            "Invalid value: \"plain\": name is neither a standard finalizer name nor is it fully qualified"
        );
        assert_eq!(
            errors[5].message,
            "Invalid value: \"\": uid must not be empty"
        );
        let big = json!({"annotations": {"a": "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT)}});
        assert_eq!(
            object_meta(Some(&big), "metadata")[0].message,
            "Too long: must have at most 262144 bytes"
        );
    }
}
