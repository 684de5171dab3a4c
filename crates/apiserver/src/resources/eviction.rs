//! Eviction: the body of pods/eviction.

use k8s_openapi::api::policy::v1::Eviction;

use crate::catalog::{KindDef, Plain, Typed};

pub static KIND: KindDef = KindDef {
    group: "policy",
    kind: "Eviction",
    resource: None,
    selectable_fields: &[],
    strategy: &Plain,
    typed: &Typed::<Eviction>::NEW,
};
