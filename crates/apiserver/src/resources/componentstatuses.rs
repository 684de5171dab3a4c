//! ComponentStatuses (core/v1, deprecated since 1.19 but still answered):
//! read-only objects made on each request, as upstream's
//! `registry/core/componentstatus` probes each control-plane component.
//! Skiff's components are judged by what it can see: `etcd-0` is the
//! store answering, `scheduler` and `controller-manager` are the leader
//! Leases in kube-system renewed within their duration. Every answer
//! carries upstream's deprecation warning; writes are 405. Serving them is
//! `crate::handlers::componentstatuses`.

use k8s_openapi::api::core::v1::ComponentStatus;

use crate::catalog::{resource, KindDef, Plain, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "",
    kind: "ComponentStatus",
    resource: Some(resource(
        "",
        "v1",
        "componentstatuses",
        "componentstatus",
        "ComponentStatus",
        false,
        &["cs"],
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &Plain,
    typed: &Typed::<ComponentStatus>::NEW,
};
