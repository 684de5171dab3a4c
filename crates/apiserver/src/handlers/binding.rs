//! POST pods/NAME/binding: the scheduler's assignment of a pod to a node
//! (and the Binding's annotations merged onto the pod, as upstream's).

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};

use crate::catalog::Kind;
use crate::object::{self};
use crate::status::{ApiError, ApiResult};
use crate::AppState;

use super::json_response;

/// POST pods/NAME/binding: sets spec.nodeName once, and PodScheduled;
/// merges the Binding's annotations into the pod's.
pub(super) async fn bind(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    name: &str,
    body: &[u8],
) -> ApiResult<Response> {
    let r = kind.resource;
    let binding = object::decode(body)?;
    // Typed, as upstream decodes it: a target or metadata field of the
    // wrong type is a 400 before anything is bound.
    crate::decode::typed::decode_body::<k8s_openapi::api::core::v1::Binding>(
        &binding,
        ("Binding", "v1"),
    )?;
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ApiError::invalid(
                "",
                "Binding",
                name,
                vec![crate::status::Cause {
                    reason: "FieldValueRequired",
                    field: "target.name".into(),
                    message: "Required value".into(),
                }],
            )
        })?
        .to_string();
    let key = object::key(r, ns, name);
    for attempt in 0.. {
        let (mut pod, revision, _) =
            crate::registry::write::current_for_update(state, r, ns, name, attempt).await?;
        // Stored form: no resourceVersion.
        object::meta(&mut pod).remove("resourceVersion");
        if pod.pointer("/metadata/deletionTimestamp").is_some() {
            return Err(ApiError::conflict_message(format!(
                "Operation cannot be fulfilled on pods/binding \"{name}\": pod {name} is being deleted, cannot be assigned to a host"
            )));
        }
        if let Some(current) = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            return Err(ApiError::conflict_message(format!(
                "Operation cannot be fulfilled on pods/binding \"{name}\": pod {name} is already assigned to node \"{current}\""
            )));
        }
        let Some(spec) = pod.get_mut("spec").filter(|s| s.is_object()) else {
            return Err(ApiError::internal(format!("stored pod {name} has no spec")));
        };
        object::set(spec, "nodeName", json!(node));
        // The Binding's annotations go onto the pod in the same write
        // (upstream `setPodNodeAndMetadata`); the scheduler's
        // `skiff.dev/scheduling-wait` travels this way.
        if let Some(annotations) = binding
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .filter(|a| !a.is_empty())
        {
            let meta = object::meta(&mut pod);
            let slot = meta.entry("annotations").or_insert_with(|| json!({}));
            if !slot.is_object() {
                *slot = json!({});
            }
            if let Some(pod_annotations) = slot.as_object_mut() {
                for (k, v) in annotations {
                    pod_annotations.insert(k.clone(), v.clone());
                }
            }
        }
        let conditions = pod
            .pointer_mut("/status/conditions")
            .and_then(Value::as_array_mut)
            .map(std::mem::take)
            .unwrap_or_default();
        let mut conditions: Vec<Value> = conditions
            .into_iter()
            .filter(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"))
            .collect();
        conditions.push(json!({
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": null,
            "lastTransitionTime": object::now(),
        }));
        if !pod.get("status").is_some_and(Value::is_object) {
            crate::object::set(&mut pod, "status", json!({}));
        }
        if let Some(status) = pod.get_mut("status") {
            object::set(status, "conditions", json!(conditions));
        }
        let value = serde_json::to_vec(&pod).map_err(|e| ApiError::internal(e.to_string()))?;
        match state.store.update(&key, value.into(), revision).await {
            Ok(_) => break,
            Err(skiff_store::Error::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}
