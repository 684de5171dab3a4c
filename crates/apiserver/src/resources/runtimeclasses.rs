//! RuntimeClasses (node.k8s.io/v1): cluster-scoped, no status (upstream
//! `registry/node/runtimeclass`); the handler is a DNS label fixed at
//! creation.

use k8s_openapi::api::node::v1::RuntimeClass;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "node.k8s.io",
    kind: "RuntimeClass",
    resource: Some(resource(
        "node.k8s.io",
        "v1",
        "runtimeclasses",
        "runtimeclass",
        "RuntimeClass",
        false,
        NONE,
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &RuntimeClassStrategy,
    typed: &Typed::<RuntimeClass>::NEW,
};

#[derive(Debug)]
struct RuntimeClassStrategy;

impl Strategy for RuntimeClassStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::node::runtime_class(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::node::runtime_class_update(old, new)
    }
}
