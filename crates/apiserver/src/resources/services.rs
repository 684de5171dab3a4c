//! Services (DNS-1035 names).

use k8s_openapi::api::core::v1::Service;

use super::{resource, Kind, Typed, ALL};

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
    typed: &Typed::<Service>::NEW,
};
