//! Per-kind validation beyond the pod spec, one function per kind (the
//! API server's strategies call them): resource quantities (decode errors
//! and bounds), tolerations and taints, pod templates and selectors of
//! workloads (required, matching the template, immutable), ConfigMap and
//! Secret size and events.k8s.io Event creation, in upstream's wording.

use serde_json::{Map, Value};

use super::meta::{label_map, too_long};
use super::{invalid, names, not_supported, required, FieldError};
use crate::quantity::ParsedQuantity;

/// The decoder's message for a quantity that does not parse.
const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// Most bytes a ConfigMap's or Secret's data may hold.
pub const MAX_DATA_SIZE: usize = 1024 * 1024;

const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// The pod specs of an object of `kind`, with their paths.
fn pod_specs<'a>(kind: &str, obj: &'a Value) -> Vec<(&'a Value, &'static str)> {
    let spec = match kind {
        "Pod" => obj.get("spec").map(|s| (s, "spec")),
        "Deployment"
        | "ReplicaSet"
        | "Job"
        | "StatefulSet"
        | "DaemonSet"
        | "ReplicationController" => obj
            .pointer("/spec/template/spec")
            .map(|s| (s, "spec.template.spec")),
        "PodTemplate" => obj.pointer("/template/spec").map(|s| (s, "template.spec")),
        "CronJob" => obj
            .pointer("/spec/jobTemplate/spec/template/spec")
            .map(|s| (s, "spec.jobTemplate.spec.template.spec")),
        _ => None,
    };
    spec.into_iter().collect()
}

fn containers(spec: &Value) -> impl Iterator<Item = (&'static str, usize, &Value)> {
    ["initContainers", "containers"]
        .into_iter()
        .flat_map(move |list| {
            spec.get(list)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
                .map(move |(i, c)| (list, i, c))
        })
}

fn quantities(m: Option<&Value>) -> impl Iterator<Item = (&String, &Value)> {
    m.and_then(Value::as_object).into_iter().flatten()
}

/// Every quantity in an object of `kind`, as strings with where they are.
fn each_quantity<'a>(kind: &str, obj: &'a Value) -> Vec<&'a Value> {
    let mut out = Vec::new();
    for (spec, _) in pod_specs(kind, obj) {
        for (_, _, c) in containers(spec) {
            for part in ["requests", "limits"] {
                out.extend(quantities(c.pointer(&format!("/resources/{part}"))).map(|(_, v)| v));
            }
        }
        out.extend(quantities(spec.get("overhead")).map(|(_, v)| v));
    }
    let maps: &[&str] = match kind {
        "Node" => &["/status/capacity", "/status/allocatable"],
        "PersistentVolume" => &["/spec/capacity"],
        "PersistentVolumeClaim" => &[
            "/spec/resources/requests",
            "/spec/resources/limits",
            "/status/capacity",
            "/status/allocatedResources",
        ],
        _ => &[],
    };
    for at in maps {
        out.extend(quantities(obj.pointer(at)).map(|(_, v)| v));
    }
    out
}

/// The decode error upstream gives for the first quantity of `obj` that
/// does not parse (a 400, before validation), if any.
pub fn bad_quantity(kind: &str, obj: &Value) -> Option<String> {
    each_quantity(kind, obj)
        .into_iter()
        .any(|q| q.as_str().is_none_or(|s| ParsedQuantity::parse(s).is_err()))
        .then(|| QUANTITY_FORMAT.to_string())
}

/// What every pod spec gets beyond `pod_spec`: resource quantities and
/// tolerations.
pub(crate) fn pod_spec_extras(spec: Option<&Value>, path: &str) -> Vec<FieldError> {
    let Some(spec) = spec else {
        return Vec::new();
    };
    let mut errors = resources(spec, path);
    errors.extend(tolerations(spec, path));
    errors
}

/// A Deployment: its template, and a selector that selects it.
pub fn deployment(obj: &Value) -> Vec<FieldError> {
    let mut errors = super::workload_template(obj);
    errors.extend(selector_matches(obj));
    errors
}

/// A ReplicaSet: as a Deployment.
pub fn replica_set(obj: &Value) -> Vec<FieldError> {
    deployment(obj)
}

/// A Job: its template (the selector is generated).
pub fn job(obj: &Value) -> Vec<FieldError> {
    super::workload_template(obj)
}

/// A Deployment or ReplicaSet update: the selector is immutable.
pub fn workload_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if old.pointer("/spec/selector").is_some()
        && old.pointer("/spec/selector") != new.pointer("/spec/selector")
    {
        errors.push(FieldError {
            reason: "FieldValueInvalid",
            field: "spec.selector".into(),
            message: format!(
                "Invalid value: {}: field is immutable",
                go_label_selector(new.pointer("/spec/selector"))
            ),
        });
    }
    errors
}

/// A Job update: selector and template are immutable.
pub fn job_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = workload_update(old, new);
    if old.pointer("/spec/template") != new.pointer("/spec/template") {
        errors.push(FieldError {
            reason: "FieldValueInvalid",
            field: "spec.template".into(),
            message: "Invalid value: field is immutable".into(),
        });
    }
    errors
}

