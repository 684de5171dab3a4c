//! Discovery and health: `/version`, `/api`, `/apis`, one APIResourceList
//! per group-version (the legacy, unaggregated shapes, which every kubectl
//! and client library accepts), the aggregated APIGroupDiscoveryList,
//! `/healthz`, `/livez` and `/readyz`. The documents cover the built-in
//! resources and those of established CustomResourceDefinitions; they are
//! serialized once per change of that set and served from memory.

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::catalog::{Catalog, Resource};
use crate::metrics_api::discovery as metrics_api;
use crate::object;
use crate::status::ApiError;
use crate::AppState;

/// The Kubernetes minor version Skiff speaks (kubectl's dispatcher picks
/// the matching kubectl by it).
pub const KUBE_MINOR: &str = "33";

/// `GET /cacerts`: the cluster's CA certificate, PEM (public, as k3s's):
/// a node joining with a token checks it against the token's hash before
/// it trusts the server.
pub async fn ca_certs(State(state): State<AppState>) -> Result<Response, ApiError> {
    let Some(pem) = state.ca_cert.clone() else {
        return Err(ApiError::not_found_path());
    };
    Ok((
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        pem.to_string(),
    )
        .into_response())
}

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
            let (group, version, k, verbs) = crate::catalog::subresource_kind(r, sub);
            json!({"subresource": sub,
                "responseKind": {"group": group, "version": version, "kind": k}, "verbs": verbs})
        })
        .collect();
    let mut out = json!({
        "resource": r.plural,
        "responseKind": kind(r.kind),
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": crate::reviews::verbs(r, VERBS),
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
        "verbs": crate::reviews::verbs(r, VERBS),
    });
    if !r.short_names.is_empty() {
        crate::object::set(&mut main, "shortNames", json!(r.short_names));
    }
    if !r.categories.is_empty() {
        crate::object::set(&mut main, "categories", json!(r.categories));
    }
    let mut out = vec![main];
    for sub in r.subresources {
        let (group, version, kind, verbs) = crate::catalog::subresource_kind(r, sub);
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

/// Upstream's version priority (`v2` > `v1` > `v1beta2` > `v1beta1` >
/// `v1alpha1`, then anything else alphabetically): the first of a group's
/// versions is its preferred one.
fn version_key(v: &str) -> (u8, std::cmp::Reverse<u64>, std::cmp::Reverse<u64>, String) {
    let parsed = v.strip_prefix('v').and_then(|rest| {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        let major: u64 = rest.get(..digits)?.parse().ok()?;
        let tail = rest.get(digits..)?;
        let (level, minor) = if tail.is_empty() {
            (0, "0")
        } else if let Some(m) = tail.strip_prefix("beta") {
            (1, m)
        } else if let Some(m) = tail.strip_prefix("alpha") {
            (2, m)
        } else {
            return None;
        };
        let minor: u64 = minor.parse().ok()?;
        Some((level, major, minor))
    });
    match parsed {
        Some((level, major, minor)) => (
            level,
            std::cmp::Reverse(major),
            std::cmp::Reverse(minor),
            String::new(),
        ),
        None => (3, std::cmp::Reverse(0), std::cmp::Reverse(0), v.to_string()),
    }
}

/// The served non-core groups with their versions, preferred first, in
/// the order the groups first appear.
fn grouped(catalog: &Catalog) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for (g, v) in catalog.groups() {
        match out.iter_mut().find(|(name, _)| *name == g) {
            Some((_, versions)) => {
                if !versions.contains(&v) {
                    versions.push(v);
                }
            }
            None => out.push((g, vec![v])),
        }
    }
    for (_, versions) in &mut out {
        versions.sort_by_key(|v| version_key(v));
    }
    out
}

