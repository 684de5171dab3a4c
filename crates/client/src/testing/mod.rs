//! Object builders for tests: `pod("web").req_cpu("100m")`,
//! `node("n1").cpu("2").taint(..)`.
//!
//! This module owns test fixtures only: builders that produce typed
//! k8s-openapi objects with sensible defaults, so tests state just what
//! matters. Nothing in the scheduler proper depends on it.

mod node;
mod pod;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

pub use node::{node, NodeBuilder};
pub use pod::{affinity_term, pod, PodBuilder};

/// A node selector requirement (`values` may be empty).
pub fn req(key: &str, operator: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.to_string(),
        operator: operator.to_string(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
    }
}

/// A label selector with `matchLabels` only.
pub fn label_selector(labels: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        match_expressions: None,
    }
}
