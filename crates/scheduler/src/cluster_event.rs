//! Cluster events that may make an unschedulable pod schedulable.
//!
//! This module owns [`ClusterEvent`], the classification of a node update
//! into [`NodeChanges`] (only changes that can *relax* a filter count: a
//! taint removed, a label changed, allocatable grown, `unschedulable`
//! cleared), claims, volumes and classes added or updated (what
//! VolumeBinding waits for), and [`is_relevant`], the per-plugin table (upstream
//! `EventsToRegister`) deciding whether an event concerns a pod rejected by
//! a given set of plugins. It is pure; the queue acts on its answers.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node, Taint};

use crate::plugins::names;
use crate::resources::Resource;

/// What changed in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterEvent {
    /// A node appeared.
    NodeAdd,
    /// A node changed in a way that may let more pods fit.
    NodeUpdate(NodeChanges),
    /// A node went away.
    NodeDelete,
    /// A pod was assigned to a node (or first seen assigned).
    AssignedPodAdd,
    /// An assigned pod's labels changed.
    AssignedPodUpdate,
    /// An assigned pod went away (or finished), freeing its resources.
    AssignedPodDelete,
    /// A PersistentVolumeClaim appeared.
    ClaimAdd,
    /// A PersistentVolumeClaim changed (bound, annotated, ...).
    ClaimUpdate,
    /// A PersistentVolume appeared.
    VolumeAdd,
    /// A PersistentVolume changed.
    VolumeUpdate,
    /// A StorageClass appeared.
    StorageClassAdd,
    /// A StorageClass changed.
    StorageClassUpdate,
}

/// The relaxing parts of a node update.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeChanges {
    /// A taint was removed or changed.
    pub taint_removed: bool,
    /// A label was added, changed or removed.
    pub labels_changed: bool,
    /// Some allocatable resource grew (or appeared).
    pub allocatable_grew: bool,
    /// `spec.unschedulable` went from true to false.
    pub unschedulable_cleared: bool,
}

fn taints(node: &Node) -> Vec<(&str, Option<&str>, &str)> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|t: &Taint| (t.key.as_str(), t.value.as_deref(), t.effect.as_str()))
        .collect()
}

fn allocatable(node: &Node) -> Resource {
    node.status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .and_then(|a| Resource::from_list(a).ok())
        .unwrap_or_default()
}

