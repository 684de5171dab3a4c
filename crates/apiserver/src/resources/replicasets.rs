//! ReplicaSets, with status and scale.

use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, ALL};

pub static KIND: KindDef = KindDef {
    group: "apps",
    kind: "ReplicaSet",
    resource: Some(resource(
        "apps",
        "v1",
        "replicasets",
        "replicaset",
        "ReplicaSet",
        true,
        &["rs"],
        ALL,
        &["status", "scale"],
    )),
    selectable_fields: &[],
    strategy: &ReplicaSetStrategy,
    typed: &Typed::<ReplicaSet>::NEW,
};

#[derive(Debug)]
struct ReplicaSetStrategy;

impl Strategy for ReplicaSetStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::replica_set(obj);
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::replica_set(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        let mut errors = self.validate(new);
        errors.extend(skiff_api::validation::workload_update(old, new));
        errors
    }
    /// A status write checks the status alone (upstream's status
    /// strategy); the spec is the stored one.
    fn validate_status_update(&self, _old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::replica_set_status(new)
    }
}
