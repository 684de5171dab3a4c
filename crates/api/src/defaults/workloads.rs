//! Defaults of the workload kinds beyond Deployment, ReplicaSet and Job, as
//! kube-apiserver 1.33 applies them (`SetDefaults_StatefulSet`,
//! `SetDefaults_DaemonSet`, `SetDefaults_ReplicationController`,
//! `SetDefaults_CronJob`, `SetDefaults_HorizontalPodAutoscaler` and the
//! generated defaulters that reach the pod templates and claim templates
//! inside them), plus the initial status each kind's strategy sets on
//! create. Works on wire-form JSON and fills only what is absent.

use serde_json::{json, Value};

use super::{default, object_at, object_entry_map, pod_spec, template};

/// The annotations autoscaling/v1 uses to carry v2-only fields; never
/// stored (upstream `DropRoundTripHorizontalPodAutoscalerAnnotations`).
pub const HPA_ROUND_TRIP_ANNOTATIONS: &[&str] = &[
    "autoscaling.alpha.kubernetes.io/metrics",
    "autoscaling.alpha.kubernetes.io/current-metrics",
    "autoscaling.alpha.kubernetes.io/conditions",
    "autoscaling.alpha.kubernetes.io/behavior",
];

/// StatefulSet defaults: OrderedReady pods, RollingUpdate with partition 0,
/// PVC retention Retain/Retain (StatefulSetAutoDeletePVC is on in 1.33),
/// one replica, ten revisions; the template's pod spec and the claim
/// templates get their own defaults.
pub fn stateful_set(obj: &mut Value) {
    if let Some(spec) = object_at(obj, "spec") {
        default(spec, "podManagementPolicy", json!("OrderedReady"));
        let strategy = object_entry_map(spec, "updateStrategy");
        if strategy
            .get("type")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            strategy.insert("type".into(), json!("RollingUpdate"));
            default(strategy, "rollingUpdate", json!({}));
        }
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            if let Some(rolling) = strategy
                .get_mut("rollingUpdate")
                .and_then(Value::as_object_mut)
            {
                default(rolling, "partition", json!(0));
                // MaxUnavailableStatefulSet is off in 1.33: dropped.
                rolling.remove("maxUnavailable");
            }
        }
        let retention = object_entry_map(spec, "persistentVolumeClaimRetentionPolicy");
        for field in ["whenDeleted", "whenScaled"] {
            if retention
                .get(field)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                retention.insert(field.into(), json!("Retain"));
            }
        }
        default(spec, "replicas", json!(1));
        default(spec, "revisionHistoryLimit", json!(10));
        if let Some(claims) = spec
            .get_mut("volumeClaimTemplates")
            .and_then(Value::as_array_mut)
        {
            for claim in claims.iter_mut().filter(|c| c.is_object()) {
                super::persistent_volume_claim(claim);
            }
        }
    }
    template(obj);
}

/// DaemonSet defaults: RollingUpdate with maxUnavailable 1 and maxSurge 0,
/// ten revisions.
pub fn daemon_set(obj: &mut Value) {
    if let Some(spec) = object_at(obj, "spec") {
        let strategy = object_entry_map(spec, "updateStrategy");
        if strategy
            .get("type")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            strategy.insert("type".into(), json!("RollingUpdate"));
        }
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            let rolling = object_entry_map(strategy, "rollingUpdate");
            default(rolling, "maxUnavailable", json!(1));
            default(rolling, "maxSurge", json!(0));
        }
        default(spec, "revisionHistoryLimit", json!(10));
    }
    template(obj);
}

/// ReplicationController defaults: the selector and the object's labels
/// from the template's labels when empty, one replica.
pub fn replication_controller(obj: &mut Value) {
    let labels = obj
        .pointer("/spec/template/metadata/labels")
        .filter(|l| l.is_object())
        .cloned();
    if let Some(labels) = labels {
        if let Some(spec) = object_at(obj, "spec") {
            if spec
                .get("selector")
                .and_then(Value::as_object)
                .is_none_or(|s| s.is_empty())
            {
                spec.insert("selector".into(), labels.clone());
            }
        }
        if let Some(meta) = object_at(obj, "metadata") {
            if meta
                .get("labels")
                .and_then(Value::as_object)
                .is_none_or(|l| l.is_empty())
            {
                meta.insert("labels".into(), labels);
            }
        }
    }
    if let Some(spec) = object_at(obj, "spec") {
        default(spec, "replicas", json!(1));
    }
    template(obj);
}

/// PodTemplate defaults: those of its pod spec.
pub fn pod_template(obj: &mut Value) {
    if let Some(spec) = obj.pointer_mut("/template/spec") {
        pod_spec(spec);
    }
}

/// CronJob defaults: Allow concurrency, not suspended, 3 successful and 1
/// failed job kept; the job template's pod spec gets the pod defaults
/// (restartPolicy Always when unset, which validation then refuses, as
/// upstream does). The job spec itself gets no Job defaults.
pub fn cron_job(obj: &mut Value) {
    if let Some(spec) = object_at(obj, "spec") {
        default(spec, "concurrencyPolicy", json!("Allow"));
        default(spec, "suspend", json!(false));
        default(spec, "successfulJobsHistoryLimit", json!(3));
        default(spec, "failedJobsHistoryLimit", json!(1));
    }
    if let Some(spec) = obj.pointer_mut("/spec/jobTemplate/spec/template/spec") {
        pod_spec(spec);
    }
}

