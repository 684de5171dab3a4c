//! What a stored CustomResourceDefinition serves: one [`Served`] per
//! served version, under the names its status accepted, with the
//! version's structural schema (reused from the previous entry when the
//! schema did not change), printer columns, subresources and selectable
//! fields.

use std::sync::Arc;

use crate::customresources::engine::Structural;
use serde_json::Value;

use super::names::{self, CrdNames};
use crate::customresources::{intern, intern_list, Column, Names, Registry, ScalePaths, Served};

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn columns(version: &Value) -> Vec<Column> {
    version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .map(|cols| {
            cols.iter()
                .map(|c| Column {
                    name: text(c, "name"),
                    type_: text(c, "type"),
                    format: text(c, "format"),
                    description: text(c, "description"),
                    priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                    json_path: text(c, "jsonPath"),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn scale(version: &Value) -> Option<ScalePaths> {
    let s = version.pointer("/subresources/scale")?;
    Some(ScalePaths {
        spec_replicas: text(s, "specReplicasPath"),
        status_replicas: text(s, "statusReplicasPath"),
        label_selector: s
            .get("labelSelectorPath")
            .and_then(Value::as_str)
            .map(String::from),
    })
}

/// The entries `crd` (with status `accepted` names) serves; none unless
/// its names are accepted or it is established.
pub fn entries(served_now: &Registry, crd: &Value, accepted: &CrdNames) -> Vec<Served> {
    let established = names::is_true(crd, "Established");
    if accepted.plural.is_empty() || !(established || names::is_true(crd, "NamesAccepted")) {
        return Vec::new();
    }
    let group = crd
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let crd_name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let namespaced = crd.pointer("/spec/scope").and_then(Value::as_str) != Some("Cluster");
    let terminating = crd.pointer("/metadata/deletionTimestamp").is_some();
    let versions: Vec<&Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|v| v.iter().collect())
        .unwrap_or_default();
    let storage_version = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .map(|v| text(v, "name"))
        .unwrap_or_default();
    let served_versions: Vec<String> = versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
        .map(|v| text(v, "name"))
        .collect();
    let singular = if accepted.singular.is_empty() {
        accepted.kind.to_lowercase()
    } else {
        accepted.singular.clone()
    };
    let list_kind = if accepted.list_kind.is_empty() {
        format!("{}List", accepted.kind)
    } else {
        accepted.list_kind.clone()
    };
    let mut out = Vec::new();
    for v in versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
    {
        let version = text(v, "name");
        let status = v.pointer("/subresources/status").is_some();
        let scale = scale(v);
        let mut subresources = Vec::new();
        if status {
            subresources.push("status".to_string());
        }
        if scale.is_some() {
            subresources.push("scale".to_string());
        }
        let resource = intern(&Names {
            group: group.to_string(),
            version: version.clone(),
            plural: accepted.plural.clone(),
            singular: singular.clone(),
            kind: accepted.kind.clone(),
            namespaced,
            short_names: accepted.short_names.clone(),
            categories: accepted.categories.clone(),
            subresources,
        });
        let raw_schema = v
            .pointer("/schema/openAPIV3Schema")
            .cloned()
            .unwrap_or(Value::Null);
        let schema = match served_now.find(group, &version, &accepted.plural) {
            Some(prev) if prev.raw_schema == raw_schema => prev.schema.clone(),
            _ if raw_schema.is_null() => None,
            _ => Some(Arc::new(Structural::unchecked(&raw_schema))),
        };
        let deprecated = (v.get("deprecated").and_then(Value::as_bool) == Some(true)).then(|| {
            v.get("deprecationWarning")
                .and_then(Value::as_str)
                .map(String::from)
                .unwrap_or_else(|| format!("{group}/{version} {} is deprecated", accepted.kind))
        });
        let selectable: Vec<String> = v
            .get("selectableFields")
            .and_then(Value::as_array)
            .map(|f| {
                f.iter()
                    .map(|s| text(s, "jsonPath").trim_start_matches('.').to_string())
                    .filter(|p| !p.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let selectable = intern_list(&selectable);
        out.push(Served {
            resource,
            crd_name: crd_name.to_string(),
            list_kind: list_kind.clone(),
            storage_version: storage_version.clone(),
            versions: served_versions.clone(),
            schema,
            raw_schema,
            columns: columns(v),
            scale,
            status,
            established,
            terminating,
            deprecated,
            selectable,
        });
    }
    out
}
