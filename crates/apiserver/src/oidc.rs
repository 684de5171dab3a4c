//! The service-account issuer's discovery documents, as upstream's
//! `serviceaccount/openidmetadata.go`: `/.well-known/openid-configuration`
//! (issuer, jwks_uri, what tokens look like) and `/openid/v1/jwks` (the
//! keys that verify them), so that a relying party outside the cluster
//! can check service-account tokens. Who may read them is RBAC's
//! (`system:service-account-issuer-discovery`).
//!
//! It serves only what `crate::authn::serviceaccount` holds; without an
//! issuer (a server built without keys) both paths are 404.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::status::ApiError;
use crate::AppState;

/// Upstream's caching of both documents.
const CACHE_CONTROL: &str = "public, max-age=3600";

fn answer(content_type: &'static str, body: &serde_json::Value) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, CACHE_CONTROL),
        ],
        serde_json::to_vec(body).unwrap_or_default(),
    )
        .into_response()
}

/// GET /.well-known/openid-configuration.
pub async fn configuration(State(state): State<AppState>) -> Response {
    let Some(sa) = &state.service_accounts else {
        return ApiError::not_found_path().into_response();
    };
    answer(
        "application/json",
        &json!({
            "issuer": sa.issuer(),
            "jwks_uri": format!("https://{}/openid/v1/jwks", state.advertise),
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": [skiff_api::jwt::ALGORITHM],
        }),
    )
}

/// GET /openid/v1/jwks.
pub async fn jwks(State(state): State<AppState>) -> Response {
    let Some(sa) = &state.service_accounts else {
        return ApiError::not_found_path().into_response();
    };
    let keys: Vec<_> = sa.keys().iter().map(|k| k.jwk()).collect();
    answer("application/jwk-set+json", &json!({ "keys": keys }))
}
