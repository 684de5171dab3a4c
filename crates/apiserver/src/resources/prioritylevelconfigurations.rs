//! PriorityLevelConfigurations (flowcontrol.apiserver.k8s.io/v1):
//! cluster-scoped, with status (upstream
//! `registry/flowcontrol/prioritylevelconfiguration`). Limited levels get
//! upstream's shares and queuing defaults; the mandatory `exempt` and
//! `catch-all` levels keep their fixed specs (exempt's `spec.exempt`
//! excepted). Stored and served, not enforced.

use k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration;
use serde_json::{json, Value};
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "flowcontrol.apiserver.k8s.io",
    kind: "PriorityLevelConfiguration",
    resource: Some(resource(
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "prioritylevelconfigurations",
        "prioritylevelconfiguration",
        "PriorityLevelConfiguration",
        false,
        NONE,
        NONE,
        &["status"],
    )),
    selectable_fields: &[],
    strategy: &PriorityLevelStrategy,
    typed: &Typed::<PriorityLevelConfiguration>::NEW,
};

#[derive(Debug)]
struct PriorityLevelStrategy;

impl Strategy for PriorityLevelStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::flowcontrol::priority_level_configuration(obj);
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        crate::object::set(obj, "status", json!({}));
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::flowcontrol::priority_level_configuration(obj)
    }
}
