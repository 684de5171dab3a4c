//! PodTemplates (core/v1): a pod template stored on its own, defaulted and
//! validated as a pod template (upstream `registry/core/podtemplate`).

use k8s_openapi::api::core::v1::PodTemplate;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "",
    kind: "PodTemplate",
    resource: Some(resource(
        "",
        "v1",
        "podtemplates",
        "podtemplate",
        "PodTemplate",
        true,
        NONE,
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &PodTemplateStrategy,
    typed: &Typed::<PodTemplate>::NEW,
};

#[derive(Debug)]
struct PodTemplateStrategy;

impl Strategy for PodTemplateStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::pod_template(obj);
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        crate::object::meta(obj).insert("generation".into(), Value::from(1));
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::pod_template(obj)
    }
}
