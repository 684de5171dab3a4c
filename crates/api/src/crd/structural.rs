//! The structural skeleton of an OpenAPI v3 schema (upstream's
//! `schema.Structural`): per node the type, properties, items,
//! additionalProperties, default, nullable and the x-kubernetes
//! extensions. Value validations (allOf, anyOf, ...) stay in the raw
//! schema, which validation walks.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// `additionalProperties` as a boolean or a schema.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Additional {
    Bool(bool),
    Schema(Box<Node>),
}

/// One node of a structural schema.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Node {
    pub typ: String,
    pub nullable: bool,
    pub default: Option<Value>,
    pub items: Option<Box<Node>>,
    pub properties: BTreeMap<String, Node>,
    pub additional: Option<Additional>,
    pub preserve_unknown: bool,
    pub embedded: bool,
    pub int_or_string: bool,
    pub list_type: Option<String>,
    pub list_map_keys: Vec<String>,
    pub map_type: Option<String>,
}

pub(crate) fn str_of<'a>(m: &'a Map<String, Value>, k: &str) -> &'a str {
    m.get(k).and_then(Value::as_str).unwrap_or("")
}

pub(crate) fn bool_of(m: &Map<String, Value>, k: &str) -> bool {
    m.get(k).and_then(Value::as_bool).unwrap_or(false)
}

impl Node {
    /// Builds the skeleton of `schema`; anything not of the expected shape
    /// is ignored (the checks report it).
    pub(crate) fn parse(schema: &Value) -> Node {
        let Some(m) = schema.as_object() else {
            return Node::default();
        };
        let mut n = Node {
            typ: str_of(m, "type").to_string(),
            nullable: bool_of(m, "nullable"),
            default: m.get("default").filter(|d| !d.is_null()).cloned(),
            preserve_unknown: bool_of(m, "x-kubernetes-preserve-unknown-fields"),
            embedded: bool_of(m, "x-kubernetes-embedded-resource"),
            int_or_string: bool_of(m, "x-kubernetes-int-or-string"),
            list_type: m
                .get("x-kubernetes-list-type")
                .and_then(Value::as_str)
                .map(str::to_string),
            map_type: m
                .get("x-kubernetes-map-type")
                .and_then(Value::as_str)
                .map(str::to_string),
            list_map_keys: m
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            ..Node::default()
        };
        if let Some(items) = m.get("items").filter(|i| i.is_object()) {
            n.items = Some(Box::new(Node::parse(items)));
        }
        if let Some(props) = m.get("properties").and_then(Value::as_object) {
            for (k, v) in props {
                n.properties.insert(k.clone(), Node::parse(v));
            }
        }
        match m.get("additionalProperties") {
            Some(Value::Bool(b)) => n.additional = Some(Additional::Bool(*b)),
            Some(v @ Value::Object(_)) => {
                n.additional = Some(Additional::Schema(Box::new(Node::parse(v))));
            }
            _ => {}
        }
        n
    }
}
