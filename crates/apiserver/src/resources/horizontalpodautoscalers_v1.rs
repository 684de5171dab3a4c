//! HorizontalPodAutoscalers at autoscaling/v1: a view of the v2 objects
//! (stored once, under /registry/horizontalpodautoscalers/), converted as
//! upstream's `pkg/apis/autoscaling/v1/conversion.go` does. v1 has only
//! `targetCPUUtilizationPercentage` and `currentCPUUtilizationPercentage`;
//! the other metrics, the metric statuses, the conditions and the
//! behavior ride in the `autoscaling.alpha.kubernetes.io/*` annotations
//! (v1's metric types inside; the behavior as upstream's internal type
//! marshals it), and come back out of them when a v1 object is written.

use serde_json::{json, Map, Value};

use super::horizontalpodautoscalers::{HorizontalPodAutoscalerStrategy, HpaTyped};
use crate::catalog::{resource, KindDef, Strategy, ALL};
use skiff_api::validation::FieldError;

pub static KIND: KindDef = KindDef {
    group: "autoscaling",
    kind: "HorizontalPodAutoscaler",
    resource: Some(resource(
        "autoscaling",
        "v1",
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        "HorizontalPodAutoscaler",
        true,
        &["hpa"],
        ALL,
        &["status"],
    )),
    selectable_fields: &[],
    strategy: &HpaV1Strategy,
    typed: &HpaTyped,
};

/// The v2 rules, served through the v1 view.
#[derive(Debug)]
struct HpaV1Strategy;

impl Strategy for HpaV1Strategy {
    fn defaults(&self, obj: &mut Value) {
        HorizontalPodAutoscalerStrategy.defaults(obj);
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        HorizontalPodAutoscalerStrategy.prepare_for_create(obj);
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        HorizontalPodAutoscalerStrategy.validate(obj)
    }
    fn converts(&self) -> bool {
        true
    }
    fn to_served(&self, obj: Value) -> Value {
        to_v1(obj)
    }
    fn to_stored(&self, obj: Value) -> Value {
        from_v1(obj)
    }
}

const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";
const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";

fn set(map: &mut Map<String, Value>, key: &str, v: Option<&Value>) {
    if let Some(v) = v.filter(|v| !v.is_null()) {
        map.insert(key.into(), v.clone());
    }
}

fn quantity_or_zero(v: Option<&Value>) -> Value {
    v.filter(|v| !v.is_null())
        .cloned()
        .unwrap_or_else(|| json!("0"))
}

fn is_cpu_resource(m: &Value) -> bool {
    m.get("type").and_then(Value::as_str) == Some("Resource")
        && m.pointer("/resource/name").and_then(Value::as_str) == Some("cpu")
}

/// A v2 MetricSpec as v1's.
fn spec_to_v1(m: &Value) -> Value {
    let mut out = Map::new();
    set(&mut out, "type", m.get("type"));
    let t = |src: &Value, f: &str| src.pointer(&format!("/target/{f}")).cloned();
    if let Some(src) = m.get("resource").filter(|v| !v.is_null()) {
        let mut r = Map::new();
        set(&mut r, "name", src.get("name"));
        set(
            &mut r,
            "targetAverageUtilization",
            t(src, "averageUtilization").as_ref(),
        );
        set(
            &mut r,
            "targetAverageValue",
            t(src, "averageValue").as_ref(),
        );
        out.insert("resource".into(), Value::Object(r));
    }
    if let Some(src) = m.get("containerResource").filter(|v| !v.is_null()) {
        let mut r = Map::new();
        set(&mut r, "name", src.get("name"));
        set(&mut r, "container", src.get("container"));
        set(
            &mut r,
            "targetAverageUtilization",
            t(src, "averageUtilization").as_ref(),
        );
        set(
            &mut r,
            "targetAverageValue",
            t(src, "averageValue").as_ref(),
        );
        out.insert("containerResource".into(), Value::Object(r));
    }
    if let Some(src) = m.get("pods").filter(|v| !v.is_null()) {
        let mut r = Map::new();
        set(&mut r, "metricName", src.pointer("/metric/name"));
        set(&mut r, "selector", src.pointer("/metric/selector"));
        r.insert(
            "targetAverageValue".into(),
            quantity_or_zero(t(src, "averageValue").as_ref()),
        );
        out.insert("pods".into(), Value::Object(r));
    }
    if let Some(src) = m.get("object").filter(|v| !v.is_null()) {
        let mut r = Map::new();
        set(&mut r, "target", src.get("describedObject"));
        set(&mut r, "metricName", src.pointer("/metric/name"));
        set(&mut r, "selector", src.pointer("/metric/selector"));
        r.insert(
            "targetValue".into(),
            quantity_or_zero(t(src, "value").as_ref()),
        );
        set(&mut r, "averageValue", t(src, "averageValue").as_ref());
        out.insert("object".into(), Value::Object(r));
    }
    if let Some(src) = m.get("external").filter(|v| !v.is_null()) {
        let mut r = Map::new();
        set(&mut r, "metricName", src.pointer("/metric/name"));
        set(&mut r, "metricSelector", src.pointer("/metric/selector"));
        set(&mut r, "targetValue", t(src, "value").as_ref());
        set(
            &mut r,
            "targetAverageValue",
            t(src, "averageValue").as_ref(),
        );
        out.insert("external".into(), Value::Object(r));
    }
    Value::Object(out)
}

