//! Nodes: cluster-scoped, with status.

use k8s_openapi::api::core::v1::Node;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "",
    kind: "Node",
    resource: Some(resource(
        "",
        "v1",
        "nodes",
        "node",
        "Node",
        false,
        &["no"],
        NONE,
        &["status"],
    )),
    selectable_fields: &["spec.unschedulable"],
    strategy: &NodeStrategy,
    typed: &Typed::<Node>::NEW,
};

#[derive(Debug)]
struct NodeStrategy;

impl Strategy for NodeStrategy {
    /// Every top-level field of the type but metadata is optional (see
    /// [`Strategy::status_reads_less`]).
    fn status_reads_less(&self) -> bool {
        true
    }
    /// `spec.podCIDR` and `spec.podCIDRs` as upstream's v1 conversion
    /// leaves them: podCIDR wins when the two differ, and is the first of
    /// podCIDRs.
    fn defaults(&self, obj: &mut Value) {
        let cidrs = skiff_api::validation::node_pod_cidrs(obj);
        let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
            return;
        };
        if let Some(first) = cidrs.first() {
            spec.insert("podCIDR".into(), Value::from(first.as_str()));
            spec.insert("podCIDRs".into(), Value::from(cidrs.clone()));
        }
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::node(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        let mut errors = self.validate(new);
        errors.extend(skiff_api::validation::node_update(old, new));
        errors
    }
}
