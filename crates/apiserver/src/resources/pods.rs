//! Pods, with status, binding and eviction subresources.

use k8s_openapi::api::core::v1::Pod;

use super::{resource, Kind, Typed, ALL};

pub static KIND: Kind = Kind {
    group: "",
    kind: "Pod",
    resource: Some(resource(
        "",
        "v1",
        "pods",
        "pod",
        "Pod",
        true,
        &["po"],
        ALL,
        &["status", "binding", "eviction"],
    )),
    selectable_fields: &[
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ],
    typed: &Typed::<Pod>::NEW,
};
