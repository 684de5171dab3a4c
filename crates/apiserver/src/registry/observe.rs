//! What follows every stored create or delete, whatever the kind:
//! ResourceQuota usage recounted in the object's namespace
//! (`admission::resource_quota::recount`, upstream's quota controller's
//! replenishment) and, after a delete, the kind's storage hooks. The
//! write and delete paths call it once the store answered.

use serde_json::Value;

use crate::catalog::{Kind, Resource};
use crate::AppState;

/// After a create or delete of `obj` (of `r`) was stored: the quotas of
/// its namespace that count `r` get its current usage.
pub async fn created_or_deleted(state: &AppState, r: &Resource, obj: &Value) {
    if !r.namespaced {
        return;
    }
    if let Some(ns) = obj.pointer("/metadata/namespace").and_then(Value::as_str) {
        crate::admission::resource_quota::recount(&state.admission_context(), r, ns).await;
    }
}

/// After `obj` (of `kind`) left the store.
pub async fn deleted(state: &AppState, kind: &Kind, obj: &Value) {
    created_or_deleted(state, kind.resource, obj).await;
    if let Some(hooks) = kind.hooks() {
        hooks.after_delete(obj).await;
    }
}
