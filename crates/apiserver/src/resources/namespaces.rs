//! Namespaces: cluster-scoped, DNS-label names, the kubernetes finalizer.

use k8s_openapi::api::core::v1::Namespace;

use super::{resource, Kind, Typed, NONE};

pub static KIND: Kind = Kind {
    group: "",
    kind: "Namespace",
    resource: Some(resource(
        "",
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        false,
        &["ns"],
        NONE,
        &["status"],
    )),
    selectable_fields: &["status.phase"],
    typed: &Typed::<Namespace>::NEW,
};
