//! Leases (leader election, node heartbeats).

use k8s_openapi::api::coordination::v1::Lease;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
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
    strategy: &LeaseStrategy,
    typed: &Typed::<Lease>::NEW,
};

#[derive(Debug)]
struct LeaseStrategy;

impl Strategy for LeaseStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::coordination::lease(obj)
    }
}
