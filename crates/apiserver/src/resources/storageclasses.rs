//! StorageClasses (storage.k8s.io/v1): cluster-scoped, no status; the
//! provisioner, parameters, reclaim policy and binding mode are fixed at
//! creation (upstream `registry/storage/storageclass`).

use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "storage.k8s.io",
    kind: "StorageClass",
    resource: Some(resource(
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "storageclass",
        "StorageClass",
        false,
        &["sc"],
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &StorageClassStrategy,
    typed: &Typed::<StorageClass>::NEW,
};

#[derive(Debug)]
struct StorageClassStrategy;

impl Strategy for StorageClassStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::storage_class(obj);
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::storage_class(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::storage_class_update(old, new)
    }
}
