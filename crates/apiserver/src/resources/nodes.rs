//! Nodes: cluster-scoped, with status.

use k8s_openapi::api::core::v1::Node;
use serde_json::Value;
use skiff_api::validation::FieldError;

use super::{resource, Kind, Strategy, Typed, NONE};

pub static KIND: Kind = Kind {
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
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::node(obj)
    }
}
