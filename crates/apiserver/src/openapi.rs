//! OpenAPI: `/openapi/v3` (an index) and one document per served
//! group-version with the paths and operations kubectl looks for
//! (`x-kubernetes-group-version-kind`, the `fieldValidation` parameter) and
//! the schemas of every served kind, generated from k8s-openapi's types
//! (descriptions included), so `kubectl explain` works. `/openapi/v2` is a
//! clean 404: kubectl only asks for it as protobuf.
//!
//! Documents are built once and kept: the built-in group-versions' on
//! first request, those of custom resources (`crate::customresources::openapi`)
//! again whenever a server's custom resources change (their generation),
//! never per request.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, RwLock};

use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use schemars::generate::SchemaSettings;
use serde_json::{json, Map, Value};

use crate::catalog::{definition, subresource_kind, Catalog, Resource};
use crate::customresources::Registry;
use crate::resources;
use crate::status::ApiError;

/// What a server's documents are built from: its catalog and custom
/// resources.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub catalog: &'a Catalog,
    pub crds: &'a Registry,
}

impl Source<'_> {
    /// The documents of `state`'s server.
    pub fn of(state: &crate::AppState) -> Source<'_> {
        Source {
            catalog: &state.catalog,
            crds: &state.crds,
        }
    }
}

/// The built-in kinds alone (no custom resources).
fn built_in_source() -> Source<'static> {
    static NONE: std::sync::LazyLock<Registry> = std::sync::LazyLock::new(Registry::default);
    Source {
        catalog: resources::builtin(),
        crds: &NONE,
    }
}

/// (url path like "api/v1", document bytes, hash)
struct Documents {
    by_path: BTreeMap<String, (Vec<u8>, String)>,
}

/// The built-in group-versions' documents (they never change).
static BUILT_IN: OnceLock<Documents> = OnceLock::new();
/// Every document of each API server of the process (by its custom
/// resource registry's id), with the generation of custom resources it
/// reflects.
type Current = std::collections::HashMap<u64, (u64, Arc<Documents>)>;

static CURRENT: std::sync::LazyLock<RwLock<Current>> = std::sync::LazyLock::new(Default::default);

