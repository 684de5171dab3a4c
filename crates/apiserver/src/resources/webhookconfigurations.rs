//! Mutating- and ValidatingWebhookConfigurations
//! (admissionregistration.k8s.io/v1): cluster-scoped, no status (upstream
//! `registry/admissionregistration/*webhookconfiguration`), defaulted and
//! validated as upstream. Stored and served; Skiff calls no webhooks yet.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

/// Upstream's category for admission configuration.
const API_EXTENSIONS: &[&str] = &["api-extensions"];

pub static MUTATING: KindDef = KindDef {
    group: "admissionregistration.k8s.io",
    kind: "MutatingWebhookConfiguration",
    resource: Some(resource(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "mutatingwebhookconfiguration",
        "MutatingWebhookConfiguration",
        false,
        NONE,
        API_EXTENSIONS,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &MutatingStrategy,
    typed: &Typed::<MutatingWebhookConfiguration>::NEW,
};

pub static VALIDATING: KindDef = KindDef {
    group: "admissionregistration.k8s.io",
    kind: "ValidatingWebhookConfiguration",
    resource: Some(resource(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "validatingwebhookconfiguration",
        "ValidatingWebhookConfiguration",
        false,
        NONE,
        API_EXTENSIONS,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &ValidatingStrategy,
    typed: &Typed::<ValidatingWebhookConfiguration>::NEW,
};

#[derive(Debug)]
struct MutatingStrategy;

impl Strategy for MutatingStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::admissionregistration::mutating_webhook_configuration(obj);
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::admissionregistration::mutating_webhook_configuration(obj)
    }
}

#[derive(Debug)]
struct ValidatingStrategy;

impl Strategy for ValidatingStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::admissionregistration::validating_webhook_configuration(obj);
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::admissionregistration::validating_webhook_configuration(obj)
    }
}
