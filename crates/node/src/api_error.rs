//! [`ApiError`]: why a request through the node's cluster API seams
//! ([`crate::status::api::PodApi`], [`crate::pod_worker::env::Objects`])
//! failed, sorted by what the callers decide on it: the object is gone
//! (404), was changed (409), was replaced by another of the same name
//! (409 on a UID precondition), or anything else. Each variant keeps the
//! client's message, so logs and events read as before.
//!
//! It classifies kube-rs errors and nothing else; it makes no request.

/// A failed request to the API, by what it means to the node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 404: the object (or its namespace) does not exist.
    #[error("{0}")]
    NotFound(String),
    /// 409: the object was modified meanwhile (or already exists).
    #[error("{0}")]
    Conflict(String),
    /// 409 from a failed precondition (`Precondition failed: UID in
    /// precondition: ...`): the object is another one of the same name.
    #[error("{0}")]
    PreconditionFailed(String),
    /// Anything else: the request did not get through, or the API
    /// refused it for another reason (the message says which).
    #[error("{0}")]
    Transport(String),
}

impl ApiError {
    /// Whether the object the request was about is gone: deleted, or
    /// replaced by another of the same name. Retrying cannot mend that.
    pub fn is_gone(&self) -> bool {
        matches!(
            self,
            ApiError::NotFound(_) | ApiError::PreconditionFailed(_)
        )
    }
}

impl From<kube::Error> for ApiError {
    fn from(e: kube::Error) -> Self {
        let message = e.to_string();
        match &e {
            kube::Error::Api(s) if s.code == 404 || s.reason == "NotFound" => {
                ApiError::NotFound(message)
            }
            // The API server words a failed precondition as upstream's:
            // 409 Conflict, "... Precondition failed: UID in precondition".
            kube::Error::Api(s) if s.code == 409 && s.message.contains("Precondition failed") => {
                ApiError::PreconditionFailed(message)
            }
            kube::Error::Api(s) if s.code == 409 => ApiError::Conflict(message),
            _ => ApiError::Transport(message),
        }
    }
}

impl From<kube::core::request::Error> for ApiError {
    fn from(e: kube::core::request::Error) -> Self {
        ApiError::Transport(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status {
                code,
                reason: reason.into(),
                message: message.into(),
                ..kube::core::Status::default()
            }
            .boxed(),
        )
    }

    #[test]
    fn statuses_are_sorted_by_code_and_precondition() {
        let gone = api(404, "NotFound", "pods \"p\" not found");
        assert!(matches!(ApiError::from(gone), ApiError::NotFound(_)));
        let replaced = api(
            409,
            "Conflict",
            "Operation cannot be fulfilled on pods \"p\": Precondition failed: UID in precondition: a, UID in object meta: b",
        );
        let e = ApiError::from(replaced);
        assert!(matches!(e, ApiError::PreconditionFailed(_)) && e.is_gone());
        let stale = api(409, "Conflict", "the object has been modified");
        let e = ApiError::from(stale);
        assert!(matches!(e, ApiError::Conflict(_)) && !e.is_gone());
        let e = ApiError::from(api(500, "InternalError", "boom"));
        assert!(matches!(e, ApiError::Transport(_)) && !e.is_gone());
    }

    #[test]
    fn the_message_is_the_clients() {
        let e = api(404, "NotFound", "pods \"p\" not found");
        let text = e.to_string();
        assert_eq!(ApiError::from(e).to_string(), text);
    }
}