/// The schema name and definitions for the kinds of one group-version:
/// its resources' kinds and their subresources' (Binding, Eviction, Scale),
/// with the types `resources` names.
fn schemas_for(
    src: Source<'_>,
    group: &str,
    version: &str,
) -> (Map<String, Value>, BTreeMap<&'static str, String>) {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let mut names = BTreeMap::new();
    let mut kinds: Vec<(&'static str, &'static str)> = Vec::new();
    for r in src
        .catalog
        .served()
        .into_iter()
        .filter(|r| r.group == group && r.version == version)
    {
        if src.crds.served(r).is_some() {
            for sub in r.subresources.iter().filter(|s| **s == "scale") {
                let (g, _, kind, _) = subresource_kind(r, sub);
                kinds.push((g, kind));
            }
            continue;
        }
        kinds.push((r.group, r.kind));
        for sub in r.subresources {
            let (g, _, kind, _) = subresource_kind(r, sub);
            kinds.push((g, kind));
        }
    }
    kinds.sort_unstable();
    kinds.dedup();
    for (g, kind) in kinds {
        if let Some(k) = src.catalog.find_kind(g, kind) {
            names.insert(kind, k.typed.schema(&mut generator));
        }
    }
    let custom = src
        .crds
        .all()
        .iter()
        .any(|s| s.resource.group == group && s.resource.version == version);
    if !custom {
        return (generator.take_definitions(true), names);
    }
    let meta =
        definition::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>(&mut generator);
    let list_meta =
        definition::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta>(&mut generator);
    let mut schemas = generator.take_definitions(true);
    for (kind, name) in crate::customresources::openapi::add(
        src.crds,
        group,
        version,
        &mut schemas,
        &meta,
        &list_meta,
    ) {
        names.insert(kind, name);
    }
    (schemas, names)
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

fn operation(r: &Resource, action: &str, id: &str, kind: &str, schema: Option<&str>) -> Value {
    let mut op = json!({
        "operationId": id,
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(r.group, r.version, kind),
        "parameters": [
            {"name": "dryRun", "in": "query", "schema": {"type": "string"}, "uniqueItems": true},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string"}, "uniqueItems": true},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}, "uniqueItems": true},
        ],
        "responses": {"200": {"description": "OK"}},
    });
    if let Some(schema) = schema {
        let body = json!({"schema": {"$ref": format!("#/components/schemas/{schema}")}});
        if let Some(ok) = op.pointer_mut("/responses/200") {
            crate::object::set(ok, "content", json!({"application/json": body.clone()}));
        }
        if matches!(action, "put" | "post" | "patch") {
            let content = if action == "patch" {
                json!({
                    "application/json-patch+json": {"schema": {"type": "object"}},
                    "application/merge-patch+json": {"schema": {"type": "object"}},
                    "application/strategic-merge-patch+json": {"schema": {"type": "object"}},
                    "application/apply-patch+yaml": {"schema": {"type": "object"}},
                })
            } else {
                json!({"*/*": body})
            };
            // Custom resources take no strategic merge patch (upstream
            // answers 415 and leaves it out, so kubectl sends a merge patch).
            let content = match (crate::catalog::is_custom_storage(r.storage), content) {
                (true, Value::Object(mut types)) => {
                    types.remove("application/strategic-merge-patch+json");
                    Value::Object(types)
                }
                (_, content) => content,
            };
            crate::object::set(
                &mut op,
                "requestBody",
                json!({"content": content, "required": true}),
            );
        }
    }
    op
}

/// The definition a property's schema refers to (directly, through
/// `allOf`, or for a list through `items`).
fn referenced(prop: &Value) -> Option<String> {
    let target = prop.get("items").unwrap_or(prop);
    let target = target.get("allOf").and_then(|a| a.get(0)).unwrap_or(target);
    let r = target.get("$ref")?.as_str()?;
    Some(r.rsplit('/').next().unwrap_or(r).to_string())
}

/// The property at `path` under definition `root`, following `$ref`s
/// (and list items) from property to property. A bare `$ref` property is
/// wrapped in `allOf` first, since OpenAPI 3.0 ignores a `$ref`'s siblings.
fn property<'a>(
    schemas: &'a mut Map<String, Value>,
    root: &str,
    path: &[&str],
) -> Option<&'a mut Value> {
    let (last, steps) = path.split_last()?;
    let mut def = root.to_string();
    for step in steps {
        def = schemas
            .get(&def)
            .and_then(|d| d.pointer(&format!("/properties/{step}")))
            .and_then(referenced)?;
    }
    let prop = schemas
        .get_mut(&def)
        .and_then(|d| d.pointer_mut(&format!("/properties/{last}")))?;
    if let Some(r) = prop.get("$ref").cloned() {
        if let Some(o) = prop.as_object_mut() {
            o.remove("$ref");
            o.insert("allOf".into(), json!([{ "$ref": r }]));
        }
    }
    Some(prop)
}

/// Upstream's patch extensions (`x-kubernetes-patch-strategy`,
/// `x-kubernetes-patch-merge-key`), which kubectl's client-side apply
/// reads to merge lists by key as it does against kube-apiserver.
fn annotate(schemas: &mut Map<String, Value>, root: &str, ext: &skiff_api::patch::PatchExtension) {
    let Some(prop) = property(schemas, root, &ext.path) else {
        return;
    };
    crate::object::set(prop, "x-kubernetes-patch-strategy", json!(ext.strategy));
    if let Some(key) = ext.merge_key {
        crate::object::set(prop, "x-kubernetes-patch-merge-key", json!(key));
    }
}

/// Upstream's list and map extensions (`x-kubernetes-list-type`,
/// `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`), which
/// server-side apply clients read.
fn annotate_list(
    schemas: &mut Map<String, Value>,
    root: &str,
    ext: &skiff_api::apply::ListExtension,
) {
    let Some(prop) = property(schemas, root, &ext.path) else {
        return;
    };
    let is_list = prop.get("type").and_then(Value::as_str) == Some("array");
    match (is_list, ext.list_type, ext.map_type) {
        (true, Some(list_type), _) => {
            crate::object::set(prop, "x-kubernetes-list-type", json!(list_type));
            if !ext.list_map_keys.is_empty() {
                crate::object::set(prop, "x-kubernetes-list-map-keys", json!(ext.list_map_keys));
            }
        }
        (false, _, Some(map_type)) => {
            crate::object::set(prop, "x-kubernetes-map-type", json!(map_type));
        }
        _ => {}
    }
}

