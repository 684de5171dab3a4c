//! Scale: the deployments/scale and replicasets/scale view.

use k8s_openapi::api::autoscaling::v1::Scale;

use crate::catalog::{KindDef, Plain, Typed};

pub static KIND: KindDef = KindDef {
    group: "autoscaling",
    kind: "Scale",
    resource: None,
    selectable_fields: &[],
    strategy: &Plain,
    typed: &Typed::<Scale>::NEW,
};