/// The aggregated entry of one group and its versions.
fn aggregated_group(served: &[&Resource], group: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| {
            let resources: Vec<Value> = served
                .iter()
                .filter(|r| r.group == group && r.version == *v)
                .map(|r| aggregated_resource(r))
                .collect();
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    let mut metadata = json!({});
    if !group.is_empty() {
        crate::object::set(&mut metadata, "name", json!(group));
    }
    json!({"metadata": metadata, "versions": versions})
}

fn group_entry(group: &str, versions: &[&str]) -> Value {
    let gvs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    let preferred = gvs.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": gvs, "preferredVersion": preferred})
}

fn resource_list(served: &[&Resource], group: &str, version: &str) -> Option<Value> {
    let entries: Vec<Value> = served
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .flat_map(|r| resource_entries(r))
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

/// Every discovery document, serialized once per change of the served
/// resources (see `crate::catalog::Catalog::generation`).
struct Documents {
    /// (core?, "v2" | "v2beta1") → APIGroupDiscoveryList bytes.
    aggregated: Vec<((bool, &'static str), Vec<u8>)>,
    api_groups: Vec<u8>,
    /// group → APIGroup bytes.
    groups: std::collections::HashMap<String, Vec<u8>>,
    /// "v1" or "group/version" → APIResourceList bytes.
    lists: std::collections::HashMap<String, Vec<u8>>,
}

/// Per API server of the process (its custom resource registry's id): the generation of
/// the served custom resources the documents reflect, and the documents.
type Current = std::collections::HashMap<u64, (u64, std::sync::Arc<Documents>)>;

static CURRENT: std::sync::LazyLock<std::sync::RwLock<Current>> =
    std::sync::LazyLock::new(Default::default);

fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

fn build(catalog: &Catalog) -> Documents {
    let served = catalog.served();
    let grouped = grouped(catalog);
    let mut aggregated = Vec::new();
    for version in ["v2", "v2beta1"] {
        for core in [true, false] {
            let items: Vec<Value> = if core {
                vec![aggregated_group(&served, "", &["v1"])]
            } else {
                grouped
                    .iter()
                    .map(|(g, vs)| aggregated_group(&served, g, vs))
                    .chain([metrics_api::aggregated_group()])
                    .collect()
            };
            let body = json!({
                "kind": "APIGroupDiscoveryList",
                "apiVersion": format!("apidiscovery.k8s.io/{version}"),
                "metadata": {},
                "items": items,
            });
            aggregated.push(((core, version), bytes(&body)));
        }
    }
    let groups: Vec<Value> = grouped
        .iter()
        .map(|(g, vs)| group_entry(g, vs))
        .chain([metrics_api::group_entry()])
        .collect();
    let api_groups = bytes(&json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}));
    let mut by_group = std::collections::HashMap::new();
    let mut lists = std::collections::HashMap::new();
    if let Some(list) = resource_list(&served, "", "v1") {
        lists.insert("v1".to_string(), bytes(&list));
    }
    for (g, vs) in &grouped {
        let mut entry = group_entry(g, vs);
        if let Some(o) = entry.as_object_mut() {
            o.insert("kind".into(), json!("APIGroup"));
            o.insert("apiVersion".into(), json!("v1"));
        }
        by_group.insert(g.to_string(), bytes(&entry));
        for v in vs {
            if let Some(list) = resource_list(&served, g, v) {
                lists.insert(format!("{g}/{v}"), bytes(&list));
            }
        }
    }
    // metrics.k8s.io, served beside the catalog (`crate::metrics_api`).
    let mut metrics = metrics_api::group_entry();
    object::set(&mut metrics, "kind", json!("APIGroup"));
    object::set(&mut metrics, "apiVersion", json!("v1"));
    by_group.insert(metrics_api::GROUP.to_string(), bytes(&metrics));
    lists.insert(
        metrics_api::GROUP_VERSION.to_string(),
        bytes(&metrics_api::resource_list()),
    );
    Documents {
        aggregated,
        api_groups,
        groups: by_group,
        lists,
    }
}

/// The current documents (built now if the served resources changed).
fn documents(state: &AppState) -> std::sync::Arc<Documents> {
    let owner = state.crds.id();
    let generation = state.catalog.generation();
    if let Some((g, docs)) = CURRENT
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&owner)
    {
        if *g == generation {
            return docs.clone();
        }
    }
    let mut current = CURRENT.write().unwrap_or_else(|e| e.into_inner());
    if let Some((g, docs)) = current.get(&owner) {
        if *g == generation {
            return docs.clone();
        }
    }
    let started = std::time::Instant::now();
    let docs = std::sync::Arc::new(build(&state.catalog));
    tracing::debug!(
        groups = docs.groups.len(),
        aggregated_bytes = docs
            .aggregated
            .iter()
            .map(|(_, b)| b.len())
            .max()
            .unwrap_or(0),
        elapsed_us = started.elapsed().as_micros() as u64,
        "discovery documents built"
    );
    current.insert(owner, (generation, docs.clone()));
    docs
}

/// The size in bytes of the aggregated discovery document of the named
/// groups and the time its documents took to build (for measurements).
pub fn measure() -> (usize, std::time::Duration) {
    let started = std::time::Instant::now();
    let docs = build(crate::resources::builtin());
    let elapsed = started.elapsed();
    let size = docs
        .aggregated
        .iter()
        .find(|((core, v), _)| !core && *v == "v2")
        .map_or(0, |(_, b)| b.len());
    (size, elapsed)
}

fn json_bytes(content_type: String, body: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// An APIGroupDiscoveryList of the core group (`core = true`) or of all
/// named groups, in the asked-for version, with the matching Content-Type.
fn aggregated(state: &AppState, core: bool, version: &str) -> Response {
    aggregated_of(&documents(state), core, version)
}

fn aggregated_of(docs: &Documents, core: bool, version: &str) -> Response {
    let body = docs
        .aggregated
        .iter()
        .find(|((c, v), _)| *c == core && *v == version)
        .map(|(_, b)| b.clone())
        .unwrap_or_default();
    let content_type =
        format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList");
    json_bytes(content_type, body)
}

pub async fn api_versions(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(version) = aggregated_version(&headers) {
        return aggregated(&state, true, version);
    }
    legacy_api_versions(&state).into_response()
}

fn legacy_api_versions(state: &AppState) -> Json<Value> {
    Json(json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": &*state.advertise}
        ],
    }))
}

