//! PodDisruptionBudgets (policy/v1, `pdb`) with the status subresource
//! (upstream `registry/policy/poddisruptionbudget`): a new budget's status
//! is cleared (the disruption controller computes it); evictions consult
//! it (`handlers::eviction`).

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use serde_json::{json, Value};
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "policy",
    kind: "PodDisruptionBudget",
    resource: Some(resource(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        true,
        &["pdb"],
        NONE,
        &["status"],
    )),
    selectable_fields: &[],
    strategy: &PodDisruptionBudgetStrategy,
    typed: &Typed::<PodDisruptionBudget>::NEW,
};

#[derive(Debug)]
struct PodDisruptionBudgetStrategy;

impl Strategy for PodDisruptionBudgetStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        crate::object::set(
            obj,
            "status",
            json!({"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0}),
        );
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::pod_disruption_budget(obj)
    }
}