/// A v1 MetricSpec as v2's.
fn spec_from_v1(m: &Value) -> Value {
    let mut out = Map::new();
    set(&mut out, "type", m.get("type"));
    let metric = |src: &Value, selector: &str| {
        let mut id = Map::new();
        set(&mut id, "name", src.get("metricName"));
        set(&mut id, "selector", src.get(selector));
        Value::Object(id)
    };
    let target = |ty: &str, pairs: &[(&str, Option<&Value>)]| {
        let mut t = Map::new();
        t.insert("type".into(), json!(ty));
        for (k, v) in pairs {
            set(&mut t, k, *v);
        }
        Value::Object(t)
    };
    for field in ["resource", "containerResource"] {
        if let Some(src) = m.get(field).filter(|v| !v.is_null()) {
            let utilization = src.get("targetAverageUtilization").filter(|v| !v.is_null());
            let ty = if utilization.is_some() {
                "Utilization"
            } else {
                "AverageValue"
            };
            let mut r = Map::new();
            set(&mut r, "name", src.get("name"));
            set(&mut r, "container", src.get("container"));
            r.insert(
                "target".into(),
                target(
                    ty,
                    &[
                        ("averageUtilization", utilization),
                        ("averageValue", src.get("targetAverageValue")),
                    ],
                ),
            );
            out.insert(field.into(), Value::Object(r));
        }
    }
    if let Some(src) = m.get("pods").filter(|v| !v.is_null()) {
        out.insert(
            "pods".into(),
            json!({"metric": metric(src, "selector"),
                "target": target("AverageValue", &[("averageValue", src.get("targetAverageValue"))])}),
        );
    }
    if let Some(src) = m.get("object").filter(|v| !v.is_null()) {
        let average = src.get("averageValue").filter(|v| !v.is_null());
        let ty = if average.is_some() {
            "AverageValue"
        } else {
            "Value"
        };
        let mut r = Map::new();
        set(&mut r, "describedObject", src.get("target"));
        r.insert("metric".into(), metric(src, "selector"));
        r.insert(
            "target".into(),
            target(
                ty,
                &[("value", src.get("targetValue")), ("averageValue", average)],
            ),
        );
        out.insert("object".into(), Value::Object(r));
    }
    if let Some(src) = m.get("external").filter(|v| !v.is_null()) {
        let value = src.get("targetValue").filter(|v| !v.is_null());
        let ty = if value.is_some() {
            "Value"
        } else {
            "AverageValue"
        };
        out.insert(
            "external".into(),
            json!({"metric": metric(src, "metricSelector"),
                "target": target(ty, &[("value", value), ("averageValue", src.get("targetAverageValue"))])}),
        );
    }
    Value::Object(out)
}

