//! Row cells of ReplicationController, PodTemplate, ControllerRevision,
//! HorizontalPodAutoscaler and ComponentStatus, following upstream
//! `printReplicationController`, `printPodTemplate`,
//! `printControllerRevision`, `printHorizontalPodAutoscaler` (with
//! `formatHPAMetrics`) and `printComponentStatus` in
//! `pkg/printers/internalversion` (1.33). Their columns are in
//! `columns.rs`. An autoscaling/v1 HPA (served from v2 storage) prints
//! its CPU target as the v2 form would.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::util::{
    age, arr_at, container_cells, format_labels, get, int_at, int_opt, name, str_at,
};

type Now = DateTime<Utc>;

pub(super) fn replication_controller(obj: &Value, now: Now) -> Vec<Value> {
    let (names, images) = container_cells(get(obj, &["spec", "template", "spec"]));
    vec![
        json!(name(obj)),
        json!(int_opt(obj, &["spec", "replicas"]).unwrap_or(1)),
        json!(int_at(obj, &["status", "replicas"])),
        json!(int_at(obj, &["status", "readyReplicas"])),
        json!(age(obj, now)),
        json!(names),
        json!(images),
        json!(format_labels(get(obj, &["spec", "selector"]))),
    ]
}

pub(super) fn pod_template(obj: &Value, _now: Now) -> Vec<Value> {
    let (names, images) = container_cells(get(obj, &["template", "spec"]));
    vec![
        json!(name(obj)),
        json!(names),
        json!(images),
        json!(format_labels(get(obj, &["template", "metadata", "labels"]))),
    ]
}

/// `metav1.GetControllerOf` shown as `kind.group/name` in lower case.
pub(super) fn controller_revision(obj: &Value, now: Now) -> Vec<Value> {
    let controller = arr_at(obj, &["metadata", "ownerReferences"])
        .iter()
        .find(|o| get(o, &["controller"]).and_then(Value::as_bool) == Some(true))
        .map_or_else(
            || "<none>".to_string(),
            |o| {
                let api_version = str_at(o, &["apiVersion"]);
                let group = match api_version.split_once('/') {
                    Some((g, _)) => g,
                    None => "",
                };
                let kind = str_at(o, &["kind"]);
                let group_kind = if group.is_empty() {
                    kind.to_string()
                } else {
                    format!("{kind}.{group}")
                };
                if group_kind.is_empty() {
                    str_at(o, &["name"]).to_string()
                } else {
                    format!("{}/{}", group_kind.to_lowercase(), str_at(o, &["name"]))
                }
            },
        );
    vec![
        json!(name(obj)),
        json!(controller),
        json!(int_at(obj, &["revision"])),
        json!(age(obj, now)),
    ]
}

pub(super) fn component_status(obj: &Value, _now: Now) -> Vec<Value> {
    let mut status = "Unknown";
    let mut message = "";
    let mut error = "";
    if let Some(c) = arr_at(obj, &["conditions"])
        .iter()
        .find(|c| str_at(c, &["type"]) == "Healthy")
    {
        status = if str_at(c, &["status"]) == "True" {
            "Healthy"
        } else {
            "Unhealthy"
        };
        message = str_at(c, &["message"]);
        error = str_at(c, &["error"]);
    }
    vec![
        json!(name(obj)),
        json!(status),
        json!(message),
        json!(error),
    ]
}

pub(super) fn horizontal_pod_autoscaler(obj: &Value, now: Now) -> Vec<Value> {
    let reference = format!(
        "{}/{}",
        str_at(obj, &["spec", "scaleTargetRef", "kind"]),
        str_at(obj, &["spec", "scaleTargetRef", "name"])
    );
    let (specs, statuses) = metrics_of(obj);
    let min = match int_opt(obj, &["spec", "minReplicas"]) {
        Some(m) => m.to_string(),
        None => "<unset>".to_string(),
    };
    vec![
        json!(name(obj)),
        json!(reference),
        json!(format_hpa_metrics(&specs, &statuses)),
        json!(min),
        json!(int_at(obj, &["spec", "maxReplicas"])),
        json!(int_at(obj, &["status", "currentReplicas"])),
        json!(age(obj, now)),
    ]
}

