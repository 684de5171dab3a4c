//! Reading kube-rs errors: the HTTP status code of an API error.
//!
//! This module owns only classification helpers shared by the modules
//! that talk to the API server; it defines no error type of its own.

/// The status code of an API error response, if `e` is one.
pub fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// 404 Not Found.
pub fn is_not_found(e: &kube::Error) -> bool {
    status_code(e) == Some(404)
}

/// 409 Conflict (stale resourceVersion, already exists, already bound).
pub fn is_conflict(e: &kube::Error) -> bool {
    status_code(e) == Some(409)
}
