//! Errors as Kubernetes `Status` objects (metav1.Status), with the
//! upstream reasons and message wording kubectl prints.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// One cause of an Invalid error (a field path and what is wrong with it).
#[derive(Debug, Clone)]
pub struct Cause {
    pub reason: &'static str,
    pub field: String,
    pub message: String,
}

/// An API error; renders as a Status body with the matching HTTP code.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct ApiError {
    pub code: StatusCode,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<serde_json::Value>,
    pub causes: Vec<Cause>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    fn new(code: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            causes: Vec::new(),
        }
    }

    fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        let mut d = json!({ "name": name, "kind": kind });
        if !group.is_empty() {
            set(&mut d, "group", json!(group));
        }
        self.details = Some(d);
        self
    }

    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        let qualified = qualified(group, plural);
        Self::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("{qualified} \"{name}\" not found"),
        )
        .with_details(group, plural, name)
    }

    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        let qualified = qualified(group, plural);
        Self::new(
            StatusCode::CONFLICT,
            "AlreadyExists",
            format!("{qualified} \"{name}\" already exists"),
        )
        .with_details(group, plural, name)
    }

    pub fn conflict(group: &str, plural: &str, name: &str) -> Self {
        let qualified = qualified(group, plural);
        Self::new(
            StatusCode::CONFLICT,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {qualified} \"{name}\": the object has been \
                 modified; please apply your changes to the latest version and try again"
            ),
        )
        .with_details(group, plural, name)
    }

    /// 409 Conflict with a message of its own.
    pub fn conflict_message(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "Conflict", message)
    }

    /// 422 Invalid with only a message (no field causes).
    pub fn invalid_message(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", message)
    }

    /// 504 Timeout (e.g. a resourceVersion the server has not reached).
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(StatusCode::GATEWAY_TIMEOUT, "Timeout", message)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(StatusCode::GONE, "Expired", message)
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLarge",
            message,
        )
    }

    /// 415 for a body in `content_type`; `accepted` lists what the
    /// endpoint takes.
    pub fn unsupported_media_type(content_type: &str, accepted: &str) -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format ({content_type}) - accepted \
                 media types include: {accepted}"
            ),
        )
    }

    pub fn unauthorized() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized")
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "Forbidden", message)
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    pub fn not_found_path() -> Self {
        let mut e = Self::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        );
        // Upstream's generic server response carries empty details, and
        // clients (`kubectl debug`) read them.
        e.details = Some(json!({}));
        e
    }

    /// 408 for a request whose body did not arrive in time.
    pub fn request_timeout(message: impl Into<String>) -> Self {
        Self::new(StatusCode::REQUEST_TIMEOUT, "Timeout", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            message,
        )
    }

    /// 422 Invalid: `<Kind> "<name>" is invalid: <field>: <message>, ...`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let list = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect::<Vec<_>>();
        let summary = match list.as_slice() {
            [one] => one.clone(),
            _ => format!("[{}]", list.join(", ")),
        };
        let qualified_kind = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let mut e = Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            format!("{qualified_kind} \"{name}\" is invalid: {summary}"),
        )
        .with_details(group, kind, name);
        e.causes = causes;
        e
    }

    /// The metav1.Status body.
    pub fn status_body(&self) -> serde_json::Value {
        let mut body = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code.as_u16(),
        });
        let mut details = self.details.clone();
        if !self.causes.is_empty() {
            let causes: Vec<_> = self
                .causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect();
            details.get_or_insert_with(|| json!({}))["causes"] = json!(causes);
        }
        if let Some(details) = details {
            set(&mut body, "details", details);
        }
        body
    }
}

pub fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

impl ApiError {
    /// The Status body as upstream's encoder writes it: fields in
    /// metav1.Status order (kind, apiVersion, metadata, status, message,
    /// reason, details, code), details in StatusDetails order, a newline
    /// at the end.
    pub fn status_bytes(&self) -> Vec<u8> {
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Status<'a> {
            kind: &'a str,
            api_version: &'a str,
            metadata: serde_json::Map<String, serde_json::Value>,
            status: &'a str,
            message: &'a str,
            reason: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            details: Option<Details<'a>>,
            code: u16,
        }
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Details<'a> {
            #[serde(skip_serializing_if = "Option::is_none")]
            name: Option<&'a serde_json::Value>,
            #[serde(skip_serializing_if = "Option::is_none")]
            group: Option<&'a serde_json::Value>,
            #[serde(skip_serializing_if = "Option::is_none")]
            kind: Option<&'a serde_json::Value>,
            #[serde(skip_serializing_if = "Option::is_none")]
            uid: Option<&'a serde_json::Value>,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            causes: Vec<CauseOut<'a>>,
            #[serde(skip_serializing_if = "Option::is_none")]
            retry_after_seconds: Option<&'a serde_json::Value>,
        }
        #[derive(serde::Serialize)]
        struct CauseOut<'a> {
            reason: &'a str,
            message: &'a str,
            field: &'a str,
        }
        let causes: Vec<CauseOut<'_>> = self
            .causes
            .iter()
            .map(|c| CauseOut {
                reason: c.reason,
                message: &c.message,
                field: &c.field,
            })
            .collect();
        let details = match (&self.details, causes.is_empty()) {
            (None, true) => None,
            (d, _) => {
                let get = |k: &str| d.as_ref().and_then(|d| d.get(k));
                Some(Details {
                    name: get("name"),
                    group: get("group"),
                    kind: get("kind"),
                    uid: get("uid"),
                    causes,
                    retry_after_seconds: get("retryAfterSeconds"),
                })
            }
        };
        let status = Status {
            kind: "Status",
            api_version: "v1",
            metadata: serde_json::Map::new(),
            status: "Failure",
            message: &self.message,
            reason: self.reason,
            details,
            code: self.code.as_u16(),
        };
        let mut out = serde_json::to_vec(&status).unwrap_or_default();
        out.push(b'\n');
        out
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.code,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            self.status_bytes(),
        )
            .into_response()
    }
}

impl From<skiff_store::Error> for ApiError {
    fn from(e: skiff_store::Error) -> Self {
        use skiff_store::Error as S;
        match e {
            S::Compacted {
                requested,
                compacted,
            } => ApiError::gone(format!(
                "too old resource version: {requested} ({compacted})"
            )),
            S::TooLarge { .. } => ApiError::too_large("Request entity too large: limit is 3145728"),
            S::InvalidContinue { reason } => {
                ApiError::bad_request(format!("continue key is not valid: {reason}"))
            }
            S::FutureRevision { requested, .. } => ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "Timeout",
                format!("Too large resource version: {requested}"),
            ),
            other => ApiError::internal(other.to_string()),
        }
    }
}

/// Sets `key` of object `v` (nothing for other values).
fn set(v: &mut Value, key: &str, value: Value) {
    if let Some(map) = v.as_object_mut() {
        map.insert(key.to_string(), value);
    }
}