/// A Node: its taints.
pub fn node(obj: &Value) -> Vec<FieldError> {
    taints(obj)
}

/// A ConfigMap: at most 1 MiB of data.
pub fn config_map(obj: &Value) -> Vec<FieldError> {
    if data_size(obj, &["data", "binaryData"]) > MAX_DATA_SIZE {
        return vec![too_long(String::new(), MAX_DATA_SIZE)];
    }
    Vec::new()
}

/// A Secret: at most 1 MiB of data.
pub fn secret(obj: &Value) -> Vec<FieldError> {
    if data_size(obj, &["data", "stringData"]) > MAX_DATA_SIZE {
        return vec![too_long("data".into(), MAX_DATA_SIZE)];
    }
    Vec::new()
}

fn data_size(obj: &Value, fields: &[&str]) -> usize {
    fields
        .iter()
        .filter_map(|f| obj.get(*f).and_then(Value::as_object))
        .flatten()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum()
}

fn resources(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (list, i, c) in containers(spec) {
        let at = format!("{path}.{list}[{i}].resources");
        let limits = c.pointer("/resources/limits");
        let requests = c.pointer("/resources/requests");
        for (part, m) in [("limits", limits), ("requests", requests)] {
            for (name, q) in quantities(m) {
                let parsed = q.as_str().and_then(|s| ParsedQuantity::parse(s).ok());
                if parsed.is_some_and(|p| p.is_negative()) {
                    errors.push(invalid(
                        format!("{at}.{part}[{name}]"),
                        q,
                        "must be greater than or equal to 0",
                    ));
                }
            }
        }
        for (name, req) in quantities(requests) {
            let Some(limit) = limits.and_then(|l| l.get(name)) else {
                continue;
            };
            let parse = |v: &Value| v.as_str().and_then(|s| ParsedQuantity::parse(s).ok());
            if let (Some(r), Some(l)) = (parse(req), parse(limit)) {
                if r.cmp_value(&l).is_gt() {
                    errors.push(invalid(
                        format!("{at}.requests"),
                        req,
                        &format!(
                            "must be less than or equal to {name} limit of {}",
                            limit.as_str().unwrap_or_default()
                        ),
                    ));
                }
            }
        }
    }
    errors
}

fn tolerations(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let list = spec.get("tolerations").and_then(Value::as_array);
    for (i, t) in list.into_iter().flatten().enumerate() {
        if let Some(effect) = t.get("effect").and_then(Value::as_str) {
            if !effect.is_empty() && !TAINT_EFFECTS.contains(&effect) {
                errors.push(not_supported(
                    format!("{path}.tolerations[{i}].effect"),
                    effect,
                    TAINT_EFFECTS,
                ));
            }
        }
        if let Some(op) = t.get("operator").and_then(Value::as_str) {
            if !op.is_empty() && op != "Equal" && op != "Exists" {
                errors.push(not_supported(
                    format!("{path}.tolerations[{i}].operator"),
                    op,
                    &["Equal", "Exists"],
                ));
            }
        }
    }
    errors
}

fn taints(node: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let list = node.pointer("/spec/taints").and_then(Value::as_array);
    for (i, t) in list.into_iter().flatten().enumerate() {
        let at = format!("spec.taints[{i}]");
        let key = t.get("key").and_then(Value::as_str).unwrap_or_default();
        for m in names::qualified_name(key) {
            errors.push(invalid(format!("{at}.key"), &Value::from(key), &m));
        }
        match t.get("effect").and_then(Value::as_str).unwrap_or_default() {
            "" => errors.push(required(format!("{at}.effect"))),
            e if !TAINT_EFFECTS.contains(&e) => {
                errors.push(not_supported(format!("{at}.effect"), e, TAINT_EFFECTS))
            }
            _ => {}
        }
    }
    errors
}

/// A workload's selector is required, non-empty and selects its template.
pub(crate) fn selector_matches(obj: &Value) -> Vec<FieldError> {
    let Some(selector) = obj.pointer("/spec/selector") else {
        return vec![required("spec.selector".into())];
    };
    let match_labels = selector.get("matchLabels").and_then(Value::as_object);
    let exprs = selector.get("matchExpressions").and_then(Value::as_array);
    if match_labels.is_none_or(Map::is_empty) && exprs.is_none_or(Vec::is_empty) {
        let what = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
        return vec![FieldError {
            reason: "FieldValueInvalid",
            field: "spec.selector".into(),
            message: format!(
                "Invalid value: {}: empty selector is invalid for {}",
                go_label_selector(Some(selector)),
                what.to_ascii_lowercase()
            ),
        }];
    }
    let mut errors = Vec::new();
    if let Some(m) = match_labels {
        errors.extend(label_map(m, "spec.selector.matchLabels"));
    }
    let labels = obj
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object);
    let empty = Map::new();
    let selects = crate::selectors::LabelSelector::from_json(selector)
        .map(|s| s.matches(labels.unwrap_or(&empty)))
        .unwrap_or(true);
    if !selects {
        errors.push(FieldError {
            reason: "FieldValueInvalid",
            field: "spec.template.metadata.labels".into(),
            message: format!(
                "Invalid value: {}: `selector` does not match template `labels`",
                go_string_map(labels)
            ),
        });
    }
    errors
}