fn unschedulable(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

fn grew(old: &Resource, new: &Resource) -> bool {
    new.milli_cpu > old.milli_cpu
        || new.memory > old.memory
        || new.ephemeral_storage > old.ephemeral_storage
        || new.allowed_pod_number > old.allowed_pod_number
        || new
            .scalar
            .iter()
            .any(|(k, v)| *v > old.scalar.get(k).copied().unwrap_or(0))
}

impl NodeChanges {
    /// The relaxing changes from `old` to `new`.
    pub fn between(old: &Node, new: &Node) -> Self {
        let new_taints = taints(new);
        Self {
            taint_removed: taints(old).iter().any(|t| !new_taints.contains(t)),
            labels_changed: old.metadata.labels != new.metadata.labels,
            allocatable_grew: grew(&allocatable(old), &allocatable(new)),
            unschedulable_cleared: unschedulable(old) && !unschedulable(new),
        }
    }

    /// True when nothing relaxing changed (e.g. a heartbeat).
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// Whether `plugin` registered interest in `event`.
fn plugin_cares(plugin: &str, event: ClusterEvent) -> bool {
    use ClusterEvent::*;
    let node = match event {
        NodeUpdate(c) => c,
        NodeAdd => return true,
        _ => NodeChanges::default(),
    };
    match plugin {
        names::NODE_UNSCHEDULABLE => node.unschedulable_cleared,
        names::NODE_NAME => false,
        names::TAINT_TOLERATION => node.taint_removed,
        names::NODE_AFFINITY => node.labels_changed,
        names::NODE_PORTS => event == AssignedPodDelete,
        names::NODE_RESOURCES_FIT => node.allocatable_grew || event == AssignedPodDelete,
        names::POD_TOPOLOGY_SPREAD => {
            node.labels_changed
                || node.taint_removed
                || matches!(
                    event,
                    NodeDelete | AssignedPodAdd | AssignedPodUpdate | AssignedPodDelete
                )
        }
        names::INTER_POD_AFFINITY => {
            node.labels_changed
                || matches!(
                    event,
                    AssignedPodAdd | AssignedPodUpdate | AssignedPodDelete
                )
        }
        // Upstream: claims, volumes and classes added or updated; nodes
        // added or with labels or taints changed.
        names::VOLUME_BINDING => {
            node.labels_changed
                || node.taint_removed
                || matches!(
                    event,
                    ClaimAdd
                        | ClaimUpdate
                        | VolumeAdd
                        | VolumeUpdate
                        | StorageClassAdd
                        | StorageClassUpdate
                )
        }
        // Unknown plugins: assume anything may help.
        _ => true,
    }
}

/// Whether `event` may help a pod that the `rejected_by` plugins turned
/// down. An empty set (no nodes, an internal error) means any event helps.
pub fn is_relevant(event: ClusterEvent, rejected_by: &BTreeSet<&'static str>) -> bool {
    if let ClusterEvent::NodeUpdate(c) = event {
        if c.is_empty() {
            return false;
        }
    }
    rejected_by.is_empty() || rejected_by.iter().any(|p| plugin_cares(p, event))
}

#[cfg(test)]
mod tests {
    use super::*;
    use skiff_client::testing::node;

    fn set(plugins: &[&'static str]) -> BTreeSet<&'static str> {
        plugins.iter().copied().collect()
    }

    #[test]
    fn node_changes() {
        let base = node("n").label("a", "1").taint("t", "v", "NoSchedule");
        let cases = [
            ("same", base.clone().build(), NodeChanges::default()),
            (
                "taint removed",
                node("n").label("a", "1").build(),
                NodeChanges {
                    taint_removed: true,
                    ..Default::default()
                },
            ),
            (
                "taint added only",
                base.clone().taint("u", "", "NoSchedule").build(),
                NodeChanges::default(),
            ),
            (
                "label added",
                base.clone().label("b", "2").build(),
                NodeChanges {
                    labels_changed: true,
                    ..Default::default()
                },
            ),
            (
                "cpu grew",
                base.clone().cpu("8").build(),
                NodeChanges {
                    allocatable_grew: true,
                    ..Default::default()
                },
            ),
            (
                "cpu shrank",
                base.clone().cpu("1").build(),
                NodeChanges::default(),
            ),
        ];
        let old = base.build();
        for (name, new, want) in cases {
            assert_eq!(NodeChanges::between(&old, &new), want, "{name}");
        }
        let cordoned = node("n").unschedulable().build();
        let uncordoned = node("n").build();
        assert!(NodeChanges::between(&cordoned, &uncordoned).unschedulable_cleared);
        assert!(NodeChanges::between(&uncordoned, &cordoned).is_empty());
    }

    #[test]
    fn relevance_table() {
        use ClusterEvent::*;
        let taint = NodeUpdate(NodeChanges {
            taint_removed: true,
            ..Default::default()
        });
        let label = NodeUpdate(NodeChanges {
            labels_changed: true,
            ..Default::default()
        });
        let cases = [
            (NodeAdd, set(&[names::TAINT_TOLERATION]), true),
            (taint, set(&[names::TAINT_TOLERATION]), true),
            (label, set(&[names::TAINT_TOLERATION]), false),
            (label, set(&[names::NODE_AFFINITY]), true),
            (AssignedPodDelete, set(&[names::NODE_RESOURCES_FIT]), true),
            (AssignedPodAdd, set(&[names::NODE_RESOURCES_FIT]), false),
            (AssignedPodAdd, set(&[names::INTER_POD_AFFINITY]), true),
            (AssignedPodDelete, set(&[names::NODE_AFFINITY]), false),
            (
                AssignedPodDelete,
                set(&[names::NODE_AFFINITY, names::NODE_PORTS]),
                true,
            ),
            (NodeUpdate(NodeChanges::default()), set(&[]), false),
            (AssignedPodAdd, set(&[]), true),
            (NodeDelete, set(&[names::TAINT_TOLERATION]), false),
            (ClaimUpdate, set(&[names::VOLUME_BINDING]), true),
            (VolumeAdd, set(&[names::VOLUME_BINDING]), true),
            (StorageClassAdd, set(&[names::VOLUME_BINDING]), true),
            (label, set(&[names::VOLUME_BINDING]), true),
            (AssignedPodDelete, set(&[names::VOLUME_BINDING]), false),
            (ClaimUpdate, set(&[names::NODE_RESOURCES_FIT]), false),
            (VolumeUpdate, set(&[names::TAINT_TOLERATION]), false),
        ];
        for (event, plugins, want) in cases {
            assert_eq!(is_relevant(event, &plugins), want, "{event:?} {plugins:?}");
        }
    }
}
