//! StatefulSets (apps/v1), with status and scale (upstream
//! `registry/apps/statefulset`): a new one starts with a zero status; an
//! update may change only replicas, ordinals, template, updateStrategy,
//! revisionHistoryLimit, persistentVolumeClaimRetentionPolicy and
//! minReadySeconds. No controller runs them yet.

use k8s_openapi::api::apps::v1::StatefulSet;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, ALL};

pub static KIND: KindDef = KindDef {
    group: "apps",
    kind: "StatefulSet",
    resource: Some(resource(
        "apps",
        "v1",
        "statefulsets",
        "statefulset",
        "StatefulSet",
        true,
        &["sts"],
        ALL,
        &["status", "scale"],
    )),
    selectable_fields: &[],
    strategy: &StatefulSetStrategy,
    typed: &Typed::<StatefulSet>::NEW,
};

#[derive(Debug)]
struct StatefulSetStrategy;

impl Strategy for StatefulSetStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::stateful_set(obj);
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        super::workloads_status::reset(obj, "StatefulSet");
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::stateful_set(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::stateful_set_update(old, new)
    }
}
