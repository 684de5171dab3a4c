//! Roles (rbac.authorization.k8s.io/v1): namespaced policy rules, served
//! and stored as upstream `registry/rbac/role` does. Enforced by
//! `crate::authz::rbac`; writes that would grant what the writer lacks are
//! refused by `crate::admission` (RBACEscalation).

use k8s_openapi::api::rbac::v1::Role;
use serde_json::Value;
use skiff_api::validation::{rbac, FieldError};

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "rbac.authorization.k8s.io",
    kind: "Role",
    resource: Some(resource(
        "rbac.authorization.k8s.io",
        "v1",
        "roles",
        "role",
        "Role",
        true,
        NONE,
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &RoleStrategy,
    typed: &Typed::<Role>::NEW,
};

#[derive(Debug)]
struct RoleStrategy;

impl Strategy for RoleStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        rbac::role(obj)
    }
    fn name_errors(&self, name: &str) -> Vec<String> {
        rbac::path_segment_name(name)
    }
}
