//! Helpers of strategic merge patch on patch values: directive names,
//! cleaning values that land in the object as they are, merge key checks
//! and upstream's error messages.

use serde_json::{Map, Value};

use super::merge_keys::{lookup, numeric_key, Schema, Strategy};
use super::PatchError;

pub(super) const DIRECTIVE: &str = "$patch";
pub(super) const RETAIN_KEYS: &str = "$retainKeys";
pub(super) const SET_ORDER_PREFIX: &str = "$setElementOrder";
pub(super) const DELETE_PRIMITIVE_PREFIX: &str = "$deleteFromPrimitiveList";

pub(super) type Object = Map<String, Value>;
pub(super) type Result<T> = std::result::Result<T, PatchError>;

pub(super) fn bad(message: impl Into<String>) -> PatchError {
    PatchError::BadRequest(message.into())
}

/// A patch value that lands in the object as is (nothing to merge it
/// with): merge keys in it are checked for their type, then it is cleaned.
pub(super) fn checked(
    value: Value,
    strategy: Strategy,
    schema: Schema,
    field: &str,
) -> Result<Option<Value>> {
    check_keys(&value, strategy, schema, field)?;
    Ok(clean(value))
}

pub(super) fn check_keys(
    value: &Value,
    strategy: Strategy,
    schema: Schema,
    field: &str,
) -> Result<()> {
    match value {
        Value::Object(map) => {
            if let Some(directive) = map.get(DIRECTIVE) {
                if !matches!(directive.as_str(), Some("replace" | "delete")) {
                    return Err(unknown_directive(directive, map));
                }
            }
            for (key, value) in map {
                let (strategy, schema) = lookup(schema, key);
                check_keys(value, strategy, schema, key)?;
            }
        }
        Value::Array(list) => {
            for item in list.iter().filter_map(Value::as_object) {
                match strategy {
                    Strategy::Merge(Some(key)) => match item.get(key) {
                        Some(value) => check_key_type(item, key, value, field)?,
                        // A delete names what it deletes by the key.
                        None if item.get(DIRECTIVE).and_then(Value::as_str) == Some("delete") => {
                            return Err(no_merge_key_map(item, key));
                        }
                        None => {}
                    },
                    // Only elements of a list merged by key take a
                    // directive; upstream keeps `$patch` elsewhere as a
                    // field its type does not have, and refuses it.
                    _ if item.contains_key(DIRECTIVE) => {
                        return Err(bad(format!(
                            "strict decoding error: unknown field \"{field}[].{DIRECTIVE}\": {field} is not a list merged by key, so its elements take no {DIRECTIVE} directive"
                        )));
                    }
                    _ => {}
                }
                for (key, value) in item {
                    let (strategy, schema) = lookup(schema, key);
                    check_keys(value, strategy, schema, key)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// The value of merge key `key` in a patch element, checked for its type.
pub(super) fn patch_key<'a>(item: &'a Object, key: &str, field: &str) -> Result<&'a Value> {
    let Some(value) = item.get(key) else {
        return Err(no_merge_key_map(item, key));
    };
    check_key_type(item, key, value, field)?;
    Ok(value)
}

pub(super) fn check_key_type(item: &Object, key: &str, value: &Value, field: &str) -> Result<()> {
    let (ok, expected) = if numeric_key(key) {
        (value.is_i64() || value.is_u64(), "an integer")
    } else {
        (value.is_string(), "a string")
    };
    if !ok {
        return Err(bad(format!(
            "invalid merge key {key} in {field}: expected {expected}, but received a {}: {}",
            json_type(value),
            Value::Object(item.clone())
        )));
    }
    Ok(())
}

/// The field a `$setElementOrder/<field>` or `$deleteFromPrimitiveList/<field>`
/// key applies to.
pub(super) fn field_of<'a>(key: &'a str, prefix: &str) -> Result<&'a str> {
    match key.split_once('/') {
        Some((p, field)) if p == prefix => Ok(field),
        _ if prefix == DELETE_PRIMITIVE_PREFIX => Err(bad(format!(
            "invalid patch format of primitive list: {key}"
        ))),
        _ => Err(bad(format!(
            "invalid patch format of setElementOrder list: {key}"
        ))),
    }
}

/// A patch value as it lands in the object: without nulls and directives;
/// `None` when the value itself is a directive (`{"$patch": ...}`).
pub(super) fn clean(value: Value) -> Option<Value> {
    match value {
        Value::Object(map) if map.contains_key(DIRECTIVE) => None,
        Value::Object(map) => Some(Value::Object(clean_map(map))),
        Value::Array(list) => Some(Value::Array(clean_list(list))),
        other => Some(other),
    }
}

pub(super) fn clean_map(map: Object) -> Object {
    map.into_iter()
        .filter(|(k, v)| !v.is_null() && !is_directive_key(k))
        .filter_map(|(k, v)| clean(v).map(|v| (k, v)))
        .collect()
}

pub(super) fn clean_list(list: Vec<Value>) -> Vec<Value> {
    list.into_iter().filter_map(clean).collect()
}

pub(super) fn is_directive_key(key: &str) -> bool {
    key == DIRECTIVE
        || key == RETAIN_KEYS
        || key.starts_with("$setElementOrder/")
        || key.starts_with("$deleteFromPrimitiveList/")
}

/// Removes `key` keeping the order of the other keys.
pub(super) fn take_key(map: &mut Object, key: &str) -> Option<Value> {
    let value = map.get_mut(key).map(std::mem::take)?;
    map.retain(|k, _| k != key);
    Some(value)
}

/// Sets `key`, in place when it exists.
pub(super) fn set_key(map: &mut Object, key: String, value: Value) {
    match map.get_mut(&key) {
        Some(slot) => *slot = value,
        None => {
            map.insert(key, value);
        }
    }
}

pub(super) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

pub(super) fn unknown_directive(directive: &Value, map: &Object) -> PatchError {
    bad(format!(
        "unknown patch type: {directive} in map: {}",
        Value::Object(map.clone())
    ))
}

pub(super) fn no_merge_key(item: &Value, key: &str) -> PatchError {
    bad(format!(
        "map: {item} does not contain declared merge key: {key}"
    ))
}

pub(super) fn no_merge_key_map(item: &Object, key: &str) -> PatchError {
    no_merge_key(&Value::Object(item.clone()), key)
}

pub(super) fn expected_map(item: &Value) -> PatchError {
    bad(format!(
        "expected a map, but received a {}: {item}",
        json_type(item)
    ))
}

pub(super) fn not_a_list(field: &str, value: &Value) -> PatchError {
    bad(format!(
        "expected a list for {field}, but received a {}",
        json_type(value)
    ))
}