/// autoscaling/v2 HorizontalPodAutoscaler defaults: minReplicas 1, a CPU
/// utilization target of 80% when no metric is given, and a behavior's
/// unset rules filled from upstream's scale-up and scale-down rules. The
/// alpha `tolerance` (HPAConfigurableTolerance, off in 1.33) and the v1
/// round-trip annotations are dropped.
pub fn horizontal_pod_autoscaler(obj: &mut Value) {
    if let Some(annotations) = obj
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        for a in HPA_ROUND_TRIP_ANNOTATIONS {
            annotations.remove(*a);
        }
    }
    let Some(spec) = object_at(obj, "spec") else {
        return;
    };
    default(spec, "minReplicas", json!(1));
    if spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
    let Some(behavior) = spec.get_mut("behavior").and_then(Value::as_object_mut) else {
        return;
    };
    let scale_up = json!({"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15},
    ]});
    let scale_down = json!({"selectPolicy": "Max", "policies": [
        {"type": "Percent", "value": 100, "periodSeconds": 15},
    ]});
    for (field, defaults) in [("scaleUp", scale_up), ("scaleDown", scale_down)] {
        let mut rules = defaults;
        if let (Some(given), Some(out)) = (
            behavior.get(field).and_then(Value::as_object),
            rules.as_object_mut(),
        ) {
            for (k, v) in given {
                if !v.is_null() && k != "tolerance" {
                    out.insert(k.clone(), v.clone());
                }
            }
        }
        behavior.insert(field.into(), rules);
    }
}

/// The status a new object of `kind` starts with (each strategy's
/// `PrepareForCreate` resets it), in the form its JSON encoding has with
/// every non-omitempty field at zero.
pub fn initial_status(kind: &str) -> Option<Value> {
    Some(match kind {
        "StatefulSet" => json!({"replicas": 0, "availableReplicas": 0}),
        "DaemonSet" => json!({"currentNumberScheduled": 0, "numberMisscheduled": 0,
            "desiredNumberScheduled": 0, "numberReady": 0}),
        "ReplicationController" => json!({"replicas": 0}),
        "CronJob" => json!({}),
        "HorizontalPodAutoscaler" => json!({"desiredReplicas": 0}),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stateful_set_defaults() {
        let mut s = json!({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "d"},
            "spec": {"accessModes": ["ReadWriteOnce"]}}],
            "template": {"spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}});
        stateful_set(&mut s);
        let spec = &s["spec"];
        assert_eq!(spec["podManagementPolicy"], "OrderedReady");
        assert_eq!(
            spec["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        );
        assert_eq!(
            spec["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
        );
        assert_eq!(spec["replicas"], 1);
        assert_eq!(spec["revisionHistoryLimit"], 10);
        assert_eq!(
            spec["volumeClaimTemplates"][0]["status"]["phase"],
            "Pending"
        );
        assert_eq!(
            spec["volumeClaimTemplates"][0]["spec"]["volumeMode"],
            "Filesystem"
        );
        assert_eq!(spec["template"]["spec"]["restartPolicy"], "Always");
        let mut on_delete = json!({"spec": {"updateStrategy": {"type": "OnDelete"}}});
        stateful_set(&mut on_delete);
        assert_eq!(
            on_delete["spec"]["updateStrategy"],
            json!({"type": "OnDelete"})
        );
    }

    #[test]
    fn daemon_set_and_controller_defaults() {
        let mut d = json!({"spec": {}});
        daemon_set(&mut d);
        assert_eq!(
            d["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        );
        let mut rc = json!({"metadata": {"name": "r"},
            "spec": {"template": {"metadata": {"labels": {"app": "a"}}, "spec": {}}}});
        replication_controller(&mut rc);
        assert_eq!(rc["spec"]["selector"], json!({"app": "a"}));
        assert_eq!(rc["metadata"]["labels"], json!({"app": "a"}));
        assert_eq!(rc["spec"]["replicas"], 1);
        let mut cj = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {}}}}}});
        cron_job(&mut cj);
        assert_eq!(cj["spec"]["concurrencyPolicy"], "Allow");
        assert_eq!(cj["spec"]["successfulJobsHistoryLimit"], 3);
        assert_eq!(
            cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"],
            "Always"
        );
        assert!(cj["spec"]["jobTemplate"]["spec"]
            .get("backoffLimit")
            .is_none());
    }

    #[test]
    fn hpa_defaults() {
        let mut h = json!({"metadata": {"annotations": {"autoscaling.alpha.kubernetes.io/metrics": "[]", "keep": "x"}},
            "spec": {"maxReplicas": 3, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}});
        horizontal_pod_autoscaler(&mut h);
        assert_eq!(h["metadata"]["annotations"], json!({"keep": "x"}));
        assert_eq!(h["spec"]["minReplicas"], 1);
        assert_eq!(
            h["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
        assert_eq!(
            h["spec"]["behavior"]["scaleDown"],
            json!({"stabilizationWindowSeconds": 60, "selectPolicy": "Max",
                "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]})
        );
        assert_eq!(
            h["spec"]["behavior"]["scaleUp"]["policies"][0],
            json!({"type": "Pods", "value": 4, "periodSeconds": 15})
        );
    }
}
