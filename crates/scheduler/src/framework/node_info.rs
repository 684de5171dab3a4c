//! What the scheduler knows about one node.
//!
//! This module owns [`NodeInfo`]: the node object, the pods assigned or
//! assumed on it, the aggregate of their requests (exact and with non-zero
//! defaults for scoring), allocatable resources, host ports in use and the
//! images present. Aggregates are kept in step by [`NodeInfo::add_pod`] and
//! [`NodeInfo::remove_pod`]; nothing here talks to the API server.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ContainerPort, Node, Pod, Taint};

use crate::resources::{is_sidecar, pod_requests, MissingRequests, Resource};
use skiff_client::selectors::Labels;

/// A pod as placed on a node, with its requests precomputed.
#[derive(Debug, Clone)]
pub struct PodInfo {
    /// The pod object, shared with the scheduler cache and queue. While
    /// the pod is only assumed here its `spec.nodeName` is still empty:
    /// the node holding this `PodInfo` is where it counts.
    pub pod: Arc<Pod>,
    /// Requests with missing values as zero.
    pub requested: Resource,
    /// Requests with missing cpu/memory as 100m/200Mi (for scoring).
    pub non_zero_requested: Resource,
}

fn requests_or_zero(pod: &Pod, missing: MissingRequests) -> Resource {
    pod_requests(pod, missing).unwrap_or_else(|e| {
        tracing::warn!(pod = %pod_key(pod), error = %e, "ignoring unparsable pod requests");
        Resource::default()
    })
}

/// `namespace/name` of a pod, for logs and messages.
pub fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

impl PodInfo {
    /// Wraps a pod; unparsable requests count as zero (the API server
    /// validates quantities, so this only guards against corrupt input).
    pub fn new(pod: impl Into<Arc<Pod>>) -> Self {
        let pod = pod.into();
        let requested = requests_or_zero(&pod, MissingRequests::Zero);
        let non_zero_requested = requests_or_zero(&pod, MissingRequests::NonZeroDefaults);
        Self {
            pod,
            requested,
            non_zero_requested,
        }
    }

    /// The pod's namespace (`default` when unset).
    pub fn namespace(&self) -> &str {
        self.pod.metadata.namespace.as_deref().unwrap_or("default")
    }

    /// The pod's name.
    pub fn name(&self) -> &str {
        self.pod.metadata.name.as_deref().unwrap_or_default()
    }
}

/// An image present on a node and how widely it is spread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageStateSummary {
    /// Size in bytes.
    pub size: i64,
    /// On how many nodes of the snapshot the image is present.
    pub num_nodes: usize,
}

/// Host ports in use on a node: ip → {(protocol, port)}.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostPortInfo {
    by_ip: BTreeMap<String, BTreeSet<(String, i32)>>,
}

/// The wildcard host IP.
pub const BIND_ALL_HOST_IP: &str = "0.0.0.0";

fn sanitize(ip: Option<&str>, protocol: Option<&str>) -> (String, String) {
    let ip = ip.filter(|s| !s.is_empty()).unwrap_or(BIND_ALL_HOST_IP);
    let protocol = protocol.filter(|s| !s.is_empty()).unwrap_or("TCP");
    (ip.to_string(), protocol.to_string())
}

impl HostPortInfo {
    /// Records a port (empty ip means 0.0.0.0, empty protocol TCP).
    pub fn add(&mut self, ip: Option<&str>, protocol: Option<&str>, port: i32) {
        if port <= 0 {
            return;
        }
        let (ip, protocol) = sanitize(ip, protocol);
        self.by_ip.entry(ip).or_default().insert((protocol, port));
    }

    /// Forgets a port.
    pub fn remove(&mut self, ip: Option<&str>, protocol: Option<&str>, port: i32) {
        let (ip, protocol) = sanitize(ip, protocol);
        if let Some(set) = self.by_ip.get_mut(&ip) {
            set.remove(&(protocol, port));
            if set.is_empty() {
                self.by_ip.remove(&ip);
            }
        }
    }

    /// Upstream `CheckConflict`: 0.0.0.0 conflicts with the same
    /// protocol/port on any IP; a specific IP conflicts with itself and
    /// with 0.0.0.0.
    pub fn conflicts(&self, ip: Option<&str>, protocol: Option<&str>, port: i32) -> bool {
        if port <= 0 {
            return false;
        }
        let (ip, protocol) = sanitize(ip, protocol);
        let key = (protocol, port);
        if ip == BIND_ALL_HOST_IP {
            return self.by_ip.values().any(|s| s.contains(&key));
        }
        [BIND_ALL_HOST_IP, ip.as_str()]
            .iter()
            .any(|i| self.by_ip.get(*i).is_some_and(|s| s.contains(&key)))
    }

