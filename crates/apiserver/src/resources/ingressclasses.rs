//! IngressClasses (networking.k8s.io/v1): cluster-scoped, no status
//! (upstream `registry/networking/ingressclass`). The controller is fixed
//! at creation; `ingressclass.kubernetes.io/is-default-class: "true"`
//! makes a class the one the DefaultIngressClass admission plugin gives to
//! new Ingresses.

use k8s_openapi::api::networking::v1::IngressClass;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "networking.k8s.io",
    kind: "IngressClass",
    resource: Some(resource(
        "networking.k8s.io",
        "v1",
        "ingressclasses",
        "ingressclass",
        "IngressClass",
        false,
        NONE,
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &IngressClassStrategy,
    typed: &Typed::<IngressClass>::NEW,
};

#[derive(Debug)]
struct IngressClassStrategy;

impl Strategy for IngressClassStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::networking::ingress_class(obj);
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::networking::ingress_class(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::networking::ingress_class_update(old, new)
    }
}
