//! Strategic merge patch (`application/strategic-merge-patch+json`) for
//! built-in kinds, after apimachinery's `pkg/util/strategicpatch`
//! (`StrategicMergeMapPatch`, server side: parallel lists are merged and
//! nulls that match nothing are dropped).
//!
//! - Objects merge recursively; a `null` value deletes the key.
//! - Lists follow their field's strategy ([`super::merge_keys`]): merge
//!   lists of objects merge element-wise by merge key, merge lists of
//!   primitives merge as a set, all other lists are replaced whole.
//! - Directives: `$patch: replace|delete` (on an object, or on an element
//!   of a merge list), `$retainKeys`, `$setElementOrder/<field>` and
//!   `$deleteFromPrimitiveList/<field>`.
//! - Order of a merged list, as upstream: elements named by the patch (or
//!   by `$setElementOrder`) take the patch's order, elements only on the
//!   server keep their relative order and are interleaved by their old
//!   positions; new elements that can't be placed that way come first.

use serde_json::Value;

use super::merge_keys::{lookup, Schema, Strategy};
use super::values::{
    bad, checked, clean, clean_map, expected_map, field_of, json_type, no_merge_key, not_a_list,
    patch_key, set_key, take_key, unknown_directive, Object, Result, DELETE_PRIMITIVE_PREFIX,
    DIRECTIVE, RETAIN_KEYS, SET_ORDER_PREFIX,
};
use super::PatchError;

/// Applies `patch` to `original` (both objects of the kind `schema` is the
/// root of) and returns the result.
pub(crate) fn apply(original: Object, patch: Object, schema: Schema) -> Result<Object> {
    merge_map(original, patch, schema)
}

fn merge_map(mut original: Object, mut patch: Object, schema: Schema) -> Result<Object> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        return match directive.as_str() {
            Some("replace") => Ok(clean_map(patch)),
            Some("delete") => Ok(Object::new()),
            _ => Err(unknown_directive(directive, &patch)),
        };
    }
    apply_retain_keys(&mut original, &mut patch)?;
    apply_set_element_order(&mut original, &mut patch, schema)?;
    // Deletions from primitive lists run after the merges of the same map.
    let mut deletions = Vec::new();
    for (key, value) in patch {
        if key.starts_with(DELETE_PRIMITIVE_PREFIX) {
            if !(value.is_array() || value.is_null()) {
                return Err(bad(format!(
                    "invalid patch format of primitive list: {key} must be a list, got {value}"
                )));
            }
            deletions.push((field_of(&key, DELETE_PRIMITIVE_PREFIX)?.to_owned(), value));
        } else {
            merge_field(&mut original, key, value, schema, false)?;
        }
    }
    for (key, value) in deletions {
        merge_field(&mut original, key, value, schema, true)?;
    }
    Ok(original)
}

/// Merges one key of a patch map into `original`. With `delete_list` the
/// value is a `$deleteFromPrimitiveList` list for the field `key`.
fn merge_field(
    original: &mut Object,
    key: String,
    patch: Value,
    schema: Schema,
    delete_list: bool,
) -> Result<()> {
    if patch.is_null() {
        take_key(original, &key);
        return Ok(());
    }
    let (strategy, schema) = lookup(schema, &key);
    let Some(current) = original.get_mut(&key).map(std::mem::take) else {
        if !delete_list {
            if let Some(value) = checked(patch, strategy, schema, &key)? {
                original.insert(key, value);
            }
        }
        return Ok(());
    };
    let merged = match (current, patch) {
        (Value::Object(current), Value::Object(patch)) => match strategy {
            Strategy::Replace => checked(Value::Object(patch), strategy, schema, &key)?,
            _ => Some(Value::Object(merge_map(current, patch, schema)?)),
        },
        (Value::Array(current), Value::Array(patch)) => match strategy {
            Strategy::Merge(merge_key) => {
                let merged = merge_list(current, patch, merge_key, schema, delete_list, &key)?;
                Some(Value::Array(merged.list))
            }
            _ if delete_list => {
                let merged = merge_list(current, patch, None, schema, true, &key)?;
                Some(Value::Array(merged.list))
            }
            _ => checked(Value::Array(patch), strategy, schema, &key)?,
        },
        (current, _) if delete_list => Some(current),
        (_, patch) => checked(patch, strategy, schema, &key)?,
    };
    match merged {
        Some(value) => set_key(original, key, value),
        None => {
            take_key(original, &key);
        }
    }
    Ok(())
}

/// A merged list, and its elements before reordering: the original's
/// elements left after deletions, then the elements the patch added.
struct Merged {
    list: Vec<Value>,
    natural: Vec<Value>,
}

