//! Eviction: the body of pods/eviction.

use k8s_openapi::api::policy::v1::Eviction;

use super::{Kind, Typed};

pub static KIND: Kind = Kind {
    group: "policy",
    kind: "Eviction",
    resource: None,
    selectable_fields: &[],
    typed: &Typed::<Eviction>::NEW,
};
