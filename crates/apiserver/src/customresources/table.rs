//! Tables of custom objects, as upstream's CRD table convertor prints
//! them: Name, then the served version's additionalPrinterColumns (or Age
//! when it has none), each cell read with the column's JSONPath and typed
//! by the column's type (`date` as a human duration).

use serde_json::{json, Value};

use super::{Column, Served};
use crate::table::Include;

/// The version's columns, Age when it declares none.
fn columns(served: &Served) -> Vec<Column> {
    if !served.columns.is_empty() {
        return served.columns.clone();
    }
    vec![Column {
        name: "Age".into(),
        type_: "date".into(),
        format: String::new(),
        description: meta_description(1),
        priority: 0,
        json_path: ".metadata.creationTimestamp".into(),
    }]
}

/// ObjectMeta's descriptions of name (0) and creationTimestamp (1), from
/// the default table skiff-api prints.
fn meta_description(i: usize) -> String {
    skiff_api::tables::column_definitions("")
        .get(i)
        .and_then(|c| c.get("description"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn definitions(served: &Served) -> Vec<Value> {
    let mut out = vec![json!({
        "name": "Name", "type": "string", "format": "name",
        "description": meta_description(0), "priority": 0,
    })];
    for c in columns(served) {
        let description = if c.description.is_empty() {
            format!(
                "Custom resource definition column (in JSONPath format): {}",
                c.json_path
            )
        } else {
            c.description.clone()
        };
        out.push(json!({
            "name": c.name, "type": c.type_, "format": c.format,
            "description": description, "priority": c.priority,
        }));
    }
    out
}

fn cell(c: &Column, obj: &Value, now: chrono::DateTime<chrono::Utc>) -> Value {
    let Some(value) = super::engine::Structural::column(obj, &c.json_path) else {
        return Value::Null;
    };
    if value.is_null() {
        return Value::Null;
    }
    match c.type_.as_str() {
        "string" => match value {
            Value::String(s) => json!(s),
            other => json!(other.to_string()),
        },
        "integer" => match value.as_i64().or_else(|| value.as_f64().map(|f| f as i64)) {
            Some(n) => json!(n),
            None => Value::Null,
        },
        "number" => value.as_f64().map_or(Value::Null, |f| json!(f)),
        "boolean" => value.as_bool().map_or(Value::Null, |b| json!(b)),
        "date" => match value.as_str() {
            Some(s) => match chrono::DateTime::parse_from_rfc3339(s) {
                Ok(t) => json!(skiff_api::tables::human_duration(
                    now.signed_duration_since(t.with_timezone(&chrono::Utc))
                )),
                Err(_) => json!("<invalid>"),
            },
            None => Value::Null,
        },
        _ => Value::Null,
    }
}

/// A Table of custom objects (served form).
pub fn table(served: &Served, objects: &[&Value], list_meta: Value, include: Include) -> Value {
    let now = chrono::Utc::now();
    let cols = columns(served);
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let mut cells = vec![json!(crate::object::name_of(obj).unwrap_or_default())];
            cells.extend(cols.iter().map(|c| cell(c, obj, now)));
            let mut row = json!({ "cells": cells });
            match include {
                Include::None => {}
                Include::Metadata => crate::object::set(
                    &mut row,
                    "object",
                    json!({
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
                    }),
                ),
                Include::Object => crate::object::set(&mut row, "object", (*obj).clone()),
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": definitions(served),
        "rows": rows,
    })
}
