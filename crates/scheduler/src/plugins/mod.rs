//! The default plugins, one file each, registered in one list.
//!
//! This module owns plugin logic and the default profile:
//! [`default_registry`] lists the plugins in upstream's `MultiPoint` order
//! with upstream's default score weights. Each plugin reproduces upstream
//! kube-scheduler behaviour and reason strings (users grep for them).
//! Plugins are pure functions of the pod, the snapshot and the cycle state.

mod balanced_allocation;
mod default_preemption;
mod image_locality;
mod inter_pod_affinity;
mod node_affinity;
mod node_name;
mod node_ports;
mod node_resources_fit;
mod node_unschedulable;
mod pod_topology_spread;
mod taint_toleration;
mod volume_binding;

pub use balanced_allocation::BalancedAllocation;
pub use default_preemption::DefaultPreemption;
pub use image_locality::ImageLocality;
pub use inter_pod_affinity::InterPodAffinity;
pub use node_affinity::NodeAffinity;
pub use node_name::NodeName;
pub use node_ports::NodePorts;
pub use node_resources_fit::NodeResourcesFit;
pub use node_unschedulable::NodeUnschedulable;
pub use pod_topology_spread::PodTopologySpread;
pub use taint_toleration::{find_untolerated_taint, tolerates, TaintToleration};
pub use volume_binding::{VolumeBinding, DEFAULT_BIND_TIMEOUT};

use std::time::Duration;

use crate::framework::{Framework, Registry};

/// Upstream plugin names.
pub mod names {
    /// Filters cordoned nodes.
    pub const NODE_UNSCHEDULABLE: &str = "NodeUnschedulable";
    /// Filters on `spec.nodeName`.
    pub const NODE_NAME: &str = "NodeName";
    /// Taints and tolerations.
    pub const TAINT_TOLERATION: &str = "TaintToleration";
    /// Node selector and node affinity.
    pub const NODE_AFFINITY: &str = "NodeAffinity";
    /// Host port conflicts.
    pub const NODE_PORTS: &str = "NodePorts";
    /// Requests vs allocatable; LeastAllocated scoring.
    pub const NODE_RESOURCES_FIT: &str = "NodeResourcesFit";
    /// PersistentVolumeClaims bound or bindable on the node.
    pub const VOLUME_BINDING: &str = "VolumeBinding";
    /// Required topology spread constraints.
    pub const POD_TOPOLOGY_SPREAD: &str = "PodTopologySpread";
    /// Required pod (anti-)affinity.
    pub const INTER_POD_AFFINITY: &str = "InterPodAffinity";
    /// PostFilter: preemption (diagnostics only for now).
    pub const DEFAULT_PREEMPTION: &str = "DefaultPreemption";
    /// Balanced cpu/memory usage scoring.
    pub const NODE_RESOURCES_BALANCED_ALLOCATION: &str = "NodeResourcesBalancedAllocation";
    /// Scoring by images already present.
    pub const IMAGE_LOCALITY: &str = "ImageLocality";
}

/// The default plugins in upstream order with upstream score weights
/// (TaintToleration 3, NodeAffinity 2, NodeResourcesFit 1,
/// PodTopologySpread 2, InterPodAffinity 2, BalancedAllocation 1,
/// ImageLocality 1; the last three of upstream's scorers that we only
/// filter with keep their weights for when they score). VolumeBinding
/// waits [`DEFAULT_BIND_TIMEOUT`] for claims to be bound.
pub fn default_registry() -> Registry {
    default_registry_with_bind_timeout(DEFAULT_BIND_TIMEOUT)
}

/// [`default_registry`] with VolumeBinding's `bindTimeoutSeconds`.
pub fn default_registry_with_bind_timeout(bind_timeout: Duration) -> Registry {
    Registry::new()
        .register(NodeUnschedulable, 0)
        .register(NodeName, 0)
        .register(TaintToleration, 3)
        .register(NodeAffinity, 2)
        .register(NodePorts, 0)
        .register(NodeResourcesFit::default(), 1)
        // Upstream's VolumeRestrictions and NodeVolumeLimits come first.
        .register(VolumeBinding::new(bind_timeout), 0)
        .register(PodTopologySpread, 2)
        .register(InterPodAffinity, 2)
        .register(DefaultPreemption, 0)
        .register(BalancedAllocation::default(), 1)
        .register(ImageLocality, 1)
}

/// A framework running [`default_registry`] with the adaptive percentage of
/// nodes to score.
pub fn default_framework() -> Framework {
    Framework::new(default_registry())
}
