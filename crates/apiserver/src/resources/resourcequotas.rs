//! ResourceQuotas (core/v1, `quota`) with the status subresource
//! (upstream `registry/core/resourcequota`): a new quota's status is
//! cleared, then kept by the ResourceQuota admission plugin (usage
//! charged at create) and the resource quota controller (usage
//! recomputed, status.hard mirroring spec.hard).

use k8s_openapi::api::core::v1::ResourceQuota;
use serde_json::{json, Value};
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "",
    kind: "ResourceQuota",
    resource: Some(resource(
        "",
        "v1",
        "resourcequotas",
        "resourcequota",
        "ResourceQuota",
        true,
        &["quota"],
        NONE,
        &["status"],
    )),
    selectable_fields: &[],
    strategy: &ResourceQuotaStrategy,
    typed: &Typed::<ResourceQuota>::NEW,
};

#[derive(Debug)]
struct ResourceQuotaStrategy;

impl Strategy for ResourceQuotaStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        crate::object::set(obj, "status", json!({}));
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::resource_quota(obj)
    }
}
