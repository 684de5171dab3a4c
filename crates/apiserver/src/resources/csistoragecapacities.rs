//! CSIStorageCapacities (storage.k8s.io/v1): namespaced, no status
//! (upstream `registry/storage/csistoragecapacity`); the topology and class
//! are fixed at creation.

use k8s_openapi::api::storage::v1::CSIStorageCapacity;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "storage.k8s.io",
    kind: "CSIStorageCapacity",
    resource: Some(resource(
        "storage.k8s.io",
        "v1",
        "csistoragecapacities",
        "csistoragecapacity",
        "CSIStorageCapacity",
        true,
        NONE,
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &CsiStorageCapacityStrategy,
    typed: &Typed::<CSIStorageCapacity>::NEW,
};

#[derive(Debug)]
struct CsiStorageCapacityStrategy;

impl Strategy for CsiStorageCapacityStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::csi::csi_storage_capacity(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::csi::csi_storage_capacity_update(old, new)
    }
}
