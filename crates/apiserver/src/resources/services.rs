//! Services (DNS-1035 names): defaults, validation (the ClusterIP may
//! not change once set); ClusterIPs and NodePorts are allocated on the
//! write path by `crate::allocators::services`.

use k8s_openapi::api::core::v1::Service;
use serde_json::Value;
use skiff_api::validation::FieldError;

use super::{resource, Kind, Strategy, Typed, ALL};

pub static KIND: Kind = Kind {
    group: "",
    kind: "Service",
    resource: Some(resource(
        "",
        "v1",
        "services",
        "service",
        "Service",
        true,
        &["svc"],
        ALL,
        &["status"],
    )),
    selectable_fields: &[],
    strategy: &ServiceStrategy,
    typed: &Typed::<Service>::NEW,
};

#[derive(Debug)]
struct ServiceStrategy;

impl Strategy for ServiceStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::service(obj);
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        // Upstream clears status: `status: {loadBalancer: {}}`.
        crate::object::set(obj, "status", serde_json::json!({"loadBalancer": {}}));
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::service(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::service_update(old, new)
    }
    fn name_errors(&self, name: &str) -> Vec<String> {
        skiff_api::validation::names::dns1035_label(name)
    }
}
