//! The OpenAPI checks of a CRD schema (upstream's
//! `ValidateCustomResourceDefinitionOpenAPISchema` and its
//! `specStandardValidatorV3`): unsupported keywords, defaults where they
//! may not be, uniqueItems, additionalProperties beside properties, the
//! x-kubernetes-map-type / list-type / list-map-keys rules and the
//! x-kubernetes-validations fields (no CEL engine: rules are not compiled).

use serde_json::{Map, Value};

use super::errors::{self as fe, child, index, key};
use super::schema_checks::{list_of, props_of, sorted_props, META_FIELDS, OPENAPI_TYPES};
use super::structural::{bool_of, str_of};
use crate::validation::FieldError;

/// Runs the checks from the root of a schema.
pub(crate) fn check(m: &Map<String, Value>, base: &str, errs: &mut Vec<FieldError>) {
    let ssv = Ssv {
        allow_defaults: true,
        reason: String::new(),
        inside_meta: false,
    };
    openapi(m, base, &ssv, true, errs);
}

/// The spec standard validator's state.
#[derive(Debug, Clone)]
struct Ssv {
    allow_defaults: bool,
    reason: String,
    inside_meta: bool,
}
impl Ssv {
    fn forbid_defaults(&self, reason: String) -> Ssv {
        Ssv {
            allow_defaults: false,
            reason,
            inside_meta: self.inside_meta,
        }
    }
}
/// ValidateCustomResourceDefinitionOpenAPISchema (CEL rules aside).
fn openapi(
    s: &Map<String, Value>,
    path: &str,
    ssv: &Ssv,
    is_root: bool,
    errs: &mut Vec<FieldError>,
) {
    let typ = str_of(s, "type");
    // specStandardValidatorV3.validate
    if !typ.is_empty() && !OPENAPI_TYPES.contains(&typ) {
        let supported: Vec<String> = OPENAPI_TYPES.iter().map(|t| t.to_string()).collect();
        errs.push(fe::not_supported(
            &child(path, "type"),
            &Value::from(typ),
            &supported,
        ));
    }
    if s.get("default").is_some_and(|d| !d.is_null()) && !ssv.allow_defaults {
        let mut detail = "must not be set".to_string();
        if !ssv.reason.is_empty() {
            detail = format!("{detail} {}", ssv.reason);
        }
        errs.push(fe::forbidden(&child(path, "default"), &detail));
    }
    let has = |k: &str| match s.get(k) {
        None | Some(Value::Null) => false,
        Some(Value::String(x)) => !x.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(_) => true,
    };
    if has("id") {
        errs.push(fe::forbidden(&child(path, "id"), "id is not supported"));
    }
    if s.get("additionalItems").is_some_and(|v| !v.is_null()) {
        errs.push(fe::forbidden(
            &child(path, "additionalItems"),
            "additionalItems is not supported",
        ));
    }
    if has("patternProperties") {
        errs.push(fe::forbidden(
            &child(path, "patternProperties"),
            "patternProperties is not supported",
        ));
    }
    if has("definitions") {
        errs.push(fe::forbidden(
            &child(path, "definitions"),
            "definitions is not supported",
        ));
    }
    if s.get("dependencies").is_some_and(|v| !v.is_null()) {
        errs.push(fe::forbidden(
            &child(path, "dependencies"),
            "dependencies is not supported",
        ));
    }
    if s.get("$ref").is_some_and(|v| !v.is_null()) {
        errs.push(fe::forbidden(&child(path, "$ref"), "$ref is not supported"));
    }
    if typ == "null" {
        errs.push(fe::forbidden(
            &child(path, "type"),
            "type cannot be set to null, use nullable as an alternative",
        ));
    }
    if s.get("items").is_some_and(Value::is_array) {
        errs.push(fe::forbidden(
            &child(path, "items"),
            "items must be a schema object and not an array",
        ));
    }
    let embedded = bool_of(s, "x-kubernetes-embedded-resource");
    if ssv.inside_meta && embedded {
        errs.push(fe::forbidden(
            &child(path, "x-kubernetes-embedded-resource"),
            "must not be used inside of resource meta",
        ));
    }

    if bool_of(s, "uniqueItems") {
        errs.push(fe::forbidden(
            &child(path, "uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if let Some(ap) = s.get("additionalProperties").filter(|v| !v.is_null()) {
        if props_of(s).is_some() && (ap == &Value::Bool(false) || ap.is_object()) {
            errs.push(fe::forbidden(
                &child(path, "additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        let sub = if ssv.inside_meta {
            ssv.forbid_defaults("inside additionalProperties applying to object metadata".into())
        } else {
            ssv.clone()
        };
        if let Some(ap) = ap.as_object() {
            openapi(ap, &child(path, "additionalProperties"), &sub, false, errs);
        }
    }
    for (k, v) in sorted_props(s) {
        let mut sub = ssv.clone();
        if (is_root || embedded) && META_FIELDS.contains(&k.as_str()) {
            sub.inside_meta = true;
            if is_root {
                sub = sub.forbid_defaults(format!("in top-level {k}"));
            }
        }
        openapi(v, &key(&child(path, "properties"), k), &sub, false, errs);
    }
    if let Some(not) = s.get("not").and_then(Value::as_object) {
        openapi(not, &child(path, "not"), ssv, false, errs);
    }
    for k in ["allOf", "oneOf", "anyOf"] {
        for (i, x) in list_of(s, k).into_iter().enumerate() {
            openapi(x, &index(&child(path, k), i), ssv, false, errs);
        }
    }
    if let Some(defs) = s.get("definitions").and_then(Value::as_object) {
        for (k, v) in defs {
            if let Some(v) = v.as_object() {
                openapi(v, &key(&child(path, "definitions"), k), ssv, false, errs);
            }
        }
    }
    match s.get("items") {
        Some(Value::Object(items)) => openapi(items, &child(path, "items"), ssv, false, errs),
        Some(Value::Array(list)) => {
            for (i, x) in list.iter().enumerate() {
                if let Some(x) = x.as_object() {
                    openapi(x, &index(&child(path, "items"), i), ssv, false, errs);
                }
            }
        }
        _ => {}
    }
    if s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        errs.push(fe::invalid(
            &child(path, "x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(false),
            "must be true or undefined",
        ));
    }
    extensions(s, typ, path, errs);
    validation_rules(s, path, errs);
}
/// The x-kubernetes-validations checks that need no CEL engine (rules are
/// neither compiled nor run here).
fn validation_rules(s: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
    const REASONS: [&str; 4] = [
        "FieldValueDuplicate",
        "FieldValueForbidden",
        "FieldValueInvalid",
        "FieldValueRequired",
    ];
    let newline = |x: &str| x.contains('\n') || x.contains('\r');
    for (i, rule) in list_of(s, "x-kubernetes-validations")
        .into_iter()
        .enumerate()
    {
        let at = index(&child(path, "x-kubernetes-validations"), i);
        let text = str_of(rule, "rule");
        let msg = str_of(rule, "message");
        let msg_expr = str_of(rule, "messageExpression");
        let (t_rule, t_msg) = (text.trim(), msg.trim());
        if t_rule.is_empty() {
            errs.push(fe::required(&child(&at, "rule"), "rule is not specified"));
        } else if !msg.is_empty() && t_msg.is_empty() {
            errs.push(fe::invalid_str(
                &child(&at, "message"),
                msg,
                "message must be non-empty if specified",
            ));
        } else if newline(t_msg) {
            errs.push(fe::invalid_str(
                &child(&at, "message"),
                msg,
                "message must not contain line breaks",
            ));
        } else if newline(t_rule) && t_msg.is_empty() {
            errs.push(fe::required(
                &child(&at, "message"),
                "message must be specified if rule contains line breaks",
            ));
        }
        if !msg_expr.is_empty() && msg_expr.trim().is_empty() {
            errs.push(fe::required(
                &child(&at, "messageExpression"),
                "messageExpression must be non-empty if specified",
            ));
        }
        if let Some(reason) = rule.get("reason").and_then(Value::as_str) {
            if !REASONS.contains(&reason) {
                let supported: Vec<String> = REASONS.iter().map(|r| r.to_string()).collect();
                errs.push(fe::not_supported(
                    &child(&at, "reason"),
                    &Value::from(reason),
                    &supported,
                ));
            }
        }
        let fp = str_of(rule, "fieldPath");
        if !fp.is_empty() && fp.trim().is_empty() {
            errs.push(fe::invalid_str(
                &child(&at, "fieldPath"),
                fp,
                "fieldPath must be non-empty if specified",
            ));
        }
        if newline(fp) {
            errs.push(fe::invalid_str(
                &child(&at, "fieldPath"),
                fp,
                "fieldPath must not contain line breaks",
            ));
        }
        if !fp.is_empty() && !field_path_valid(s, fp) {
            errs.push(fe::invalid_str(
                &child(&at, "fieldPath"),
                fp,
                "fieldPath must be a valid path",
            ));
        }
    }
}
/// The x-kubernetes-map-type / list-type / list-map-keys checks.
fn extensions(s: &Map<String, Value>, typ: &str, path: &str, errs: &mut Vec<FieldError>) {
    let map_type = s.get("x-kubernetes-map-type").and_then(Value::as_str);
    if map_type.is_some() && typ != "object" {
        if typ.is_empty() {
            errs.push(fe::required(
                &child(path, "type"),
                "must be object if x-kubernetes-map-type is specified",
            ));
        } else {
            errs.push(fe::invalid_str(
                &child(path, "type"),
                typ,
                "must be object if x-kubernetes-map-type is specified",
            ));
        }
    }
    if let Some(mt) = map_type.filter(|t| *t != "atomic" && *t != "granular") {
        errs.push(fe::not_supported(
            &child(path, "x-kubernetes-map-type"),
            &Value::from(mt),
            &["atomic".into(), "granular".into()],
        ));
    }
    let list_type = s.get("x-kubernetes-list-type").and_then(Value::as_str);
    let items = s.get("items").and_then(Value::as_object);
    if list_type.is_some() && typ != "array" {
        if typ.is_empty() {
            errs.push(fe::required(
                &child(path, "type"),
                "must be array if x-kubernetes-list-type is specified",
            ));
        } else {
            errs.push(fe::invalid_str(
                &child(path, "type"),
                typ,
                "must be array if x-kubernetes-list-type is specified",
            ));
        }
    } else if let (Some("set"), Some(is)) = (list_type, items) {
        match str_of(is, "type") {
            "array" => {
                if let Some(lt) = is.get("x-kubernetes-list-type").and_then(Value::as_str) {
                    if lt != "atomic" {
                        errs.push(fe::invalid_str(
                            &child(&child(path, "items"), "x-kubernetes-list-type"),
                            lt,
                            "must be atomic as item of a list with x-kubernetes-list-type=set",
                        ));
                    }
                }
            }
            "object"
                if is.get("x-kubernetes-map-type").and_then(Value::as_str) != Some("atomic") =>
            {
                errs.push(fe::invalid(
                    &child(&child(path, "items"), "x-kubernetes-map-type"),
                    &Value::Null,
                    "must be atomic as item of a list with x-kubernetes-list-type=set",
                ));
            }
            _ => {}
        }
    }
    if let Some(lt) = list_type.filter(|t| !["atomic", "set", "map"].contains(t)) {
        errs.push(fe::not_supported(
            &child(path, "x-kubernetes-list-type"),
            &Value::from(lt),
            &["atomic".into(), "set".into(), "map".into()],
        ));
    }
    let keys: Vec<String> = s
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if !keys.is_empty() {
        match list_type {
            None => errs.push(fe::required(
                &child(path, "x-kubernetes-list-type"),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
            Some(lt) if lt != "map" => errs.push(fe::invalid_str(
                &child(path, "x-kubernetes-list-type"),
                lt,
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
            _ => {}
        }
    }
    if list_type == Some("map") {
        if keys.is_empty() {
            errs.push(fe::required(
                &child(path, "x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        match s.get("items") {
            None | Some(Value::Null) => errs.push(fe::required(
                &child(path, "items"),
                "must have a schema if x-kubernetes-list-type is map",
            )),
            Some(Value::Array(_)) => errs.push(fe::invalid_shown(
                &child(path, "items"),
                "\"\"",
                "must only have a single schema if x-kubernetes-list-type is map",
            )),
            _ => {}
        }
        if let Some(is) = items {
            let it = str_of(is, "type");
            if it != "object" {
                errs.push(fe::invalid_str(
                    &child(&child(path, "items"), "type"),
                    it,
                    "must be object if parent array's x-kubernetes-list-type is map",
                ));
            } else {
                let ip = is.get("properties").and_then(Value::as_object);
                let mut seen: Vec<&str> = Vec::new();
                for k in &keys {
                    match ip.and_then(|p| p.get(k)).and_then(Value::as_object) {
                        Some(ks) => {
                            let kt = str_of(ks, "type");
                            if kt == "array" || kt == "object" {
                                errs.push(fe::invalid_str(
                                    &child(&key(&child(&child(path, "items"), "properties"), k), "type"),
                                    it,
                                    "must be a scalar type if parent array's x-kubernetes-list-type is map",
                                ));
                            }
                        }
                        None => errs.push(fe::invalid_shown(
                            &child(path, "x-kubernetes-list-map-keys"),
                            &fe::go_strings(&keys),
                            "entries must all be names of item properties",
                        )),
                    }
                    if seen.contains(&k.as_str()) {
                        errs.push(fe::invalid_shown(
                            &child(path, "x-kubernetes-list-map-keys"),
                            &fe::go_strings(&keys),
                            "must not contain duplicate entries",
                        ));
                    }
                    seen.push(k);
                }
            }
        }
    }
    // requireMapListKeysMapSetValidation
    if let (Some(lt @ ("set" | "map")), Some(is)) = (list_type, items) {
        if bool_of(is, "nullable") {
            errs.push(fe::forbidden(
                &child(&child(path, "items"), "nullable"),
                &format!("cannot be nullable when x-kubernetes-list-type is {lt}"),
            ));
        }
        if lt == "map" {
            let required: Vec<&str> = is
                .get("required")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let ip = is.get("properties").and_then(Value::as_object);
            for k in &keys {
                let Some(ks) = ip.and_then(|p| p.get(k)).and_then(Value::as_object) else {
                    continue;
                };
                let at = key(&child(&child(path, "items"), "properties"), k);
                if !required.contains(&k.as_str()) && ks.get("default").is_none_or(Value::is_null) {
                    errs.push(fe::required(
                        &child(&at, "default"),
                        "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                    ));
                }
                if bool_of(ks, "nullable") {
                    errs.push(fe::forbidden(
                        &child(&at, "nullable"),
                        "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                    ));
                }
            }
        }
    }
}

/// cel.ValidFieldPath, roughly: `.field`, `['field']` and `[index]` steps
/// that the schema knows (properties, additionalProperties, items).
fn field_path_valid(schema: &Map<String, Value>, path: &str) -> bool {
    let mut node = super::structural::Node::parse(&Value::Object(schema.clone()));
    let mut rest = path;
    if !rest.starts_with(['.', '[']) {
        return false;
    }
    while !rest.is_empty() {
        let (step, after, index) = if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let (name, after) = r.split_at(end);
            if name.is_empty() {
                return false;
            }
            (name.to_string(), after, false)
        } else if let Some(r) = rest.strip_prefix("['") {
            let Some(end) = r.find("']") else {
                return false;
            };
            let (name, after) = r.split_at(end);
            (name.to_string(), after.get(2..).unwrap_or(""), false)
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else { return false };
            let (num, after) = r.split_at(end);
            if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit()) {
                return false;
            }
            (num.to_string(), after.get(1..).unwrap_or(""), true)
        } else {
            return false;
        };
        let next = if index {
            node.items.as_deref().cloned()
        } else {
            node.properties
                .get(&step)
                .cloned()
                .or(match &node.additional {
                    Some(super::structural::Additional::Schema(a)) => Some((**a).clone()),
                    _ => None,
                })
        };
        let Some(n) = next else { return false };
        node = n;
        rest = after;
    }
    true
}
