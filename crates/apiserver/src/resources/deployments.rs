//! Deployments, with status and scale.

use k8s_openapi::api::apps::v1::Deployment;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, ALL};

pub static KIND: KindDef = KindDef {
    group: "apps",
    kind: "Deployment",
    resource: Some(resource(
        "apps",
        "v1",
        "deployments",
        "deployment",
        "Deployment",
        true,
        &["deploy"],
        ALL,
        &["status", "scale"],
    )),
    selectable_fields: &[],
    strategy: &DeploymentStrategy,
    typed: &Typed::<Deployment>::NEW,
};

#[derive(Debug)]
struct DeploymentStrategy;

impl Strategy for DeploymentStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::deployment(obj);
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::deployment(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        let mut errors = self.validate(new);
        errors.extend(skiff_api::validation::workload_update(old, new));
        errors
    }
    /// A status write checks the status alone (upstream's status
    /// strategy); the spec is the stored one.
    fn validate_status_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::deployment_status(old, new)
    }
}