    /// Number of (ip, protocol, port) entries.
    pub fn len(&self) -> usize {
        self.by_ip.values().map(BTreeSet::len).sum()
    }

    /// True when no port is in use.
    pub fn is_empty(&self) -> bool {
        self.by_ip.is_empty()
    }
}

/// Container ports with a host port, of containers and of sidecars (init
/// containers with `restartPolicy: Always`), like upstream `GetHostPorts`.
pub fn host_ports(pod: &Pod) -> Vec<&ContainerPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| is_sidecar(c));
    sidecars
        .chain(spec.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.unwrap_or(0) > 0)
        .collect()
}

/// Name, allocatable and images of a node object.
fn node_parts(node: &Node) -> (String, Resource, BTreeMap<String, ImageStateSummary>) {
    let name = node.metadata.name.clone().unwrap_or_default();
    let status = node.status.as_ref();
    let allocatable = match status.and_then(|s| s.allocatable.as_ref()) {
        Some(list) => Resource::from_list(list).unwrap_or_else(|e| {
            tracing::warn!(node = %name, error = %e, "ignoring unparsable node allocatable");
            Resource::default()
        }),
        None => Resource::default(),
    };
    let mut image_states = BTreeMap::new();
    for image in status.and_then(|s| s.images.as_ref()).into_iter().flatten() {
        for n in image.names.iter().flatten() {
            let size = image.size_bytes.unwrap_or(0);
            image_states.insert(n.clone(), ImageStateSummary { size, num_nodes: 1 });
        }
    }
    (name, allocatable, image_states)
}

