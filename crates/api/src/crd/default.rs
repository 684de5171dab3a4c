//! Defaulting of custom objects (upstream's schema/defaulting): drop
//! `null`s a non-nullable field without a default cannot hold
//! (`PruneNonNullableNullsWithoutDefaults`), then fill absent fields, and
//! non-nullable nulls, from their schema's `default` (`Default`), top down
//! so a defaulted object gets its own fields' defaults too.

use serde_json::Value;

use super::structural::{Additional, Node};

/// Runs both steps, in upstream's order.
pub(crate) fn apply(root: &Node, obj: &mut Value) {
    prune_nulls(obj, Some(root));
    default(obj, root);
}

fn non_nullable_null(x: &Value, s: Option<&Node>) -> bool {
    x.is_null() && s.is_some_and(|s| !s.nullable)
}

fn additional_schema(s: &Node) -> Option<&Node> {
    match &s.additional {
        Some(Additional::Schema(n)) => Some(n),
        _ => None,
    }
}

fn default(x: &mut Value, s: &Node) {
    match x {
        Value::Object(map) => {
            for (k, prop) in &s.properties {
                let Some(d) = &prop.default else { continue };
                let missing = map.get(k).is_none_or(|v| non_nullable_null(v, Some(prop)));
                if missing {
                    map.insert(k.clone(), d.clone());
                }
            }
            for (k, v) in map.iter_mut() {
                if let Some(prop) = s.properties.get(k) {
                    default(v, prop);
                } else if let Some(ap) = additional_schema(s) {
                    if non_nullable_null(v, Some(ap)) {
                        if let Some(d) = &ap.default {
                            *v = d.clone();
                        }
                    }
                    default(v, ap);
                }
            }
        }
        Value::Array(items) => {
            let Some(item) = s.items.as_deref() else {
                return;
            };
            for v in items.iter_mut() {
                if non_nullable_null(v, Some(item)) {
                    if let Some(d) = &item.default {
                        *v = d.clone();
                    }
                }
                default(v, item);
            }
        }
        _ => {}
    }
}

fn schema_for_field<'a>(field: &str, s: Option<&'a Node>) -> Option<&'a Node> {
    let s = s?;
    s.properties.get(field).or_else(|| additional_schema(s))
}

/// Upstream's `PruneNonNullableNullsWithoutDefaults`.
pub(crate) fn prune_nulls(x: &mut Value, s: Option<&Node>) {
    match x {
        Value::Object(map) => {
            map.retain(|k, v| {
                let schema = schema_for_field(k, s);
                !(v.is_null() && schema.is_some_and(|s| !s.nullable && s.default.is_none()))
            });
            for (k, v) in map.iter_mut() {
                prune_nulls(v, schema_for_field(k, s));
            }
        }
        Value::Array(items) => {
            let schema = s.and_then(|s| s.items.as_deref());
            for v in items.iter_mut() {
                prune_nulls(v, schema);
            }
        }
        _ => {}
    }
}
