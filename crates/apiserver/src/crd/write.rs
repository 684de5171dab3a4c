//! Writing a CRD back to the store after the controller or the cleanup
//! changed its status or finalizers (compare-and-swap on the revision
//! they read).

use serde_json::Value;

use crate::object;
use crate::AppState;

/// Writes `crd` (whose stored revision was `revision`) back; a conflict
/// means a newer version exists, whose event brings another pass.
pub async fn write_status(state: &AppState, crd: &Value, revision: i64) -> Option<i64> {
    let r = super::crd_resource()?;
    let name = object::name_of(crd)?;
    let mut stored = crd.clone();
    object::meta(&mut stored).remove("resourceVersion");
    let value = serde_json::to_vec(&stored).ok()?;
    match state
        .store
        .update(&object::key(r, None, name), value.into(), revision)
        .await
    {
        Ok(kv) => Some(kv.mod_revision),
        Err(skiff_store::Error::Conflict { .. } | skiff_store::Error::NotFound { .. }) => None,
        Err(e) => {
            tracing::warn!(crd = %name, error = %e, "cannot write CRD status");
            None
        }
    }
}
