//! Endpoints.

use k8s_openapi::api::core::v1::Endpoints;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "",
    kind: "Endpoints",
    resource: Some(resource(
        "",
        "v1",
        "endpoints",
        "endpoints",
        "Endpoints",
        true,
        &["ep"],
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &EndpointsStrategy,
    typed: &Typed::<Endpoints>::NEW,
};

#[derive(Debug)]
struct EndpointsStrategy;

impl Strategy for EndpointsStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::endpoints::endpoints(obj)
    }
}
