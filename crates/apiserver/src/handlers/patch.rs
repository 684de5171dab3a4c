//! PATCH of every type (JSON, merge, strategic merge, apply).

use axum::http::header;
use axum::response::Response;
use serde_json::{json, Value};

use crate::catalog::Kind;
use crate::registry::write::WriteOptions;
use crate::status::{ApiError, ApiResult};
use crate::AppState;

use super::written;

/// The media type of a request body.
pub(super) fn content_type(headers: &axum::http::HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

pub(crate) fn patch_error(e: skiff_api::patch::PatchError) -> ApiError {
    let mut error = match e.status_code() {
        415 => ApiError::unsupported_media_type(&e.to_string(), skiff_api::patch::PATCH_TYPES),
        422 => ApiError::invalid_message(e.to_string()),
        _ => ApiError::bad_request(e.to_string()),
    };
    if e.status_code() == 415 {
        error.message = e.to_string();
    }
    error
}

/// A PATCH request body with its media type.
pub(super) struct PatchBody<'a> {
    pub(super) content_type: &'a str,
    pub(super) bytes: &'a [u8],
}

pub(super) async fn patch(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    name: &str,
    subresource: Option<&str>,
    patch: PatchBody<'_>,
    opts: &WriteOptions,
) -> ApiResult<Response> {
    let r = kind.resource;
    let (content_type, body) = (patch.content_type, patch.bytes);
    use skiff_api::patch::{apply_patch, PatchType};
    let Some(patch_type) = PatchType::from_content_type(content_type) else {
        return Err(ApiError::unsupported_media_type(
            content_type,
            skiff_api::patch::PATCH_TYPES,
        ));
    };
    if patch_type == PatchType::StrategicMerge && crate::customresources::served_of(kind).is_some()
    {
        // Custom resources have no patch strategies (upstream: 415).
        return Err(patch_error(
            skiff_api::patch::PatchError::UnsupportedMediaType,
        ));
    }
    // An apply body may be YAML, whose plain scalars the scan would
    // misread; JSON (what kubectl sends) starts with a brace.
    let json = patch_type != PatchType::Apply
        || body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    if let Some(detail) = json
        .then(|| crate::decode::numbers::out_of_range(body))
        .flatten()
    {
        return Err(ApiError::bad_request(detail));
    }
    if patch_type == PatchType::Apply {
        return crate::handlers::apply::server_side_apply(state, kind, ns, name, body, opts).await;
    }
    let mut warnings = Vec::new();
    if patch_type != PatchType::Json
        && opts.validation != crate::decode::strict::FieldValidation::Ignore
    {
        // Unknown or duplicate fields in the patch itself.
        if let Ok(mut typed) = serde_json::from_slice::<Value>(body) {
            if typed.is_object() {
                crate::object::set(&mut typed, "apiVersion", json!(r.group_version()));
                crate::object::set(&mut typed, "kind", json!(r.kind));
            }
            warnings = if patch_type == PatchType::StrategicMerge {
                let fields = skiff_api::patch::without_directives(typed);
                let raw = serde_json::to_vec(&fields).unwrap_or_default();
                crate::registry::write::check_fields(&state.catalog, r, &raw, &fields, opts)?
            } else {
                crate::registry::write::check_fields(&state.catalog, r, body, &typed, opts)?
            };
        }
    }
    let kind_name = r.kind;
    let mut outcome =
        crate::registry::write::update(state, kind, ns, name, subresource, opts, |current| {
            apply_patch(kind_name, current, patch_type, body).map_err(patch_error)
        })
        .await?;
    outcome.warnings = warnings;
    Ok(written(kind, outcome))
}
