//! EndpointSlices (discovery.k8s.io/v1), no status (upstream
//! `registry/discovery/endpointslice`): port names and protocols are
//! defaulted; the address type is fixed at creation.

use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "discovery.k8s.io",
    kind: "EndpointSlice",
    resource: Some(resource(
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "endpointslice",
        "EndpointSlice",
        true,
        NONE,
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &EndpointSliceStrategy,
    typed: &Typed::<EndpointSlice>::NEW,
};

#[derive(Debug)]
struct EndpointSliceStrategy;

impl Strategy for EndpointSliceStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::networking::endpoint_slice(obj);
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::discovery::endpoint_slice(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::discovery::endpoint_slice_update(old, new)
    }
}
