//! What a panic in a handler becomes: a 500 Status and an error log line,
//! never a dropped stream or an unwind into an in-process (loopback)
//! caller. The request filters (`super::filters`) run every request under
//! [`caught`].

use std::future::Future;

use axum::http::Method;
use axum::response::Response;

/// Runs `handling` (the request's filters and handler), turning a panic in
/// it into a 500 Status and an error log line, so a client gets an answer,
/// the connection lives on, and a panic never unwinds into an in-process
/// (loopback) caller. `method` and `path` name the request in both.
pub async fn caught(
    method: Method,
    path: String,
    handling: impl Future<Output = Response>,
) -> Response {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(handling).catch_unwind().await {
        Ok(response) => response,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            tracing::error!(%method, %path, panic = %what, "handler panicked");
            axum::response::IntoResponse::into_response(crate::status::ApiError::internal(format!(
                "Internal error occurred: the server panicked while handling {method} {path}"
            )))
        }
    }
}
