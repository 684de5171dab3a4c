//! Serving ComponentStatuses (`crate::resources::componentstatuses`):
//! read-only objects made on each request, as upstream's
//! `registry/core/componentstatus` probes each control-plane component.
//! `etcd-0` is the store answering, `scheduler` and `controller-manager`
//! are the leader Leases in kube-system renewed within their duration.
//! Every answer carries upstream's deprecation warning; writes are 405.

use std::collections::HashMap;

use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use crate::catalog::{Kind, Resource};
use crate::status::{ApiError, ApiResult};
use crate::table;
use crate::AppState;

/// The `Warning` upstream's deprecation filter adds to every answer.
pub const WARNING: &str = "299 - \"v1 ComponentStatus is deprecated in v1.19+\"";

/// The components, in the order they are listed.
const COMPONENTS: &[&str] = &["scheduler", "controller-manager", "etcd-0"];

/// Whether `r` is the componentstatuses resource.
pub fn is(r: &Resource) -> bool {
    r.group.is_empty() && r.plural == "componentstatuses"
}

/// (status, message, error) of one component.
async fn probe(state: &AppState, name: &str) -> (&'static str, String, String) {
    let lease = match name {
        "etcd-0" => {
            return match state.store.current_revision().await {
                Ok(_) => ("True", "ok".into(), String::new()),
                Err(e) => ("False", String::new(), e.to_string()),
            }
        }
        "scheduler" => "kube-scheduler",
        _ => "kube-controller-manager",
    };
    let Some(leases) = crate::resources::find_builtin("coordination.k8s.io", "v1", "leases") else {
        return ("Unknown", String::new(), "leases are not served".into());
    };
    let key = crate::object::key(leases, Some("kube-system"), lease);
    let held = match state.store.get(&key).await {
        Ok(kv) => serde_json::from_slice::<Value>(&kv.value).ok(),
        Err(skiff_store::Error::NotFound { .. }) => None,
        Err(e) => return ("Unknown", String::new(), e.to_string()),
    };
    let Some(held) = held else {
        return (
            "False",
            String::new(),
            format!("no {lease} holds the kube-system/{lease} Lease"),
        );
    };
    let renewed = held
        .pointer("/spec/renewTime")
        .and_then(Value::as_str)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
    let duration = held
        .pointer("/spec/leaseDurationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(15);
    match renewed {
        Some(t) if t + chrono::Duration::seconds(duration) >= chrono::Utc::now() => {
            ("True", "ok".into(), String::new())
        }
        _ => (
            "False",
            String::new(),
            format!("the kube-system/{lease} Lease has not been renewed in the last {duration}s"),
        ),
    }
}

async fn component(state: &AppState, name: &str) -> Value {
    let (status, message, error) = probe(state, name).await;
    let mut condition = json!({"type": "Healthy", "status": status});
    if !message.is_empty() {
        crate::object::set(&mut condition, "message", json!(message));
    }
    if !error.is_empty() {
        crate::object::set(&mut condition, "error", json!(error));
    }
    json!({"kind": "ComponentStatus", "apiVersion": "v1",
        "metadata": {"name": name}, "conditions": [condition]})
}

fn answer(body: &Value) -> Response {
    let mut response = crate::response::json_response(StatusCode::OK, body);
    response
        .headers_mut()
        .append(header::WARNING, HeaderValue::from_static(WARNING));
    response
}

/// Answers a request for componentstatuses: GET of one or all (as
/// objects or a Table, a list filtered by its selectors); anything else
/// is 405.
pub async fn handle(
    state: &AppState,
    kind: &Kind,
    method: &Method,
    name: Option<&str>,
    subresource: Option<&str>,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
) -> ApiResult<Response> {
    let r = kind.resource;
    let watch = query
        .get("watch")
        .is_some_and(|w| w.eq_ignore_ascii_case("true") || w == "1");
    if *method != Method::GET || subresource.is_some() || watch {
        return Err(ApiError::method_not_allowed());
    }
    let wants_table = crate::handlers::params::wants_table(headers);
    let include = table::Include::parse(query.get("includeObject"));
    match name {
        Some(name) => {
            if !COMPONENTS.contains(&name) {
                return Err(ApiError::internal(format!("Component not found: {name}")));
            }
            let obj = component(state, name).await;
            Ok(answer(&if wants_table {
                table::table("ComponentStatus", &[&obj], json!({}), include)
            } else {
                obj
            }))
        }
        None => {
            // Label and field (metadata.name) selectors filter the list.
            let filter = crate::watchcache::filter::Filter::parse(r, &[], query)?;
            let mut items = Vec::new();
            for name in COMPONENTS {
                let obj = component(state, name).await;
                if filter.matches_object(r, &[], &obj) {
                    items.push(obj);
                }
            }
            Ok(answer(&if wants_table {
                let refs: Vec<&Value> = items.iter().collect();
                table::table("ComponentStatus", &refs, json!({}), include)
            } else {
                json!({"kind": "ComponentStatusList", "apiVersion": "v1",
                    "metadata": {}, "items": items})
            }))
        }
    }
}
