//! GET of one object (or its status), as itself or a Table.

use axum::http::StatusCode;
use axum::response::Response;

use crate::catalog::Kind;
use crate::object::{self, with_revision};
use crate::status::{ApiError, ApiResult};
use crate::AppState;

use super::{json_response, parse_stored, Output};

pub(super) async fn get(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    name: &str,
    out: Output,
) -> ApiResult<Response> {
    let r = kind.resource;
    match state.store.get(&object::key(r, ns, name)).await {
        Ok(kv) => Ok(json_response(
            StatusCode::OK,
            &out.object(
                kind,
                with_revision(parse_stored(&kv.value)?, kv.mod_revision),
            ),
        )),
        Err(skiff_store::Error::NotFound { .. }) => {
            Err(ApiError::not_found(r.group, r.plural, name))
        }
        Err(e) => Err(e.into()),
    }
}
