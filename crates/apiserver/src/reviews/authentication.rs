//! TokenReview (upstream `registry/authentication/tokenreview`): the
//! token is authenticated with the server's bearer tokens, as a request
//! carrying it would be; and SelfSubjectReview: the requesting user.
//!
//! The server's tokens are audience-agnostic, so they are valid for the
//! API audience [`API_AUDIENCE`] only (upstream wraps such authenticators
//! in `WrapAudienceAgnosticToken` with the API audiences): a review that
//! names other audiences only is not authenticated.

use serde_json::{json, Value};

use super::{reported_groups, with_status, Context};
use crate::authn::User;
use crate::status::{ApiError, ApiResult};

/// The API server's audience (upstream's default service-account issuer).
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

fn user_info(user: &User) -> Value {
    json!({"username": user.name, "groups": reported_groups(user)})
}

pub(super) fn token_review(ctx: &Context, obj: Value) -> ApiResult<Value> {
    let token = obj
        .pointer("/spec/token")
        .and_then(Value::as_str)
        .unwrap_or("");
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let wanted: Vec<&str> = obj
        .pointer("/spec/audiences")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let audiences: Vec<&str> = if wanted.is_empty() {
        vec![API_AUDIENCE]
    } else {
        wanted.into_iter().filter(|a| *a == API_AUDIENCE).collect()
    };
    let status = match ctx.tokens.user(token.trim()) {
        Some(user) if !audiences.is_empty() => json!({
            "authenticated": true,
            "user": user_info(user),
            "audiences": audiences,
        }),
        _ => json!({"user": {}}),
    };
    Ok(with_status(obj, status))
}

pub(super) fn self_subject_review(user: Option<&User>, obj: Value) -> ApiResult<Value> {
    let Some(user) = user else {
        return Err(ApiError::bad_request("no user present on request"));
    };
    let out = json!({
        "kind": "SelfSubjectReview",
        "apiVersion": obj.get("apiVersion").cloned().unwrap_or(json!("authentication.k8s.io/v1")),
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    });
    Ok(with_status(out, json!({"userInfo": user_info(user)})))
}
