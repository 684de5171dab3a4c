//! Discovery and health: `/version`, `/api`, `/apis`, one APIResourceList
//! per group-version (the legacy, unaggregated shapes, which every kubectl
//! and client library accepts), `/healthz`, `/livez` and `/readyz`.

use axum::extract::State;
use axum::response::IntoResponse;
use axum::Json;
use serde_json::{json, Value};

use crate::resources::{self, Resource, RESOURCES};
use crate::status::ApiError;
use crate::AppState;

/// The Kubernetes minor version Skiff speaks (kubectl's dispatcher picks
/// the matching kubectl by it).
pub const KUBE_MINOR: &str = "33";

pub async fn version() -> Json<Value> {
    Json(json!({
        "major": "1",
        "minor": KUBE_MINOR,
        "gitVersion": format!("v1.{KUBE_MINOR}.0-skiff.{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            other => other,
        }),
    }))
}

pub async fn healthz(State(state): State<AppState>) -> impl IntoResponse {
    match state.store.current_revision().await {
        Ok(_) => (axum::http::StatusCode::OK, "ok"),
        Err(_) => (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "store unavailable",
        ),
    }
}

pub async fn api_versions(State(state): State<AppState>) -> Json<Value> {
    Json(json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": state.advertise.clone()}
        ],
    }))
}

pub async fn api_groups() -> Json<Value> {
    let groups: Vec<Value> = resources::groups()
        .into_iter()
        .map(|(group, version)| {
            let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
            json!({"name": group, "versions": [gv.clone()], "preferredVersion": gv})
        })
        .collect();
    Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
}

const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "update",
    "watch",
];

fn resource_entries(r: &Resource) -> Vec<Value> {
    let mut main = json!({
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": VERBS,
    });
    if !r.short_names.is_empty() {
        main["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        main["categories"] = json!(r.categories);
    }
    let mut out = vec![main];
    for sub in r.subresources {
        let (kind, verbs): (&str, &[&str]) = match *sub {
            "binding" => ("Binding", &["create"]),
            _ => (r.kind, &["get", "update"]),
        };
        out.push(json!({
            "name": format!("{}/{sub}", r.plural),
            "singularName": "",
            "namespaced": r.namespaced,
            "kind": kind,
            "verbs": verbs,
        }));
    }
    out
}

fn resource_list(group: &str, version: &str) -> Option<Value> {
    let entries: Vec<Value> = RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .flat_map(resource_entries)
        .collect();
    if entries.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": entries}),
    )
}

pub async fn core_resources() -> Json<Value> {
    Json(resource_list("", "v1").unwrap_or(Value::Null))
}

pub async fn group_resources(
    axum::extract::Path((group, version)): axum::extract::Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    resource_list(&group, &version)
        .map(Json)
        .ok_or_else(ApiError::not_found_path)
}

pub async fn group(
    axum::extract::Path(group): axum::extract::Path<String>,
) -> Result<Json<Value>, ApiError> {
    resources::groups()
        .into_iter()
        .find(|(g, _)| *g == group)
        .map(|(g, v)| {
            let gv = json!({"groupVersion": format!("{g}/{v}"), "version": v});
            Json(json!({"kind": "APIGroup", "apiVersion": "v1", "name": g, "versions": [gv.clone()], "preferredVersion": gv}))
        })
        .ok_or_else(ApiError::not_found_path)
}
