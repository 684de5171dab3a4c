//! managedFields bookkeeping on ordinary writes (operation "Update"),
//! delegating the field-set logic to skiff-api's server-side apply module.

use serde_json::Value;

use crate::catalog::Resource;

/// Records an Update by `manager` from `old` to `new` in
/// metadata.managedFields.
pub fn record_update(r: &Resource, old: Option<&Value>, new: Value, manager: &str) -> Value {
    skiff_api::apply::record_update(
        r.kind,
        old,
        &new,
        manager,
        &r.group_version(),
        &crate::object::now(),
    )
}