fn merge_list(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: Option<&str>,
    schema: Schema,
    delete_list: bool,
    field: &str,
) -> Result<Merged> {
    if original.is_empty() && patch.is_empty() {
        return Ok(Merged {
            list: original,
            natural: Vec::new(),
        });
    }
    if !elements_are_objects(&original, &patch, field)? {
        if delete_list {
            original.retain(|v| !patch.contains(v));
            return Ok(Merged {
                natural: original.clone(),
                list: original,
            });
        }
        let server: Vec<Option<Value>> = original.iter().cloned().map(Some).collect();
        let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
        for value in original.into_iter().chain(patch.iter().cloned()) {
            if !merged.contains(&value) {
                merged.push(value);
            }
        }
        let natural = merged.clone();
        let list = reorder(merged, &patch, &server, None)?;
        return Ok(Merged { list, natural });
    }
    let Some(key) = merge_key else {
        return Err(bad(format!(
            "cannot merge lists without merge key for {field}"
        )));
    };
    let mut replace = false;
    let mut plain = Vec::new();
    for item in patch {
        let Value::Object(item) = item else { continue };
        let Some(directive) = item.get(DIRECTIVE) else {
            plain.push(item);
            continue;
        };
        match directive.as_str() {
            Some("delete") => {
                let id = patch_key(&item, key, field)?;
                original.retain(|o| o.get(key) != Some(id));
            }
            Some("replace") => replace = true,
            Some("merge") => {
                return Err(bad("merging lists cannot yet be specified in the patch"));
            }
            _ => return Err(unknown_directive(directive, &item)),
        }
    }
    if replace {
        original = plain
            .into_iter()
            .filter_map(|m| clean(Value::Object(m)))
            .collect();
        plain = Vec::new();
    }
    let server: Vec<Option<Value>> = original.iter().map(|o| o.get(key).cloned()).collect();
    let mut order = Vec::with_capacity(plain.len());
    for item in plain {
        let id = patch_key(&item, key, field)?.clone();
        match original.iter().position(|o| o.get(key) == Some(&id)) {
            Some(i) => {
                if let Some(slot) = original.get_mut(i) {
                    *slot = match std::mem::take(slot) {
                        Value::Object(current) => Value::Object(merge_map(current, item, schema)?),
                        other => other,
                    };
                }
            }
            None => original.extend(checked(
                Value::Object(item),
                Strategy::Default,
                schema,
                field,
            )?),
        }
        order.push(id);
    }
    let natural = original.clone();
    let list = reorder(original, &order, &server, Some(key))?;
    Ok(Merged { list, natural })
}

/// Whether the elements of both lists are objects. Lists of lists and lists
/// mixing element types are errors, as upstream.
fn elements_are_objects(original: &[Value], patch: &[Value], field: &str) -> Result<bool> {
    let mut first = None;
    for value in original.iter().chain(patch) {
        if value.is_array() {
            return Err(PatchError::Invalid(
                "lists of lists are not supported".into(),
            ));
        }
        let kind = json_type(value);
        match first {
            None => first = Some(kind),
            Some(f) if f != kind => {
                return Err(bad(format!(
                    "list element types are not identical in {field}: {} and {}",
                    Value::Array(original.to_vec()),
                    Value::Array(patch.to_vec())
                )))
            }
            Some(_) => {}
        }
    }
    Ok(first == Some("object"))
}

/// The identity of a list element: its merge key's value, or the element
/// itself for lists without merge key.
fn identity<'a>(item: &'a Value, key: Option<&str>) -> Option<&'a Value> {
    match key {
        None => Some(item),
        Some(key) => item.get(key),
    }
}

/// Orders `merged`: the elements named in `order` in that order, the
/// others (server-only) in their `server` order, interleaved by their
/// positions in `server` (upstream's `normalizeElementOrder`).
fn reorder(
    merged: Vec<Value>,
    order: &[Value],
    server: &[Option<Value>],
    key: Option<&str>,
) -> Result<Vec<Value>> {
    let server_pos = |id: &Value| server.iter().position(|s| s.as_ref() == Some(id));
    let mut named = Vec::new();
    let mut server_only = Vec::new();
    for item in merged {
        let Some(id) = identity(&item, key) else {
            return Err(no_merge_key(&item, key.unwrap_or_default()));
        };
        let server_at = server_pos(id);
        match order.iter().position(|o| o == id) {
            Some(at) => named.push((at, server_at, item)),
            None => server_only.push((server_at.unwrap_or(usize::MAX), server_at, item)),
        }
    }
    named.sort_by_key(|(at, ..)| *at);
    server_only.sort_by_key(|(at, ..)| *at);
    let mut out = Vec::with_capacity(named.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = named.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (Some((_, Some(l), _)), Some((_, Some(r), _))) => l < r,
            (Some(_), Some(_)) => false,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next.map(|(_, _, item)| item));
    }
    Ok(out)
}

fn apply_retain_keys(original: &mut Object, patch: &mut Object) -> Result<()> {
    const FORMAT: &str = "invalid patch format of retainKeys";
    let Some(retain) = take_key(patch, RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(bad(format!(
            "{FORMAT}: {RETAIN_KEYS} must be a list, got {retain}"
        )));
    };
    let keeps = |k: &str| retain.iter().any(|v| v.as_str() == Some(k));
    for (key, value) in patch.iter() {
        if value.is_null()
            || key.starts_with(DELETE_PRIMITIVE_PREFIX)
            || key.starts_with(SET_ORDER_PREFIX)
        {
            continue;
        }
        if !keeps(key) {
            return Err(bad(format!(
                "{FORMAT}: field {key} is not in the {RETAIN_KEYS} list"
            )));
        }
    }
    original.retain(|k, _| keeps(k));
    Ok(())
}

