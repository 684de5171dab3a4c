//! The Swagger 2.0 document of `/openapi/v2`, made from the per
//! group-version OpenAPI v3 documents `crate::openapi` serves: their
//! `components/schemas` become `definitions` (the same
//! `io.k8s.api.core.v1.Pod`-style names), their paths and operations keep
//! their `x-kubernetes-*` extensions, and v3's request bodies and typed
//! parameters take v2's forms (`in: body` parameters, `consumes`,
//! `produces`).
//!
//! kubectl 1.27–1.29 parse the definitions with kube-openapi's strict
//! `proto.NewOpenAPIData`, which rejects the whole document for a `$ref`
//! beside a `type` or `properties`, an array without `items`, several
//! types, or an unknown primitive type; and gnostic rejects keys Swagger 2.0
//! does not have. So schemas are rewritten as upstream writes v2: `allOf`
//! of one `$ref` becomes the `$ref` (its siblings, such as the patch
//! extensions, kept), other junctors (`allOf`, `anyOf`, `oneOf`, `not`) are
//! dropped, and `nullable` and `x-kubernetes-preserve-unknown-fields`
//! values lose their type and structure, as apiextensions-apiserver's
//! `ToStructuralOpenAPIV2` does for custom resources.

use serde_json::{json, Map, Value};

/// Schema keys Swagger 2.0 has (besides `x-` extensions).
const SCHEMA_KEYS: &[&str] = &[
    "$ref",
    "format",
    "title",
    "description",
    "default",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "required",
    "enum",
    "additionalProperties",
    "type",
    "items",
    "properties",
    "readOnly",
    "externalDocs",
    "example",
];

/// What every resource operation produces (kube-apiserver 1.33's list).
const PRODUCES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];

/// What lists produce besides: their watch streams.
const WATCH_PRODUCES: &[&str] = &[
    "application/json;stream=watch",
    "application/vnd.kubernetes.protobuf;stream=watch",
];

const METHODS: &[&str] = &["get", "put", "post", "delete", "options", "head", "patch"];

const V3_REFS: &str = "#/components/schemas/";
const V2_REFS: &str = "#/definitions/";

/// The v2 document for `docs` (v3 documents, in the order served).
pub(super) fn swagger(docs: &[Value]) -> Value {
    let mut definitions = Map::new();
    let mut paths = Map::new();
    for doc in docs {
        if let Some(Value::Object(schemas)) = doc.pointer("/components/schemas") {
            for (name, s) in schemas {
                let converted = definition(name, s);
                match definitions.get_mut(name) {
                    Some(existing) => merge(existing, converted),
                    None => {
                        definitions.insert(name.clone(), converted);
                    }
                }
            }
        }
        if let Some(Value::Object(doc_paths)) = doc.get("paths") {
            for (path, item) in doc_paths {
                paths.insert(path.clone(), path_item(path, item));
            }
        }
    }
    let info = docs
        .iter()
        .find_map(|d| d.get("info").cloned())
        .unwrap_or_else(|| json!({"title": "Kubernetes"}));
    json!({
        "swagger": "2.0",
        "info": info,
        "paths": paths,
        "definitions": definitions,
        "securityDefinitions": {
            "BearerToken": {
                "description": "Bearer Token authentication",
                "in": "header",
                "name": "authorization",
                "type": "apiKey",
            }
        },
        "security": [{"BearerToken": []}],
    })
}

