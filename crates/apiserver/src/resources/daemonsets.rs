//! DaemonSets (apps/v1), with status (upstream `registry/apps/daemonset`):
//! a new one starts with a zero status; the selector is immutable. No
//! controller runs them yet.

use k8s_openapi::api::apps::v1::DaemonSet;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, ALL};

pub static KIND: KindDef = KindDef {
    group: "apps",
    kind: "DaemonSet",
    resource: Some(resource(
        "apps",
        "v1",
        "daemonsets",
        "daemonset",
        "DaemonSet",
        true,
        &["ds"],
        ALL,
        &["status"],
    )),
    selectable_fields: &[],
    strategy: &DaemonSetStrategy,
    typed: &Typed::<DaemonSet>::NEW,
};

#[derive(Debug)]
struct DaemonSetStrategy;

impl Strategy for DaemonSetStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::daemon_set(obj);
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        super::workloads_status::reset(obj, "DaemonSet");
        set_template_generation(obj, 1);
    }
    /// Upstream keeps spec.templateGeneration (carried by apps/v1 in an
    /// annotation) and bumps it when the pod template changes.
    fn prepare_for_update(&self, old: &Value, new: &mut Value) {
        let before = old
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(TEMPLATE_GENERATION))
            .and_then(Value::as_str)
            .and_then(|g| g.parse::<i64>().ok())
            .unwrap_or(0);
        let changed = old.pointer("/spec/template") != new.pointer("/spec/template");
        set_template_generation(new, if changed { before + 1 } else { before });
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::daemon_set(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::daemon_set_update(old, new)
    }
}

/// The annotation apps/v1 DaemonSets carry the internal
/// `spec.templateGeneration` in.
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

fn set_template_generation(obj: &mut Value, generation: i64) {
    let meta = crate::object::meta(obj);
    let annotations = meta
        .entry("annotations")
        .or_insert_with(|| Value::Object(Default::default()));
    if !annotations.is_object() {
        *annotations = Value::Object(Default::default());
    }
    if let Some(a) = annotations.as_object_mut() {
        if generation > 0 {
            a.insert(
                TEMPLATE_GENERATION.into(),
                Value::from(generation.to_string()),
            );
        } else {
            a.remove(TEMPLATE_GENERATION);
        }
    }
}
