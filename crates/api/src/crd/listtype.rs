//! The structural checks of custom objects besides the schema validator:
//! embedded resources' apiVersion/kind/metadata (upstream's
//! objectmeta.Validate below the root) and x-kubernetes-list-type set and
//! map uniqueness (listtype.ValidateListSetsAndMaps).

use serde_json::{Map, Value};

use super::errors as fe;
use super::structural::{Additional, Node};
use crate::validation::FieldError;

/// Embedded resources anywhere below the root of `obj`.
pub(crate) fn embedded_resources(root: &Node, obj: &Value) -> Vec<FieldError> {
    let mut out = Vec::new();
    if let Value::Object(map) = obj {
        for (k, v) in map {
            if let Some(prop) = root.properties.get(k) {
                embedded(k, v, Some(prop), &mut out);
            } else if let Some(Additional::Schema(ap)) = &root.additional {
                embedded(&fe::key("", k), v, Some(ap), &mut out);
            }
        }
    }
    out
}

/// upstream's objectmeta.Validate (not at the resource root): embedded
/// resources need apiVersion and kind, and a valid metadata.
pub(crate) fn embedded(path: &str, x: &Value, s: Option<&Node>, out: &mut Vec<FieldError>) {
    let Some(s) = s else { return };
    match x {
        Value::Object(map) => {
            if s.embedded {
                out.extend(super::embedded::validate(path, map));
            }
            for (k, v) in map {
                if let Some(prop) = s.properties.get(k) {
                    embedded(&fe::child(path, k), v, Some(prop), out);
                } else if let Some(ap) = &s.additional {
                    let ap = match ap {
                        Additional::Schema(n) => Some(n.as_ref()),
                        Additional::Bool(_) => None,
                    };
                    embedded(&fe::key(path, k), v, ap, out);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                embedded(&fe::index(path, i), v, s.items.as_deref(), out);
            }
        }
        _ => {}
    }
}

/// upstream's listtype.ValidateListSetsAndMaps from the root.
pub(crate) fn list_types(root: &Node, obj: &Value) -> Vec<FieldError> {
    let mut out = Vec::new();
    if let Value::Object(map) = obj {
        lists_in_object("", root, map, &mut out);
    }
    out
}

fn lists_in_object(path: &str, s: &Node, obj: &Map<String, Value>, out: &mut Vec<FieldError>) {
    if let Some(Additional::Schema(ap)) = &s.additional {
        for (k, v) in obj {
            lists_in_value(&fe::key(path, k), ap, v, out);
        }
    }
    for (k, v) in obj {
        if let Some(sub) = s.properties.get(k) {
            lists_in_value(&fe::child(path, k), sub, v, out);
        }
    }
}

fn lists_in_value(path: &str, s: &Node, v: &Value, out: &mut Vec<FieldError>) {
    match v {
        Value::Array(items) => {
            match s.list_type.as_deref() {
                Some("set") => {
                    for i in non_unique(items) {
                        if let Some(x) = items.get(i) {
                            out.push(fe::duplicate_go(&fe::index(path, i), x));
                        }
                    }
                }
                Some("map") => list_map(path, s, items, out),
                _ => {}
            }
            if let Some(item) = s.items.as_deref() {
                for (i, x) in items.iter().enumerate() {
                    lists_in_value(&fe::index(path, i), item, x, out);
                }
            }
        }
        Value::Object(map) => lists_in_object(path, s, map, out),
        _ => {}
    }
}

/// Indices of second occurrences (each duplicate value reported once).
fn non_unique(items: &[Value]) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, x) in items.iter().enumerate() {
        let before = items
            .iter()
            .take(i)
            .filter(|y| super::validate::json_equal(x, y))
            .count();
        if before == 1 {
            out.push(i);
        }
    }
    out
}

fn list_map(path: &str, s: &Node, items: &[Value], out: &mut Vec<FieldError>) {
    for (i, x) in items.iter().enumerate() {
        if !x.is_null() && !x.is_object() {
            out.push(fe::invalid(
                &fe::index(path, i),
                x,
                "must be an object for an array of list-type map",
            ));
            return;
        }
    }
    if items.len() <= 1 {
        return;
    }
    let keys: Vec<Value> = items
        .iter()
        .map(|x| {
            let mut key = Map::new();
            for k in &s.list_map_keys {
                if let Some(v) = x.get(k) {
                    key.insert(k.clone(), v.clone());
                }
            }
            Value::Object(key)
        })
        .collect();
    for i in non_unique(&keys) {
        if let Some(k) = keys.get(i) {
            out.push(fe::duplicate_go(&fe::index(path, i), k));
        }
    }
}
