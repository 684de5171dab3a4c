//! ReplicationControllers (core/v1), with status and scale (upstream
//! `registry/core/replicationcontroller`): a new one starts with an empty
//! status; its selector, unlike a ReplicaSet's, may change.

use k8s_openapi::api::core::v1::ReplicationController;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, ALL};

pub static KIND: KindDef = KindDef {
    group: "",
    kind: "ReplicationController",
    resource: Some(resource(
        "",
        "v1",
        "replicationcontrollers",
        "replicationcontroller",
        "ReplicationController",
        true,
        &["rc"],
        ALL,
        &["status", "scale"],
    )),
    selectable_fields: &["status.replicas"],
    strategy: &ReplicationControllerStrategy,
    typed: &Typed::<ReplicationController>::NEW,
};

#[derive(Debug)]
struct ReplicationControllerStrategy;

impl Strategy for ReplicationControllerStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::replication_controller(obj);
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        super::workloads_status::reset(obj, "ReplicationController");
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::replication_controller(obj)
    }
}
