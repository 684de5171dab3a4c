//! Scale: the deployments/scale and replicasets/scale view.

use k8s_openapi::api::autoscaling::v1::Scale;

use super::{Kind, Plain, Typed};

pub static KIND: Kind = Kind {
    group: "autoscaling",
    kind: "Scale",
    resource: None,
    selectable_fields: &[],
    strategy: &Plain,
    typed: &Typed::<Scale>::NEW,
};