/// `map[string]string{"a":"b"}`, as Go prints one.
pub(crate) fn go_string_map(m: Option<&Map<String, Value>>) -> String {
    let body: Vec<String> = m
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k:?}:{:?}", v.as_str().unwrap_or_default()))
        .collect();
    format!("map[string]string{{{}}}", body.join(", "))
}

/// A LabelSelector as Go's `%#v`-like printing in field errors shows it.
pub(crate) fn go_label_selector(s: Option<&Value>) -> String {
    let Some(s) = s else {
        return "(*v1.LabelSelector)(nil)".into();
    };
    let labels = match s.get("matchLabels").and_then(Value::as_object) {
        Some(m) => go_string_map(Some(m)),
        None => "map[string]string(nil)".into(),
    };
    let exprs = match s.get("matchExpressions").and_then(Value::as_array) {
        Some(list) => {
            let items: Vec<String> = list
                .iter()
                .map(|e| {
                    let values: Vec<String> = e
                        .get("values")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(|v| format!("{:?}", v.as_str().unwrap_or_default()))
                        .collect();
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{:?}, Operator:{:?}, Values:[]string{{{}}}}}",
                        e.get("key").and_then(Value::as_str).unwrap_or_default(),
                        e.get("operator").and_then(Value::as_str).unwrap_or_default(),
                        values.join(", ")
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
        None => "[]v1.LabelSelectorRequirement(nil)".into(),
    };
    format!("v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{exprs}}}")
}

/// events.k8s.io/v1 Event creation (upstream's strict validation for
/// events made through the new API), on the served form.
pub fn events_v1_create(ev: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let s = |f: &str| ev.get(f).and_then(Value::as_str).unwrap_or_default();
    if s("eventTime").is_empty() {
        errors.push(required("eventTime".into()));
    }
    let ty = s("type");
    if ty != "Normal" && ty != "Warning" {
        errors.push(invalid(
            "type".into(),
            &Value::from(""),
            &format!("has invalid value: {ty}"),
        ));
    }
    for (field, limit) in [
        ("reportingController", 128),
        ("reportingInstance", 128),
        ("action", 128),
        ("reason", 128),
    ] {
        let v = s(field);
        if v.is_empty() {
            errors.push(required(field.into()));
        }
        if field == "reportingController" {
            errors.extend(
                names::qualified_name(v)
                    .iter()
                    .map(|m| invalid(field.into(), &Value::from(v), m)),
            );
        }
        if v.len() > limit {
            errors.push(too_long(field.into(), limit));
        }
    }
    if s("note").len() > 1024 {
        errors.push(too_long("note".into(), 1024));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_and_bounds() {
        let pod = json!({"spec": {"containers": [{"name": "a", "image": "i",
            "resources": {"requests": {"cpu": "lots"}}}]}});
        assert_eq!(bad_quantity("Pod", &pod).as_deref(), Some(QUANTITY_FORMAT));
        let pod = json!({"spec": {"containers": [{"name": "a", "image": "i",
            "resources": {"requests": {"cpu": "2", "memory": "-1"}, "limits": {"cpu": "1"}}}]}});
        assert_eq!(bad_quantity("Pod", &pod), None);
        let e = super::super::pod(&pod);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].field, "spec.containers[0].resources.requests[memory]");
        assert_eq!(
            e[1].message,
            "Invalid value: \"2\": must be less than or equal to cpu limit of 1"
        );
    }

    #[test]
    fn taints_selectors_and_sizes() {
        let node = json!({"spec": {"taints": [{"key": "k", "effect": "Bogus"}]}});
        assert_eq!(
            super::node(&node)[0].message,
            "Unsupported value: \"Bogus\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""
        );
        let d = json!({"kind": "Deployment", "spec": {"selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "c"}}}}});
        assert_eq!(
            deployment(&d)
                .iter()
                .find(|e| e.field == "spec.template.metadata.labels")
                .unwrap()
                .message,
            "Invalid value: map[string]string{\"a\":\"c\"}: `selector` does not match template `labels`"
        );
        let moved = json!({"spec": {"selector": {"matchLabels": {"a": "x"}}}});
        assert_eq!(
            workload_update(&d, &moved)[0].message,
            "Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"a\":\"x\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
        );
        let cm = json!({"data": {"a": "x".repeat(MAX_DATA_SIZE)}});
        assert_eq!(
            config_map(&cm)[0].message,
            "Too long: must have at most 1048576 bytes"
        );
        assert_eq!(names::dns1123_label("a.b").len(), 1);
        assert!(names::dns1123_subdomain("a.b").is_empty());
    }

    #[test]
    fn events_v1_need_their_fields() {
        let fields: Vec<String> = events_v1_create(&json!({"metadata": {"name": "e"}}))
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(
            fields,
            vec![
                "eventTime",
                "type",
                "reportingController",
                "reportingController",
                "reportingController",
                "reportingInstance",
                "action",
                "reason"
            ]
        );
    }
}
