//! The v2 document in gnostic's protobuf encoding (the `openapi.v2.Document`
//! message of `proto/github.com/google/gnostic-models/openapiv2/`), the
//! form kubectl 1.27–1.29 ask for. kube-apiserver makes it by parsing its
//! JSON with gnostic (`openapi_v2.ParseDocument`) and marshalling that;
//! this walks the JSON the same way, guided by the message descriptors:
//!
//! - a JSON key is the field of that lowerCamel name (`$ref` is `_ref`);
//! - `x-` keys are `vendor_extension` entries whose `Any.yaml` holds the
//!   value (as JSON, which is YAML; clients `yaml.Unmarshal` it);
//! - maps are repeated `Named*` pairs (`additional_properties`, the
//!   `path` of `Paths`, the `response_code` of `Responses`);
//! - gnostic's `oneof` wrappers pick their case from the value
//!   (`Parameter` by `in`, `TypeItem` string or list, `ItemsItem` one
//!   schema or several, `AdditionalPropertiesItem` schema or bool, a
//!   `$ref` for `JsonReference`, security schemes by `type` and `flow`).
//!
//! Keys gnostic does not know are left out (the builder writes none).

use std::sync::OnceLock;

use prost_reflect::prost::Message;
use prost_reflect::Value as Field;
use prost_reflect::{
    DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, ReflectMessage,
};
use serde_json::{Map, Value};

const DOCUMENT: &str = "openapi.v2.Document";

fn pool() -> Option<&'static DescriptorPool> {
    static POOL: OnceLock<Option<DescriptorPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        DescriptorPool::decode(
            &include_bytes!(concat!(env!("OUT_DIR"), "/openapiv2-descriptors.pb"))[..],
        )
        .ok()
    })
    .as_ref()
}

/// `doc` (a Swagger 2.0 document) as a marshalled `openapi.v2.Document`;
/// `None` only if the compiled descriptors are unreadable.
pub(super) fn encode(doc: &Value) -> Option<Vec<u8>> {
    let desc = pool()?.get_message_by_name(DOCUMENT)?;
    Some(message(&desc, doc).encode_to_vec())
}

/// The protobuf field for JSON key `key`.
fn field_for(desc: &MessageDescriptor, key: &str) -> Option<FieldDescriptor> {
    if key == "$ref" {
        return desc.get_field_by_name("_ref");
    }
    desc.fields()
        .find(|f| f.json_name() == key && f.name() != "_ref")
}

fn sub(field: &FieldDescriptor) -> Option<MessageDescriptor> {
    match field.kind() {
        Kind::Message(m) => Some(m),
        _ => None,
    }
}

/// Sets `field` of `m` to the message made of `value`.
fn set_message(m: &mut DynamicMessage, name: &str, value: &Value) {
    let Some(field) = m.descriptor().get_field_by_name(name) else {
        return;
    };
    let Some(desc) = sub(&field) else {
        return;
    };
    let inner = message(&desc, value);
    let value = if field.is_list() {
        Field::List(vec![Field::Message(inner)])
    } else {
        Field::Message(inner)
    };
    let _ = m.try_set_field(&field, value);
}

/// Sets the repeated message `field` of `m` to one message per element.
fn set_messages<'a>(m: &mut DynamicMessage, name: &str, values: impl Iterator<Item = &'a Value>) {
    let Some(field) = m.descriptor().get_field_by_name(name) else {
        return;
    };
    let Some(desc) = sub(&field) else {
        return;
    };
    let list = values.map(|v| Field::Message(message(&desc, v))).collect();
    let _ = m.try_set_field(&field, Field::List(list));
}

fn set_strings(m: &mut DynamicMessage, name: &str, value: &Value) {
    let strings = match value {
        Value::Array(list) => list.iter().map(scalar_string).collect(),
        other => vec![scalar_string(other)],
    };
    if let Some(field) = m.descriptor().get_field_by_name(name) {
        let list = strings.into_iter().map(Field::String).collect();
        let _ = m.try_set_field(&field, Field::List(list));
    }
}

