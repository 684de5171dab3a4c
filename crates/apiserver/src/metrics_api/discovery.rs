//! What discovery says of metrics.k8s.io/v1beta1, as the aggregator
//! publishes metrics-server's group: `nodes` (NodeMetrics, cluster-scoped)
//! and `pods` (PodMetrics, namespaced), verbs get and list. Plain data for
//! `crate::discovery`, which owns the documents; no state, no I/O.

use serde_json::{json, Value};

pub const GROUP: &str = "metrics.k8s.io";
pub const VERSION: &str = "v1beta1";
pub const GROUP_VERSION: &str = "metrics.k8s.io/v1beta1";

/// (plural, singular, kind, namespaced).
const RESOURCES: &[(&str, &str, &str, bool)] = &[
    ("nodes", "", "NodeMetrics", false),
    ("pods", "", "PodMetrics", true),
];

const VERBS: &[&str] = &["get", "list"];

/// The APIResourceList of metrics.k8s.io/v1beta1.
pub fn resource_list() -> Value {
    let resources: Vec<Value> = RESOURCES
        .iter()
        .map(|(plural, singular, kind, namespaced)| {
            json!({"name": plural, "singularName": singular, "namespaced": namespaced,
                "kind": kind, "verbs": VERBS})
        })
        .collect();
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION,
        "resources": resources})
}

/// The group's entry in an APIGroupList (`kind`/`apiVersion` added for
/// the APIGroup document).
pub fn group_entry() -> Value {
    let gv = json!({"groupVersion": GROUP_VERSION, "version": VERSION});
    json!({"name": GROUP, "versions": [gv.clone()], "preferredVersion": gv})
}

/// The group in an APIGroupDiscoveryList.
pub fn aggregated_group() -> Value {
    let resources: Vec<Value> = RESOURCES
        .iter()
        .map(|(plural, singular, kind, namespaced)| {
            json!({
                "resource": plural,
                "responseKind": {"group": GROUP, "version": VERSION, "kind": kind},
                "scope": if *namespaced { "Namespaced" } else { "Cluster" },
                "singularResource": if singular.is_empty() { plural } else { singular },
                "verbs": VERBS,
            })
        })
        .collect();
    json!({"metadata": {"name": GROUP}, "versions": [
        {"version": VERSION, "resources": resources, "freshness": "Current"}
    ]})
}