fn unschedulable_of(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

fn taints_of(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

/// A node and the pods on it, with aggregates.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// Boxed: the object is large and rarely read per node, while the
    /// counters below are read for every node of every cycle.
    node: Box<Node>,
    name: String,
    /// `spec.unschedulable` and `spec.taints`, copied out of the boxed
    /// object because filters read them for every node.
    unschedulable: bool,
    taints: Vec<Taint>,
    pods: Vec<PodInfo>,
    requested: Resource,
    non_zero_requested: Resource,
    allocatable: Resource,
    used_ports: HostPortInfo,
    image_states: BTreeMap<String, ImageStateSummary>,
    /// Pods here with required pod anti-affinity (upstream's
    /// PodsWithRequiredAntiAffinity), so InterPodAffinity can pass over
    /// the rest without looking at them.
    required_anti_affinity_pods: usize,
}

/// Does `pod` carry required pod anti-affinity terms?
pub fn has_required_anti_affinity(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|p| {
            p.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .is_some_and(|terms| !terms.is_empty())
}

impl NodeInfo {
    /// A node without pods; every image counts as present on one node
    /// until a [`super::Snapshot`] counts them across nodes.
    pub fn new(node: Node) -> Self {
        let (name, allocatable, image_states) = node_parts(&node);
        Self {
            unschedulable: unschedulable_of(&node),
            taints: taints_of(&node),
            node: Box::new(node),
            name,
            pods: Vec::new(),
            requested: Resource::default(),
            non_zero_requested: Resource::default(),
            allocatable,
            used_ports: HostPortInfo::default(),
            image_states,
            required_anti_affinity_pods: 0,
        }
    }

    /// Replaces the node object (an update), keeping the pods and their
    /// aggregates; image spread counts reset to one node. Returns the
    /// previous object.
    pub fn set_node(&mut self, node: Node) -> Node {
        let (name, allocatable, image_states) = node_parts(&node);
        self.name = name;
        self.unschedulable = unschedulable_of(&node);
        self.taints = taints_of(&node);
        self.allocatable = allocatable;
        self.image_states = image_states;
        *std::mem::replace(&mut self.node, Box::new(node))
    }

    /// The node object.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The node's labels, if any.
    pub fn labels(&self) -> Option<&Labels> {
        self.node.metadata.labels.as_ref()
    }

    /// One label's value.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels().and_then(|l| l.get(key)).map(String::as_str)
    }

    /// The node's taints.
    pub fn taints(&self) -> &[Taint] {
        &self.taints
    }

    /// Whether the node is cordoned (`spec.unschedulable`).
    pub fn unschedulable(&self) -> bool {
        self.unschedulable
    }

    /// Pods assigned or assumed on the node.
    pub fn pods(&self) -> &[PodInfo] {
        &self.pods
    }

    /// Sum of the pods' requests (missing = 0).
    pub fn requested(&self) -> &Resource {
        &self.requested
    }

    /// Sum of the pods' requests with non-zero cpu/memory defaults.
    pub fn non_zero_requested(&self) -> &Resource {
        &self.non_zero_requested
    }

    /// The node's allocatable resources (`status.allocatable`).
    pub fn allocatable(&self) -> &Resource {
        &self.allocatable
    }

    /// Host ports in use.
    pub fn used_ports(&self) -> &HostPortInfo {
        &self.used_ports
    }

    /// Images on the node by name.
    pub fn image_states(&self) -> &BTreeMap<String, ImageStateSummary> {
        &self.image_states
    }

    pub(crate) fn image_states_mut(&mut self) -> &mut BTreeMap<String, ImageStateSummary> {
        &mut self.image_states
    }

    /// Accounts a pod on this node.
    pub fn add_pod(&mut self, pod: impl Into<Arc<Pod>>) {
        let info = PodInfo::new(pod);
        self.requested.add(&info.requested);
        self.non_zero_requested.milli_cpu += info.non_zero_requested.milli_cpu;
        self.non_zero_requested.memory += info.non_zero_requested.memory;
        for p in host_ports(&info.pod) {
            self.used_ports.add(
                p.host_ip.as_deref(),
                p.protocol.as_deref(),
                p.host_port.unwrap_or(0),
            );
        }
        if has_required_anti_affinity(&info.pod) {
            self.required_anti_affinity_pods += 1;
        }
        self.pods.push(info);
    }

    /// Number of pods here with required pod anti-affinity.
    pub fn required_anti_affinity_pods(&self) -> usize {
        self.required_anti_affinity_pods
    }

    /// Swaps in a newer version of a pod that counts the same (its
    /// binding confirmed): the accounting stays, the old object is let go.
    /// False if the pod is not here.
    pub fn replace_pod(&mut self, pod: Arc<Pod>) -> bool {
        let (ns, name) = (
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or_default(),
        );
        match self
            .pods
            .iter_mut()
            .find(|p| p.namespace() == ns && p.name() == name)
        {
            Some(info) => {
                info.pod = pod;
                true
            }
            None => false,
        }
    }

    /// Removes a pod by namespace and name, undoing its accounting.
    pub fn remove_pod(&mut self, namespace: &str, name: &str) -> Option<PodInfo> {
        let idx = self
            .pods
            .iter()
            .position(|p| p.namespace() == namespace && p.name() == name)?;
        let info = self.pods.remove(idx);
        if has_required_anti_affinity(&info.pod) {
            self.required_anti_affinity_pods -= 1;
        }
        self.requested.sub(&info.requested);
        self.non_zero_requested.milli_cpu -= info.non_zero_requested.milli_cpu;
        self.non_zero_requested.memory -= info.non_zero_requested.memory;
        for p in host_ports(&info.pod) {
            self.used_ports.remove(
                p.host_ip.as_deref(),
                p.protocol.as_deref(),
                p.host_port.unwrap_or(0),
            );
        }
        Some(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skiff_client::testing::{node, pod};

    #[test]
    fn aggregates_follow_add_and_remove() {
        let mut ni = NodeInfo::new(node("n1").cpu("2").mem("4Gi").build());
        ni.add_pod(pod("a").req_cpu("500m").host_port(80).build());
        ni.add_pod(pod("b").build());
        assert_eq!(ni.requested().milli_cpu, 500);
        assert_eq!(ni.non_zero_requested().milli_cpu, 600);
        assert_eq!(ni.non_zero_requested().memory, 400 * 1024 * 1024);
        assert_eq!(ni.allocatable().allowed_pod_number, 110);
        assert!(ni.used_ports().conflicts(None, None, 80));
        assert!(ni.remove_pod("default", "a").is_some());
        assert_eq!(ni.requested().milli_cpu, 0);
        assert_eq!(ni.non_zero_requested().milli_cpu, 100);
        assert!(ni.used_ports().is_empty());
        assert!(ni.remove_pod("default", "a").is_none());
    }

    #[test]
    fn host_port_conflicts() {
        let mut ports = HostPortInfo::default();
        ports.add(Some("10.0.0.1"), Some("TCP"), 80);
        ports.add(None, Some("UDP"), 53);
        let cases = [
            (None, None, 80, true),                    // wildcard vs specific ip
            (Some("10.0.0.1"), None, 80, true),        // same ip
            (Some("10.0.0.2"), None, 80, false),       // other ip
            (Some("10.0.0.2"), Some("UDP"), 53, true), // specific vs wildcard
            (None, None, 53, false),                   // other protocol
            (None, None, 0, false),                    // no host port
        ];
        for (ip, proto, port, want) in cases {
            assert_eq!(
                ports.conflicts(ip, proto, port),
                want,
                "{ip:?} {proto:?} {port}"
            );
        }
    }
}
