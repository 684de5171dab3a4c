//! Server-side apply (`application/apply-patch+yaml`): merges the applied
//! configuration into the live object (or creates it), tracking field
//! ownership per manager in metadata.managedFields, and answers 409 with
//! the conflicting fields when another manager owns them and `force` is
//! not set. The field logic lives in `skiff_api::apply`.

use axum::response::Response;
use serde_json::Value;

use crate::catalog::Kind;
use crate::object;
use crate::registry::write::{self, WriteOptions};
use crate::status::{ApiError, ApiResult, Cause};
use crate::AppState;

fn apply_error(e: skiff_api::apply::ApplyError) -> ApiError {
    match e.status_code() {
        409 => {
            let mut error = ApiError::conflict_message(e.to_string());
            error.causes = e
                .conflict_causes()
                .into_iter()
                .map(|(field, message)| Cause {
                    reason: "FieldManagerConflict",
                    field,
                    message,
                })
                .collect();
            error
        }
        _ => ApiError::bad_request(e.to_string()),
    }
}

pub async fn server_side_apply(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    name: &str,
    body: &[u8],
    opts: &WriteOptions,
) -> ApiResult<Response> {
    let r = kind.resource;
    let Some(manager) = opts.field_manager.clone() else {
        return Err(ApiError::invalid(
            r.group,
            r.kind,
            name,
            vec![Cause {
                reason: "FieldValueRequired",
                field: "fieldManager".into(),
                message: "Required value: is required for apply patch".into(),
            }],
        ));
    };
    // kubectl and the client libraries send the configuration as JSON
    // (which is YAML too); people with curl send YAML.
    let yaml;
    let (applied, body): (Value, &[u8]) = match serde_json::from_slice(body) {
        Ok(v) => (v, body),
        Err(_) => {
            let v: Value = serde_saphyr::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
            if !v.is_object() {
                return Err(ApiError::bad_request(
                    "error decoding YAML: the applied configuration is not an object",
                ));
            }
            yaml = serde_json::to_vec(&v).unwrap_or_default();
            (v, &yaml)
        }
    };
    if let Some(given) = object::name_of(&applied) {
        if given != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({given}) does not match the name on the URL ({name})"
            )));
        }
    }
    let warnings = write::check_fields(&state.catalog, r, body, &applied, opts)?;
    let api_version = r.group_version();
    let now = object::now();
    // Ownership is recorded here; the shared write path must not record an
    // Update on top of it.
    let plain = WriteOptions {
        field_manager: None,
        ..opts.clone()
    };
    let mut outcome = match write::current(state, r, ns, name).await {
        Err(e) if e.code == axum::http::StatusCode::NOT_FOUND => {
            let created = skiff_api::apply::apply(
                r.kind,
                None,
                &applied,
                &manager,
                &api_version,
                opts.force,
                &now,
            )
            .map_err(apply_error)?;
            write::create(
                state,
                kind,
                ns,
                write::Body::Sent(created),
                &plain,
                Vec::new(),
            )
            .await?
        }
        Err(e) => return Err(e),
        Ok(_) => {
            write::update(state, kind, ns, name, None, &plain, |live| {
                skiff_api::apply::apply(
                    r.kind,
                    Some(live),
                    &applied,
                    &manager,
                    &api_version,
                    opts.force,
                    &now,
                )
                .map_err(apply_error)
            })
            .await?
        }
    };
    outcome.warnings = warnings;
    Ok(crate::handlers::written(kind, outcome))
}
