//! POST of a new object.

use axum::response::Response;

use crate::catalog::Kind;
use crate::registry::write::WriteOptions;
use crate::status::ApiResult;
use crate::AppState;

use super::written;

pub(super) async fn create(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    body: &[u8],
    opts: &WriteOptions,
) -> ApiResult<Response> {
    let r = kind.resource;
    let checked = crate::registry::write::check_create_body(&state.catalog, r, body, opts)?;
    let outcome =
        crate::registry::write::create(state, kind, ns, checked.body, opts, checked.warnings)
            .await?;
    Ok(written(kind, outcome))
}
