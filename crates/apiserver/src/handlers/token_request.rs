//! POST serviceaccounts/NAME/token (authentication.k8s.io/v1 TokenRequest),
//! as upstream's `registry/core/serviceaccount/storage/token.go`: a bound
//! token for the ServiceAccount, for `spec.audiences` (default: the API
//! audience), valid `spec.expirationSeconds` (default 3600, at least 600),
//! optionally bound to a Pod, Secret or Node that must exist (with the
//! UID given, if one is); a pod bound on a node also names the node.
//!
//! It reads the ServiceAccount and the bound object from the store (not
//! the watch cache: an agent asks for a pod's token right after the pod
//! was bound) and stores nothing; signing is
//! `crate::authn::serviceaccount`'s.

use axum::http::StatusCode;
use axum::response::Response;
use k8s_openapi::api::authentication::v1::TokenRequest;
use serde_json::{json, Value};
use skiff_api::jwt;

use crate::authn::serviceaccount::{unix_now, Binding};
use crate::catalog::Kind;
use crate::object;
use crate::status::{ApiError, ApiResult, Cause};
use crate::AppState;

use super::json_response;

const GROUP: &str = "authentication.k8s.io";
const DEFAULT_SECONDS: i64 = 3600;
/// Upstream's `MinTokenAgeSec` and `MaxTokenAgeSec`.
const MIN_SECONDS: i64 = 600;
const MAX_SECONDS: i64 = 1 << 32;

fn invalid(name: &str, field: &str, message: String) -> ApiError {
    ApiError::invalid(
        GROUP,
        "TokenRequest",
        name,
        vec![Cause {
            reason: "FieldValueInvalid",
            field: field.into(),
            message,
        }],
    )
}

/// An object read from the store; 404 in upstream's words when missing.
async fn stored(
    state: &AppState,
    plural: &str,
    namespace: Option<&str>,
    name: &str,
) -> ApiResult<Value> {
    let Some(r) = crate::resources::find_builtin("", "v1", plural) else {
        return Err(ApiError::internal(format!("{plural} are not served")));
    };
    match state.store.get(&object::key(r, namespace, name)).await {
        Ok(kv) => serde_json::from_slice(&kv.value)
            .map_err(|e| ApiError::internal(format!("stored object is not JSON: {e}"))),
        Err(skiff_store::Error::NotFound { .. }) => Err(ApiError::not_found("", plural, name)),
        Err(e) => Err(e.into()),
    }
}

