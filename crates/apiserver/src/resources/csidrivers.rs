//! CSIDrivers (storage.k8s.io/v1): cluster-scoped, no status (upstream
//! `registry/storage/csidriver`): defaulted as upstream, attachRequired and
//! the lifecycle modes fixed at creation.

use k8s_openapi::api::storage::v1::CSIDriver;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "storage.k8s.io",
    kind: "CSIDriver",
    resource: Some(resource(
        "storage.k8s.io",
        "v1",
        "csidrivers",
        "csidriver",
        "CSIDriver",
        false,
        NONE,
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &CsiDriverStrategy,
    typed: &Typed::<CSIDriver>::NEW,
};

#[derive(Debug)]
struct CsiDriverStrategy;

impl Strategy for CsiDriverStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::csi::csi_driver(obj);
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::csi::csi_driver(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::csi::csi_driver_update(old, new)
    }
}
