//! Deployments, with status and scale.

use k8s_openapi::api::apps::v1::Deployment;

use super::{resource, Kind, Typed, ALL};

pub static KIND: Kind = Kind {
    group: "apps",
    kind: "Deployment",
    resource: Some(resource(
        "apps",
        "v1",
        "deployments",
        "deployment",
        "Deployment",
        true,
        &["deploy"],
        ALL,
        &["status", "scale"],
    )),
    selectable_fields: &[],
    typed: &Typed::<Deployment>::NEW,
};