/// The v2 metric specs and statuses of an HPA in either served form. An
/// autoscaling/v1 one keeps its other metrics in upstream's annotations,
/// in v1's types; for printing, v1's fields are mapped onto v2's.
fn metrics_of(obj: &Value) -> (Vec<Value>, Vec<Value>) {
    if str_at(obj, &["apiVersion"]) != "autoscaling/v1" {
        return (
            arr_at(obj, &["spec", "metrics"]).to_vec(),
            arr_at(obj, &["status", "currentMetrics"]).to_vec(),
        );
    }
    let annotation = |key: &str| -> Vec<Value> {
        get(obj, &["metadata", "annotations", key])
            .and_then(Value::as_str)
            .and_then(|s| serde_json::from_str::<Value>(s).ok())
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
    };
    let mut specs: Vec<Value> = annotation("autoscaling.alpha.kubernetes.io/metrics")
        .iter()
        .map(|m| v1_metric(m, "target"))
        .collect();
    if let Some(target) = int_opt(obj, &["spec", "targetCPUUtilizationPercentage"]) {
        specs.push(json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": target}}}));
    }
    if specs.is_empty() {
        specs.push(json!({"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 80}}}));
    }
    let mut statuses: Vec<Value> = annotation("autoscaling.alpha.kubernetes.io/current-metrics")
        .iter()
        .map(|m| v1_metric(m, "current"))
        .collect();
    if statuses.is_empty() {
        if let Some(c) = int_opt(obj, &["status", "currentCPUUtilizationPercentage"]) {
            statuses.push(json!({"type": "Resource", "resource": {"name": "cpu",
                "current": {"averageUtilization": c}}}));
        }
    }
    (specs, statuses)
}

/// A v1 MetricSpec (`side` "target") or MetricStatus ("current") with
/// its values where v2 has them, as far as printing reads them.
fn v1_metric(m: &Value, side: &str) -> Value {
    let field = |src: &Value, name: &str| get(src, &[name]).cloned().unwrap_or(Value::Null);
    let mut out = serde_json::Map::new();
    out.insert("type".into(), json!(str_at(m, &["type"])));
    for source in ["resource", "containerResource"] {
        if let Some(src) = get(m, &[source]) {
            out.insert(
                source.into(),
                json!({"name": str_at(src, &["name"]), side: {
                    "averageUtilization": field(src, &format!("{side}AverageUtilization")),
                    "averageValue": field(src, &format!("{side}AverageValue")),
                }}),
            );
        }
    }
    if let Some(src) = get(m, &["pods"]) {
        out.insert(
            "pods".into(),
            json!({side: {"averageValue": field(src, &format!("{side}AverageValue"))}}),
        );
    }
    if let Some(src) = get(m, &["object"]) {
        out.insert(
            "object".into(),
            json!({side: {
                "value": field(src, &format!("{side}Value")),
                "averageValue": field(src, "averageValue"),
            }}),
        );
    }
    if let Some(src) = get(m, &["external"]) {
        out.insert(
            "external".into(),
            json!({side: {
                "value": field(src, &format!("{side}Value")),
                "averageValue": field(src, &format!("{side}AverageValue")),
            }}),
        );
    }
    Value::Object(out)
}

/// A quantity's `String()`: as stored, `0` for none.
fn quantity(v: Option<&Value>) -> String {
    match v.and_then(Value::as_str) {
        Some(q) if !q.is_empty() => q.to_string(),
        _ => "0".to_string(),
    }
}

/// Upstream `formatHPAMetrics`: at most two metrics, then `+ N more...`.
fn format_hpa_metrics(specs: &[Value], statuses: &[Value]) -> String {
    if specs.is_empty() {
        return "<none>".to_string();
    }
    let status = |i: usize, source: &str| statuses.get(i).and_then(|s| get(s, &[source]));
    let mut list = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let text = match str_at(spec, &["type"]) {
            ty @ ("External" | "Object") => {
                let source = if ty == "External" {
                    "external"
                } else {
                    "object"
                };
                let st = status(i, source);
                match get(spec, &[source, "target", "averageValue"]) {
                    Some(avg) => {
                        let current = st
                            .and_then(|s| get(s, &["current", "averageValue"]))
                            .map_or_else(|| "<unknown>".to_string(), |q| quantity(Some(q)));
                        format!("{current}/{} (avg)", quantity(Some(avg)))
                    }
                    None => {
                        let current = st.map_or_else(
                            || "<unknown>".to_string(),
                            |s| quantity(get(s, &["current", "value"])),
                        );
                        format!(
                            "{current}/{}",
                            quantity(get(spec, &[source, "target", "value"]))
                        )
                    }
                }
            }
            "Pods" => {
                let current = status(i, "pods").map_or_else(
                    || "<unknown>".to_string(),
                    |s| quantity(get(s, &["current", "averageValue"])),
                );
                format!(
                    "{current}/{}",
                    quantity(get(spec, &["pods", "target", "averageValue"]))
                )
            }
            ty @ ("Resource" | "ContainerResource") => {
                let source = if ty == "Resource" {
                    "resource"
                } else {
                    "containerResource"
                };
                let resource = str_at(spec, &[source, "name"]);
                let st = status(i, source);
                match get(spec, &[source, "target", "averageValue"]) {
                    Some(avg) => {
                        let current = st.map_or_else(
                            || "<unknown>".to_string(),
                            |s| quantity(get(s, &["current", "averageValue"])),
                        );
                        format!("{resource}: {current}/{}", quantity(Some(avg)))
                    }
                    None => {
                        let current = st
                            .and_then(|s| int_opt(s, &["current", "averageUtilization"]))
                            .map_or_else(|| "<unknown>".to_string(), |u| format!("{u}%"));
                        let target = int_opt(spec, &[source, "target", "averageUtilization"])
                            .map_or_else(|| "<auto>".to_string(), |u| format!("{u}%"));
                        format!("{resource}: {current}/{target}")
                    }
                }
            }
            _ => "<unknown type>".to_string(),
        };
        list.push(text);
    }
    let count = list.len();
    if count > 2 {
        list.truncate(2);
        return format!("{} + {} more...", list.join(", "), count - 2);
    }
    list.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> Now {
        Utc.with_ymd_and_hms(2024, 1, 2, 0, 0, 0).unwrap()
    }

    fn meta(name: &str) -> Value {
        json!({"name": name, "creationTimestamp": "2024-01-01T00:00:00Z"})
    }

    #[test]
    fn rc_template_revision_and_status_rows() {
        let rc = json!({"metadata": meta("rc"), "spec": {"replicas": 3, "selector": {"b": "2", "a": "1"},
            "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
            "status": {"replicas": 2, "readyReplicas": 1}});
        assert_eq!(
            replication_controller(&rc, now()),
            vec![
                json!("rc"),
                json!(3),
                json!(2),
                json!(1),
                json!("24h"),
                json!("c"),
                json!("nginx"),
                json!("a=1,b=2")
            ]
        );
        let pt = json!({"metadata": meta("pt"), "template": {"metadata": {"labels": {"app": "x"}},
            "spec": {"containers": [{"name": "a", "image": "i1"}, {"name": "b", "image": "i2"}]}}});
        assert_eq!(
            pod_template(&pt, now()),
            vec![json!("pt"), json!("a,b"), json!("i1,i2"), json!("app=x")]
        );
        let mut cr = json!({"metadata": meta("web-1"), "revision": 2});
        cr["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "StatefulSet",
            "name": "web", "uid": "u", "controller": true}]);
        assert_eq!(
            controller_revision(&cr, now()),
            vec![
                json!("web-1"),
                json!("statefulset.apps/web"),
                json!(2),
                json!("24h")
            ]
        );
        let cs = json!({"metadata": {"name": "etcd-0"}, "conditions": [
            {"type": "Healthy", "status": "True", "message": "ok"}]});
        assert_eq!(
            component_status(&cs, now()),
            vec![json!("etcd-0"), json!("Healthy"), json!("ok"), json!("")]
        );
    }

    #[test]
    fn hpa_rows() {
        let hpa = json!({"metadata": meta("web"), "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "minReplicas": 2, "maxReplicas": 5, "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
                {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1k"}}},
                {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}}]},
            "status": {"currentReplicas": 2, "currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 12}}}]}});
        assert_eq!(
            horizontal_pod_autoscaler(&hpa, now()),
            vec![
                json!("web"),
                json!("Deployment/web"),
                json!("cpu: 12%/80%, <unknown>/1k + 1 more..."),
                json!("2"),
                json!(5),
                json!(2),
                json!("24h")
            ]
        );
        let v1 = json!({"apiVersion": "autoscaling/v1", "metadata": meta("web"),
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5,
                "targetCPUUtilizationPercentage": 50}});
        assert_eq!(
            horizontal_pod_autoscaler(&v1, now())[2..4],
            [json!("cpu: <unknown>/50%"), json!("<unset>")]
        );
        let mut with_pods = v1.clone();
        with_pods["metadata"]["annotations"] = json!({"autoscaling.alpha.kubernetes.io/metrics":
            r#"[{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"1k"}}]"#});
        assert_eq!(
            horizontal_pod_autoscaler(&with_pods, now())[2],
            json!("<unknown>/1k, cpu: <unknown>/50%")
        );
    }
}