/// A v2 MetricStatus as v1's.
fn status_to_v1(m: &Value) -> Value {
    let mut out = Map::new();
    set(&mut out, "type", m.get("type"));
    let c = |src: &Value, f: &str| src.pointer(&format!("/current/{f}")).cloned();
    for field in ["resource", "containerResource"] {
        if let Some(src) = m.get(field).filter(|v| !v.is_null()) {
            let mut r = Map::new();
            set(&mut r, "name", src.get("name"));
            set(&mut r, "container", src.get("container"));
            set(
                &mut r,
                "currentAverageUtilization",
                c(src, "averageUtilization").as_ref(),
            );
            r.insert(
                "currentAverageValue".into(),
                quantity_or_zero(c(src, "averageValue").as_ref()),
            );
            out.insert(field.into(), Value::Object(r));
        }
    }
    if let Some(src) = m.get("pods").filter(|v| !v.is_null()) {
        let mut r = Map::new();
        set(&mut r, "metricName", src.pointer("/metric/name"));
        set(&mut r, "selector", src.pointer("/metric/selector"));
        r.insert(
            "currentAverageValue".into(),
            quantity_or_zero(c(src, "averageValue").as_ref()),
        );
        out.insert("pods".into(), Value::Object(r));
    }
    if let Some(src) = m.get("object").filter(|v| !v.is_null()) {
        let mut r = Map::new();
        set(&mut r, "target", src.get("describedObject"));
        set(&mut r, "metricName", src.pointer("/metric/name"));
        set(&mut r, "selector", src.pointer("/metric/selector"));
        r.insert(
            "currentValue".into(),
            quantity_or_zero(c(src, "value").as_ref()),
        );
        set(&mut r, "averageValue", c(src, "averageValue").as_ref());
        out.insert("object".into(), Value::Object(r));
    }
    if let Some(src) = m.get("external").filter(|v| !v.is_null()) {
        let mut r = Map::new();
        set(&mut r, "metricName", src.pointer("/metric/name"));
        set(&mut r, "metricSelector", src.pointer("/metric/selector"));
        r.insert(
            "currentValue".into(),
            quantity_or_zero(c(src, "value").as_ref()),
        );
        set(
            &mut r,
            "currentAverageValue",
            c(src, "averageValue").as_ref(),
        );
        out.insert("external".into(), Value::Object(r));
    }
    Value::Object(out)
}

/// A v1 MetricStatus as v2's.
fn status_from_v1(m: &Value) -> Value {
    let mut out = Map::new();
    set(&mut out, "type", m.get("type"));
    let metric = |src: &Value, selector: &str| {
        let mut id = Map::new();
        set(&mut id, "name", src.get("metricName"));
        set(&mut id, "selector", src.get(selector));
        Value::Object(id)
    };
    let current = |pairs: &[(&str, Option<&Value>)]| {
        let mut t = Map::new();
        for (k, v) in pairs {
            set(&mut t, k, *v);
        }
        Value::Object(t)
    };
    for field in ["resource", "containerResource"] {
        if let Some(src) = m.get(field).filter(|v| !v.is_null()) {
            let mut r = Map::new();
            set(&mut r, "name", src.get("name"));
            set(&mut r, "container", src.get("container"));
            r.insert(
                "current".into(),
                current(&[
                    (
                        "averageValue",
                        Some(&quantity_or_zero(src.get("currentAverageValue"))),
                    ),
                    ("averageUtilization", src.get("currentAverageUtilization")),
                ]),
            );
            out.insert(field.into(), Value::Object(r));
        }
    }
    if let Some(src) = m.get("pods").filter(|v| !v.is_null()) {
        out.insert(
            "pods".into(),
            json!({"metric": metric(src, "selector"),
                "current": current(&[("averageValue", Some(&quantity_or_zero(src.get("currentAverageValue"))))])}),
        );
    }
    if let Some(src) = m.get("object").filter(|v| !v.is_null()) {
        let mut r = Map::new();
        set(&mut r, "describedObject", src.get("target"));
        r.insert("metric".into(), metric(src, "selector"));
        r.insert(
            "current".into(),
            current(&[
                ("value", Some(&quantity_or_zero(src.get("currentValue")))),
                ("averageValue", src.get("averageValue")),
            ]),
        );
        out.insert("object".into(), Value::Object(r));
    }
    if let Some(src) = m.get("external").filter(|v| !v.is_null()) {
        out.insert(
            "external".into(),
            json!({"metric": metric(src, "metricSelector"),
            "current": current(&[
                ("value", Some(&quantity_or_zero(src.get("currentValue")))),
                ("averageValue", src.get("currentAverageValue")),
            ])}),
        );
    }
    Value::Object(out)
}

