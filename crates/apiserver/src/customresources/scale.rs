//! The scale subresource of custom resources: an autoscaling/v1 Scale
//! whose spec.replicas, status.replicas and status.selector are read from
//! (and spec.replicas written to) the paths the CRD version names.

use serde_json::{json, Value};

use super::ScalePaths;

/// `.spec.replicas` → `["spec", "replicas"]`.
fn segments(path: &str) -> Vec<&str> {
    path.trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
        .collect()
}

fn at<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    segments(path)
        .into_iter()
        .try_fold(obj, |v, s| v.as_object()?.get(s))
}

/// The metadata a Scale carries of the object it scales (custom or
/// built-in): name, namespace, uid, resourceVersion, creationTimestamp.
pub fn metadata(obj: &Value) -> Value {
    let meta = obj.get("metadata").cloned().unwrap_or(json!({}));
    let mut metadata = json!({});
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = meta.get(field) {
            crate::object::set(&mut metadata, field, v.clone());
        }
    }
    metadata
}

/// The Scale view of a custom object.
pub fn to_scale(paths: &ScalePaths, obj: &Value) -> Value {
    let metadata = metadata(obj);
    let replicas = |p: &str| at(obj, p).and_then(Value::as_i64).unwrap_or(0);
    let mut status = json!({"replicas": replicas(&paths.status_replicas)});
    if let Some(selector) = paths
        .label_selector
        .as_deref()
        .and_then(|p| at(obj, p))
        .and_then(Value::as_str)
    {
        crate::object::set(&mut status, "selector", json!(selector));
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": replicas(&paths.spec_replicas)},
        "status": status,
    })
}

/// `obj` with `replicas` at the spec replicas path (objects made on the
/// way).
pub fn set_replicas(paths: &ScalePaths, obj: &Value, replicas: i64) -> Value {
    let mut next = obj.clone();
    let segs = segments(&paths.spec_replicas);
    let Some((last, parents)) = segs.split_last() else {
        return next;
    };
    let mut cur = &mut next;
    for s in parents {
        if !cur.get(*s).is_some_and(Value::is_object) {
            crate::object::set(cur, s, json!({}));
        }
        let Some(child) = cur.get_mut(*s) else {
            return obj.clone();
        };
        cur = child;
    }
    crate::object::set(cur, last, json!(replicas));
    next
}
