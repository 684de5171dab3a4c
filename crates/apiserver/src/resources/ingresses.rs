//! Ingresses (networking.k8s.io/v1), with status (upstream
//! `registry/networking/ingress`): create starts with an empty status; the
//! DefaultIngressClass admission plugin fills in `spec.ingressClassName`.

use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{json, Value};
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "networking.k8s.io",
    kind: "Ingress",
    resource: Some(resource(
        "networking.k8s.io",
        "v1",
        "ingresses",
        "ingress",
        "Ingress",
        true,
        &["ing"],
        NONE,
        &["status"],
    )),
    selectable_fields: &[],
    strategy: &IngressStrategy,
    typed: &Typed::<Ingress>::NEW,
};

#[derive(Debug)]
struct IngressStrategy;

impl Strategy for IngressStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        crate::object::set(obj, "status", json!({}));
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::networking::ingress(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::networking::ingress_update(old, new)
    }
}
