//! Services (DNS-1035 names).

use k8s_openapi::api::core::v1::Service;
use serde_json::Value;

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
    fn name_errors(&self, name: &str) -> Vec<String> {
        skiff_api::validation::names::dns1035_label(name)
    }
}
