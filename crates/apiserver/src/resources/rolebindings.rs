//! RoleBindings (rbac.authorization.k8s.io/v1): subjects bound to a Role
//! or ClusterRole in a namespace; the role reference is immutable
//! (upstream `registry/rbac/rolebinding`). Enforced by
//! `crate::authz::rbac`; escalation checked by `crate::admission`.

use k8s_openapi::api::rbac::v1::RoleBinding;
use serde_json::Value;
use skiff_api::validation::{rbac, FieldError};

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "rbac.authorization.k8s.io",
    kind: "RoleBinding",
    resource: Some(resource(
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "rolebinding",
        "RoleBinding",
        true,
        NONE,
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &RoleBindingStrategy,
    typed: &Typed::<RoleBinding>::NEW,
};

#[derive(Debug)]
struct RoleBindingStrategy;

impl Strategy for RoleBindingStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::rbac::role_binding(obj);
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        rbac::role_binding(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        rbac::binding_update(old, new, true)
    }
    fn name_errors(&self, name: &str) -> Vec<String> {
        rbac::path_segment_name(name)
    }
}
