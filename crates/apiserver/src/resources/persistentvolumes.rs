//! PersistentVolumes: cluster-scoped, with status (upstream
//! `registry/core/persistentvolume`). Create resets the status to phase
//! Pending with a transition time; a status write that changes the phase
//! stamps a new `lastPhaseTransitionTime` unless the writer set one.

use k8s_openapi::api::core::v1::PersistentVolume;
use serde_json::{json, Value};
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "",
    kind: "PersistentVolume",
    resource: Some(resource(
        "",
        "v1",
        "persistentvolumes",
        "persistentvolume",
        "PersistentVolume",
        false,
        &["pv"],
        NONE,
        &["status"],
    )),
    selectable_fields: &[],
    strategy: &PersistentVolumeStrategy,
    typed: &Typed::<PersistentVolume>::NEW,
};

#[derive(Debug)]
struct PersistentVolumeStrategy;

impl Strategy for PersistentVolumeStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::drop_volume_attributes_class(obj);
        skiff_api::defaults::persistent_volume(obj);
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        crate::object::set(
            obj,
            "status",
            json!({"phase": "Pending", "lastPhaseTransitionTime": crate::object::now()}),
        );
    }
    fn prepare_for_status_update(&self, old: &Value, new: &mut Value) {
        let phase = |o: &Value| o.pointer("/status/phase").cloned();
        let stamp = |o: &Value| o.pointer("/status/lastPhaseTransitionTime").cloned();
        let Some(status) = new.get_mut("status").and_then(Value::as_object_mut) else {
            return;
        };
        let given = status
            .get("lastPhaseTransitionTime")
            .filter(|t| !t.is_null())
            .cloned();
        if phase(old) == status.get("phase").cloned() {
            if given.is_none() {
                if let Some(t) = stamp(old) {
                    status.insert("lastPhaseTransitionTime".into(), t);
                }
            }
        } else if given.is_none() || given == stamp(old) {
            status.insert(
                "lastPhaseTransitionTime".into(),
                json!(crate::object::now()),
            );
        }
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::persistent_volume(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::persistent_volume_update(old, new)
    }
}
