//! PriorityClasses (scheduling.k8s.io/v1, `pc`): cluster-scoped, value
//! and preemptionPolicy fixed at creation, the `system-` names reserved
//! (upstream `registry/scheduling/priorityclass`). The two system classes
//! are created at start ([`system_classes`]); the Priority admission
//! plugin resolves a pod's class and keeps one global default.

use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde_json::{json, Value};
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "scheduling.k8s.io",
    kind: "PriorityClass",
    resource: Some(resource(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "priorityclass",
        "PriorityClass",
        false,
        &["pc"],
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &PriorityClassStrategy,
    typed: &Typed::<PriorityClass>::NEW,
};

#[derive(Debug)]
struct PriorityClassStrategy;

impl Strategy for PriorityClassStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::policy::priority_class(obj);
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::priority_class(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::priority_class_update(old, new)
    }
}

/// The built-in classes, as upstream's bootstrap creates them.
pub fn system_classes() -> Vec<Value> {
    skiff_api::validation::SYSTEM_PRIORITY_CLASSES
        .iter()
        .map(|(name, value)| {
            let description = if *name == "system-node-critical" {
                "Used for system critical pods that must not be moved from their current node."
            } else {
                "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."
            };
            json!({
                "kind": "PriorityClass",
                "apiVersion": "scheduling.k8s.io/v1",
                "metadata": {
                    "name": name,
                    "uid": uuid::Uuid::new_v4().to_string(),
                    "creationTimestamp": crate::object::now(),
                    "generation": 1,
                },
                "value": value,
                "description": description,
                "preemptionPolicy": "PreemptLowerPriority",
            })
        })
        .collect()
}