pub async fn api_groups(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(version) = aggregated_version(&headers) {
        return aggregated(&state, false, version);
    }
    json_bytes(
        "application/json".into(),
        documents(&state).api_groups.clone(),
    )
}

pub async fn core_resources(State(state): State<AppState>) -> Response {
    let docs = documents(&state);
    json_bytes(
        "application/json".into(),
        docs.lists.get("v1").cloned().unwrap_or_default(),
    )
}

pub async fn group_resources(
    State(state): State<AppState>,
    axum::extract::Path((group, version)): axum::extract::Path<(String, String)>,
) -> Result<Response, ApiError> {
    let docs = documents(&state);
    docs.lists
        .get(&format!("{group}/{version}"))
        .map(|b| json_bytes("application/json".into(), b.clone()))
        .ok_or_else(ApiError::not_found_path)
}

pub async fn group(
    State(state): State<AppState>,
    axum::extract::Path(group): axum::extract::Path<String>,
) -> Result<Response, ApiError> {
    let docs = documents(&state);
    docs.groups
        .get(&group)
        .map(|b| json_bytes("application/json".into(), b.clone()))
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
    fn versions_sort_by_upstream_priority() {
        let mut v = vec![
            "v1alpha1", "v1", "v2beta1", "foo", "v1beta2", "v2", "v1beta1", "v10",
        ];
        v.sort_by_key(|x| version_key(x));
        assert_eq!(
            v,
            ["v10", "v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1", "foo"]
        );
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
    fn metrics_k8s_io_is_discovered() {
        let docs = build(crate::resources::builtin());
        let groups: Value = serde_json::from_slice(&docs.api_groups).unwrap();
        assert!(groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "metrics.k8s.io"));
        let list: Value = serde_json::from_slice(&docs.lists["metrics.k8s.io/v1beta1"]).unwrap();
        let kinds: Vec<&str> = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["NodeMetrics", "PodMetrics"]);
        let aggregated = &docs
            .aggregated
            .iter()
            .find(|((core, v), _)| !core && *v == "v2")
            .unwrap()
            .1;
        let aggregated: Value = serde_json::from_slice(aggregated).unwrap();
        assert!(aggregated["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["metadata"]["name"] == "metrics.k8s.io"
                && g["versions"][0]["resources"][1]["verbs"] == json!(["get", "list"])));
    }

    #[test]
    fn aggregated_lists_every_resource_once() {
        let response = aggregated_of(&build(crate::resources::builtin()), false, "v2");
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
