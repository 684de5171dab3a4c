//! Jobs, with status.

use k8s_openapi::api::batch::v1::Job;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, ALL, NONE};

pub static KIND: KindDef = KindDef {
    group: "batch",
    kind: "Job",
    resource: Some(resource(
        "batch",
        "v1",
        "jobs",
        "job",
        "Job",
        true,
        NONE,
        ALL,
        &["status"],
    )),
    selectable_fields: &["status.successful"],
    strategy: &JobStrategy,
    typed: &Typed::<Job>::NEW,
};

#[derive(Debug)]
struct JobStrategy;

impl Strategy for JobStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::job(obj);
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        skiff_api::defaults::job_selector(obj);
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::job(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        let mut errors = self.validate(new);
        errors.extend(skiff_api::validation::job_update(old, new));
        errors
    }
}
