//! Pods, with status, binding, eviction, log, exec, attach and
//! portforward subresources.

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, ALL};

pub static KIND: KindDef = KindDef {
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
        &[
            "status",
            "binding",
            "eviction",
            "log",
            "exec",
            "attach",
            "portforward",
        ],
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
    strategy: &PodStrategy,
    typed: &Typed::<Pod>::NEW,
};

#[derive(Debug)]
struct PodStrategy;

impl Strategy for PodStrategy {
    /// Every top-level field of the type but metadata is optional (see
    /// [`Strategy::status_reads_less`]).
    fn status_reads_less(&self) -> bool {
        true
    }
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::pod(obj);
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::pod(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::pod_update_all(old, new)
    }
}
