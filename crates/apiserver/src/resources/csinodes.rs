//! CSINodes (storage.k8s.io/v1): cluster-scoped, named after their node,
//! no status (upstream `registry/storage/csinode`); a listed driver's
//! entry may not change.

use k8s_openapi::api::storage::v1::CSINode;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "storage.k8s.io",
    kind: "CSINode",
    resource: Some(resource(
        "storage.k8s.io",
        "v1",
        "csinodes",
        "csinode",
        "CSINode",
        false,
        NONE,
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &CsiNodeStrategy,
    typed: &Typed::<CSINode>::NEW,
};

#[derive(Debug)]
struct CsiNodeStrategy;

impl Strategy for CsiNodeStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::csi::csi_node(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::csi::csi_node_update(old, new)
    }
}
