//! Secrets.

use k8s_openapi::api::core::v1::Secret;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "",
    kind: "Secret",
    resource: Some(resource(
        "", "v1", "secrets", "secret", "Secret", true, NONE, NONE, NONE,
    )),
    selectable_fields: &["type"],
    strategy: &SecretStrategy,
    typed: &Typed::<Secret>::NEW,
};

#[derive(Debug)]
struct SecretStrategy;

impl Strategy for SecretStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::secret(obj);
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = skiff_api::validation::configs::secret_keys(obj);
        errors.extend(skiff_api::validation::secret(obj));
        errors
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        let mut errors = self.validate(new);
        errors.extend(skiff_api::validation::configs::secret_update(old, new));
        errors
    }
}