/// Go's JSON of the internal `HorizontalPodAutoscalerBehavior` (no JSON
/// tags: Go field names, in field order, nil pointers as null).
fn behavior_annotation(b: &Value) -> String {
    let rules = |r: Option<&Value>| -> String {
        let Some(r) = r.filter(|r| !r.is_null()) else {
            return "null".into();
        };
        let or_null = |v: Option<&Value>| {
            v.filter(|v| !v.is_null())
                .map_or_else(|| "null".to_string(), Value::to_string)
        };
        let policies = match r.get("policies").and_then(Value::as_array) {
            None => "null".to_string(),
            Some(list) => {
                let items: Vec<String> = list
                    .iter()
                    .map(|p| {
                        format!(
                            "{{\"Type\":{},\"Value\":{},\"PeriodSeconds\":{}}}",
                            p.get("type").cloned().unwrap_or(json!("")),
                            p.get("value").cloned().unwrap_or(json!(0)),
                            p.get("periodSeconds").cloned().unwrap_or(json!(0)),
                        )
                    })
                    .collect();
                format!("[{}]", items.join(","))
            }
        };
        format!(
            "{{\"StabilizationWindowSeconds\":{},\"SelectPolicy\":{},\"Policies\":{policies},\"Tolerance\":{}}}",
            or_null(r.get("stabilizationWindowSeconds")),
            or_null(r.get("selectPolicy")),
            or_null(r.get("tolerance")),
        )
    };
    format!(
        "{{\"ScaleUp\":{},\"ScaleDown\":{}}}",
        rules(b.get("scaleUp")),
        rules(b.get("scaleDown"))
    )
}

/// The v2 behavior from the annotation's internal-type JSON.
fn behavior_from_annotation(text: &str) -> Option<Value> {
    let parsed: Value = serde_json::from_str(text).ok()?;
    let rules = |r: Option<&Value>| -> Option<Value> {
        let r = r.filter(|r| r.is_object())?;
        let mut out = Map::new();
        set(
            &mut out,
            "stabilizationWindowSeconds",
            r.get("StabilizationWindowSeconds"),
        );
        set(&mut out, "selectPolicy", r.get("SelectPolicy"));
        if let Some(list) = r.get("Policies").and_then(Value::as_array) {
            let policies: Vec<Value> = list
                .iter()
                .map(|p| {
                    json!({"type": p.get("Type").cloned().unwrap_or(json!("")),
                        "value": p.get("Value").cloned().unwrap_or(json!(0)),
                        "periodSeconds": p.get("PeriodSeconds").cloned().unwrap_or(json!(0))})
                })
                .collect();
            out.insert("policies".into(), Value::Array(policies));
        }
        Some(Value::Object(out))
    };
    let mut b = Map::new();
    if let Some(up) = rules(parsed.get("ScaleUp")) {
        b.insert("scaleUp".into(), up);
    }
    if let Some(down) = rules(parsed.get("ScaleDown")) {
        b.insert("scaleDown".into(), down);
    }
    Some(Value::Object(b))
}

