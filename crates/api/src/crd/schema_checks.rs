//! The checks a CRD's `openAPIV3Schema` must pass (upstream's
//! `validateCustomResourceDefinitionValidation` for v1, whose schemas are
//! required to be structural): unsupported fields, the structural
//! invariants and completeness (`ValidateStructural`), the defaults
//! (`ValidateDefaults`: valid against their schema and pruned), then the
//! OpenAPI checks of openapi_checks.rs. The
//! status-subresource root restriction needs the CRD and lives in
//! crd_validation.rs.

use serde_json::{Map, Value};

use super::errors::{self as fe, child, index, key};
use super::structural::{bool_of, str_of, Node};
use crate::validation::FieldError;

pub(crate) const OPENAPI_TYPES: [&str; 6] =
    ["array", "boolean", "integer", "number", "object", "string"];
pub(crate) const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// All findings for `schema` at `base` (`…openAPIV3Schema`).
pub(crate) fn check(schema: &Value, base: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(m) = schema.as_object() else {
        errs.push(fe::invalid(base, schema, "must be an object"));
        return errs;
    };
    errs.extend(shape(m, base));
    if !errs.is_empty() {
        return errs;
    }
    if bool_of(m, "nullable") {
        errs.push(fe::forbidden(
            &child(base, "nullable"),
            "nullable cannot be true at the root",
        ));
    }
    let mut init_errs = Vec::new();
    if let Some(msg) = unsupported(m) {
        init_errs.push(fe::invalid_str(base, "", &msg));
    } else {
        let mut structural = Vec::new();
        invariants(m, Level::Root, base, &mut structural);
        completeness(m, base, &mut structural);
        structural.sort_by_key(|e| format!("{}: {}", e.field, e.message));
        if !structural.is_empty() {
            errs.extend(structural);
        } else {
            let mut root = Node::parse(schema);
            root.embedded = true;
            defaults(m, &root, base, false, &mut errs);
        }
    }
    super::openapi_checks::check(m, base, &mut errs);
    if errs.is_empty() {
        errs.extend(init_errs);
    }
    errs
}

/// Fields of the wrong JSON type (upstream fails decoding the CRD).
fn shape(m: &Map<String, Value>, path: &str) -> Vec<FieldError> {
    let mut out = Vec::new();
    for (k, v) in m {
        let at = child(path, k);
        let ok = match k.as_str() {
            "type"
            | "format"
            | "title"
            | "description"
            | "pattern"
            | "id"
            | "$schema"
            | "$ref"
            | "x-kubernetes-list-type"
            | "x-kubernetes-map-type" => v.is_string() || v.is_null(),
            "nullable"
            | "exclusiveMaximum"
            | "exclusiveMinimum"
            | "uniqueItems"
            | "x-kubernetes-preserve-unknown-fields"
            | "x-kubernetes-embedded-resource"
            | "x-kubernetes-int-or-string" => v.is_boolean() || v.is_null(),
            "maximum" | "minimum" | "multipleOf" => v.is_number() || v.is_null(),
            "maxLength" | "minLength" | "maxItems" | "minItems" | "maxProperties"
            | "minProperties" => v.is_i64() || v.is_u64() || v.is_null(),
            "required" | "x-kubernetes-list-map-keys" => {
                v.is_null() || v.as_array().is_some_and(|a| a.iter().all(Value::is_string))
            }
            "enum" | "x-kubernetes-validations" => v.is_array() || v.is_null(),
            "properties" | "patternProperties" | "definitions" | "dependencies" => {
                v.is_object() || v.is_null()
            }
            "items" => v.is_object() || v.is_array() || v.is_null(),
            "additionalProperties" | "additionalItems" => {
                v.is_object() || v.is_boolean() || v.is_null()
            }
            "not" => v.is_object() || v.is_null(),
            "allOf" | "anyOf" | "oneOf" => {
                v.is_null() || v.as_array().is_some_and(|a| a.iter().all(Value::is_object))
            }
            _ => true,
        };
        if !ok {
            out.push(fe::invalid(&at, v, "has the wrong type"));
            continue;
        }
        let mut sub = |s: &Value, p: String| {
            if let Some(sm) = s.as_object() {
                out.extend(shape(sm, &p));
            } else if !s.is_boolean() {
                out.push(fe::invalid(&p, s, "must be an object"));
            }
        };
        match (k.as_str(), v) {
            ("properties" | "patternProperties" | "definitions", Value::Object(props)) => {
                for (pk, pv) in props {
                    sub(pv, key(&at, pk));
                }
            }
            ("items", Value::Array(items)) | ("allOf" | "anyOf" | "oneOf", Value::Array(items)) => {
                for (i, s) in items.iter().enumerate() {
                    sub(s, index(&at, i));
                }
            }
            ("items" | "not" | "additionalProperties" | "additionalItems", Value::Object(_)) => {
                sub(v, at.clone());
            }
            _ => {}
        }
    }
    out
}

