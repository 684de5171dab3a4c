//! ConfigMaps.

use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "",
    kind: "ConfigMap",
    resource: Some(resource(
        "",
        "v1",
        "configmaps",
        "configmap",
        "ConfigMap",
        true,
        &["cm"],
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &ConfigMapStrategy,
    typed: &Typed::<ConfigMap>::NEW,
};

#[derive(Debug)]
struct ConfigMapStrategy;

impl Strategy for ConfigMapStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = skiff_api::validation::configs::config_map_keys(obj);
        errors.extend(skiff_api::validation::config_map(obj));
        errors
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        let mut errors = self.validate(new);
        errors.extend(skiff_api::validation::configs::config_map_update(old, new));
        errors
    }
}
