//! Create-only kinds that are answered, never stored: authentication.k8s.io
//! TokenReview and SelfSubjectReview ([`authentication`]), and
//! authorization.k8s.io SubjectAccessReview, SelfSubjectAccessReview,
//! LocalSubjectAccessReview and SelfSubjectRulesReview ([`authorization`]),
//! answered by the server's authenticator and authorizer chain. Also the
//! Local APIServices, kept in step with the served groups before every
//! read of apiservices ([`apiservices`]).
//!
//! [`intercept`] runs at the start of the resource handler: it answers a
//! review POST (201 with the review and its status, as upstream), refuses
//! other verbs on review resources (405), and otherwise hands the request
//! back. SelfSubjectReview is also answered at v1beta1 and v1alpha1 (the
//! paths kubectl 1.27 tries), which are not in discovery.

pub mod apiservices;
mod authentication;
mod authorization;

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::{header, Method, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use crate::authn::{Tokens, User};
use crate::authz::Authorizer;
use crate::catalog::Resource;
use crate::status::{ApiError, ApiResult};
use crate::AppState;

/// What the reviews need from the server: its authenticator's tokens and
/// its authorizer chain (a request extension set by the router).
#[derive(Debug, Clone)]
pub struct Context {
    pub tokens: Arc<Tokens>,
    pub authorizers: Arc<Vec<Box<dyn Authorizer>>>,
}

/// (group, plural) of the review resources.
const REVIEWS: &[(&str, &str)] = &[
    ("authentication.k8s.io", "tokenreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"),
    ("authorization.k8s.io", "subjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "localsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
];

/// Whether `r` is a create-only review resource.
pub fn create_only(r: &Resource) -> bool {
    REVIEWS.contains(&(r.group, r.plural))
}

/// The discovery verbs of `r`: `create` for a review, else `default`.
pub fn verbs(r: &Resource, default: &'static [&'static str]) -> &'static [&'static str] {
    if create_only(r) {
        &["create"]
    } else {
        default
    }
}

/// Which review a request names.
enum Review {
    Token,
    SelfSubject(String),
    SubjectAccess,
    SelfSubjectAccess,
    LocalSubjectAccess(String),
    SelfSubjectRules,
}

/// The review at a served review resource (as the router parses the URL).
fn review_of(target: &crate::request::Target) -> Review {
    match target.resource.plural {
        "tokenreviews" => Review::Token,
        "selfsubjectreviews" => Review::SelfSubject(target.resource.version.to_string()),
        "subjectaccessreviews" => Review::SubjectAccess,
        "selfsubjectaccessreviews" => Review::SelfSubjectAccess,
        "localsubjectaccessreviews" => {
            Review::LocalSubjectAccess(target.namespace.clone().unwrap_or_default())
        }
        _ => Review::SelfSubjectRules,
    }
}

/// The older SelfSubjectReview versions (not in discovery), by path.
fn older_self_subject_review(path: &str) -> Option<Result<Review, ()>> {
    let segs: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .map(|s| crate::request::percent_decode(s, false))
        .collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    match segs.as_slice() {
        ["apis", "authentication.k8s.io", v @ ("v1beta1" | "v1alpha1"), "selfsubjectreviews", rest @ ..] => {
            Some(if rest.is_empty() {
                Ok(Review::SelfSubject(v.to_string()))
            } else {
                Err(())
            })
        }
        _ => None,
    }
}

/// Answers review requests; any other request is handed back.
pub async fn intercept(state: &AppState, req: Request) -> Result<ApiResult<Response>, Request> {
    // Every request passes here: look closer only at the three groups (and
    // at anything percent-encoded, which the router decodes as well).
    let raw = req.uri().path().trim_start_matches('/');
    let ours = [
        "authentication.k8s.io/",
        "authorization.k8s.io/",
        "apiregistration.k8s.io/",
    ];
    if !raw.contains('%')
        && !raw
            .strip_prefix("apis/")
            .is_some_and(|rest| ours.iter().any(|g| rest.starts_with(g)))
    {
        return Err(req);
    }
    let review = match crate::request::parse_target(crate::resources::builtin(), req.uri().path()) {
        Some(t)
            if t.resource.plural == "apiservices"
                && t.resource.group == "apiregistration.k8s.io" =>
        {
            if req.method() == Method::GET {
                if let Err(e) =
                    apiservices::sync(state.store.as_ref(), &state.catalog.groups()).await
                {
                    tracing::warn!(error = %e, "cannot register the local APIServices");
                }
            }
            return Err(req);
        }
        // Nothing is stored, so no review has a name.
        Some(t) if create_only(t.resource) && t.name.is_some() => {
            return Ok(Err(ApiError::not_found_path()))
        }
        Some(t) if create_only(t.resource) => review_of(&t),
        Some(_) => return Err(req),
        None => match older_self_subject_review(req.uri().path()) {
            None => return Err(req),
            Some(Err(())) => return Ok(Err(ApiError::not_found_path())),
            Some(Ok(review)) => review,
        },
    };
    if req.method() != Method::POST {
        return Ok(Err(ApiError::method_not_allowed()));
    }
    Ok(answer(review, req).await)
}

