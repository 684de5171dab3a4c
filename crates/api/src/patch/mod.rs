//! PATCH semantics on wire-form objects, as the Kubernetes apiserver applies
//! them (k8s.io/apiserver `pkg/endpoints/handlers/patch.go`):
//!
//! - `application/json-patch+json`: RFC 6902 operations (`json.rs`, with
//!   the messages of gopkg.in/evanphx/json-patch.v4).
//! - `application/merge-patch+json`: RFC 7386 merge patch.
//! - `application/strategic-merge-patch+json`: strategic merge patch for
//!   built-in kinds (`strategic.rs`; the per-field strategies, i.e. the
//!   `patchStrategy`/`patchMergeKey` tags of k8s.io/api, in
//!   `merge_keys.rs`). Other kinds (custom resources) answer
//!   [`PatchError::UnsupportedMediaType`] as upstream.
//! - `application/apply-patch+yaml` (server-side apply) is not handled
//!   here: [`apply_patch`] answers [`PatchError::ApplyNotHandled`].
//!
//! [`apply_patch`] never modifies the original: it returns a new object or
//! an error whose variant names the upstream status (see
//! [`PatchError::status_code`]).

mod json;
pub use json::go_type;

/// A strategic merge patch as the fields it sets: without directives
/// (`$patch`, `$retainKeys`, `$setElementOrder/…`,
/// `$deleteFromPrimitiveList/…`), the elements they mark, and nulls, for
/// field validation (directives are no fields).
pub fn without_directives(patch: serde_json::Value) -> serde_json::Value {
    values::clean(patch).unwrap_or_else(|| serde_json::json!({}))
}
mod merge_keys;
pub use merge_keys::{extensions, PatchExtension};
mod strategic;
#[cfg(test)]
mod tests;
mod values;

use serde_json::Value;

/// The kind of a PATCH body, from its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PatchType {
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchType {
    /// The patch type of a `Content-Type` header value; parameters such as
    /// `; charset=utf-8` are ignored. `None` for anything else (upstream
    /// answers 415 Unsupported Media Type).
    pub fn from_content_type(content_type: &str) -> Option<PatchType> {
        let media_type = content_type.split(';').next().unwrap_or_default().trim();
        match media_type.to_ascii_lowercase().as_str() {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::StrategicMerge),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }

    /// The canonical `Content-Type` of this patch type.
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Json => "application/json-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// Media types accepted for custom resources (no strategic merge patch),
/// as listed by upstream's 415 answer.
const CUSTOM_RESOURCE_PATCH_TYPES: &str =
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";

/// The patch media types built-in kinds accept, as a 415 lists them.
pub const PATCH_TYPES: &str = "application/json-patch+json, application/merge-patch+json, \
     application/strategic-merge-patch+json, application/apply-patch+yaml";

/// Why a patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// 400 Bad Request: the body is not valid JSON (`invalid JSON patch`),
    /// has the wrong shape (`json: cannot unmarshal object into Go value of
    /// type jsonpatch.Patch`), or a strategic merge patch is malformed
    /// (`map: {"image":"x"} does not contain declared merge key: name`).
    #[error("{0}")]
    BadRequest(String),
    /// 422 Unprocessable Entity (reason Invalid): the patch is well formed
    /// but can't be applied, e.g. a JSON patch `test` that fails (`testing
    /// value /spec/replicas failed: test failed`) or a path that doesn't
    /// exist. Upstream's Status message for these is the generic
    /// [`PatchError::status_message`]; the detail is this string.
    #[error("{0}")]
    Invalid(String),
    /// 415 Unsupported Media Type: strategic merge patch of a kind that is
    /// not built in (custom resources).
    #[error(
        "the body of the request was in an unknown format - accepted media types include: \
         {CUSTOM_RESOURCE_PATCH_TYPES}"
    )]
    UnsupportedMediaType,
    /// Server-side apply (`application/apply-patch+yaml`) is not handled by
    /// [`apply_patch`]; the caller routes it to its apply implementation.
    #[error(
        "server-side apply patches (application/apply-patch+yaml) are not handled by \
         apply_patch"
    )]
    ApplyNotHandled,
}

impl PatchError {
    /// The HTTP status upstream answers with.
    pub fn status_code(&self) -> u16 {
        match self {
            PatchError::BadRequest(_) => 400,
            PatchError::Invalid(_) => 422,
            PatchError::UnsupportedMediaType | PatchError::ApplyNotHandled => 415,
        }
    }

    /// The `reason` of upstream's Status.
    pub fn reason(&self) -> &'static str {
        match self {
            PatchError::BadRequest(_) => "BadRequest",
            PatchError::Invalid(_) => "Invalid",
            PatchError::UnsupportedMediaType | PatchError::ApplyNotHandled => {
                "UnsupportedMediaType"
            }
        }
    }

    /// The `message` of upstream's Status. For [`PatchError::Invalid`]
    /// upstream (`NewGenericServerResponse(422, ...)`) drops the detail.
    pub fn status_message(&self) -> String {
        match self {
            PatchError::Invalid(_) => {
                "the server rejected our request due to an error in our request".to_owned()
            }
            other => other.to_string(),
        }
    }
}

/// Whether `kind` accepts strategic merge patches (built-in kinds do,
/// custom resources don't).
pub fn supports_strategic_merge(kind: &str) -> bool {
    merge_keys::root(kind).is_some()
}

/// Applies a PATCH body of `patch_type` to `original` (the stored object of
/// `kind`, in wire form) and returns the patched object. `original` is
/// never modified.
pub fn apply_patch(
    kind: &str,
    original: &Value,
    patch_type: PatchType,
    patch: &[u8],
) -> Result<Value, PatchError> {
    match patch_type {
        PatchType::Apply => Err(PatchError::ApplyNotHandled),
        PatchType::Json => {
            let patched = json::apply(original, parse(patch)?)?;
            if !patched.is_object() {
                return Err(PatchError::Invalid(format!(
                    "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                    json::go_type(&patched)
                )));
            }
            Ok(patched)
        }
        PatchType::Merge => match parse(patch)? {
            patch @ Value::Object(_) => {
                let mut patched = original.clone();
                json_patch::merge(&mut patched, &patch);
                Ok(patched)
            }
            // evanphx/json-patch: the document becomes the list, which then
            // fails to decode as an object.
            Value::Array(_) => Err(PatchError::Invalid(
                "json: cannot unmarshal array into Go value of type map[string]interface {}"
                    .to_owned(),
            )),
            _ => Err(PatchError::BadRequest("Invalid JSON Patch".to_owned())),
        },
        PatchType::StrategicMerge => {
            let schema = merge_keys::root(kind).ok_or(PatchError::UnsupportedMediaType)?;
            let patch = match parse(patch)? {
                Value::Object(patch) => patch,
                other => {
                    return Err(PatchError::BadRequest(format!(
                        "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                        json::go_type(&other)
                    )))
                }
            };
            let Value::Object(original) = original else {
                return Err(PatchError::BadRequest(format!(
                    "the object to patch is a {}, not an object",
                    json::go_type(original)
                )));
            };
            strategic::apply(original.clone(), patch, schema).map(Value::Object)
        }
    }
}

/// Parses a JSON body; upstream checks this before anything else.
fn parse(body: &[u8]) -> Result<Value, PatchError> {
    serde_json::from_slice(body).map_err(|_| PatchError::BadRequest("invalid JSON patch".into()))
}