/// One definition. The meta types whose v3 schemas differ from upstream's
/// v2 ones are written as upstream writes them; a kind whose whole schema
/// preserves unknown fields is only `type: object` and its kind, as
/// apiextensions-apiserver publishes such a custom resource.
fn definition(name: &str, s: &Value) -> Value {
    let mut out = schema(s);
    let Some(o) = out.as_object_mut() else {
        return out;
    };
    match name {
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString" => {
            o.remove("x-kubernetes-int-or-string");
            o.insert("type".into(), json!("string"));
            o.insert("format".into(), json!("int-or-string"));
        }
        "io.k8s.apimachinery.pkg.api.resource.Quantity" => {
            o.remove("x-kubernetes-int-or-string");
            o.insert("type".into(), json!("string"));
        }
        _ => {}
    }
    // k8s-openapi's types make every kind's `metadata` required; upstream
    // requires it of the core Event only (kubectl would refuse a List item
    // without it before the server could name what is missing).
    if o.contains_key("x-kubernetes-group-version-kind") && name != "io.k8s.api.core.v1.Event" {
        if let Some(Value::Array(required)) = o.get_mut("required") {
            required.retain(|r| r != "metadata");
            if required.is_empty() {
                o.remove("required");
            }
        }
    }
    let preserves = s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if preserves {
        if let Some(gvk) = o.get("x-kubernetes-group-version-kind").cloned() {
            return json!({"type": "object", "x-kubernetes-group-version-kind": gvk});
        }
    }
    out
}

/// `#/components/schemas/X` as `#/definitions/X`.
fn reference(r: &Value) -> Value {
    match r.as_str() {
        Some(s) => Value::String(match s.strip_prefix(V3_REFS) {
            Some(name) => format!("{V2_REFS}{name}"),
            None => s.to_string(),
        }),
        None => r.clone(),
    }
}

fn is_true(o: &Map<String, Value>, key: &str) -> bool {
    o.get(key) == Some(&Value::Bool(true))
}

/// One schema, recursively, in v2's form.
pub(super) fn schema(s: &Value) -> Value {
    let Some(o) = s.as_object() else {
        // `true` (anything) and other non-object schemas: no constraint.
        return json!({});
    };
    let mut out = Map::new();
    for (key, value) in o {
        match key.as_str() {
            "$ref" => {
                out.insert(key.clone(), reference(value));
            }
            "allOf" => {
                // `allOf: [{$ref}]` is how v3 gives a `$ref` siblings.
                if let Some([only]) = value.as_array().map(Vec::as_slice) {
                    if let Some(r) = only.get("$ref") {
                        out.insert("$ref".into(), reference(r));
                    }
                }
            }
            "properties" => {
                let props: Map<String, Value> = value
                    .as_object()
                    .map(|p| p.iter().map(|(k, v)| (k.clone(), schema(v))).collect())
                    .unwrap_or_default();
                if !props.is_empty() {
                    out.insert(key.clone(), Value::Object(props));
                }
            }
            "items" => {
                let items = match value {
                    Value::Array(list) => list.first().map(schema).unwrap_or_else(|| json!({})),
                    other => schema(other),
                };
                out.insert(key.clone(), items);
            }
            "additionalProperties" => {
                let ap = match value {
                    Value::Bool(b) => Value::Bool(*b),
                    other => schema(other),
                };
                out.insert(key.clone(), ap);
            }
            "type" => {
                let t = match value {
                    Value::Array(types) => types.iter().find(|t| t.as_str() != Some("null")),
                    other => Some(other),
                };
                if let Some(t) = t.filter(|t| t.is_string() && t.as_str() != Some("null")) {
                    out.insert(key.clone(), t.clone());
                }
            }
            "required" if value.as_array().is_some_and(|r| !r.is_empty()) => {
                out.insert(key.clone(), value.clone());
            }
            "required" => {}
            k if k.starts_with("x-") || SCHEMA_KEYS.contains(&k) => {
                out.insert(key.clone(), value.clone());
            }
            // v3 only: nullable, oneOf, anyOf, not, writeOnly, deprecated,
            // discriminator objects, patternProperties.
            _ => {}
        }
    }
    // Properties that may be null are not required (kubectl would insist).
    let nullable: Vec<String> = o
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .filter(|(_, v)| v.get("nullable") == Some(&Value::Bool(true)))
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default();
    let ap_nullable = o
        .get("additionalProperties")
        .and_then(|a| a.get("nullable"))
        == Some(&Value::Bool(true));
    if let Some(Value::Array(required)) = out.get_mut("required") {
        required.retain(|r| r.as_str().is_some_and(|r| !nullable.iter().any(|n| n == r)));
        if required.is_empty() || ap_nullable {
            out.remove("required");
        }
    }
    if is_true(o, "nullable") {
        out.remove("type");
        out.remove("items");
        out.remove("properties");
    }
    if is_true(o, "x-kubernetes-preserve-unknown-fields") {
        out.remove("items");
        out.remove("properties");
        if out.get("type").and_then(Value::as_str) == Some("object") {
            out.remove("type");
        }
    }
    if out.get("type").and_then(Value::as_str) == Some("array") && !out.contains_key("items") {
        out.remove("type");
    }
    if out.contains_key("$ref") {
        out.remove("type");
        out.remove("properties");
    }
    Value::Object(out)
}