async fn answer(review: Review, req: Request) -> ApiResult<Response> {
    let Some(ctx) = req.extensions().get::<Context>().cloned() else {
        return Err(ApiError::internal("the reviews are not configured"));
    };
    let user = req.extensions().get::<User>().cloned();
    // A service-account token's UID and extra, for SelfSubjectReview.
    let identity = req
        .extensions()
        .get::<crate::authn::serviceaccount::Identity>()
        .cloned();
    let q: HashMap<String, String> = req
        .uri()
        .query()
        .map(|q| crate::request::url_pairs(q).into_iter().collect())
        .unwrap_or_default();
    let opts = crate::registry::write::WriteOptions::parse(&q)?;
    let (group, version, kind) = match &review {
        Review::Token => ("authentication.k8s.io", "v1", "TokenReview"),
        Review::SelfSubject(v) => ("authentication.k8s.io", v.as_str(), "SelfSubjectReview"),
        Review::SubjectAccess => ("authorization.k8s.io", "v1", "SubjectAccessReview"),
        Review::SelfSubjectAccess => ("authorization.k8s.io", "v1", "SelfSubjectAccessReview"),
        Review::LocalSubjectAccess(_) => ("authorization.k8s.io", "v1", "LocalSubjectAccessReview"),
        Review::SelfSubjectRules => ("authorization.k8s.io", "v1", "SelfSubjectRulesReview"),
    };
    let (raw, obj) = body(req, group, version, kind).await?;
    // Field validation against the v1 type (the older versions' shape is
    // the same).
    if let Some(r) = crate::resources::builtin()
        .find_kind(group, kind)
        .and_then(|k| k.resource.as_ref())
    {
        crate::registry::write::check_fields(crate::resources::builtin(), r, &raw, &obj, &opts)?;
    }
    // The older SelfSubjectReview versions have v1's shape: decode as v1.
    let mut obj = obj;
    if version != "v1" {
        crate::object::set(&mut obj, "apiVersion", json!(format!("{group}/v1")));
    }
    let mut obj = crate::resources::builtin().normalize(group, kind, (kind, version), obj)?;
    crate::object::set(&mut obj, "apiVersion", json!(format!("{group}/{version}")));
    let answered = match review {
        Review::Token => authentication::token_review(&ctx, obj)?,
        Review::SelfSubject(_) => {
            authentication::self_subject_review(user.as_ref(), identity.as_ref(), obj)?
        }
        Review::SubjectAccess => authorization::subject_access_review(&ctx, obj)?,
        Review::SelfSubjectAccess => {
            authorization::self_subject_access_review(&ctx, user.as_ref(), obj)?
        }
        Review::LocalSubjectAccess(ns) => {
            authorization::local_subject_access_review(&ctx, &ns, obj)?
        }
        Review::SelfSubjectRules => {
            authorization::self_subject_rules_review(&ctx, user.as_ref(), obj)?
        }
    };
    Ok(crate::response::json_response(
        StatusCode::CREATED,
        &answered,
    ))
}

/// The request body as a JSON object of `kind` in `group`/`version` (JSON
/// or protobuf), with apiVersion and kind checked and filled, and the raw
/// JSON bytes for field validation.
async fn body(req: Request, group: &str, version: &str, kind: &str) -> ApiResult<(Vec<u8>, Value)> {
    let media = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|ct| ct.split(';').next().unwrap_or("").trim().to_string())
        .unwrap_or_default();
    let protobuf = crate::protobuf::is_protobuf(&media);
    if !(protobuf || media.is_empty() || media == "application/json" || media == "*/*") {
        return Err(ApiError::unsupported_media_type(
            &media,
            "application/json, application/vnd.kubernetes.protobuf",
        ));
    }
    let bytes = axum::body::to_bytes(req.into_body(), crate::response::MAX_BODY)
        .await
        .map_err(|_| ApiError::too_large("Request entity too large: limit is 3145728"))?;
    let raw = if protobuf {
        let obj =
            crate::protobuf::to_json(&bytes).map_err(|e| ApiError::bad_request(e.to_string()))?;
        serde_json::to_vec(&obj).unwrap_or_default()
    } else {
        bytes.to_vec()
    };
    let mut obj = crate::object::decode(&raw)?;
    let gv = format!("{group}/{version}");
    for (field, want) in [("apiVersion", gv.as_str()), ("kind", kind)] {
        match obj.get(field) {
            None | Some(Value::Null) => crate::object::set(&mut obj, field, json!(want)),
            Some(Value::String(s)) if s.is_empty() => {
                crate::object::set(&mut obj, field, json!(want))
            }
            Some(Value::String(s)) if s == want => {}
            Some(other) => {
                let shown = other
                    .as_str()
                    .map_or_else(|| other.to_string(), String::from);
                let what = if field == "kind" {
                    "kind"
                } else {
                    "API version"
                };
                return Err(ApiError::bad_request(format!(
                    "the {what} in the data ({shown}) does not match the expected {what} ({want})"
                )));
            }
        }
    }
    Ok((raw, obj))
}

/// The object answered: as sent, with `metadata.creationTimestamp: null`
/// (Go encodes the zero time so) and `status`.
fn with_status(mut obj: Value, status: Value) -> Value {
    let meta = crate::object::meta(&mut obj);
    if !meta.contains_key("creationTimestamp") {
        meta.insert("creationTimestamp".into(), Value::Null);
    }
    crate::object::set(&mut obj, "status", status);
    obj
}

/// The user as upstream's authenticator reports it: with
/// `system:authenticated` (unless anonymous or already there).
fn reported_groups(user: &User) -> Vec<String> {
    let mut groups = user.groups.clone();
    if user.name != "system:anonymous"
        && !groups
            .iter()
            .any(|g| g == "system:authenticated" || g == "system:unauthenticated")
    {
        groups.push("system:authenticated".into());
    }
    groups
}
