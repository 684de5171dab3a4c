//! PUT of an object or its status.

use axum::response::Response;

use crate::catalog::Kind;
use crate::object::{self};
use crate::registry::write::WriteOptions;
use crate::status::ApiResult;
use crate::AppState;

use super::written;

pub(super) async fn update(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    name: &str,
    subresource: Option<&str>,
    body: &[u8],
    opts: &WriteOptions,
) -> ApiResult<Response> {
    let r = kind.resource;
    crate::registry::write::check_numbers(r, body)?;
    let obj = object::decode(body)?;
    let body_kind = obj
        .get("kind")
        .and_then(serde_json::Value::as_str)
        .unwrap_or(r.kind);
    state
        .catalog
        .check_duplicated_types(r.group, body_kind, (r.kind, r.version), body)?;
    let warnings = crate::registry::write::check_fields(&state.catalog, r, body, &obj, opts)?;
    let mut outcome =
        crate::registry::write::update(state, kind, ns, name, subresource, opts, |_| {
            Ok(obj.clone())
        })
        .await?;
    outcome.warnings = warnings;
    Ok(written(kind, outcome))
}
