//! An update that empties the finalizers of an object marked for
//! deletion removes it (and, for a pod, only once its grace period is 0;
//! for a namespace, only once spec.finalizers is empty too).
//! The write path calls it after every stored update.

use serde_json::Value;

use crate::catalog::Kind;
use crate::status::ApiResult;
use crate::AppState;

/// After an update: an object marked for deletion whose finalizers are
/// gone (and, for a pod, whose grace period is 0) is removed.
pub async fn finish_if_done(
    state: &AppState,
    kind: &Kind,
    key: &str,
    obj: &Value,
    revision: i64,
) -> ApiResult<bool> {
    let r = kind.resource;
    if obj.pointer("/metadata/deletionTimestamp").is_none() || !finalizers(obj).is_empty() {
        return Ok(false);
    }
    // A namespace also waits for its spec.finalizers (the namespace
    // controller's `kubernetes`), as upstream's namespace REST does.
    let is_namespace = r.group.is_empty() && r.plural == "namespaces";
    if is_namespace
        && obj
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty())
    {
        return Ok(false);
    }
    let grace = obj
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if r.plural == "pods" && r.group.is_empty() && grace > 0 {
        return Ok(false);
    }
    match state.store.delete(key, Some(revision)).await {
        Ok(_) => {
            super::observe::deleted(state, kind, obj).await;
            Ok(true)
        }
        Err(skiff_store::Error::NotFound { .. } | skiff_store::Error::Conflict { .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The finalizers an object carries.
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}
