//! The `scale` subresource of deployments and replicasets (an
//! autoscaling/v1 Scale view of spec.replicas); `pods/eviction` is in
//! `handlers::eviction`.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};

use crate::catalog::{Kind, Resource};
use crate::object;
use crate::registry::write::{self, WriteOptions};
use crate::response::json_response;
use crate::status::{ApiError, ApiResult};
use crate::AppState;

/// The label selector string of a workload's spec.selector.
fn selector_string(obj: &Value) -> String {
    // A ReplicationController's selector is a plain label map.
    if obj.get("kind").and_then(Value::as_str) == Some("ReplicationController") {
        let mut pairs: Vec<String> = obj
            .pointer("/spec/selector")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect();
        pairs.sort_unstable();
        return pairs.join(",");
    }
    let mut parts = Vec::new();
    if let Some(labels) = obj
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
    {
        for (k, v) in labels {
            parts.push(format!("{k}={}", v.as_str().unwrap_or_default()));
        }
    }
    if let Some(exprs) = obj
        .pointer("/spec/selector/matchExpressions")
        .and_then(Value::as_array)
    {
        for e in exprs {
            let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
            let values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match e.get("operator").and_then(Value::as_str) {
                Some("In") => parts.push(format!("{key} in ({})", values.join(","))),
                Some("NotIn") => parts.push(format!("{key} notin ({})", values.join(","))),
                Some("Exists") => parts.push(key.to_string()),
                Some("DoesNotExist") => parts.push(format!("!{key}")),
                _ => {}
            }
        }
    }
    parts.join(",")
}

/// The Scale view of a workload.
pub fn to_scale(obj: &Value) -> Value {
    let metadata = crate::customresources::scale::metadata(obj);
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": metadata,
        "spec": {"replicas": obj.pointer("/spec/replicas").cloned().unwrap_or(json!(0))},
        "status": {
            "replicas": obj.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            "selector": selector_string(obj),
        },
    })
}

/// The Scale view of `obj` of `kind` (a workload, or a custom resource
/// through its CRD's scale paths).
fn view(kind: &Kind, obj: &Value) -> Value {
    match crate::customresources::served_of(kind).and_then(|s| s.scale.clone()) {
        Some(paths) => crate::customresources::scale::to_scale(&paths, obj),
        None => to_scale(obj),
    }
}

/// `workload` changed by `scale`, for `kind`.
fn apply_scale(kind: &Kind, workload: &Value, scale: &Value) -> ApiResult<Value> {
    check_scale(scale)?;
    let next = from_scale(workload, scale)?;
    match crate::customresources::served_of(kind).and_then(|s| s.scale.clone()) {
        Some(paths) => {
            let replicas = scale
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            // from_scale checked the value and carried the precondition;
            // the replicas go where the CRD says.
            let mut out = crate::customresources::scale::set_replicas(&paths, workload, replicas);
            match next.pointer("/metadata/resourceVersion") {
                Some(rv) => {
                    object::meta(&mut out).insert("resourceVersion".into(), rv.clone());
                }
                None => {
                    object::meta(&mut out).remove("resourceVersion");
                }
            }
            Ok(out)
        }
        None => Ok(next),
    }
}

/// A Scale body (as sent, or as a patch left it) is an autoscaling/v1
/// Scale and decodes as one: `replicas: "3"` is a 400, not a scale to 0.
fn check_scale(scale: &Value) -> ApiResult<()> {
    for (field, want) in [("apiVersion", "autoscaling/v1"), ("kind", "Scale")] {
        match scale.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::String(v)) if v.is_empty() || v == want => {}
            Some(Value::String(v)) => {
                let what = if field == "kind" { "kind" } else { "API version" };
                return Err(ApiError::bad_request(format!(
                    "the {what} in the data ({v}) does not match the expected {what} ({want})"
                )));
            }
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go struct field .{field} of type string",
                    skiff_api::patch::go_type(other)
                )))
            }
        }
    }
    crate::decode::typed::decode_body::<k8s_openapi::api::autoscaling::v1::Scale>(
        scale,
        ("Scale", "v1"),
    )
    .map(drop)
}

fn check(r: &Resource) -> ApiResult<()> {
    if r.subresources.contains(&"scale") {
        Ok(())
    } else {
        Err(ApiError::not_found_path())
    }
}

pub async fn get(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    name: &str,
) -> ApiResult<Response> {
    let r = kind.resource;
    check(r)?;
    let (obj, _) = write::current(state, r, ns, name).await?;
    Ok(json_response(StatusCode::OK, &view(kind, &obj)))
}

/// Applies a changed Scale back onto the workload.
fn from_scale(workload: &Value, scale: &Value) -> ApiResult<Value> {
    let replicas = scale
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if replicas < 0 {
        return Err(ApiError::invalid(
            "autoscaling",
            "Scale",
            object::name_of(workload).unwrap_or_default(),
            vec![crate::status::Cause {
                reason: "FieldValueInvalid",
                field: "spec.replicas".into(),
                message: format!("Invalid value: {replicas}: must be greater than or equal to 0"),
            }],
        ));
    }
    let mut next = workload.clone();
    if let Some(spec) = next.get_mut("spec") {
        crate::object::set(spec, "replicas", json!(replicas));
    }
    // A resourceVersion in the Scale is a precondition on the workload.
    match scale
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
    {
        Some(rv) if !rv.is_empty() => {
            object::meta(&mut next).insert("resourceVersion".into(), json!(rv));
        }
        _ => {
            object::meta(&mut next).remove("resourceVersion");
        }
    }
    Ok(next)
}

pub async fn update(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    name: &str,
    body: &[u8],
    opts: &WriteOptions,
) -> ApiResult<Response> {
    let r = kind.resource;
    check(r)?;
    let scale = object::decode(body)?;
    let outcome = write::update(state, kind, ns, name, None, opts, |workload| {
        apply_scale(kind, workload, &scale)
    })
    .await?;
    Ok(json_response(StatusCode::OK, &view(kind, &outcome.object)))
}

pub async fn patch(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    name: &str,
    content_type: &str,
    body: &[u8],
    opts: &WriteOptions,
) -> ApiResult<Response> {
    let r = kind.resource;
    use skiff_api::patch::{apply_patch, PatchType};
    check(r)?;
    let patch_type = PatchType::from_content_type(content_type)
        .filter(|t| *t != PatchType::Apply)
        .ok_or_else(|| {
            ApiError::unsupported_media_type(content_type, skiff_api::patch::PATCH_TYPES)
        })?;
    let outcome = write::update(state, kind, ns, name, None, opts, |workload| {
        let scale = view(kind, workload);
        // The same statuses as any other patch (400, 422, 415).
        let patched =
            apply_patch("Scale", &scale, patch_type, body).map_err(crate::handlers::patch_error)?;
        apply_scale(kind, workload, &patched)
    })
    .await?;
    Ok(json_response(StatusCode::OK, &view(kind, &outcome.object)))
}
