//! A ReplicaSet's (or ReplicationController's) status from its pods, as
//! upstream's `calculateStatus`: replicas (active pods it owns),
//! fullyLabeledReplicas (those carrying every template label),
//! readyReplicas, availableReplicas (ready for minReadySeconds),
//! observedGeneration, and the `ReplicaFailure` condition while creates or
//! deletes are refused.
//!
//! Pure: the status as JSON in the shape both kinds share; no I/O.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Value};

use crate::workload::pods;

/// Why managing the replicas failed, for the `ReplicaFailure` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// `FailedCreate` or `FailedDelete`.
    pub reason: &'static str,
    /// The API's error message.
    pub message: String,
}

/// The status for `owned` pods. `current` is the status now (its
/// conditions are kept, the `ReplicaFailure` one set or cleared).
pub fn compute(
    owned: &[Arc<Pod>],
    template_labels: &BTreeMap<String, String>,
    min_ready_seconds: i32,
    generation: Option<i64>,
    current: &Value,
    failure: Option<&Failure>,
    now: Timestamp,
) -> Value {
    let fully_labeled = owned
        .iter()
        .filter(|p| {
            let labels = p.metadata.labels.as_ref();
            template_labels
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        })
        .count();
    let ready = owned.iter().filter(|p| pods::is_ready(p)).count();
    let available = owned
        .iter()
        .filter(|p| pods::is_available(p, min_ready_seconds, now))
        .count();
    let mut conditions: Vec<Value> = current
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let has_failure = conditions.iter().any(|c| c["type"] == "ReplicaFailure");
    match failure {
        Some(f) if !has_failure => conditions.push(json!({
            "type": "ReplicaFailure",
            "status": "True",
            "reason": f.reason,
            "message": f.message,
            "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        })),
        Some(_) => {}
        None => conditions.retain(|c| c["type"] != "ReplicaFailure"),
    }
    // Zero counts are left out, as upstream's omitempty fields.
    let count = |n: usize| if n == 0 { Value::Null } else { json!(n) };
    json!({
        "replicas": owned.len(),
        "fullyLabeledReplicas": count(fully_labeled),
        "readyReplicas": count(ready),
        "availableReplicas": count(available),
        "observedGeneration": generation,
        "conditions": if conditions.is_empty() { Value::Null } else { json!(conditions) },
    })
}

/// Whether `desired` differs from `current` in any field it sets (a null
/// in `desired` matches an absent field).
pub fn differs(desired: &Value, current: &Value) -> bool {
    let Some(fields) = desired.as_object() else {
        return true;
    };
    fields.iter().any(|(k, v)| {
        let now = current.get(k).unwrap_or(&Value::Null);
        match (v, now) {
            (Value::Null, Value::Null) => false,
            (Value::Number(a), Value::Number(b)) => a.as_i64() != b.as_i64(),
            (a, b) => a != b,
        }
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    fn pod(labels: &[(&str, &str)], ready_secs_ago: Option<u64>, now: Timestamp) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            status: Some(PodStatus {
                conditions: ready_secs_ago.map(|ago| {
                    vec![PodCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        last_transition_time: Some(Time(now - Duration::from_secs(ago))),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    #[test]
    fn counts_and_the_failure_condition() {
        let now = Timestamp::now();
        let template: BTreeMap<String, String> = [
            ("app".to_string(), "web".to_string()),
            ("tier".to_string(), "fe".to_string()),
        ]
        .into();
        let owned = vec![
            pod(&[("app", "web"), ("tier", "fe")], Some(100), now),
            pod(&[("app", "web")], Some(2), now),
            pod(&[("app", "web"), ("tier", "fe")], None, now),
        ];
        let failure = Failure {
            reason: "FailedCreate",
            message: "exceeded quota".into(),
        };
        let status = compute(
            &owned,
            &template,
            10,
            Some(4),
            &json!({}),
            Some(&failure),
            now,
        );
        assert_eq!(status["replicas"], 3);
        assert_eq!(status["fullyLabeledReplicas"], 2);
        assert_eq!(status["readyReplicas"], 2);
        assert_eq!(status["availableReplicas"], 1);
        assert_eq!(status["observedGeneration"], 4);
        assert_eq!(status["conditions"][0]["reason"], "FailedCreate");
        // Kept while failing, cleared once managing succeeds.
        let again = compute(&owned, &template, 10, Some(4), &status, Some(&failure), now);
        assert_eq!(again["conditions"].as_array().unwrap().len(), 1);
        assert!(!differs(&again, &status));
        let cleared = compute(&owned, &template, 10, Some(4), &status, None, now);
        assert!(cleared["conditions"].is_null());
        assert!(differs(&cleared, &status));
        // Nothing ready: the counts are left out.
        let empty = compute(&[], &template, 0, Some(1), &json!({}), None, now);
        assert_eq!(empty["replicas"], 0);
        assert!(empty["readyReplicas"].is_null());
        assert!(!differs(
            &empty,
            &json!({"replicas": 0, "observedGeneration": 1})
        ));
    }
}
