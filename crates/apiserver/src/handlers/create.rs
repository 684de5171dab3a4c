//! POST of a new object.

use axum::response::Response;

use crate::registry::write::WriteOptions;
use crate::resources::Resource;
use crate::status::ApiResult;
use crate::AppState;

use super::written;

pub(super) async fn create(
    state: &AppState,
    r: &Resource,
    ns: Option<&str>,
    body: &[u8],
    opts: &WriteOptions,
) -> ApiResult<Response> {
    let checked = crate::registry::write::check_create_body(r, body, opts)?;
    let outcome =
        crate::registry::write::create(state, r, ns, checked.body, opts, checked.warnings).await?;
    Ok(written(r, outcome))
}
