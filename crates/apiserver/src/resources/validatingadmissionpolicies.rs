//! ValidatingAdmissionPolicies (with status) and their bindings
//! (admissionregistration.k8s.io/v1): cluster-scoped (upstream
//! `registry/admissionregistration/validatingadmissionpolicy*`), defaulted
//! and validated as upstream; CEL expressions are not compiled. Stored and
//! served, not enforced.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use serde_json::{json, Value};
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

const API_EXTENSIONS: &[&str] = &["api-extensions"];

pub static POLICY: KindDef = KindDef {
    group: "admissionregistration.k8s.io",
    kind: "ValidatingAdmissionPolicy",
    resource: Some(resource(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
        "validatingadmissionpolicy",
        "ValidatingAdmissionPolicy",
        false,
        NONE,
        API_EXTENSIONS,
        &["status"],
    )),
    selectable_fields: &[],
    strategy: &PolicyStrategy,
    typed: &Typed::<ValidatingAdmissionPolicy>::NEW,
};

pub static BINDING: KindDef = KindDef {
    group: "admissionregistration.k8s.io",
    kind: "ValidatingAdmissionPolicyBinding",
    resource: Some(resource(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicybindings",
        "validatingadmissionpolicybinding",
        "ValidatingAdmissionPolicyBinding",
        false,
        NONE,
        API_EXTENSIONS,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &BindingStrategy,
    typed: &Typed::<ValidatingAdmissionPolicyBinding>::NEW,
};

#[derive(Debug)]
struct PolicyStrategy;

impl Strategy for PolicyStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::admissionregistration::validating_admission_policy(obj);
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        crate::object::set(obj, "status", json!({}));
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors =
            skiff_api::validation::admissionregistration::validating_admission_policy(obj);
        errors.extend(
            skiff_api::validation::admissionregistration::validating_admission_policy_status(obj),
        );
        errors
    }
}

#[derive(Debug)]
struct BindingStrategy;

impl Strategy for BindingStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::admissionregistration::validating_admission_policy_binding(obj);
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::admissionregistration::validating_admission_policy_binding(obj)
    }
}