/// Stored (v2) → autoscaling/v1.
pub fn to_v1(obj: Value) -> Value {
    let Value::Object(mut obj) = obj else {
        return obj;
    };
    let spec = obj.remove("spec").unwrap_or(Value::Null);
    let status = obj.remove("status").unwrap_or(Value::Null);
    let metrics = spec
        .get("metrics")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut v1_spec = Map::new();
    set(&mut v1_spec, "scaleTargetRef", spec.get("scaleTargetRef"));
    set(&mut v1_spec, "minReplicas", spec.get("minReplicas"));
    v1_spec.insert(
        "maxReplicas".into(),
        spec.get("maxReplicas").cloned().unwrap_or(json!(0)),
    );
    if let Some(cpu) = metrics.iter().find(|m| is_cpu_resource(m)) {
        set(
            &mut v1_spec,
            "targetCPUUtilizationPercentage",
            cpu.pointer("/resource/target/averageUtilization"),
        );
    }
    let mut v1_status = Map::new();
    set(
        &mut v1_status,
        "observedGeneration",
        status.get("observedGeneration"),
    );
    set(&mut v1_status, "lastScaleTime", status.get("lastScaleTime"));
    for f in ["currentReplicas", "desiredReplicas"] {
        v1_status.insert(f.into(), status.get(f).cloned().unwrap_or(json!(0)));
    }
    let current = status
        .get("currentMetrics")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for m in current.iter().filter(|m| is_cpu_resource(m)) {
        set(
            &mut v1_status,
            "currentCPUUtilizationPercentage",
            m.pointer("/resource/current/averageUtilization"),
        );
    }
    let mut extra = Vec::new();
    let others: Vec<Value> = metrics
        .iter()
        .filter(|m| {
            !(is_cpu_resource(m)
                && m.pointer("/resource/target/averageUtilization")
                    .is_some_and(|u| !u.is_null()))
        })
        .map(spec_to_v1)
        .collect();
    if !others.is_empty() {
        extra.push((METRICS, Value::Array(others).to_string()));
    }
    if !current.is_empty() {
        let statuses: Vec<Value> = current.iter().map(status_to_v1).collect();
        extra.push((CURRENT_METRICS, Value::Array(statuses).to_string()));
    }
    if let Some(conditions) = status
        .get("conditions")
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty())
    {
        extra.push((CONDITIONS, Value::Array(conditions.clone()).to_string()));
    }
    if let Some(b) = spec.get("behavior").filter(|b| !b.is_null()) {
        extra.push((BEHAVIOR, behavior_annotation(b)));
    }
    let mut obj = Value::Object(obj);
    if !extra.is_empty() {
        let meta = crate::object::meta(&mut obj);
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if !annotations.is_object() {
            *annotations = json!({});
        }
        if let Some(a) = annotations.as_object_mut() {
            for (k, v) in extra {
                a.insert(k.into(), Value::String(v));
            }
        }
    }
    if let Some(map) = obj.as_object_mut() {
        map.insert("apiVersion".into(), json!("autoscaling/v1"));
        map.insert("spec".into(), Value::Object(v1_spec));
        map.insert("status".into(), Value::Object(v1_status));
    }
    obj
}

