//! ClusterRoles (rbac.authorization.k8s.io/v1): cluster-wide policy rules
//! and the aggregation rule (its `rules` are filled from the selected
//! roles by the clusterrole-aggregation controller), as upstream
//! `registry/rbac/clusterrole`. Enforced by `crate::authz::rbac`;
//! escalation checked by `crate::admission`.

use k8s_openapi::api::rbac::v1::ClusterRole;
use serde_json::Value;
use skiff_api::validation::{rbac, FieldError};

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "rbac.authorization.k8s.io",
    kind: "ClusterRole",
    resource: Some(resource(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "clusterrole",
        "ClusterRole",
        false,
        NONE,
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &ClusterRoleStrategy,
    typed: &Typed::<ClusterRole>::NEW,
};

#[derive(Debug)]
struct ClusterRoleStrategy;

impl Strategy for ClusterRoleStrategy {
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        rbac::cluster_role(obj)
    }
    fn name_errors(&self, name: &str) -> Vec<String> {
        rbac::path_segment_name(name)
    }
}