fn scalar_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The YAML gnostic keeps for an `Any`: JSON text, which YAML parsers read.
fn yaml(v: &Value) -> String {
    let mut text = serde_json::to_string(v).unwrap_or_default();
    text.push('\n');
    text
}

/// `(name, value)` pairs of a `Named*` message made from a JSON map entry.
fn named(desc: &MessageDescriptor, name: &str, value: &Value) -> DynamicMessage {
    let mut m = DynamicMessage::new(desc.clone());
    if let Some(f) = desc.get_field_by_name("name") {
        let _ = m.try_set_field(&f, Field::String(name.to_string()));
    }
    if let Some(f) = desc.get_field_by_name("value") {
        let v = match f.kind() {
            Kind::Message(inner) => Some(Field::Message(message(&inner, value))),
            Kind::String => Some(Field::String(scalar_string(value))),
            _ => None,
        };
        if let Some(v) = v {
            let _ = m.try_set_field(&f, v);
        }
    }
    m
}

/// Sets repeated `Named*` field `name` of `m` to the entries of `map`
/// that `keep` selects.
fn set_named(
    m: &mut DynamicMessage,
    name: &str,
    map: &Map<String, Value>,
    keep: impl Fn(&str) -> bool,
) {
    let Some(field) = m.descriptor().get_field_by_name(name) else {
        return;
    };
    let Some(desc) = sub(&field) else {
        return;
    };
    let list: Vec<Field> = map
        .iter()
        .filter(|(k, _)| keep(k))
        .map(|(k, v)| Field::Message(named(&desc, k, v)))
        .collect();
    if !list.is_empty() {
        let _ = m.try_set_field(&field, Field::List(list));
    }
}

fn is_extension(key: &str) -> bool {
    key.starts_with("x-")
}

/// The message `desc` made of `v`.
fn message(desc: &MessageDescriptor, v: &Value) -> DynamicMessage {
    let mut m = DynamicMessage::new(desc.clone());
    let empty = Map::new();
    let o = v.as_object().unwrap_or(&empty);
    let ty = o.get("type").and_then(Value::as_str).unwrap_or("");
    match desc.name() {
        "Any" => {
            if let Some(f) = desc.get_field_by_name("yaml") {
                let _ = m.try_set_field(&f, Field::String(yaml(v)));
            }
        }
        "TypeItem" | "StringArray" => set_strings(&mut m, "value", v),
        "ItemsItem" => match v {
            Value::Array(list) => set_messages(&mut m, "schema", list.iter()),
            other => set_messages(&mut m, "schema", std::iter::once(other)),
        },
        "AdditionalPropertiesItem" => match v {
            Value::Bool(b) => {
                if let Some(f) = desc.get_field_by_name("boolean") {
                    let _ = m.try_set_field(&f, Field::Bool(*b));
                }
            }
            other => set_message(&mut m, "schema", other),
        },
        "SchemaItem" => {
            let case = if ty == "file" {
                "file_schema"
            } else {
                "schema"
            };
            set_message(&mut m, case, v);
        }
        "ParametersItem" | "ResponseValue" if o.contains_key("$ref") => {
            set_message(&mut m, "json_reference", v)
        }
        "ParametersItem" => set_message(&mut m, "parameter", v),
        "ResponseValue" => set_message(&mut m, "response", v),
        "Parameter" => {
            let case = if o.get("in").and_then(Value::as_str) == Some("body") {
                "body_parameter"
            } else {
                "non_body_parameter"
            };
            set_message(&mut m, case, v);
        }
        "NonBodyParameter" => {
            let case = match o.get("in").and_then(Value::as_str) {
                Some("header") => "header_parameter_sub_schema",
                Some("formData") => "form_data_parameter_sub_schema",
                Some("path") => "path_parameter_sub_schema",
                _ => "query_parameter_sub_schema",
            };
            set_message(&mut m, case, v);
        }
        "SecurityDefinitionsItem" => {
            let flow = o.get("flow").and_then(Value::as_str).unwrap_or("");
            let case = match (ty, flow) {
                ("basic", _) => "basic_authentication_security",
                ("oauth2", "implicit") => "oauth2_implicit_security",
                ("oauth2", "password") => "oauth2_password_security",
                ("oauth2", "application") => "oauth2_application_security",
                ("oauth2", _) => "oauth2_access_code_security",
                _ => "api_key_security",
            };
            set_message(&mut m, case, v);
        }
        "Paths" => {
            set_named(&mut m, "path", o, |k| !is_extension(k));
            set_named(&mut m, "vendor_extension", o, is_extension);
        }
        "Responses" => {
            set_named(&mut m, "response_code", o, |k| !is_extension(k));
            set_named(&mut m, "vendor_extension", o, is_extension);
        }
        // Maps: messages whose only field is `additional_properties`.
        _ if desc.fields().len() == 1
            && desc.get_field_by_name("additional_properties").is_some() =>
        {
            set_named(&mut m, "additional_properties", o, |_| true);
        }
        _ => {
            for (key, value) in o {
                if is_extension(key) {
                    continue;
                }
                if let Some(field) = field_for(desc, key) {
                    set_value(&mut m, &field, value);
                }
            }
            set_named(&mut m, "vendor_extension", o, is_extension);
        }
    }
    m
}

