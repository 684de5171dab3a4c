//! JSON answers and the request body limit, shared by the handlers and
//! the review kinds (`crate::reviews`).

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// Largest request body accepted (upstream's 3 MiB).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// `body` as a JSON answer with `status`.
pub fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_vec(body).unwrap_or_default(),
    )
        .into_response()
}