/// NewStructural's refusals (only shown when nothing else is wrong).
fn unsupported(m: &Map<String, Value>) -> Option<String> {
    let nonempty = |k: &str| match m.get(k) {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(Value::Null) | None => false,
        Some(_) => true,
    };
    for (k, name) in [
        ("id", "id"),
        ("$schema", "schema"),
        ("$ref", "$ref"),
        ("patternProperties", "patternProperties"),
        ("dependencies", "dependencies"),
    ] {
        if nonempty(k) {
            return Some(format!("OpenAPIV3Schema '{name}' is not supported"));
        }
    }
    if m.get("additionalItems").is_some_and(|v| !v.is_null()) {
        return Some("OpenAPIV3Schema 'additionalItems' is not supported".into());
    }
    if nonempty("definitions") {
        return Some("OpenAPIV3Schema 'definitions' is not supported".into());
    }
    if m.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        return Some(
            "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined"
                .into(),
        );
    }
    for k in ["not", "additionalProperties"] {
        if let Some(Value::Object(sub)) = m.get(k) {
            if let Some(e) = unsupported(sub) {
                return Some(e);
            }
        }
    }
    for k in ["allOf", "anyOf", "oneOf"] {
        for sub in m.get(k).and_then(Value::as_array).into_iter().flatten() {
            if let Some(e) = sub.as_object().and_then(unsupported) {
                return Some(e);
            }
        }
    }
    match m.get("items") {
        Some(Value::Array(_)) => {
            return Some("OpenAPIV3Schema 'items' must be a schema, but is an array".into())
        }
        Some(Value::Object(sub)) => {
            if let Some(e) = unsupported(sub) {
                return Some(e);
            }
        }
        _ => {}
    }
    if let Some(props) = m.get("properties").and_then(Value::as_object) {
        let mut keys: Vec<&String> = props.keys().collect();
        keys.sort();
        for k in keys {
            if let Some(e) = props
                .get(k)
                .and_then(Value::as_object)
                .and_then(unsupported)
            {
                return Some(e);
            }
        }
    }
    None
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

pub(crate) fn props_of(m: &Map<String, Value>) -> Option<&Map<String, Value>> {
    m.get("properties")
        .and_then(Value::as_object)
        .filter(|p| !p.is_empty())
}

pub(crate) fn list_of<'a>(m: &'a Map<String, Value>, k: &str) -> Vec<&'a Map<String, Value>> {
    m.get(k)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default()
}

pub(crate) fn sorted_props(m: &Map<String, Value>) -> Vec<(&String, &Map<String, Value>)> {
    let mut v: Vec<(&String, &Map<String, Value>)> = props_of(m)
        .map(|p| {
            p.iter()
                .filter_map(|(k, v)| v.as_object().map(|o| (k, o)))
                .collect()
        })
        .unwrap_or_default();
    v.sort_by(|a, b| a.0.cmp(b.0));
    v
}

