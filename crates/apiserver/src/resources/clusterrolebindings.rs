//! ClusterRoleBindings (rbac.authorization.k8s.io/v1): subjects bound to a
//! ClusterRole cluster-wide; the role reference is immutable (upstream
//! `registry/rbac/clusterrolebinding`). Enforced by `crate::authz::rbac`;
//! escalation checked by `crate::admission`.

use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use serde_json::Value;
use skiff_api::validation::{rbac, FieldError};

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "rbac.authorization.k8s.io",
    kind: "ClusterRoleBinding",
    resource: Some(resource(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        false,
        NONE,
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &ClusterRoleBindingStrategy,
    typed: &Typed::<ClusterRoleBinding>::NEW,
};

#[derive(Debug)]
struct ClusterRoleBindingStrategy;

impl Strategy for ClusterRoleBindingStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::rbac::role_binding(obj);
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        rbac::cluster_role_binding(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        rbac::binding_update(old, new, false)
    }
    fn name_errors(&self, name: &str) -> Vec<String> {
        rbac::path_segment_name(name)
    }
}
