//! Pruning of custom objects (upstream's schema/pruning): fields the
//! schema does not specify are dropped, except under
//! `x-kubernetes-preserve-unknown-fields`, and `apiVersion`, `kind` and
//! `metadata` of the object root and of embedded resources. Returns the
//! dropped paths, sorted, as upstream records them for strict field
//! validation (`spec.foo`, `spec.items[0].bar`). Nested embedded
//! resources also lose unknown metadata fields, unreported.

use serde_json::Value;

use super::structural::{Additional, Node};

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// ObjectMeta's JSON fields: an embedded resource's metadata keeps only
/// these (upstream round-trips it through ObjectMeta).
pub const OBJECT_META: [&str; 15] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Drops unknown ObjectMeta fields of a nested embedded resource, as
/// upstream's objectmeta.Coerce does: silently (only the root's metadata
/// reports unknown fields, and that is the generic server's business).
fn prune_meta(map: &mut serde_json::Map<String, Value>, path: &str) {
    if path.is_empty() {
        return;
    }
    if let Some(Value::Object(meta)) = map.get_mut("metadata") {
        meta.retain(|k, _| OBJECT_META.contains(&k.as_str()));
    }
}

fn additional_schema(s: &Node) -> Option<Option<&Node>> {
    match &s.additional {
        Some(Additional::Schema(n)) => Some(Some(n)),
        Some(Additional::Bool(_)) => Some(None),
        None => None,
    }
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// What a walk collects, and whether it coerces embedded metadata.
struct Ctx {
    out: Vec<String>,
    coerce_meta: bool,
}

/// Prunes a whole custom object as a request or storage read does (the
/// root counts as an embedded resource; nested embedded metadata is
/// coerced to ObjectMeta).
pub(crate) fn prune(root: &Node, obj: &mut Value) -> Vec<String> {
    run(root, obj, true, true)
}

/// upstream's `pruning.Prune(obj, s, isResourceRoot)` alone.
pub(crate) fn prune_with(s: &Node, obj: &mut Value, is_resource_root: bool) -> Vec<String> {
    run(s, obj, is_resource_root, false)
}

fn run(s: &Node, obj: &mut Value, is_resource_root: bool, coerce_meta: bool) -> Vec<String> {
    let mut cx = Ctx {
        out: Vec::new(),
        coerce_meta,
    };
    if is_resource_root && !s.embedded {
        let mut root = s.clone();
        root.embedded = true;
        walk(obj, Some(&root), "", &mut cx);
    } else {
        walk(obj, Some(s), "", &mut cx);
    }
    cx.out.sort();
    cx.out
}

fn walk(x: &mut Value, s: Option<&Node>, path: &str, cx: &mut Ctx) {
    if let Some(s) = s.filter(|s| s.preserve_unknown) {
        skip(x, s, path, cx);
        return;
    }
    match x {
        Value::Object(map) => {
            let Some(s) = s else {
                let mut keys: Vec<String> = map.keys().cloned().collect();
                keys.sort();
                for k in keys {
                    cx.out.push(join(path, &k));
                }
                map.clear();
                return;
            };
            if s.embedded && cx.coerce_meta {
                prune_meta(map, path);
            }
            let mut drop = Vec::new();
            for (k, v) in map.iter_mut() {
                if s.embedded && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                if let Some(prop) = s.properties.get(k) {
                    walk(v, Some(prop), &join(path, k), cx);
                } else if let Some(ap) = additional_schema(s) {
                    walk(v, ap, &join(path, k), cx);
                } else {
                    if !META_FIELDS.contains(&k.as_str()) || !path.is_empty() {
                        cx.out.push(join(path, k));
                    }
                    drop.push(k.clone());
                }
            }
            for k in drop {
                map.remove(&k);
            }
        }
        Value::Array(items) => {
            let item = s.and_then(|s| s.items.as_deref());
            for (i, v) in items.iter_mut().enumerate() {
                walk(v, item, &format!("{path}[{i}]"), cx);
            }
        }
        _ => {}
    }
}

fn skip(x: &mut Value, s: &Node, path: &str, cx: &mut Ctx) {
    match x {
        Value::Object(map) => {
            if s.embedded && cx.coerce_meta {
                prune_meta(map, path);
            }
            for (k, v) in map.iter_mut() {
                if s.embedded && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                if let Some(prop) = s.properties.get(k) {
                    walk(v, Some(prop), &join(path, k), cx);
                } else if let Some(ap) = additional_schema(s) {
                    walk(v, ap, &join(path, k), cx);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = s.items.as_deref() {
                for (i, v) in items.iter_mut().enumerate() {
                    skip(v, item, &format!("{path}[{i}]"), cx);
                }
            }
        }
        _ => {}
    }
}