fn int_or_string_any_of(any_of: &[&Map<String, Value>]) -> bool {
    any_of.len() == 2
        && any_of
            .first()
            .is_some_and(|a| a.len() == 1 && str_of(a, "type") == "integer")
        && any_of
            .get(1)
            .is_some_and(|a| a.len() == 1 && str_of(a, "type") == "string")
}

/// validateStructuralInvariants.
fn invariants(s: &Map<String, Value>, lvl: Level, path: &str, errs: &mut Vec<FieldError>) {
    let typ = str_of(s, "type");
    let items = s.get("items").and_then(Value::as_object);
    if typ == "array" && items.is_none() {
        errs.push(fe::required(&child(path, "items"), "must be specified"));
    }
    if let Some(items) = items {
        invariants(items, Level::Item, &child(path, "items"), errs);
    }
    for (k, v) in sorted_props(s) {
        invariants(v, Level::Field, &key(&child(path, "properties"), k), errs);
    }
    let additional = s.get("additionalProperties").filter(|v| !v.is_null());
    if let Some(ap) = additional {
        if lvl == Level::Root {
            errs.push(fe::forbidden(
                &child(path, "additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let Some(ap) = ap.as_object() {
            invariants(ap, Level::Field, &child(path, "additionalProperties"), errs);
        }
    }
    let int_or_string = bool_of(s, "x-kubernetes-int-or-string");
    let preserve = bool_of(s, "x-kubernetes-preserve-unknown-fields");
    let embedded = bool_of(s, "x-kubernetes-embedded-resource");
    if int_or_string && preserve {
        errs.push(fe::invalid(
            &child(path, "x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if int_or_string && embedded {
        errs.push(fe::invalid(
            &child(path, "x-kubernetes-embedded-resource"),
            &Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    let skip_any_of = int_or_string_any_of(&list_of(s, "anyOf"));
    let skip_first_all_of = list_of(s, "allOf")
        .first()
        .is_some_and(|a| int_or_string_any_of(&list_of(a, "anyOf")));
    value_validation(s, skip_any_of, skip_first_all_of, path, errs);

    let check_metadata = lvl == Level::Root || embedded;
    if embedded && typ != "object" {
        if typ.is_empty() {
            errs.push(fe::required(
                &child(path, "type"),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        } else {
            errs.push(fe::invalid_str(
                &child(path, "type"),
                typ,
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        }
    } else if typ.is_empty() && !int_or_string && !preserve {
        let detail = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(fe::required(&child(path, "type"), detail));
    }
    if embedded && additional.is_some() {
        errs.push(fe::forbidden(
            &child(path, "additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !typ.is_empty() && typ != "object" {
        errs.push(fe::invalid_str(
            &child(path, "type"),
            typ,
            "must be object at the root",
        ));
    }
    let props = props_of(s);
    let prop = |k: &str| props.and_then(|p| p.get(k)).and_then(Value::as_object);
    for k in ["kind", "apiVersion"] {
        if let Some(p) = prop(k) {
            if check_metadata && str_of(p, "type") != "string" {
                errs.push(fe::invalid_str(
                    &child(&key(&child(path, "properties"), k), "type"),
                    str_of(p, "type"),
                    "must be string",
                ));
            }
        }
    }
    if let Some(meta) = prop("metadata") {
        let at = key(&child(path, "properties"), "metadata");
        if check_metadata && str_of(meta, "type") != "object" {
            errs.push(fe::invalid_str(
                &child(&at, "type"),
                str_of(meta, "type"),
                "must be object",
            ));
        }
        if lvl == Level::Root && !root_metadata_is_implicit(meta) {
            errs.push(fe::forbidden(
                &at,
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    if embedded && !preserve && props.is_none() {
        errs.push(fe::required(
            &child(path, "properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// Whether a root `metadata` schema says nothing but its type, a default
/// and the properties name and generateName.
fn root_metadata_is_implicit(m: &Map<String, Value>) -> bool {
    for (k, v) in m {
        let zero = match k.as_str() {
            "type" | "default" => true,
            "properties" => {
                let p = v.as_object();
                p.is_none_or(|p| p.keys().all(|k| k == "name" || k == "generateName"))
            }
            "enum" | "allOf" | "anyOf" | "oneOf" | "x-kubernetes-validations" => {
                v.as_array().is_none_or(Vec::is_empty)
            }
            _ => match v {
                Value::Null | Value::Bool(false) => true,
                Value::String(s) => s.is_empty(),
                _ => false,
            },
        };
        if !zero {
            return false;
        }
    }
    true
}

/// validateValueValidation.
fn value_validation(
    s: &Map<String, Value>,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if !skip_any_of {
        for (i, v) in list_of(s, "anyOf").into_iter().enumerate() {
            nested(v, false, &index(&child(path, "anyOf"), i), errs);
        }
    }
    for (i, v) in list_of(s, "allOf").into_iter().enumerate() {
        nested(
            v,
            skip_first_all_of_any_of && i == 0,
            &index(&child(path, "allOf"), i),
            errs,
        );
    }
    for (i, v) in list_of(s, "oneOf").into_iter().enumerate() {
        nested(v, false, &index(&child(path, "oneOf"), i), errs);
    }
    if let Some(not) = s.get("not").and_then(Value::as_object) {
        nested(not, false, &child(path, "not"), errs);
    }
    let pattern = str_of(s, "pattern");
    if !pattern.is_empty() {
        if let Err(e) = super::regex::Regex::new(pattern) {
            errs.push(fe::invalid_str(
                &child(path, "pattern"),
                pattern,
                &format!("must be a valid regular expression, but isn't: {e}"),
            ));
        }
    }
}

/// validateNestedValueValidation.
fn nested(v: &Map<String, Value>, skip_any_of: bool, path: &str, errs: &mut Vec<FieldError>) {
    value_validation(v, skip_any_of, false, path, errs);
    if let Some(items) = v.get("items").and_then(Value::as_object) {
        nested(items, false, &child(path, "items"), errs);
    }
    if let Some(props) = v.get("properties").and_then(Value::as_object) {
        let mut keys: Vec<&String> = props.keys().collect();
        keys.sort();
        for k in keys {
            if let Some(p) = props.get(k).and_then(Value::as_object) {
                nested(p, false, &key(&child(path, "properties"), k), errs);
            }
        }
    }
    let present = |k: &str| match v.get(k) {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(_) => true,
    };
    if present("type") {
        errs.push(fe::forbidden(
            &child(path, "type"),
            "must be empty to be structural",
        ));
    }
    // additionalProperties: false converts to nothing here.
    if present("additionalProperties") {
        errs.push(fe::forbidden(
            &child(path, "additionalProperties"),
            "must be undefined to be structural",
        ));
    }
    if v.get("default").is_some_and(|d| !d.is_null()) {
        errs.push(fe::forbidden(
            &child(path, "default"),
            "must be undefined to be structural",
        ));
    }
    for (k, detail) in [
        ("title", "must be empty to be structural"),
        ("description", "must be empty to be structural"),
        ("nullable", "must be false to be structural"),
        (
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
        ),
        (
            "x-kubernetes-embedded-resource",
            "must be false to be structural",
        ),
        (
            "x-kubernetes-int-or-string",
            "must be false to be structural",
        ),
        (
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        ),
    ] {
        if present(k) {
            errs.push(fe::forbidden(&child(path, k), detail));
        }
    }
    for k in ["x-kubernetes-list-type", "x-kubernetes-map-type"] {
        if v.get(k).is_some_and(|x| !x.is_null()) {
            errs.push(fe::forbidden(
                &child(path, k),
                "must be undefined to be structural",
            ));
        }
    }
    if present("x-kubernetes-validations") {
        errs.push(fe::forbidden(
            &child(path, "x-kubernetes-validations"),
            "must be empty to be structural",
        ));
    }
    if v.get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| p.contains_key("metadata"))
    {
        errs.push(fe::forbidden(
            &key(&child(path, "properties"), "metadata"),
            "must not be specified in a nested context",
        ));
    }
}

/// validateStructuralCompleteness: everything value validations mention
/// must be specified structurally.
fn completeness(s: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
    vv_complete(s, Some(s), path, path, errs);
}

fn vv_complete(
    v: &Map<String, Value>,
    s: Option<&Map<String, Value>>,
    s_path: &str,
    v_path: &str,
    errs: &mut Vec<FieldError>,
) {
    if let Some(not) = v.get("not").and_then(Value::as_object) {
        nested_complete(not, s, s_path, &child(v_path, "not"), errs);
    }
    for k in ["allOf", "anyOf", "oneOf"] {
        for (i, x) in list_of(v, k).into_iter().enumerate() {
            nested_complete(x, s, s_path, &index(&child(v_path, k), i), errs);
        }
    }
}

fn nested_complete(
    v: &Map<String, Value>,
    s: Option<&Map<String, Value>>,
    s_path: &str,
    v_path: &str,
    errs: &mut Vec<FieldError>,
) {
    let Some(s) = s else {
        errs.push(fe::required(
            s_path,
            &format!("because it is defined in {v_path}"),
        ));
        return;
    };
    vv_complete(v, Some(s), s_path, v_path, errs);
    if let Some(items) = v.get("items").and_then(Value::as_object) {
        nested_complete(
            items,
            s.get("items").and_then(Value::as_object),
            &child(s_path, "items"),
            &child(v_path, "items"),
            errs,
        );
    }
    if let Some(props) = v.get("properties").and_then(Value::as_object) {
        let s_props = s.get("properties").and_then(Value::as_object);
        let mut keys: Vec<&String> = props.keys().collect();
        keys.sort();
        for k in keys {
            let Some(vf) = props.get(k).and_then(Value::as_object) else {
                continue;
            };
            let sp = key(&child(s_path, "properties"), k);
            let vp = key(&child(v_path, "properties"), k);
            match s_props.and_then(|p| p.get(k)).and_then(Value::as_object) {
                None => errs.push(fe::required(&sp, &format!("because it is defined in {vp}"))),
                Some(sf) => nested_complete(vf, Some(sf), &sp, &vp, errs),
            }
        }
    }
}

/// ValidateDefaults: each default must survive pruning and validate
/// against its own schema.
fn defaults(
    m: &Map<String, Value>,
    node: &Node,
    path: &str,
    inside_meta: bool,
    errs: &mut Vec<FieldError>,
) {
    let mut inside_meta = inside_meta;
    if node.embedded {
        inside_meta = false;
    }
    if let Some(d) = m.get("default").filter(|d| !d.is_null()) {
        let at = child(path, "default");
        if !inside_meta {
            let mut pruned = d.clone();
            super::prune::prune_with(node, &mut pruned, node.embedded);
            if pruned != *d {
                errs.push(fe::invalid(&at, d, "must not have unknown fields"));
            }
        }
        // objectmeta.Validate(default, s, isResourceRoot=embedded), then the
        // schema validator, only when the metadata passed
        let mut found = Vec::new();
        super::listtype::embedded(&at, d, Some(node), &mut found);
        if found.is_empty() {
            found.extend(super::validate::validate_at(
                &Value::Object(m.clone()),
                d,
                Some(&at),
            ));
        }
        errs.extend(found);
    }
    if let (Some(items), Some(item_node)) = (
        m.get("items").and_then(Value::as_object),
        node.items.as_deref(),
    ) {
        defaults(items, item_node, &child(path, "items"), inside_meta, errs);
    }
    for (k, v) in sorted_props(m) {
        let Some(sub) = node.properties.get(k.as_str()) else {
            continue;
        };
        let sub_meta = inside_meta || (node.embedded && META_FIELDS.contains(&k.as_str()));
        defaults(v, sub, &key(&child(path, "properties"), k), sub_meta, errs);
    }
}
