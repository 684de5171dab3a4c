//! Server-side apply (`application/apply-patch+yaml`).

use axum::response::Response;

use crate::resources::Resource;
use crate::status::{ApiError, ApiResult};
use crate::write::WriteOptions;
use crate::AppState;

pub async fn server_side_apply(
    _state: &AppState,
    _r: &'static Resource,
    _ns: Option<&str>,
    _name: &str,
    _body: &[u8],
    _opts: &WriteOptions,
) -> ApiResult<Response> {
    Err(ApiError::unsupported_media_type(
        "application/apply-patch+yaml",
    ))
}
