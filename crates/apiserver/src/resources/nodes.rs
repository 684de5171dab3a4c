//! Nodes: cluster-scoped, with status.

use k8s_openapi::api::core::v1::Node;

use super::{resource, Kind, Typed, NONE};

pub static KIND: Kind = Kind {
    group: "",
    kind: "Node",
    resource: Some(resource(
        "",
        "v1",
        "nodes",
        "node",
        "Node",
        false,
        &["no"],
        NONE,
        &["status"],
    )),
    selectable_fields: &["spec.unschedulable"],
    typed: &Typed::<Node>::NEW,
};
