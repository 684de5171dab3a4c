//! LimitRanges (core/v1, `limits`): per-namespace defaults and bounds
//! for containers, pods and claims, applied by the LimitRanger admission
//! plugin; defaulted as upstream `SetDefaults_LimitRangeItem`.

use k8s_openapi::api::core::v1::LimitRange;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "",
    kind: "LimitRange",
    resource: Some(resource(
        "",
        "v1",
        "limitranges",
        "limitrange",
        "LimitRange",
        true,
        &["limits"],
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    strategy: &LimitRangeStrategy,
    typed: &Typed::<LimitRange>::NEW,
};

#[derive(Debug)]
struct LimitRangeStrategy;

impl Strategy for LimitRangeStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::policy::limit_range(obj);
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::limit_range(obj)
    }
}
