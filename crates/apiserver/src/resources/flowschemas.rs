//! FlowSchemas (flowcontrol.apiserver.k8s.io/v1): cluster-scoped, with
//! status (upstream `registry/flowcontrol/flowschema`). Create starts with
//! an empty status; the mandatory `exempt` and `catch-all` schemas keep
//! their fixed specs (see `crate::bootstrap::flowcontrol`). Stored and served;
//! Skiff does no API priority and fairness yet.

use k8s_openapi::api::flowcontrol::v1::FlowSchema;
use serde_json::{json, Value};
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "flowcontrol.apiserver.k8s.io",
    kind: "FlowSchema",
    resource: Some(resource(
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "flowschemas",
        "flowschema",
        "FlowSchema",
        false,
        NONE,
        NONE,
        &["status"],
    )),
    selectable_fields: &[],
    strategy: &FlowSchemaStrategy,
    typed: &Typed::<FlowSchema>::NEW,
};

#[derive(Debug)]
struct FlowSchemaStrategy;

impl Strategy for FlowSchemaStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::flowcontrol::flow_schema(obj);
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        crate::object::set(obj, "status", json!({}));
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::flowcontrol::flow_schema(obj)
    }
}
