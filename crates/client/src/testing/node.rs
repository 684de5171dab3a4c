//! The node builder.

use k8s_openapi::api::core::v1::{ContainerImage, Node, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Starts a node with allocatable cpu 4, memory 8Gi, 110 pods.
pub fn node(name: &str) -> NodeBuilder {
    let mut n = Node::default();
    n.metadata.name = Some(name.to_string());
    let allocatable = [("cpu", "4"), ("memory", "8Gi"), ("pods", "110")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect();
    n.status = Some(NodeStatus {
        allocatable: Some(allocatable),
        ..Default::default()
    });
    NodeBuilder { node: n }
}

/// Builds a [`Node`].
#[derive(Debug, Clone)]
pub struct NodeBuilder {
    node: Node,
}

impl NodeBuilder {
    fn status(&mut self) -> &mut NodeStatus {
        self.node.status.get_or_insert_with(Default::default)
    }

    fn spec(&mut self) -> &mut NodeSpec {
        self.node.spec.get_or_insert_with(Default::default)
    }

    /// Sets one allocatable resource.
    pub fn allocatable(mut self, name: &str, quantity: &str) -> Self {
        self.status()
            .allocatable
            .get_or_insert_with(Default::default)
            .insert(name.to_string(), Quantity(quantity.to_string()));
        self
    }

    /// Allocatable cpu.
    pub fn cpu(self, quantity: &str) -> Self {
        self.allocatable("cpu", quantity)
    }

    /// Allocatable memory.
    pub fn mem(self, quantity: &str) -> Self {
        self.allocatable("memory", quantity)
    }

    /// Allocatable pod count.
    pub fn pods(self, count: u32) -> Self {
        self.allocatable("pods", &count.to_string())
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.node
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(key.to_string(), value.to_string());
        self
    }

    /// Adds a taint (`value` may be empty).
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        let taint = Taint {
            key: key.to_string(),
            value: (!value.is_empty()).then(|| value.to_string()),
            effect: effect.to_string(),
            time_added: None,
        };
        self.spec().taints.get_or_insert_with(Vec::new).push(taint);
        self
    }

    /// Marks the node unschedulable (cordoned).
    pub fn unschedulable(mut self) -> Self {
        self.spec().unschedulable = Some(true);
        self
    }

    /// Adds an image known by `names`, of `size` bytes.
    pub fn image(mut self, names: &[&str], size: i64) -> Self {
        let image = ContainerImage {
            names: Some(names.iter().map(|n| n.to_string()).collect()),
            size_bytes: Some(size),
        };
        self.status()
            .images
            .get_or_insert_with(Vec::new)
            .push(image);
        self
    }

    /// The node.
    pub fn build(self) -> Node {
        self.node
    }
}
