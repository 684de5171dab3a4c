//! ReplicaSets, with status and scale.

use k8s_openapi::api::apps::v1::ReplicaSet;

use super::{resource, Kind, Typed, ALL};

pub static KIND: Kind = Kind {
    group: "apps",
    kind: "ReplicaSet",
    resource: Some(resource(
        "apps",
        "v1",
        "replicasets",
        "replicaset",
        "ReplicaSet",
        true,
        &["rs"],
        ALL,
        &["status", "scale"],
    )),
    selectable_fields: &[],
    typed: &Typed::<ReplicaSet>::NEW,
};
