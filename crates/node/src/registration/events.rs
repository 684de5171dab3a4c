//! The node's own events, as the kubelet writes them about its Node:
//! `Starting` ("Starting kubelet.") when the agent starts, and upstream's
//! `recordNodeStatusEvent` ("Node NAME status is now: REASON") when a
//! condition is first set or changes: NodeHasSufficientMemory /
//! NodeHasInsufficientMemory, NodeHasNoDiskPressure / NodeHasDiskPressure,
//! NodeHasSufficientPID / NodeHasInsufficientPID, and NodeReady /
//! NodeNotReady (only on a change of an existing Ready condition, as
//! upstream's setter). `RegisteredNode` is the node lifecycle
//! controller's.
//!
//! [`transitions`] is pure; [`NodeEvents`] records through the cluster's
//! event recorder about the node's reference (`kind: Node`, its name as
//! its UID, as the kubelet's `nodeRef`). It reads no node and writes
//! nothing but events.

use k8s_openapi::api::core::v1::{NodeCondition, ObjectReference};
use skiff_client::recorder::{EventType, Recorder};

/// The kubelet's reason for its start.
pub const STARTING: &str = "Starting";

/// The kubelet's reference to its Node: no namespace, the name as UID;
/// with `apiVersion: v1`, which `kubectl events --for node/NAME` selects
/// on.
pub fn node_ref(node: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(node.to_string()),
        uid: Some(node.to_string()),
        ..Default::default()
    }
}

/// The event reason for condition `type_` now at `status`, if the
/// kubelet records one.
fn reason(type_: &str, status: &str) -> Option<&'static str> {
    let on = status == "True";
    Some(match (type_, on) {
        ("MemoryPressure", false) => "NodeHasSufficientMemory",
        ("MemoryPressure", true) => "NodeHasInsufficientMemory",
        ("DiskPressure", false) => "NodeHasNoDiskPressure",
        ("DiskPressure", true) => "NodeHasDiskPressure",
        ("PIDPressure", false) => "NodeHasSufficientPID",
        ("PIDPressure", true) => "NodeHasInsufficientPID",
        ("Ready", true) => "NodeReady",
        ("Ready", false) => "NodeNotReady",
        _ => return None,
    })
}

/// The events the kubelet's status setters record going from `before`
/// (`None` at start: the node as the agent builds it anew) to `after`:
/// a pressure condition that is new or changed, a Ready condition that
/// changed (a new one records nothing).
pub fn transitions(before: Option<&[NodeCondition]>, after: &[NodeCondition]) -> Vec<&'static str> {
    let mut out = Vec::new();
    for c in after {
        let old = before
            .unwrap_or_default()
            .iter()
            .find(|o| o.type_ == c.type_)
            .map(|o| o.status.as_str());
        let record = match (c.type_.as_str(), old) {
            ("Ready", None) => false,
            (_, None) => true,
            (_, Some(old)) => old != c.status,
        };
        if record {
            out.extend(reason(&c.type_, &c.status));
        }
    }
    out
}

/// Records node events through the cluster's recorder.
#[derive(Debug, Clone)]
pub struct NodeEvents {
    recorder: Recorder,
    node: String,
}

impl NodeEvents {
    pub fn new(recorder: Recorder, node: &str) -> Self {
        Self {
            recorder,
            node: node.to_string(),
        }
    }

    /// `Starting`: "Starting kubelet."
    pub fn starting(&self) {
        self.record(STARTING, "Starting kubelet.");
    }

    /// The status events between two sets of conditions ([`transitions`]).
    pub fn conditions(&self, before: Option<&[NodeCondition]>, after: &[NodeCondition]) {
        for r in transitions(before, after) {
            tracing::info!(node = %self.node, event = r, "Recording event message for node");
            self.record(r, &format!("Node {} status is now: {r}", self.node));
        }
    }

    fn record(&self, reason: &str, message: &str) {
        self.recorder.record_for(
            &node_ref(&self.node),
            EventType::Normal,
            reason,
            "",
            message,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(type_: &str, status: &str) -> NodeCondition {
        NodeCondition {
            type_: type_.into(),
            status: status.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_new_node_has_its_pressure_events_but_no_ready_one() {
        let after = [
            cond("MemoryPressure", "False"),
            cond("DiskPressure", "False"),
            cond("PIDPressure", "False"),
            cond("Ready", "False"),
        ];
        assert_eq!(
            transitions(None, &after),
            [
                "NodeHasSufficientMemory",
                "NodeHasNoDiskPressure",
                "NodeHasSufficientPID"
            ]
        );
    }

    #[test]
    fn changes_are_recorded_and_the_rest_is_not() {
        let before = [cond("MemoryPressure", "False"), cond("Ready", "False")];
        let after = [cond("MemoryPressure", "False"), cond("Ready", "True")];
        assert_eq!(transitions(Some(&before[..]), &after), ["NodeReady"]);
        assert_eq!(transitions(Some(&after[..]), &before), ["NodeNotReady"]);
        let pressed = [cond("MemoryPressure", "True"), cond("Ready", "True")];
        assert_eq!(
            transitions(Some(&after[..]), &pressed),
            ["NodeHasInsufficientMemory"]
        );
        assert!(transitions(Some(&after[..]), &after).is_empty());
        // Unknown (the node controller's) to False counts as a change.
        assert_eq!(
            transitions(
                Some(&[cond("Ready", "Unknown")][..]),
                &[cond("Ready", "False")]
            ),
            ["NodeNotReady"]
        );
    }
}
