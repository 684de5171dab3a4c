//! JSON patch (RFC 6902, `application/json-patch+json`), applied with the
//! json-patch crate. Messages follow gopkg.in/evanphx/json-patch.v4, which
//! the apiserver uses: a body that is not a list of operation objects is a
//! decode error (400); an operation that can't be applied (unknown `op`,
//! missing field, missing path, failed `test`) fails the patch (422).

use json_patch::{PatchErrorKind, PatchOperation};
use serde_json::{Map, Value};

use super::PatchError;

/// Applies the operations in `patch` to a copy of `original`.
pub(crate) fn apply(original: &Value, patch: Value) -> Result<Value, PatchError> {
    let Value::Array(items) = patch else {
        return Err(PatchError::BadRequest(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
            go_type(&patch)
        )));
    };
    let mut ops = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Value::Object(op) => ops.push(op),
            // Go decodes null into an empty operation.
            Value::Null => ops.push(Map::new()),
            other => {
                return Err(PatchError::BadRequest(format!(
                    "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
                    go_type(&other)
                )))
            }
        }
    }
    let mut doc = original.clone();
    for op in &ops {
        apply_op(&mut doc, op).map_err(PatchError::Invalid)?;
    }
    Ok(doc)
}

/// Applies one operation; on failure `doc` is left as it was.
fn apply_op(doc: &mut Value, op: &Map<String, Value>) -> Result<(), String> {
    let kind = op.get("op").and_then(Value::as_str).unwrap_or("unknown");
    if !matches!(
        kind,
        "add" | "remove" | "replace" | "move" | "copy" | "test"
    ) {
        return Err(format!("Unexpected kind: {kind}"));
    }
    let Some(path) = op.get("path").and_then(Value::as_str) else {
        return Err(format!(
            "{kind} operation failed to decode path: missing value"
        ));
    };
    let from = match kind {
        "move" | "copy" => match op.get("from").and_then(Value::as_str) {
            Some(from) => Some(from),
            None => {
                return Err(format!(
                    "{kind} operation failed to decode from: missing value"
                ))
            }
        },
        _ => None,
    };
    // evanphx treats a missing value as null.
    let value = op.get("value").cloned().unwrap_or(Value::Null);

    let mut wire = Map::new();
    wire.insert("op".into(), kind.into());
    wire.insert("path".into(), path.into());
    if let Some(from) = from {
        wire.insert("from".into(), from.into());
    }
    if matches!(kind, "add" | "replace" | "test") {
        wire.insert("value".into(), value.clone());
    }
    let Ok(parsed) = serde_json::from_value::<PatchOperation>(Value::Object(wire)) else {
        // A path or from that is not a JSON pointer points at nothing.
        return Err(match from {
            Some(from) if !is_pointer(from) => missing_from(kind, from),
            _ => missing_path(doc, kind, path),
        });
    };
    // evanphx: testing a missing key against null succeeds.
    if kind == "test"
        && value.is_null()
        && doc.pointer(path).is_none()
        && matches!(parent(doc, path), Some((Value::Object(_), _)))
    {
        return Ok(());
    }
    json_patch::patch(doc, std::slice::from_ref(&parsed)).map_err(|e| match e.kind {
        PatchErrorKind::TestFailed => format!("testing value {path} failed: test failed"),
        PatchErrorKind::InvalidFromPointer => missing_from(kind, from.unwrap_or_default()),
        PatchErrorKind::InvalidPointer => missing_path(doc, kind, path),
        PatchErrorKind::CannotMoveInsideItself => format!(
            "move operation does not apply: cannot move {} into its own child {path}",
            from.unwrap_or_default()
        ),
        other => format!("{kind} operation does not apply at path {path}: {other}"),
    })
}

fn is_pointer(path: &str) -> bool {
    path.is_empty() || path.starts_with('/')
}

/// The value holding the last token of `path`, and that token.
fn parent<'a, 'p>(doc: &'a Value, path: &'p str) -> Option<(&'a Value, &'p str)> {
    if !is_pointer(path) {
        return None;
    }
    let (parent, token) = path.rsplit_once('/')?;
    doc.pointer(parent).map(|p| (p, token))
}

/// The message for an operation whose `path` doesn't resolve in `doc`.
fn missing_path(doc: &Value, kind: &str, path: &str) -> String {
    match (parent(doc, path), kind) {
        (Some((Value::Array(_), index)), _) => format!(
            "error in {kind} for path: '{path}': Unable to access invalid index: {index}: \
             invalid index referenced"
        ),
        (Some((Value::Object(_), key)), "remove") => format!(
            "error in remove for path: '{path}': Unable to remove nonexistent key: {key}: \
             missing value"
        ),
        (Some((Value::Object(_), _)), "replace") => {
            format!("replace operation does not apply: doc is missing key: {path}: missing value")
        }
        (Some((Value::Object(_), _)), "test") => {
            format!("testing value {path} failed: test failed")
        }
        (_, "add" | "remove") => {
            format!(
                "{kind} operation does not apply: doc is missing path: \"{path}\": missing value"
            )
        }
        (_, "replace") => {
            format!("replace operation does not apply: doc is missing path: {path}: missing value")
        }
        (_, "test") => {
            format!("test operation does not apply: is missing path: {path}: missing value")
        }
        _ => format!(
            "{kind} operation does not apply: doc is missing destination path: {path}: \
             missing value"
        ),
    }
}

fn missing_from(kind: &str, from: &str) -> String {
    format!("{kind} operation does not apply: doc is missing from path: {from}: missing value")
}

/// The name Go's encoding/json gives a JSON value in decode errors.
pub fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