/// Processes the `$setElementOrder/<field>` directives of `patch` together
/// with `<field>`, which is merged here and taken out of `patch`.
fn apply_set_element_order(
    original: &mut Object,
    patch: &mut Object,
    schema: Schema,
) -> Result<()> {
    let keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ORDER_PREFIX))
        .cloned()
        .collect();
    for directive in keys {
        let field = field_of(&directive, SET_ORDER_PREFIX)?.to_owned();
        let Some(Value::Array(order)) = take_key(patch, &directive) else {
            return Err(bad(format!(
                "invalid patch format of setElementOrder list: {directive} must be a list"
            )));
        };
        let (strategy, schema) = lookup(schema, &field);
        let merge_key = match strategy {
            Strategy::Merge(key) => key,
            _ => None,
        };
        let current = match original.get(&field) {
            None => None,
            Some(Value::Array(list)) => Some(list.clone()),
            Some(other) => return Err(not_a_list(&field, other)),
        };
        let patch_list = match take_key(patch, &field) {
            None => None,
            Some(Value::Array(list)) => Some(list),
            Some(other) => return Err(not_a_list(&field, &other)),
        };
        if merge_key.is_none() {
            // Without a merge key only primitives can be ordered.
            let nested = |v: &Value| v.is_object() || v.is_array();
            let listed = current.iter().chain(patch_list.iter()).flatten();
            if order.iter().any(nested) || listed.clone().any(nested) {
                return Err(bad(format!(
                    "invalid patch format of setElementOrder list: {directive} orders {field}, whose elements are not merged by a key"
                )));
            }
        }
        validate_order(patch_list.as_deref(), &order, merge_key, &field)?;
        let server_len = current.as_ref().map_or(0, Vec::len);
        let merged = match (current, patch_list) {
            (None, None) => continue,
            (Some(list), None) => Merged {
                natural: list.clone(),
                list,
            },
            (Some(list), Some(patch_list)) if matches!(strategy, Strategy::Merge(_)) => {
                merge_list(list, patch_list, merge_key, schema, false, &field)?
            }
            (_, Some(patch_list)) => {
                let list = match checked(Value::Array(patch_list), strategy, schema, &field)? {
                    Some(Value::Array(list)) => list,
                    _ => Vec::new(),
                };
                Merged {
                    natural: list.clone(),
                    list,
                }
            }
        };
        // Upstream compares against the original list's backing array,
        // which by then holds the survivors of deletions followed by the
        // added elements, cut at the original length.
        let mut server = merged.natural;
        server.truncate(server_len);
        let server: Vec<Option<Value>> = server
            .iter()
            .map(|s| identity(s, merge_key).cloned())
            .collect();
        let mut order_ids = Vec::with_capacity(order.len());
        for item in &order {
            order_ids.push(match (merge_key, item) {
                (Some(key), Value::Object(map)) => patch_key(map, key, &field)?.clone(),
                (Some(_), other) => return Err(expected_map(other)),
                (None, other) => other.clone(),
            });
        }
        let list = reorder(merged.list, &order_ids, &server, merge_key)?;
        set_key(original, field, Value::Array(list));
    }
    Ok(())
}

/// Checks that the elements of a patch list appear in the same relative
/// order as in its `$setElementOrder` list (deletions are ignored).
fn validate_order(
    patch: Option<&[Value]>,
    order: &[Value],
    merge_key: Option<&str>,
    field: &str,
) -> Result<()> {
    let Some(patch) = patch else { return Ok(()) };
    if patch.is_empty() || order.is_empty() {
        return Ok(());
    }
    let mut items = Vec::with_capacity(patch.len());
    for item in patch {
        match item.as_object() {
            None if merge_key.is_some() => return Err(expected_map(item)),
            // Directives ($patch: delete, ...) take no place in the order.
            Some(map) if map.contains_key(DIRECTIVE) => {}
            _ => items.push(item),
        }
    }
    let (mut p, mut o) = (0, 0);
    while let (Some(&at_p), Some(at_o)) = (items.get(p), order.get(o)) {
        let same = match merge_key {
            None => at_p == at_o,
            Some(key) => {
                let (Some(item), Some(ordered)) = (at_p.as_object(), at_o.as_object()) else {
                    return Err(expected_map(at_o));
                };
                patch_key(item, key, field)? == patch_key(ordered, key, field)?
            }
        };
        if same {
            p += 1;
        }
        o += 1;
    }
    if p < items.len() {
        return Err(bad(format!(
            "The order in patch list:\n{}\n doesn't match {SET_ORDER_PREFIX} list:\n{}\n",
            Value::Array(patch.to_vec()),
            Value::Array(order.to_vec())
        )));
    }
    Ok(())
}