/// A definition served by several group-versions (ObjectMeta, PodSpec,
/// Scale …): the first one, with what the later ones add (their kinds
/// joined into one `x-kubernetes-group-version-kind` list).
fn merge(into: &mut Value, from: Value) {
    let (Value::Object(into), Value::Object(from)) = (into, from) else {
        return;
    };
    for (key, value) in from {
        match into.get_mut(&key) {
            None => {
                into.insert(key, value);
            }
            Some(Value::Array(list)) if key == "x-kubernetes-group-version-kind" => {
                for gvk in value.as_array().into_iter().flatten() {
                    if !list.contains(gvk) {
                        list.push(gvk.clone());
                    }
                }
            }
            Some(existing @ Value::Object(_)) if value.is_object() => merge(existing, value),
            Some(_) => {}
        }
    }
}

/// The description upstream gives a path parameter.
fn path_parameter(name: &str) -> Value {
    let description = match name {
        "namespace" => "object name and auth scope, such as for teams and projects".to_string(),
        "path" => "path to the resource".to_string(),
        other => format!("name of the {}", other),
    };
    json!({
        "description": description,
        "in": "path",
        "name": name,
        "required": true,
        "type": "string",
        "uniqueItems": true,
    })
}

fn path_item(path: &str, item: &Value) -> Value {
    let mut out = Map::new();
    let Some(item) = item.as_object() else {
        return Value::Object(out);
    };
    for (key, value) in item {
        if METHODS.contains(&key.as_str()) {
            out.insert(key.clone(), operation(value));
        } else if key.starts_with("x-") {
            out.insert(key.clone(), value.clone());
        }
    }
    // Path parameters: the `{...}` segments of the path, then any the v3
    // path item declares itself.
    let mut parameters: Vec<Value> = path
        .split('/')
        .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| path_parameter(name.trim_start_matches('*')))
        .collect();
    for p in item
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let p = parameter(p);
        if !parameters
            .iter()
            .any(|q| q.get("name") == p.get("name") && q.get("in") == p.get("in"))
        {
            parameters.push(p);
        }
    }
    if !parameters.is_empty() {
        out.insert("parameters".into(), Value::Array(parameters));
    }
    Value::Object(out)
}