fn build(src: Source<'_>, group: &str, version: &str) -> Value {
    let (mut schemas, names) = schemas_for(src, group, version);
    for (kind, name) in &names {
        if src.catalog.find_kind(group, kind).is_none() && *kind != "Scale" {
            // A custom kind: its schema carries its own extensions.
            continue;
        }
        for ext in skiff_api::patch::extensions(kind) {
            annotate(&mut schemas, name, &ext);
        }
        for ext in skiff_api::apply::list_extensions(kind) {
            annotate_list(&mut schemas, name, &ext);
        }
    }
    // kubectl finds a kind's schema by this extension.
    for (kind, name) in &names {
        let (g, v) = match *kind {
            "Scale" => ("autoscaling", "v1"),
            "Eviction" => ("policy", "v1"),
            _ => (group, version),
        };
        if let Some(Value::Object(schema)) = schemas.get_mut(name) {
            schema.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([gvk(g, v, kind)]),
            );
        }
    }
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let mut paths = Map::new();
    for r in src
        .catalog
        .served()
        .into_iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let schema = names.get(r.kind).map(String::as_str);
        let (list_path, item_path) = if r.namespaced {
            (
                format!("{prefix}/namespaces/{{namespace}}/{}", r.plural),
                format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural),
            )
        } else {
            (
                format!("{prefix}/{}", r.plural),
                format!("{prefix}/{}/{{name}}", r.plural),
            )
        };
        let k = r.kind;
        paths.insert(
            list_path,
            json!({
                "get": operation(r, "list", &format!("list{k}"), k, None),
                "post": operation(r, "post", &format!("create{k}"), k, schema),
                "delete": operation(r, "deletecollection", &format!("deleteCollection{k}"), k, None),
            }),
        );
        paths.insert(
            item_path.clone(),
            json!({
                "get": operation(r, "get", &format!("read{k}"), k, schema),
                "put": operation(r, "put", &format!("replace{k}"), k, schema),
                "patch": operation(r, "patch", &format!("patch{k}"), k, schema),
                "delete": operation(r, "delete", &format!("delete{k}"), k, None),
            }),
        );
        for sub in r.subresources {
            let (_, _, sub_kind, verbs) = subresource_kind(r, sub);
            let sub_schema = names.get(sub_kind).map(String::as_str);
            let mut ops = Map::new();
            for verb in verbs.iter() {
                let action = if *verb == "create" { "post" } else { verb };
                let id = format!("{verb}{k}{}", sub[..1].to_uppercase() + &sub[1..]);
                ops.insert(
                    action.to_string(),
                    operation(r, action, &id, sub_kind, sub_schema),
                );
            }
            paths.insert(format!("{item_path}/{sub}"), Value::Object(ops));
        }
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{}.0", crate::discovery::KUBE_MINOR)},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// The documents of `gvs`, keyed by URL path.
fn build_all(src: Source<'_>, gvs: Vec<(&str, &str)>) -> BTreeMap<String, (Vec<u8>, String)> {
    gvs.into_iter()
        .map(|(g, v)| {
            let path = if g.is_empty() {
                format!("api/{v}")
            } else {
                format!("apis/{g}/{v}")
            };
            let bytes = serde_json::to_vec(&build(src, g, v)).unwrap_or_default();
            // A content hash, so clients can cache documents by URL.
            let hash = bytes.iter().fold(0xcbf29ce484222325u64, |h, b| {
                (h ^ u64::from(*b)).wrapping_mul(0x100000001b3)
            });
            (path, (bytes, format!("{hash:016X}")))
        })
        .collect()
}

/// The group-versions served by built-in resources only.
fn built_in_gvs() -> Vec<(&'static str, &'static str)> {
    let mut gvs = vec![("", "v1")];
    for r in resources::builtin()
        .builtin()
        .iter()
        .filter(|r| !r.group.is_empty())
    {
        if !gvs.contains(&(r.group, r.version)) {
            gvs.push((r.group, r.version));
        }
    }
    gvs
}

