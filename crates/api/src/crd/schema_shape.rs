//! The typed shape of a v1 JSONSchemaProps: upstream decodes a CRD's
//! schema into Go structs, so keys they do not have are dropped (and
//! named by strict field validation as `unknown field "…"`).

use serde_json::{Map, Value};

const KEYS: [&str; 44] = [
    "id",
    "$schema",
    "$ref",
    "description",
    "type",
    "format",
    "title",
    "default",
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
    "multipleOf",
    "enum",
    "maxProperties",
    "minProperties",
    "required",
    "items",
    "allOf",
    "oneOf",
    "anyOf",
    "not",
    "properties",
    "additionalProperties",
    "patternProperties",
    "dependencies",
    "additionalItems",
    "definitions",
    "externalDocs",
    "example",
    "nullable",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
];

const RULE_KEYS: [&str; 6] = [
    "rule",
    "message",
    "messageExpression",
    "reason",
    "fieldPath",
    "optionalOldSelf",
];

/// Drops keys JSONSchemaProps does not have from `schema` (at `base`,
/// e.g. `spec.versions[0].schema.openAPIV3Schema`), returning their
/// paths in strict decoding's notation (`…properties.spec.foo`).
pub(crate) fn prune_schema(schema: &mut Value, base: &str) -> Vec<String> {
    let mut out = Vec::new();
    walk(schema, base, &mut out);
    out.sort();
    out
}

fn retain(m: &mut Map<String, Value>, keys: &[&str], path: &str, out: &mut Vec<String>) {
    m.retain(|k, _| {
        let keep = keys.contains(&k.as_str());
        if !keep {
            out.push(format!("{path}.{k}"));
        }
        keep
    });
}

fn walk(schema: &mut Value, path: &str, out: &mut Vec<String>) {
    let Some(m) = schema.as_object_mut() else {
        return;
    };
    retain(m, &KEYS, path, out);
    for (k, v) in m.iter_mut() {
        let at = format!("{path}.{k}");
        match (k.as_str(), v) {
            (
                "items" | "not" | "additionalProperties" | "additionalItems",
                v @ Value::Object(_),
            ) => walk(v, &at, out),
            ("items" | "allOf" | "oneOf" | "anyOf", Value::Array(list)) => {
                for (i, x) in list.iter_mut().enumerate() {
                    walk(x, &format!("{at}[{i}]"), out);
                }
            }
            ("properties" | "patternProperties" | "definitions", Value::Object(props)) => {
                for (pk, pv) in props.iter_mut() {
                    walk(pv, &format!("{at}.{pk}"), out);
                }
            }
            ("dependencies", Value::Object(deps)) => {
                for (dk, dv) in deps.iter_mut() {
                    if dv.is_object() {
                        walk(dv, &format!("{at}.{dk}"), out);
                    }
                }
            }
            ("externalDocs", Value::Object(docs)) => {
                retain(docs, &["description", "url"], &at, out)
            }
            ("x-kubernetes-validations", Value::Array(rules)) => {
                for (i, r) in rules.iter_mut().enumerate() {
                    if let Some(r) = r.as_object_mut() {
                        retain(r, &RULE_KEYS, &format!("{at}[{i}]"), out);
                    }
                }
            }
            _ => {}
        }
    }
}
