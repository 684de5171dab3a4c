//! The pod builder.

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, NodeAffinity, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, Pod, PodAffinity, PodAffinityTerm, PodAntiAffinity, PodSpec, PodStatus,
    PreferredSchedulingTerm, ResourceRequirements, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};

/// Starts a pod in namespace `default` with one container `c0` running
/// `busybox` and no requests.
pub fn pod(name: &str) -> PodBuilder {
    let mut p = Pod::default();
    p.metadata.name = Some(name.to_string());
    p.metadata.namespace = Some("default".to_string());
    p.spec = Some(PodSpec {
        containers: vec![container("c0", "busybox")],
        ..Default::default()
    });
    PodBuilder { pod: p }
}

fn container(name: &str, image: &str) -> Container {
    Container {
        name: name.to_string(),
        image: Some(image.to_string()),
        ..Default::default()
    }
}

fn set_request(c: &mut Container, name: &str, quantity: &str) {
    if quantity.is_empty() {
        return;
    }
    let res = c
        .resources
        .get_or_insert_with(ResourceRequirements::default);
    res.requests
        .get_or_insert_with(Default::default)
        .insert(name.to_string(), Quantity(quantity.to_string()));
}

/// Builds a [`Pod`]. Request and port setters apply to the last container.
#[derive(Debug, Clone)]
pub struct PodBuilder {
    pod: Pod,
}

impl From<Pod> for PodBuilder {
    /// Continues building from an existing pod.
    fn from(pod: Pod) -> Self {
        Self { pod }
    }
}

impl PodBuilder {
    fn spec(&mut self) -> &mut PodSpec {
        self.pod.spec.get_or_insert_with(Default::default)
    }

    fn last(&mut self) -> &mut Container {
        let containers = &mut self.spec().containers;
        if containers.is_empty() {
            containers.push(container("c0", "busybox"));
        }
        let i = containers.len() - 1;
        &mut containers[i]
    }

    fn affinity(&mut self) -> &mut Affinity {
        self.spec().affinity.get_or_insert_with(Default::default)
    }

    fn node_affinity(&mut self) -> &mut NodeAffinity {
        self.affinity()
            .node_affinity
            .get_or_insert_with(Default::default)
    }

    /// Sets the namespace.
    pub fn ns(mut self, namespace: &str) -> Self {
        self.pod.metadata.namespace = Some(namespace.to_string());
        self
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.pod
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(key.to_string(), value.to_string());
        self
    }

    /// Appends a container.
    pub fn container(mut self, name: &str, image: &str) -> Self {
        self.spec().containers.push(container(name, image));
        self
    }

    /// Sets the last container's image.
    pub fn image(mut self, image: &str) -> Self {
        self.last().image = Some(image.to_string());
        self
    }

    /// Requests a resource on the last container.
    pub fn req(mut self, name: &str, quantity: &str) -> Self {
        set_request(self.last(), name, quantity);
        self
    }

    /// Requests cpu on the last container.
    pub fn req_cpu(self, quantity: &str) -> Self {
        self.req("cpu", quantity)
    }

    /// Requests memory on the last container.
    pub fn req_mem(self, quantity: &str) -> Self {
        self.req("memory", quantity)
    }

    fn push_init(mut self, name: &str, cpu: &str, mem: &str, sidecar: bool) -> Self {
        let mut c = container(name, "busybox");
        set_request(&mut c, "cpu", cpu);
        set_request(&mut c, "memory", mem);
        c.restart_policy = sidecar.then(|| "Always".to_string());
        self.spec()
            .init_containers
            .get_or_insert_with(Vec::new)
            .push(c);
        self
    }

    /// Appends an init container with cpu/memory requests (`""` = none).
    pub fn init_container(self, name: &str, cpu: &str, mem: &str) -> Self {
        self.push_init(name, cpu, mem, false)
    }

    /// Appends a sidecar (init container with `restartPolicy: Always`).
    pub fn sidecar(self, name: &str, cpu: &str, mem: &str) -> Self {
        self.push_init(name, cpu, mem, true)
    }

