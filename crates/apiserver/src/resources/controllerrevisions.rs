//! ControllerRevisions (apps/v1): immutable snapshots of a controller's
//! template (upstream `registry/apps/controllerrevision`); data may not
//! change once written.

use k8s_openapi::api::apps::v1::ControllerRevision;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "apps",
    kind: "ControllerRevision",
    resource: Some(resource(
        "apps",
        "v1",
        "controllerrevisions",
        "controllerrevision",
        "ControllerRevision",
        true,
        NONE,
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &ControllerRevisionStrategy,
    typed: &Typed::<ControllerRevision>::NEW,
};

#[derive(Debug)]
struct ControllerRevisionStrategy;

impl Strategy for ControllerRevisionStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::controller_revision(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::controller_revision_update(old, new)
    }
}
