//! Discovery and health: `/version`, `/api`, `/apis`, one APIResourceList
//! per group-version (the legacy, unaggregated shapes, which every kubectl
//! and client library accepts), `/healthz`, `/livez` and `/readyz`.

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
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

pub async fn healthz(
    State(state): State<AppState>,
    uri: axum::http::Uri,
) -> axum::response::Response {
    let endpoint = uri.path().trim_matches('/');
    let endpoint = match endpoint {
        "livez" | "readyz" => endpoint,
        _ => "healthz",
    };
    let verbose = uri.query().is_some_and(|q| {
        q.split('&')
            .any(|p| p == "verbose" || p.starts_with("verbose="))
    });
    let store_ok = state.store.current_revision().await.is_ok();
    // Upstream's checks, in its order (the store stands in for etcd).
    let mut checks = vec![("ping", true), ("log", true), ("etcd", store_ok)];
    if endpoint == "readyz" {
        checks.push(("shutdown", true));
    }
    let healthy = checks.iter().all(|(_, ok)| *ok);
    let code = if healthy {
        axum::http::StatusCode::OK
    } else {
        axum::http::StatusCode::INTERNAL_SERVER_ERROR
    };
    if !verbose && healthy {
        return (code, "ok").into_response();
    }
    let mut body = String::new();
    for (name, ok) in &checks {
        if *ok {
            body.push_str(&format!("[+]{name} ok\n"));
        } else {
            body.push_str(&format!("[-]{name} failed: reason withheld\n"));
        }
    }
    let verdict = if healthy { "passed" } else { "failed" };
    body.push_str(&format!("{endpoint} check {verdict}\n"));
    (code, body).into_response()
}

/// The aggregated discovery version a client asked for in `Accept`, if any.
fn aggregated_version(headers: &HeaderMap) -> Option<&'static str> {
    let accept = headers.get(header::ACCEPT)?.to_str().ok()?;
    // Honour the client's order of preference.
    for part in accept.split(',') {
        let params: Vec<&str> = part.split(';').map(str::trim).collect();
        if !params.contains(&"as=APIGroupDiscoveryList")
            || !params.contains(&"g=apidiscovery.k8s.io")
        {
            if params
                .first()
                .is_some_and(|m| *m == "application/json" || *m == "*/*")
            {
                return None;
            }
            continue;
        }
        if params.contains(&"v=v2") {
            return Some("v2");
        }
        if params.contains(&"v=v2beta1") {
            return Some("v2beta1");
        }
    }
    None
}

fn aggregated_resource(r: &Resource) -> Value {
    let kind = |kind: &str| json!({"group": r.group, "version": r.version, "kind": kind});
    let subresources: Vec<Value> = r
        .subresources
        .iter()
        .map(|sub| {
            let (group, version, k, verbs) = resources::subresource_kind(r, sub);
            json!({"subresource": sub,
                "responseKind": {"group": group, "version": version, "kind": k}, "verbs": verbs})
        })
        .collect();
    let mut out = json!({
        "resource": r.plural,
        "responseKind": kind(r.kind),
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": VERBS,
    });
    if !r.short_names.is_empty() {
        crate::object::set(&mut out, "shortNames", json!(r.short_names));
    }
    if !r.categories.is_empty() {
        crate::object::set(&mut out, "categories", json!(r.categories));
    }
    if !subresources.is_empty() {
        crate::object::set(&mut out, "subresources", json!(subresources));
    }
    out
}

/// An APIGroupDiscoveryList of the core group (`core = true`) or of all
/// named groups, in the asked-for version, with the matching Content-Type.
fn aggregated(core: bool, version: &str) -> Response {
    let mut groups: Vec<(&str, &str)> = if core {
        vec![("", "v1")]
    } else {
        resources::groups()
    };
    groups.dedup();
    let items: Vec<Value> = groups
        .into_iter()
        .map(|(group, v)| {
            let resources: Vec<Value> = RESOURCES
                .iter()
                .filter(|r| r.group == group && r.version == v)
                .map(aggregated_resource)
                .collect();
            let mut metadata = json!({});
            if !group.is_empty() {
                crate::object::set(&mut metadata, "name", json!(group));
            }
            json!({
                "metadata": metadata,
                "versions": [{"version": v, "resources": resources, "freshness": "Current"}],
            })
        })
        .collect();
    let body = json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    });
    let content_type =
        format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList");
    (
        [(header::CONTENT_TYPE, content_type)],
        serde_json::to_vec(&body).unwrap_or_default(),
    )
        .into_response()
}

pub async fn api_versions(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(version) = aggregated_version(&headers) {
        return aggregated(true, version);
    }
    legacy_api_versions(&state).into_response()
}

fn legacy_api_versions(state: &AppState) -> Json<Value> {
    Json(json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": state.advertise.clone()}
        ],
    }))
}

pub async fn api_groups(headers: HeaderMap) -> Response {
    if let Some(version) = aggregated_version(&headers) {
        return aggregated(false, version);
    }
    let groups: Vec<Value> = resources::groups()
        .into_iter()
        .map(|(group, version)| {
            let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
            json!({"name": group, "versions": [gv.clone()], "preferredVersion": gv})
        })
        .collect();
    Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})).into_response()
}

const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
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
        crate::object::set(&mut main, "shortNames", json!(r.short_names));
    }
    if !r.categories.is_empty() {
        crate::object::set(&mut main, "categories", json!(r.categories));
    }
    let mut out = vec![main];
    for sub in r.subresources {
        let (group, version, kind, verbs) = resources::subresource_kind(r, sub);
        let mut entry = json!({
            "name": format!("{}/{sub}", r.plural),
            "singularName": "",
            "namespaced": r.namespaced,
            "kind": kind,
            "verbs": verbs,
        });
        if (group, version) != (r.group, r.version) {
            crate::object::set(&mut entry, "group", json!(group));
            crate::object::set(&mut entry, "version", json!(version));
        }
        out.push(entry);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, value.parse().unwrap());
        h
    }

    #[test]
    fn negotiates_aggregated_discovery() {
        let kubectl = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(aggregated_version(&accept(kubectl)), Some("v2"));
        let old = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(aggregated_version(&accept(old)), Some("v2beta1"));
        assert_eq!(aggregated_version(&accept("application/json")), None);
        assert_eq!(aggregated_version(&HeaderMap::new()), None);
    }

    #[test]
    fn aggregated_lists_every_resource_once() {
        let response = aggregated(false, "v2");
        let ct = response.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_string();
        assert_eq!(
            ct,
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        );
    }
}
