//! Server-side printing: `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`
//! turns an object, a list or each watch event into a meta.k8s.io/v1
//! Table whose rows carry PartialObjectMetadata (so kubectl's NAMESPACE
//! column and `--show-labels` work). The columns come from skiff-api;
//! custom resources' come from their CRDs (`crate::customresources::table`).
//! Whether a client asked for a Table is the handlers' (`params::negotiate`).

use serde_json::{json, Value};

/// How much of each object a row carries (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Include {
    None,
    Metadata,
    Object,
}

impl Include {
    pub fn parse(value: Option<&String>) -> Include {
        match value.map(String::as_str) {
            Some("None") => Include::None,
            Some("Object") => Include::Object,
            _ => Include::Metadata,
        }
    }
}

fn row(kind: &str, obj: &Value, include: Include, now: chrono::DateTime<chrono::Utc>) -> Value {
    let mut row = json!({ "cells": skiff_api::tables::row_cells(kind, obj, now) });
    let conditions = skiff_api::tables::row_conditions(kind, obj);
    if !conditions.is_empty() {
        crate::object::set(&mut row, "conditions", json!(conditions));
    }
    match include {
        Include::None => {}
        Include::Metadata => {
            let partial = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
            });
            crate::object::set(&mut row, "object", partial);
        }
        Include::Object => crate::object::set(&mut row, "object", obj.clone()),
    }
    row
}

/// A Table of `objects` (all of `kind`), with list metadata.
pub fn table(kind: &str, objects: &[&Value], list_meta: Value, include: Include) -> Value {
    let now = chrono::Utc::now();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": skiff_api::tables::column_definitions(kind),
        "rows": objects.iter().map(|o| row(kind, o, include, now)).collect::<Vec<_>>(),
    })
}