/// A v3 parameter (its type in `schema`) as a v2 one (its type beside it).
fn parameter(p: &Value) -> Value {
    let Some(o) = p.as_object() else {
        return json!({});
    };
    if let Some(r) = o.get("$ref") {
        return json!({ "$ref": r.as_str().map(|r| r.replace("#/components/parameters/", "#/parameters/")) });
    }
    let mut out = Map::new();
    for key in ["name", "in", "description", "required", "uniqueItems"] {
        if let Some(v) = o.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    if let Some(Value::Object(s)) = o.get("schema") {
        for key in [
            "type",
            "format",
            "default",
            "enum",
            "maximum",
            "minimum",
            "maxLength",
            "minLength",
            "pattern",
            "uniqueItems",
        ] {
            if let Some(v) = s.get(key) {
                out.insert(key.into(), v.clone());
            }
        }
        if let Some(items) = s.get("items") {
            out.insert("items".into(), schema(items));
        }
    }
    if out.get("in").and_then(Value::as_str) == Some("path") {
        out.insert("required".into(), Value::Bool(true));
    }
    out.entry("type").or_insert_with(|| json!("string"));
    Value::Object(out)
}

/// The schema of a v3 `content` map: its JSON form, else its first.
fn content_schema(content: &Value) -> Option<Value> {
    let content = content.as_object()?;
    let media = ["application/json", "*/*"]
        .iter()
        .find_map(|m| content.get(*m))
        .or_else(|| content.values().next())?;
    media.get("schema").map(schema)
}

fn operation(op: &Value) -> Value {
    let mut out = Map::new();
    let Some(o) = op.as_object() else {
        return Value::Object(out);
    };
    for (key, value) in o {
        match key.as_str() {
            "operationId" | "description" | "summary" | "tags" | "deprecated" | "externalDocs" => {
                out.insert(key.clone(), value.clone());
            }
            k if k.starts_with("x-") => {
                out.insert(key.clone(), value.clone());
            }
            _ => {}
        }
    }
    let body = o.get("requestBody");
    let consumes: Vec<Value> = body
        .and_then(|b| b.get("content"))
        .and_then(Value::as_object)
        .map(|c| c.keys().map(|k| json!(k)).collect())
        .filter(|c: &Vec<Value>| !c.is_empty())
        .unwrap_or_else(|| vec![json!("*/*")]);
    out.insert("consumes".into(), Value::Array(consumes));
    let mut produces: Vec<Value> = PRODUCES.iter().map(|p| json!(p)).collect();
    if o.get("x-kubernetes-action").and_then(Value::as_str) == Some("list") {
        produces.extend(WATCH_PRODUCES.iter().map(|p| json!(p)));
    }
    out.insert("produces".into(), Value::Array(produces));
    out.insert("schemes".into(), json!(["https"]));
    let mut parameters: Vec<Value> = o
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(parameter)
        .collect();
    if let Some(body) = body {
        let schema = body
            .get("content")
            .and_then(content_schema)
            .unwrap_or_else(|| json!({"type": "object"}));
        parameters.insert(
            0,
            json!({"in": "body", "name": "body", "required": true, "schema": schema}),
        );
    }
    if !parameters.is_empty() {
        out.insert("parameters".into(), Value::Array(parameters));
    }
    let mut responses = Map::new();
    for (code, r) in o
        .get("responses")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if code.starts_with("x-") {
            continue;
        }
        let mut resp = Map::new();
        let description = r.get("description").cloned().unwrap_or_else(|| json!(""));
        resp.insert("description".into(), description);
        if let Some(s) = r.get("content").and_then(content_schema) {
            resp.insert("schema".into(), s);
        }
        responses.insert(code.clone(), Value::Object(resp));
    }
    responses
        .entry("401")
        .or_insert_with(|| json!({"description": "Unauthorized"}));
    out.insert("responses".into(), Value::Object(responses));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_with_siblings_become_v2_refs() {
        let s = schema(&json!({
            "allOf": [{"$ref": "#/components/schemas/io.k8s.api.core.v1.PodSpec"}],
            "description": "spec",
            "x-kubernetes-patch-strategy": "merge",
        }));
        assert_eq!(
            s,
            json!({
                "$ref": "#/definitions/io.k8s.api.core.v1.PodSpec",
                "description": "spec",
                "x-kubernetes-patch-strategy": "merge",
            })
        );
    }

    #[test]
    fn shapes_kubectl_rejects_are_rewritten() {
        let s = schema(&json!({
            "type": "object",
            "required": ["a", "b"],
            "properties": {
                "a": {"type": "string", "nullable": true},
                "b": {"type": "array"},
                "c": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                      "properties": {"d": {"type": "string"}}},
                "e": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": true},
                "f": {"type": ["string", "null"]},
                "g": {"properties": {}},
            },
        }));
        assert_eq!(
            s,
            json!({
                "type": "object",
                "required": ["b"],
                "properties": {
                    "a": {},
                    "b": {},
                    "c": {"x-kubernetes-preserve-unknown-fields": true},
                    "e": {"x-kubernetes-int-or-string": true},
                    "f": {"type": "string"},
                    "g": {},
                },
            })
        );
    }

    #[test]
    fn operations_take_v2_forms() {
        let doc = json!({
            "info": {"title": "Kubernetes", "version": "v1.33.0"},
            "paths": {"/api/v1/namespaces/{namespace}/pods/{name}": {"patch": {
                "operationId": "patchPod",
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {"group": "", "version": "v1", "kind": "Pod"},
                "parameters": [{"name": "fieldValidation", "in": "query",
                                "schema": {"type": "string"}, "uniqueItems": true}],
                "requestBody": {"content": {
                    "application/merge-patch+json": {"schema": {"type": "object"}},
                    "application/strategic-merge-patch+json": {"schema": {"type": "object"}},
                }, "required": true},
                "responses": {"200": {"description": "OK", "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/io.k8s.api.core.v1.Pod"}}}}},
            }}},
            "components": {"schemas": {"io.k8s.api.core.v1.Pod": {"type": "object",
                "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "Pod"}]}}},
        });
        let v2 = swagger(&[doc]);
        let item = &v2["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"];
        assert_eq!(item["parameters"][0]["name"], "namespace");
        assert_eq!(item["parameters"][1]["name"], "name");
        let patch = &item["patch"];
        assert_eq!(
            patch["consumes"],
            json!([
                "application/merge-patch+json",
                "application/strategic-merge-patch+json"
            ])
        );
        assert_eq!(patch["parameters"][0]["in"], "body");
        assert_eq!(
            patch["parameters"][1],
            json!({"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": true})
        );
        assert_eq!(
            patch["responses"]["200"]["schema"]["$ref"],
            "#/definitions/io.k8s.api.core.v1.Pod"
        );
        assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Pod");
        assert_eq!(
            v2["definitions"]["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"][0]
                ["kind"],
            "Pod"
        );
    }

    #[test]
    fn shared_definitions_join_their_kinds() {
        let scale = |g: &str| {
            json!({"components": {"schemas": {"io.k8s.api.autoscaling.v1.Scale": {
                "type": "object",
                "x-kubernetes-group-version-kind": [{"group": g, "version": "v1", "kind": "Scale"}],
            }}}})
        };
        let v2 = swagger(&[scale("autoscaling"), scale("autoscaling"), scale("x")]);
        let gvks = &v2["definitions"]["io.k8s.api.autoscaling.v1.Scale"]
            ["x-kubernetes-group-version-kind"];
        assert_eq!(gvks.as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn kinds_do_not_require_metadata_but_core_events_do() {
        let kind = |required: Value| {
            json!({"type": "object", "required": required,
                   "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "X"}]})
        };
        let cm = definition("io.k8s.api.core.v1.ConfigMap", &kind(json!(["metadata"])));
        assert!(cm.get("required").is_none(), "{cm}");
        let binding = definition(
            "io.k8s.api.core.v1.Binding",
            &kind(json!(["metadata", "target"])),
        );
        assert_eq!(binding["required"], json!(["target"]));
        let event = definition(
            "io.k8s.api.core.v1.Event",
            &kind(json!(["metadata", "involvedObject"])),
        );
        assert_eq!(event["required"], json!(["metadata", "involvedObject"]));
        let meta = definition(
            "io.k8s.api.core.v1.PodSpec",
            &json!({"required": ["metadata"]}),
        );
        assert_eq!(meta["required"], json!(["metadata"]));
    }

    #[test]
    fn custom_resources_that_keep_unknown_fields_are_objects() {
        let d = definition(
            "com.example.v1.Widget",
            &json!({
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": true,
                "properties": {"spec": {"type": "object"}},
                "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": "Widget"}],
            }),
        );
        assert_eq!(
            d,
            json!({"type": "object", "x-kubernetes-group-version-kind": [
                {"group": "example.com", "version": "v1", "kind": "Widget"}]})
        );
    }
}
