//! TokenReview (upstream `registry/authentication/tokenreview`): the
//! token is authenticated with the server's bearer tokens, as a request
//! carrying it would be; and SelfSubjectReview: the requesting user.
//!
//! The server's static tokens are audience-agnostic, so they are valid
//! for the API audience [`API_AUDIENCE`] only (upstream wraps such
//! authenticators in `WrapAudienceAgnosticToken` with the API audiences):
//! a review that names other audiences only is not authenticated.
//! Service-account JWTs are judged for the audiences the review names
//! (`crate::authn::serviceaccount`), and answer with the account's UID and
//! extra (pod name and UID, credential id).

use serde_json::{json, Value};

use super::{reported_groups, with_status, Context};
use crate::authn::serviceaccount::unix_now;
use crate::authn::User;
use crate::status::{ApiError, ApiResult};

/// The API server's audience (upstream's default service-account issuer).
pub const API_AUDIENCE: &str = crate::authn::serviceaccount::DEFAULT_ISSUER;

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
    let token = token.trim();
    let status = match ctx.tokens.user(token) {
        Some(user) if !audiences.is_empty() => json!({
            "authenticated": true,
            "user": user_info(user),
            "audiences": audiences,
        }),
        Some(_) => json!({"user": {}}),
        None => {
            let asked: Vec<String> = obj
                .pointer("/spec/audiences")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default();
            match ctx
                .tokens
                .service_accounts
                .as_ref()
                .and_then(|sa| sa.authenticate_at(token, &asked, unix_now()))
            {
                Some(id) => json!({
                    "authenticated": true,
                    "user": {
                        "username": id.user.name,
                        "uid": id.uid,
                        "groups": reported_groups(&id.user),
                        "extra": id.extra,
                    },
                    "audiences": id.audiences,
                }),
                None => json!({"user": {}}),
            }
        }
    };
    Ok(with_status(obj, status))
}

pub(super) fn self_subject_review(
    user: Option<&User>,
    identity: Option<&crate::authn::serviceaccount::Identity>,
    obj: Value,
) -> ApiResult<Value> {
    let Some(user) = user else {
        return Err(ApiError::bad_request("no user present on request"));
    };
    let out = json!({
        "kind": "SelfSubjectReview",
        "apiVersion": obj.get("apiVersion").cloned().unwrap_or(json!("authentication.k8s.io/v1")),
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    });
    let mut info = user_info(user);
    // A service account's token also tells its UID and extra (pod, node,
    // credential id), as upstream's.
    if let Some(id) = identity.filter(|id| id.user.name == user.name) {
        crate::object::set(&mut info, "uid", json!(id.uid));
        crate::object::set(&mut info, "extra", json!(id.extra));
    }
    Ok(with_status(out, json!({"userInfo": info})))
}
