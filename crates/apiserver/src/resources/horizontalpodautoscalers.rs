//! HorizontalPodAutoscalers at autoscaling/v2, the storage version, with
//! status (upstream `registry/autoscaling/horizontalpodautoscaler`). The
//! same objects are served at autoscaling/v1 (`horizontalpodautoscalers_v1.rs`),
//! so the kind's type decodes either version by the one the client used.

use k8s_openapi::api::autoscaling::{v1, v2};
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, TypedKind, ALL};
use crate::decode::strict::Segment;
use crate::status::ApiResult;

pub static KIND: KindDef = KindDef {
    group: "autoscaling",
    kind: "HorizontalPodAutoscaler",
    resource: Some(resource(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        "HorizontalPodAutoscaler",
        true,
        &["hpa"],
        ALL,
        &["status"],
    )),
    selectable_fields: &[],
    strategy: &HorizontalPodAutoscalerStrategy,
    typed: &HpaTyped,
};

/// Both versions' rules: they run on the stored (v2) form.
#[derive(Debug)]
pub(super) struct HorizontalPodAutoscalerStrategy;

impl Strategy for HorizontalPodAutoscalerStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::horizontal_pod_autoscaler(obj);
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        super::workloads_status::reset(obj, "HorizontalPodAutoscaler");
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::horizontal_pod_autoscaler(obj)
    }
}

/// The k8s-openapi HPA type of the version an object is in: v1 when the
/// client spoke autoscaling/v1, v2 otherwise.
#[derive(Debug)]
pub(super) struct HpaTyped;

fn is_v1(obj: &Value) -> bool {
    obj.get("apiVersion").and_then(Value::as_str) == Some("autoscaling/v1")
}

impl TypedKind for HpaTyped {
    fn normalize(&self, obj: Value, served: (&str, &str)) -> ApiResult<Value> {
        if served.1 == "v1" {
            Typed::<v1::HorizontalPodAutoscaler>::NEW.normalize(obj, served)
        } else {
            Typed::<v2::HorizontalPodAutoscaler>::NEW.normalize(obj, served)
        }
    }
    fn ignored(&self, raw: &[u8], obj: &Value) -> Option<Vec<Vec<Segment>>> {
        if is_v1(obj) {
            Typed::<v1::HorizontalPodAutoscaler>::NEW.ignored(raw, obj)
        } else {
            Typed::<v2::HorizontalPodAutoscaler>::NEW.ignored(raw, obj)
        }
    }
    fn schema(&self, generator: &mut schemars::SchemaGenerator) -> String {
        Typed::<v2::HorizontalPodAutoscaler>::NEW.schema(generator)
    }
    fn check(&self, json: &[u8]) -> Result<(), String> {
        let v1 = serde_json::from_slice::<Value>(json)
            .map(|v| is_v1(&v))
            .unwrap_or(false);
        if v1 {
            Typed::<v1::HorizontalPodAutoscaler>::NEW.check(json)
        } else {
            Typed::<v2::HorizontalPodAutoscaler>::NEW.check(json)
        }
    }
}
