//! ConfigMaps.

use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::Value;
use skiff_api::validation::FieldError;

use super::{resource, Kind, Strategy, Typed, NONE};

pub static KIND: Kind = Kind {
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
        skiff_api::validation::config_map(obj)
    }
}