/// Sets an ordinary field from its JSON value.
fn set_value(m: &mut DynamicMessage, field: &FieldDescriptor, value: &Value) {
    let one = |v: &Value| -> Option<Field> {
        Some(match field.kind() {
            Kind::Message(d) => Field::Message(message(&d, v)),
            Kind::String => Field::String(scalar_string(v)),
            Kind::Bool => Field::Bool(v.as_bool()?),
            Kind::Double => Field::F64(v.as_f64()?),
            Kind::Int64 => Field::I64(v.as_i64().or_else(|| v.as_f64().map(|f| f as i64))?),
            _ => return None,
        })
    };
    let value = if field.is_list() {
        let items: Vec<Field> = match value {
            Value::Array(list) => list.iter().filter_map(one).collect(),
            other => one(other).into_iter().collect(),
        };
        Field::List(items)
    } else {
        match one(value) {
            Some(v) => v,
            None => return,
        }
    };
    let _ = m.try_set_field(field, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode(bytes: &[u8]) -> DynamicMessage {
        let desc = pool()
            .and_then(|p| p.get_message_by_name(DOCUMENT))
            .expect("descriptor");
        DynamicMessage::decode(desc, bytes).expect("decodes")
    }

    fn get(m: &DynamicMessage, path: &[&str]) -> Field {
        let mut cur = Field::Message(m.clone());
        for step in path {
            cur = match cur {
                Field::Message(msg) => msg
                    .get_field_by_name(step)
                    .map(|c| c.into_owned())
                    .unwrap_or_else(|| panic!("no field {step}")),
                Field::List(list) => {
                    let i: usize = step.parse().expect("index");
                    list.get(i)
                        .cloned()
                        .unwrap_or_else(|| panic!("no item {i}"))
                }
                other => panic!("{step} of {other:?}"),
            };
        }
        cur
    }

    #[test]
    fn encodes_as_gnostic_parses() {
        let doc = json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.33.0"},
            "paths": {"/api/v1/namespaces/{namespace}/pods/{name}": {
                "parameters": [{"in": "path", "name": "name", "required": true, "type": "string"}],
                "patch": {
                    "consumes": ["application/merge-patch+json"],
                    "parameters": [
                        {"in": "body", "name": "body", "required": true, "schema": {"type": "object"}},
                        {"in": "query", "name": "fieldValidation", "type": "string", "uniqueItems": true},
                    ],
                    "responses": {"200": {"description": "OK",
                        "schema": {"$ref": "#/definitions/io.k8s.api.core.v1.Pod"}}},
                    "x-kubernetes-group-version-kind": {"group": "", "kind": "Pod", "version": "v1"},
                },
            }},
            "definitions": {"io.k8s.api.core.v1.Pod": {
                "type": "object",
                "required": ["spec"],
                "properties": {
                    "spec": {"$ref": "#/definitions/io.k8s.api.core.v1.PodSpec", "description": "s"},
                    "list": {"type": "array", "items": {"type": "string"},
                             "x-kubernetes-patch-strategy": "merge"},
                    "map": {"type": "object", "additionalProperties": {"type": "string"}},
                },
                "x-kubernetes-group-version-kind": [{"group": "", "kind": "Pod", "version": "v1"}],
            }},
            "securityDefinitions": {"BearerToken": {"in": "header", "name": "authorization", "type": "apiKey"}},
            "security": [{"BearerToken": []}],
        });
        let m = decode(&encode(&doc).expect("encodes"));
        assert_eq!(get(&m, &["swagger"]), Field::String("2.0".into()));
        let item = get(&m, &["paths", "path", "0"]);
        let Field::Message(item) = item else {
            panic!("path item")
        };
        assert_eq!(
            get(&item, &["name"]),
            Field::String("/api/v1/namespaces/{namespace}/pods/{name}".into())
        );
        let patch = ["value", "patch"];
        let q = [
            &patch[..],
            &["parameters", "1", "parameter", "non_body_parameter"],
            &["query_parameter_sub_schema", "name"],
        ]
        .concat();
        assert_eq!(get(&item, &q), Field::String("fieldValidation".into()));
        let body = [
            &patch[..],
            &["parameters", "0", "parameter", "body_parameter", "in"],
        ]
        .concat();
        assert_eq!(get(&item, &body), Field::String("body".into()));
        let ext = [&patch[..], &["vendor_extension", "0", "value", "yaml"]].concat();
        let Field::String(gvk) = get(&item, &ext) else {
            panic!("yaml")
        };
        assert_eq!(
            serde_json::from_str::<Value>(&gvk).expect("json"),
            json!({"group": "", "kind": "Pod", "version": "v1"})
        );
        let resp = [
            &patch[..],
            &["responses", "response_code", "0", "value", "response"],
            &["schema", "schema", "_ref"],
        ]
        .concat();
        assert_eq!(
            get(&item, &resp),
            Field::String("#/definitions/io.k8s.api.core.v1.Pod".into())
        );
        let pod = get(&m, &["definitions", "additional_properties", "0", "value"]);
        let Field::Message(pod) = pod else {
            panic!("pod")
        };
        assert_eq!(
            get(&pod, &["type", "value", "0"]),
            Field::String("object".into())
        );
        assert_eq!(get(&pod, &["required", "0"]), Field::String("spec".into()));
        let props = ["properties", "additional_properties"];
        let list = [&props[..], &["0", "value"]].concat();
        assert_eq!(
            get(
                &pod,
                &[&list[..], &["items", "schema", "0", "type", "value", "0"]].concat()
            ),
            Field::String("string".into())
        );
        assert_eq!(
            get(
                &pod,
                &[&list[..], &["vendor_extension", "0", "name"]].concat()
            ),
            Field::String("x-kubernetes-patch-strategy".into())
        );
        let map = [&props[..], &["1", "value"]].concat();
        assert_eq!(
            get(
                &pod,
                &[
                    &map[..],
                    &["additional_properties", "schema", "type", "value", "0"]
                ]
                .concat()
            ),
            Field::String("string".into())
        );
        let spec = [&props[..], &["2", "value"]].concat();
        assert_eq!(
            get(&pod, &[&spec[..], &["_ref"]].concat()),
            Field::String("#/definitions/io.k8s.api.core.v1.PodSpec".into())
        );
        assert_eq!(
            get(
                &m,
                &[
                    "security_definitions",
                    "additional_properties",
                    "0",
                    "value"
                ]
            )
            .as_message()
            .map(|s| s.has_field_by_name("api_key_security")),
            Some(true)
        );
        assert_eq!(
            get(&m, &["security", "0", "additional_properties", "0", "name"]),
            Field::String("BearerToken".into())
        );
    }
}
