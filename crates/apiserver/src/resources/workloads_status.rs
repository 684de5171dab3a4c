//! What the strategies of the workload kinds beyond Deployment, ReplicaSet
//! and Job share: the status a new object starts with (upstream's
//! `PrepareForCreate` resets it to the zero status).

use serde_json::Value;

/// Replaces `obj.status` with the zero status of `kind`.
pub fn reset(obj: &mut Value, kind: &str) {
    if let (Some(status), Some(map)) = (
        skiff_api::defaults::initial_status(kind),
        obj.as_object_mut(),
    ) {
        map.insert("status".into(), status);
    }
}
