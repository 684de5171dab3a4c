//! PersistentVolumeClaims, with status (upstream
//! `registry/core/persistentvolumeclaim`). Create resets the status to
//! phase Pending; the DefaultStorageClass admission plugin fills in the
//! class. No finalizer is added: upstream's StorageObjectInUseProtection
//! adds `kubernetes.io/pvc-protection`, which only its controller removes,
//! and Skiff has none yet.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use serde_json::{json, Value};
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "",
    kind: "PersistentVolumeClaim",
    resource: Some(resource(
        "",
        "v1",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        "PersistentVolumeClaim",
        true,
        &["pvc"],
        NONE,
        &["status"],
    )),
    selectable_fields: &[],
    strategy: &PersistentVolumeClaimStrategy,
    typed: &Typed::<PersistentVolumeClaim>::NEW,
};

#[derive(Debug)]
struct PersistentVolumeClaimStrategy;

impl Strategy for PersistentVolumeClaimStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::drop_volume_attributes_class(obj);
        skiff_api::defaults::persistent_volume_claim(obj);
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        crate::object::set(obj, "status", json!({"phase": "Pending"}));
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::persistent_volume_claim(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::persistent_volume_claim_update(old, new)
    }
}
