//! NetworkPolicies (networking.k8s.io/v1), no status (upstream
//! `registry/networking/networkpolicy`): policyTypes and port protocols are
//! defaulted; an update may keep CIDRs the stored policy already had.
//! Stored and served; enforcing them is a network plugin's job.

use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "networking.k8s.io",
    kind: "NetworkPolicy",
    resource: Some(resource(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "networkpolicy",
        "NetworkPolicy",
        true,
        &["netpol"],
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &NetworkPolicyStrategy,
    typed: &Typed::<NetworkPolicy>::NEW,
};

#[derive(Debug)]
struct NetworkPolicyStrategy;

impl Strategy for NetworkPolicyStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::networking::network_policy(obj);
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::networking::network_policy(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::networking::network_policy_update(old, new)
    }
}
