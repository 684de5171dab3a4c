//! Leases (leader election, node heartbeats).

use k8s_openapi::api::coordination::v1::Lease;

use super::{resource, Kind, Plain, Typed, NONE};

pub static KIND: Kind = Kind {
    group: "coordination.k8s.io",
    kind: "Lease",
    resource: Some(resource(
        "coordination.k8s.io",
        "v1",
        "leases",
        "lease",
        "Lease",
        true,
        NONE,
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &Plain,
    typed: &Typed::<Lease>::NEW,
};
