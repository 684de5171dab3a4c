//! PUT of an object or its status.

use axum::response::Response;

use crate::object::{self};
use crate::registry::write::WriteOptions;
use crate::resources::Resource;
use crate::status::ApiResult;
use crate::AppState;

use super::written;

pub(super) async fn update(
    state: &AppState,
    r: &Resource,
    ns: Option<&str>,
    name: &str,
    subresource: Option<&str>,
    body: &[u8],
    opts: &WriteOptions,
) -> ApiResult<Response> {
    crate::registry::write::check_numbers(r, body)?;
    let obj = object::decode(body)?;
    let kind = obj
        .get("kind")
        .and_then(serde_json::Value::as_str)
        .unwrap_or(r.kind);
    crate::resources::check_duplicated_types(r.group, kind, (r.kind, r.version), body)?;
    let warnings = crate::registry::write::check_fields(r, body, &obj, opts)?;
    let mut outcome =
        crate::registry::write::update(state, r, ns, name, subresource, opts, |_| Ok(obj.clone()))
            .await?;
    outcome.warnings = warnings;
    Ok(written(r, outcome))
}