    /// Sets the pod overhead.
    pub fn overhead(mut self, cpu: &str, mem: &str) -> Self {
        let overhead = [("cpu", cpu), ("memory", mem)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect();
        self.spec().overhead = Some(overhead);
        self
    }

    /// Sets `spec.nodeName`.
    pub fn node_name(mut self, node: &str) -> Self {
        self.spec().node_name = Some(node.to_string());
        self
    }

    /// Adds a `spec.nodeSelector` entry.
    pub fn node_selector(mut self, key: &str, value: &str) -> Self {
        self.spec()
            .node_selector
            .get_or_insert_with(Default::default)
            .insert(key.to_string(), value.to_string());
        self
    }

    /// Adds a toleration; empty strings mean unset.
    pub fn toleration(mut self, key: &str, operator: &str, value: &str, effect: &str) -> Self {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
        let t = Toleration {
            key: opt(key),
            operator: opt(operator),
            value: opt(value),
            effect: opt(effect),
            toleration_seconds: None,
        };
        self.spec().tolerations.get_or_insert_with(Vec::new).push(t);
        self
    }

    /// Adds a TCP host port on 0.0.0.0 to the last container.
    pub fn host_port(self, port: i32) -> Self {
        self.host_port_on(port, "", "")
    }

    /// Adds a host port with protocol and host IP (`""` = default).
    pub fn host_port_on(mut self, port: i32, protocol: &str, ip: &str) -> Self {
        let p = ContainerPort {
            container_port: port,
            host_port: Some(port),
            protocol: (!protocol.is_empty()).then(|| protocol.to_string()),
            host_ip: (!ip.is_empty()).then(|| ip.to_string()),
            name: None,
        };
        self.last().ports.get_or_insert_with(Vec::new).push(p);
        self
    }

    /// Adds a required node affinity term (terms are ORed).
    pub fn required_node_term(mut self, exprs: Vec<NodeSelectorRequirement>) -> Self {
        let term = NodeSelectorTerm {
            match_expressions: Some(exprs),
            match_fields: None,
        };
        let ns = self
            .node_affinity()
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(NodeSelector::default);
        ns.node_selector_terms.push(term);
        self
    }

    /// Adds a fully specified required node selector term.
    pub fn required_node_selector_term(mut self, term: NodeSelectorTerm) -> Self {
        let ns = self
            .node_affinity()
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(NodeSelector::default);
        ns.node_selector_terms.push(term);
        self
    }

    /// Adds a required node affinity term with one `matchFields` entry.
    pub fn required_node_field(mut self, key: &str, operator: &str, value: &str) -> Self {
        let term = NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![super::req(key, operator, &[value])]),
        };
        let ns = self
            .node_affinity()
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(NodeSelector::default);
        ns.node_selector_terms.push(term);
        self
    }

    /// Adds a preferred node affinity term.
    pub fn preferred_node_term(mut self, weight: i32, exprs: Vec<NodeSelectorRequirement>) -> Self {
        let preference = NodeSelectorTerm {
            match_expressions: Some(exprs),
            match_fields: None,
        };
        self.node_affinity()
            .preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(PreferredSchedulingTerm { preference, weight });
        self
    }

    /// Adds a required pod affinity term.
    pub fn pod_affinity_term(mut self, term: PodAffinityTerm) -> Self {
        let pa = self
            .affinity()
            .pod_affinity
            .get_or_insert_with(PodAffinity::default);
        pa.required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(term);
        self
    }

    /// Adds a required pod anti-affinity term.
    pub fn pod_anti_affinity_term(mut self, term: PodAffinityTerm) -> Self {
        let pa = self
            .affinity()
            .pod_anti_affinity
            .get_or_insert_with(PodAntiAffinity::default);
        pa.required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(term);
        self
    }

    /// Required pod affinity to pods matching `selector` in the same
    /// namespace, within `topology_key`.
    pub fn pod_affinity(self, topology_key: &str, selector: LabelSelector) -> Self {
        self.pod_affinity_term(affinity_term(topology_key, selector))
    }

    /// Required pod anti-affinity, like [`PodBuilder::pod_affinity`].
    pub fn pod_anti_affinity(self, topology_key: &str, selector: LabelSelector) -> Self {
        self.pod_anti_affinity_term(affinity_term(topology_key, selector))
    }

    /// Adds a topology spread constraint.
    pub fn spread(
        self,
        max_skew: i32,
        topology_key: &str,
        when: &str,
        selector: LabelSelector,
    ) -> Self {
        self.spread_constraint(TopologySpreadConstraint {
            max_skew,
            topology_key: topology_key.to_string(),
            when_unsatisfiable: when.to_string(),
            label_selector: Some(selector),
            ..Default::default()
        })
    }

    /// Adds a fully specified topology spread constraint.
    pub fn spread_constraint(mut self, c: TopologySpreadConstraint) -> Self {
        self.spec()
            .topology_spread_constraints
            .get_or_insert_with(Vec::new)
            .push(c);
        self
    }

    /// Sets `preemptionPolicy: Never`.
    pub fn preemption_never(mut self) -> Self {
        self.spec().preemption_policy = Some("Never".to_string());
        self
    }

    /// Sets `status.phase`.
    pub fn phase(mut self, phase: &str) -> Self {
        self.pod.status.get_or_insert_with(PodStatus::default).phase = Some(phase.to_string());
        self
    }

    /// Marks the pod as being deleted.
    pub fn terminating(mut self) -> Self {
        self.pod.metadata.deletion_timestamp = Some(Time(Default::default()));
        self
    }

    /// The pod.
    pub fn build(self) -> Pod {
        self.pod
    }
}

/// A pod affinity term over the pod's own namespace.
pub fn affinity_term(topology_key: &str, selector: LabelSelector) -> PodAffinityTerm {
    PodAffinityTerm {
        topology_key: topology_key.to_string(),
        label_selector: Some(selector),
        ..Default::default()
    }
}