/// autoscaling/v1 → stored (v2). Annotations that do not parse are
/// dropped with the rest of the round-trip annotations.
pub fn from_v1(obj: Value) -> Value {
    let Value::Object(mut obj) = obj else {
        return obj;
    };
    let spec = obj.remove("spec").unwrap_or(Value::Null);
    let status = obj.remove("status");
    let mut taken = Map::new();
    if let Some(a) = obj
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        for key in [METRICS, CURRENT_METRICS, CONDITIONS, BEHAVIOR] {
            if let Some(v) = a.remove(key) {
                taken.insert(key.into(), v);
            }
        }
    }
    let annotation = |key: &str| -> Option<Value> {
        taken
            .get(key)
            .and_then(Value::as_str)
            .and_then(|s| serde_json::from_str::<Value>(s).ok())
    };
    let mut v2_spec = Map::new();
    set(&mut v2_spec, "scaleTargetRef", spec.get("scaleTargetRef"));
    set(&mut v2_spec, "minReplicas", spec.get("minReplicas"));
    v2_spec.insert(
        "maxReplicas".into(),
        spec.get("maxReplicas").cloned().unwrap_or(json!(0)),
    );
    let mut metrics: Vec<Value> = annotation(METRICS)
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(spec_from_v1)
        .collect();
    let cpu = spec
        .get("targetCPUUtilizationPercentage")
        .filter(|v| !v.is_null())
        .cloned();
    if let Some(cpu) = cpu {
        metrics.push(json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": cpu}}}));
    }
    if metrics.is_empty() {
        metrics.push(json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 80}}}));
    }
    v2_spec.insert("metrics".into(), Value::Array(metrics));
    if let Some(b) = taken
        .get(BEHAVIOR)
        .and_then(Value::as_str)
        .and_then(behavior_from_annotation)
    {
        v2_spec.insert("behavior".into(), b);
    }
    obj.insert("apiVersion".into(), json!("autoscaling/v2"));
    obj.insert("spec".into(), Value::Object(v2_spec));
    if let Some(status) = status.filter(|s| s.is_object()) {
        let mut v2_status = Map::new();
        set(
            &mut v2_status,
            "observedGeneration",
            status.get("observedGeneration"),
        );
        set(&mut v2_status, "lastScaleTime", status.get("lastScaleTime"));
        set(
            &mut v2_status,
            "currentReplicas",
            status.get("currentReplicas"),
        );
        v2_status.insert(
            "desiredReplicas".into(),
            status.get("desiredReplicas").cloned().unwrap_or(json!(0)),
        );
        let current = match annotation(CURRENT_METRICS).and_then(|v| v.as_array().cloned()) {
            Some(list) => Some(list.iter().map(status_from_v1).collect::<Vec<_>>()),
            None => status
                .get("currentCPUUtilizationPercentage")
                .filter(|v| !v.is_null())
                .map(|c| {
                    vec![json!({"type": "Resource", "resource": {"name": "cpu",
                        "current": {"averageUtilization": c}}})]
                }),
        };
        if let Some(current) = current {
            v2_status.insert("currentMetrics".into(), Value::Array(current));
        }
        if let Some(conditions) = annotation(CONDITIONS).filter(Value::is_array) {
            v2_status.insert("conditions".into(), conditions);
        }
        obj.insert("status".into(), Value::Object(v2_status));
    }
    Value::Object(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_only_fields_round_trip_through_v1() {
        let v2 = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "annotations": {"a": "b"}},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 2, "maxReplicas": 5,
                "metrics": [
                    {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1k"}}},
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60, "selectPolicy": "Max",
                    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}},
            "status": {"currentReplicas": 2, "desiredReplicas": 2,
                "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageUtilization": 12, "averageValue": "50m"}}}],
                "conditions": [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale"}]}});
        let v1 = to_v1(v2.clone());
        assert_eq!(v1["apiVersion"], "autoscaling/v1");
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 70);
        assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 12);
        let a = &v1["metadata"]["annotations"];
        assert_eq!(a["a"], "b");
        assert_eq!(
            a[METRICS],
            r#"[{"pods":{"metricName":"qps","targetAverageValue":"1k"},"type":"Pods"}]"#
        );
        assert_eq!(
            a[BEHAVIOR],
            r#"{"ScaleUp":null,"ScaleDown":{"StabilizationWindowSeconds":60,"SelectPolicy":"Max","Policies":[{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null}}"#
        );
        let back = from_v1(v1);
        assert_eq!(back["spec"], v2["spec"]);
        assert_eq!(back["metadata"]["annotations"], json!({"a": "b"}));
        assert_eq!(back["status"]["conditions"], v2["status"]["conditions"]);
        assert_eq!(
            back["status"]["currentMetrics"][0]["resource"]["current"],
            json!({"averageUtilization": 12, "averageValue": "50m"})
        );
    }

    #[test]
    fn a_v1_object_without_a_target_gets_cpu_80() {
        let v1 = json!({"apiVersion": "autoscaling/v1", "metadata": {"name": "x"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "x"}, "maxReplicas": 3}});
        let v2 = from_v1(v1);
        assert_eq!(
            v2["spec"]["metrics"][0]["resource"]["target"],
            json!({"type": "Utilization", "averageUtilization": 80})
        );
        assert!(v2.get("status").is_none());
    }
}