fn documents(src: Source<'_>) -> Arc<Documents> {
    let owner = src.crds.id();
    let generation = src.crds.generation();
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
    let built_in = BUILT_IN.get_or_init(|| Documents {
        by_path: build_all(built_in_source(), built_in_gvs()),
    });
    let built_in_gvs = built_in_gvs();
    let custom: Vec<(&str, &str)> = src
        .crds
        .all()
        .iter()
        .filter(|s| s.established)
        .map(|s| (s.resource.group, s.resource.version))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut by_path = built_in.by_path.clone();
    // A custom resource in a built-in group-version rebuilds that one.
    by_path.extend(build_all(src, custom.clone()));
    let docs = Arc::new(Documents { by_path });
    tracing::debug!(
        documents = docs.by_path.len(),
        custom = custom.len(),
        built_in = built_in_gvs.len(),
        bytes = docs.by_path.values().map(|(b, _)| b.len()).sum::<usize>(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "OpenAPI v3 documents built"
    );
    current.insert(owner, (generation, docs.clone()));
    docs
}

/// The generation the documents of [`each_document`] belong to: it
/// changes whenever the set of documents or their content may have (a
/// CustomResourceDefinition served, changed or gone).
pub(crate) fn documents_generation(src: Source<'_>) -> u64 {
    src.crds.generation()
}

/// Calls `f(url path, JSON bytes, hash)` for every group-version document
/// served now. `/openapi/v2` (`crate::openapi_v2`) is built from them and
/// rebuilt when a hash changes, so keep this answering the current set.
pub(crate) fn each_document(src: Source<'_>, mut f: impl FnMut(&str, &[u8], &str)) {
    let docs = documents(src);
    for (path, (bytes, hash)) in &docs.by_path {
        f(path, bytes, hash);
    }
}

/// GET /openapi/v3
pub async fn index(State(state): State<crate::AppState>) -> Response {
    let paths: Map<String, Value> = documents(Source::of(&state))
        .by_path
        .iter()
        .map(|(path, (_, hash))| {
            (
                path.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")}),
            )
        })
        .collect();
    axum::Json(json!({ "paths": paths })).into_response()
}

/// GET /openapi/v3/{api/v1 | apis/GROUP/VERSION}
pub async fn document(
    State(state): State<crate::AppState>,
    Path(path): Path<String>,
    _q: Query<BTreeMap<String, String>>,
) -> Response {
    match documents(Source::of(&state))
        .by_path
        .get(path.trim_matches('/'))
    {
        Some((bytes, _)) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            bytes.clone(),
        )
            .into_response(),
        None => ApiError::not_found_path().into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_carry_kinds_operations_and_schemas() {
        let doc = build(built_in_source(), "", "v1");
        let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
        assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Pod");
        assert!(patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation"));
        let pod = &doc["components"]["schemas"]["io.k8s.api.core.v1.Pod"];
        assert_eq!(pod["x-kubernetes-group-version-kind"][0]["kind"], "Pod");
        assert!(pod["description"]
            .as_str()
            .is_some_and(|d| d.contains("Pod")));
        let spec = &doc["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"];
        assert_eq!(
            spec["properties"]["containers"]["x-kubernetes-patch-merge-key"],
            "name"
        );
        assert_eq!(
            spec["properties"]["containers"]["x-kubernetes-patch-strategy"],
            "merge"
        );
        let container = &doc["components"]["schemas"]["io.k8s.api.core.v1.Container"];
        assert_eq!(
            container["properties"]["env"]["x-kubernetes-patch-merge-key"],
            "name"
        );
        assert_eq!(
            container["properties"]["ports"]["x-kubernetes-patch-merge-key"],
            "containerPort"
        );
        assert_eq!(
            spec["properties"]["containers"]["x-kubernetes-list-type"],
            "map"
        );
        assert_eq!(
            spec["properties"]["containers"]["x-kubernetes-list-map-keys"],
            json!(["name"])
        );
        assert_eq!(
            container["properties"]["ports"]["x-kubernetes-list-map-keys"],
            json!(["containerPort", "protocol"])
        );
        let meta = &doc["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"];
        assert_eq!(
            meta["properties"]["finalizers"]["x-kubernetes-list-type"],
            "set"
        );
        assert_eq!(
            meta["properties"]["finalizers"]["x-kubernetes-patch-strategy"],
            "merge"
        );
        let apps = build(built_in_source(), "apps", "v1");
        let rs_spec = &apps["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"];
        assert_eq!(
            rs_spec["properties"]["containers"]["x-kubernetes-patch-merge-key"],
            "name"
        );
        assert!(
            apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]["patch"]
                .is_object()
        );
    }
}
