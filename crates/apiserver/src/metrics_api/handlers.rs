//! Serving metrics.k8s.io/v1beta1 as metrics-server does: NodeMetrics
//! (`/nodes`, `/nodes/NAME`) and PodMetrics (`/pods`,
//! `/namespaces/NS/pods`, `/namespaces/NS/pods/NAME`), list and get only
//! (any other method, and a watch, is 405), `labelSelector` matched
//! against the Node's or Pod's labels (which the answer's metadata
//! carries too), objects
//! without usage absent (a get is then NotFound). Authorization happened
//! before (the request filters judge `get`/`list` on `nodes`/`pods` in
//! group metrics.k8s.io). It reads Nodes and Pods from the watch caches
//! and usage from the store; it writes nothing.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::{Json, Router};
use serde_json::{json, Map, Value};
use skiff_api::selectors::LabelSelector;

use super::discovery::{GROUP, GROUP_VERSION};
use super::store::Usage;
use super::{quantity, MetricsApi};
use crate::status::{ApiError, ApiResult};
use crate::{object, resources, AppState};

const PREFIX: &str = "/apis/metrics.k8s.io/v1beta1";

/// The routes, sharing `api`'s store.
pub fn routes(api: MetricsApi) -> Router<AppState> {
    let (a, b, c, d, e) = (api.clone(), api.clone(), api.clone(), api.clone(), api);
    Router::new()
        .route(
            &format!("{PREFIX}/nodes"),
            any(move |s, m, q| nodes(s, m, q, a, None)),
        )
        .route(
            &format!("{PREFIX}/nodes/{{name}}"),
            any(move |s, m, q, Path(name): Path<String>| nodes(s, m, q, b, Some(name))),
        )
        .route(
            &format!("{PREFIX}/pods"),
            any(move |s, m, q| pods(s, m, q, c, None, None)),
        )
        .route(
            &format!("{PREFIX}/namespaces/{{ns}}/pods"),
            any(move |s, m, q, Path(ns): Path<String>| pods(s, m, q, d, Some(ns), None)),
        )
        .route(
            &format!("{PREFIX}/namespaces/{{ns}}/pods/{{name}}"),
            any(move |s, m, q, Path((ns, name)): Path<(String, String)>| {
                pods(s, m, q, e, Some(ns), Some(name))
            }),
        )
}

type Q = Query<HashMap<String, String>>;

/// GET without `watch` (metrics-server serves no watch): others are 405.
fn only_get_and_list(method: &Method, q: &HashMap<String, String>) -> ApiResult<()> {
    if method != Method::GET || crate::request::is_true(q.get("watch")) {
        return Err(ApiError::method_not_allowed());
    }
    Ok(())
}

fn selector(q: &HashMap<String, String>) -> ApiResult<LabelSelector> {
    match q.get("labelSelector").filter(|s| !s.is_empty()) {
        Some(s) => LabelSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string())),
        None => Ok(LabelSelector::everything()),
    }
}

fn time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn usage_of(u: &Usage) -> Value {
    json!({"cpu": quantity::cpu(u.cpu_nanocores), "memory": quantity::memory(u.memory_bytes)})
}

/// The metadata metrics-server gives: the object's name, namespace and
/// labels, created now.
fn metadata(obj: &Value) -> Value {
    let mut m = json!({"creationTimestamp": time(chrono::Utc::now())});
    for field in ["name", "namespace", "labels"] {
        if let Some(v) = obj.pointer(&format!("/metadata/{field}")) {
            object::set(&mut m, field, v.clone());
        }
    }
    m
}

fn labels(obj: &Value) -> Map<String, Value> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// The cached objects of built-in `plural` in `ns` (all when none).
fn cached(state: &AppState, plural: &str, ns: Option<&str>) -> ApiResult<Vec<Value>> {
    let r = resources::find_builtin("", "v1", plural)
        .ok_or_else(|| ApiError::internal(format!("{plural} are not served")))?;
    let (_, items) = state
        .cache(r)
        .list(&object::prefix(r, ns))
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    Ok(items.iter().filter_map(|c| c.object()).collect())
}

fn list(kind: &str, items: Vec<Value>) -> Response {
    Json(
        json!({"kind": format!("{kind}List"), "apiVersion": GROUP_VERSION,
        "metadata": {}, "items": items}),
    )
    .into_response()
}

fn single(kind: &str, mut item: Value) -> Response {
    if let Some(o) = item.as_object_mut() {
        o.insert("kind".into(), json!(kind));
        o.insert("apiVersion".into(), json!(GROUP_VERSION));
    }
    Json(item).into_response()
}

fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

async fn nodes(
    State(state): State<AppState>,
    method: Method,
    Query(q): Q,
    api: MetricsApi,
    name: Option<String>,
) -> ApiResult<Response> {
    only_get_and_list(&method, &q)?;
    let selector = selector(&q)?;
    let usage: HashMap<String, Usage> = api.read().nodes().into_iter().collect();
    let items: Vec<Value> = cached(&state, "nodes", None)?
        .into_iter()
        .filter(|n| name.as_deref().is_none_or(|want| name_of(n) == want))
        .filter(|n| selector.matches(&labels(n)))
        .filter_map(|n| {
            let u = usage.get(name_of(&n))?;
            Some(
                json!({"metadata": metadata(&n), "timestamp": time(u.timestamp),
                "window": quantity::window(u.window), "usage": usage_of(u)}),
            )
        })
        .collect();
    match name {
        None => Ok(list("NodeMetrics", items)),
        Some(name) => items
            .into_iter()
            .next()
            .map(|i| single("NodeMetrics", i))
            .ok_or_else(|| ApiError::not_found(GROUP, "nodemetrics", &name)),
    }
}

async fn pods(
    State(state): State<AppState>,
    method: Method,
    Query(q): Q,
    api: MetricsApi,
    ns: Option<String>,
    name: Option<String>,
) -> ApiResult<Response> {
    only_get_and_list(&method, &q)?;
    let selector = selector(&q)?;
    let usage = api.read().pods();
    let items: Vec<Value> = cached(&state, "pods", ns.as_deref())?
        .into_iter()
        .filter(|p| name.as_deref().is_none_or(|want| name_of(p) == want))
        .filter(|p| selector.matches(&labels(p)))
        .filter_map(|p| {
            let namespace = p.pointer("/metadata/namespace")?.as_str()?.to_string();
            let u = usage.get(&(namespace, name_of(&p).to_string()))?;
            let containers: Vec<Value> = u
                .containers
                .iter()
                .map(|(c, cu)| json!({"name": c, "usage": usage_of(cu)}))
                .collect();
            Some(
                json!({"metadata": metadata(&p), "timestamp": time(u.timestamp),
                "window": quantity::window(u.window), "containers": containers}),
            )
        })
        .collect();
    match name {
        None => Ok(list("PodMetrics", items)),
        Some(name) => items
            .into_iter()
            .next()
            .map(|i| single("PodMetrics", i))
            .ok_or_else(|| ApiError::not_found(GROUP, "podmetrics", &name)),
    }
}
