//! Endpoints.

use k8s_openapi::api::core::v1::Endpoints;

use super::{resource, Kind, Plain, Typed, NONE};

pub static KIND: Kind = Kind {
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
    strategy: &Plain,
    typed: &Typed::<Endpoints>::NEW,
};
