//! The outermost layer of the router: a panic in a handler becomes a 500
//! Status and an error log line, never a dropped stream or an unwind into
//! an in-process (loopback) caller.

/// Turns a panic in a handler into a 500 Status and an error log line,
/// so a client gets an answer, the connection lives on, and a panic never
/// unwinds into an in-process (loopback) caller.
pub async fn catch_panic(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use futures::FutureExt;
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    match std::panic::AssertUnwindSafe(next.run(req))
        .catch_unwind()
        .await
    {
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
