//! OpenAPI v3 schemas of custom resources, as upstream's CRD OpenAPI
//! builder names and shapes them: `<reversed group>.<version>.<Kind>`
//! (`com.example.stable.v1.CronTab`) and its `...List`, the version's
//! `openAPIV3Schema` with `apiVersion`, `kind` and `metadata` (ObjectMeta)
//! properties and `x-kubernetes-group-version-kind`.

use serde_json::{json, Map, Value};

use super::Served;

/// `stable.example.com` → `com.example.stable`.
fn reversed(group: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    parts.join(".")
}

/// The definition name of a custom kind.
pub fn definition_name(served: &Served, kind: &str) -> String {
    let r = served.resource;
    format!("{}.{}.{kind}", reversed(r.group), r.version)
}

const API_VERSION: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// The object and list definitions of `served` (`meta` and `list_meta`
/// are the definition names of ObjectMeta and ListMeta).
pub fn definitions(served: &Served, meta: &str, list_meta: &str) -> Vec<(String, Value)> {
    let r = served.resource;
    let gvk = json!([{"group": r.group, "version": r.version, "kind": r.kind}]);
    let mut schema = match &served.raw_schema {
        Value::Object(o) => Value::Object(o.clone()),
        _ => json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    };
    if !schema.get("properties").is_some_and(Value::is_object) {
        crate::object::set(&mut schema, "properties", json!({}));
    }
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        props.insert(
            "apiVersion".into(),
            json!({"type": "string", "description": API_VERSION}),
        );
        props.insert(
            "kind".into(),
            json!({"type": "string", "description": KIND}),
        );
        props.insert(
            "metadata".into(),
            json!({"allOf": [{"$ref": format!("#/components/schemas/{meta}")}], "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}),
        );
    }
    crate::object::set(&mut schema, "x-kubernetes-group-version-kind", gvk);
    let object_name = definition_name(served, r.kind);
    let list = json!({
        "type": "object",
        "description": format!("{} is a list of {}", served.list_kind, r.kind),
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string", "description": API_VERSION},
            "kind": {"type": "string", "description": KIND},
            "metadata": {"allOf": [{"$ref": format!("#/components/schemas/{list_meta}")}]},
            "items": {
                "type": "array",
                "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", r.plural),
                "items": {"$ref": format!("#/components/schemas/{object_name}")},
            },
        },
        "x-kubernetes-group-version-kind": [{"group": r.group, "version": r.version, "kind": served.list_kind}],
    });
    vec![
        (object_name, schema),
        (definition_name(served, &served.list_kind), list),
    ]
}

/// Adds the definitions of every served custom resource of
/// `group`/`version` to `schemas`; returns (kind, definition name) pairs.
pub fn add(
    crds: &super::Registry,
    group: &str,
    version: &str,
    schemas: &mut Map<String, Value>,
    meta: &str,
    list_meta: &str,
) -> Vec<(&'static str, String)> {
    let mut names = Vec::new();
    for served in crds
        .all()
        .iter()
        .filter(|s| s.established && s.resource.group == group && s.resource.version == version)
    {
        for (name, def) in definitions(served, meta, list_meta) {
            schemas.insert(name, def);
        }
        names.push((
            served.resource.kind,
            definition_name(served, served.resource.kind),
        ));
    }
    names
}