fn uid_of(obj: &Value) -> String {
    obj.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// POST serviceaccounts/NAME/token.
pub(super) async fn create_token(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    name: &str,
    body: &[u8],
) -> ApiResult<Response> {
    let Some(issuer) = state.service_accounts.clone() else {
        return Err(ApiError::not_found_path());
    };
    let namespace = ns.unwrap_or_default();
    let mut req = object::decode(body)?;
    match req.get("kind").and_then(Value::as_str) {
        None | Some("TokenRequest") => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "expected TokenRequest, got {other}"
            )))
        }
    }
    // What a client sends as status is ignored, as upstream clears it
    // (kubectl sends an empty one, which the typed status cannot hold).
    if let Some(fields) = req.as_object_mut() {
        fields.remove("status");
    }
    let typed: TokenRequest = crate::decode::typed::decode_body(&req, ("TokenRequest", "v1"))?;
    if let Some(given) = typed.metadata.name.as_deref().filter(|n| !n.is_empty()) {
        if given != name {
            return Err(invalid(
                name,
                "metadata.name",
                format!(
                    "Invalid value: {given:?}: must match the service account name if specified"
                ),
            ));
        }
    }
    if let Some(given) = typed
        .metadata
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
    {
        if given != namespace {
            return Err(invalid(
                name,
                "metadata.namespace",
                format!("Invalid value: {given:?}: must match the service account namespace if specified"),
            ));
        }
    }
    let account = stored(state, kind.resource.plural, ns, name).await?;
    let account_uid = uid_of(&account);
    let audiences: Vec<String> = if typed.spec.audiences.is_empty() {
        issuer.api_audiences().to_vec()
    } else {
        typed.spec.audiences.clone()
    };
    let seconds = typed.spec.expiration_seconds.unwrap_or(DEFAULT_SECONDS);
    if seconds < MIN_SECONDS {
        return Err(invalid(
            "",
            "spec.expirationSeconds",
            format!("Invalid value: {seconds}: may not specify a duration less than 10 minutes"),
        ));
    }
    if seconds > MAX_SECONDS {
        return Err(invalid(
            "",
            "spec.expirationSeconds",
            format!("Too long: may not be more than {MAX_SECONDS} bytes: may not specify a duration larger than 2^32 seconds"),
        ));
    }
    let mut binding = Binding::default();
    let node_bound = crate::admission::node_restriction::token_binding(
        name,
        typed
            .spec
            .bound_object_ref
            .as_ref()
            .and_then(|r| r.kind.as_deref()),
    )?;
    if let Some(target) = &typed.spec.bound_object_ref {
        let target_name = target.name.clone().unwrap_or_default();
        let group = target
            .api_version
            .as_deref()
            .unwrap_or("v1")
            .rsplit_once('/')
            .map(|(g, _)| g.to_string())
            .unwrap_or_default();
        let kind_name = target.kind.clone().unwrap_or_default();
        let (plural, scoped) = match (group.as_str(), kind_name.as_str()) {
            ("", "Pod") => ("pods", ns),
            ("", "Secret") => ("secrets", ns),
            ("", "Node") => ("nodes", None),
            _ => {
                let gvk = if group.is_empty() {
                    format!("/v1, Kind={kind_name}")
                } else {
                    format!(
                        "{}, Kind={kind_name}",
                        target.api_version.as_deref().unwrap_or("")
                    )
                };
                return Err(ApiError::bad_request(format!(
                    "cannot bind token for serviceaccount {name:?} to object of type {gvk}"
                )));
            }
        };
        let obj = stored(state, plural, scoped, &target_name).await?;
        let uid = uid_of(&obj);
        if let Some(want) = target.uid.as_deref().filter(|u| !u.is_empty()) {
            if want != uid {
                return Err(ApiError::conflict_message(format!(
                    "Operation cannot be fulfilled on {kind_name} {target_name:?}: the UID in the bound object reference ({want}) does not match the UID in record. The object might have been deleted and then recreated"
                )));
            }
        }
        let named = jwt::Ref {
            name: target_name.clone(),
            uid,
        };
        match plural {
            "pods" => {
                if let Some(node) = &node_bound {
                    crate::admission::node_restriction::check_token_pod(node, name, &obj)?;
                }
                if let Some(node) = obj
                    .pointer("/spec/nodeName")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
                {
                    let node_obj = stored(state, "nodes", None, node).await.map_err(|e| {
                        ApiError::internal(format!("failed to get node {node:?}: {}", e.message))
                    })?;
                    binding.node = Some(jwt::Ref {
                        name: node.to_string(),
                        uid: uid_of(&node_obj),
                    });
                }
                binding.pod = Some(named);
            }
            "secrets" => binding.secret = Some(named),
            _ => binding.node = Some(named),
        }
    }
    let now = unix_now();
    let (token, exp) = issuer
        .issue(
            namespace,
            name,
            &account_uid,
            audiences.clone(),
            seconds,
            binding,
            now,
        )
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let expires = chrono::DateTime::from_timestamp(exp, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let created = chrono::DateTime::from_timestamp(now, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    object::set(&mut req, "kind", json!("TokenRequest"));
    object::set(&mut req, "apiVersion", json!("authentication.k8s.io/v1"));
    let meta = object::meta(&mut req);
    meta.insert("name".into(), json!(name));
    meta.insert("namespace".into(), json!(namespace));
    meta.insert("creationTimestamp".into(), json!(created));
    let mut spec = serde_json::to_value(&typed.spec).unwrap_or_else(|_| json!({}));
    object::set(&mut spec, "audiences", json!(audiences));
    object::set(&mut spec, "expirationSeconds", json!(seconds));
    object::set(&mut req, "spec", spec);
    object::set(
        &mut req,
        "status",
        json!({"token": token, "expirationTimestamp": expires}),
    );
    Ok(json_response(StatusCode::CREATED, &req))
}
