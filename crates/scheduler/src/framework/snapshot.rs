//! A consistent view of all nodes for one scheduling cycle.
//!
//! This module owns [`Snapshot`]: the [`NodeInfo`]s in a stable order, image
//! spread across nodes, namespace labels for affinity namespace selectors,
//! the cluster's claims, volumes and classes ([`StorageInfo`], for the
//! volume plugins), and the assume/forget operations that account a pod on
//! a node before its binding is confirmed. Building it from API objects is
//! the caller's job; it does no I/O.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;

use super::node_info::{pod_key, NodeInfo, PodInfo};
use skiff_client::selectors::Labels;

/// Errors from assuming or forgetting pods.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// The named node is not in the snapshot.
    #[error("node {0:?} not found in the snapshot")]
    NodeNotFound(String),
    /// The pod is not on the named node.
    #[error("pod {pod} not found on node {node:?}")]
    PodNotFound {
        /// `namespace/name`.
        pod: String,
        /// The node.
        node: String,
    },
}

/// All nodes with their pods.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    nodes: Vec<NodeInfo>,
    index: HashMap<String, usize>,
    /// On how many nodes each image is present.
    image_nodes: HashMap<String, usize>,
    namespace_labels: BTreeMap<String, Labels>,
    /// Pods with required pod anti-affinity on all nodes together, so the
    /// common case (none) is known without visiting every node.
    required_anti_affinity_pods: usize,
    storage: StorageInfo,
}

/// PersistentVolumeClaims (by `namespace/name`), PersistentVolumes and
/// StorageClasses (by name), as the scheduler's informers last saw them
/// (upstream's listers and assume caches, without the assuming).
#[derive(Debug, Clone, Default)]
pub struct StorageInfo {
    claims: HashMap<String, Arc<PersistentVolumeClaim>>,
    volumes: BTreeMap<String, Arc<PersistentVolume>>,
    classes: HashMap<String, Arc<StorageClass>>,
}

fn claim_key(claim: &PersistentVolumeClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or("default"),
        claim.metadata.name.as_deref().unwrap_or_default()
    )
}

impl StorageInfo {
    /// A view of these objects.
    pub fn new(
        claims: impl IntoIterator<Item = PersistentVolumeClaim>,
        volumes: impl IntoIterator<Item = PersistentVolume>,
        classes: impl IntoIterator<Item = StorageClass>,
    ) -> Self {
        let mut info = Self::default();
        claims.into_iter().for_each(|c| {
            info.upsert_claim(c);
        });
        volumes.into_iter().for_each(|v| {
            info.upsert_volume(v);
        });
        classes.into_iter().for_each(|c| {
            info.upsert_class(c);
        });
        info
    }

    /// Claim `name` in `namespace`.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<&Arc<PersistentVolumeClaim>> {
        self.claims.get(&format!("{namespace}/{name}"))
    }

    /// Volume `name`.
    pub fn volume(&self, name: &str) -> Option<&Arc<PersistentVolume>> {
        self.volumes.get(name)
    }

    /// Every volume, by name.
    pub fn volumes(&self) -> impl Iterator<Item = &Arc<PersistentVolume>> {
        self.volumes.values()
    }

    /// Class `name`.
    pub fn class(&self, name: &str) -> Option<&Arc<StorageClass>> {
        self.classes.get(name)
    }

    /// Adds or replaces a claim; true if it is new.
    pub fn upsert_claim(&mut self, claim: PersistentVolumeClaim) -> bool {
        self.claims
            .insert(claim_key(&claim), Arc::new(claim))
            .is_none()
    }

    /// Removes claim `namespace/name`; true if it was known.
    pub fn remove_claim(&mut self, key: &str) -> bool {
        self.claims.remove(key).is_some()
    }

    /// Adds or replaces a volume; true if it is new.
    pub fn upsert_volume(&mut self, volume: PersistentVolume) -> bool {
        let name = volume.metadata.name.clone().unwrap_or_default();
        self.volumes.insert(name, Arc::new(volume)).is_none()
    }

    /// Removes a volume; true if it was known.
    pub fn remove_volume(&mut self, name: &str) -> bool {
        self.volumes.remove(name).is_some()
    }

    /// Adds or replaces a class; true if it is new.
    pub fn upsert_class(&mut self, class: StorageClass) -> bool {
        let name = class.metadata.name.clone().unwrap_or_default();
        self.classes.insert(name, Arc::new(class)).is_none()
    }

    /// Removes a class; true if it was known.
    pub fn remove_class(&mut self, name: &str) -> bool {
        self.classes.remove(name).is_some()
    }

    /// Keys of the known claims (`namespace/name`).
    pub fn claim_keys(&self) -> Vec<String> {
        self.claims.keys().cloned().collect()
    }

    /// Names of the known volumes.
    pub fn volume_names(&self) -> Vec<String> {
        self.volumes.keys().cloned().collect()
    }

    /// Names of the known classes.
    pub fn class_names(&self) -> Vec<String> {
        self.classes.keys().cloned().collect()
    }
}

fn image_names(info: &NodeInfo) -> BTreeSet<String> {
    info.image_states().keys().cloned().collect()
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

impl Snapshot {
    /// Builds a snapshot. Pods count on the node named by `spec.nodeName`;
    /// unassigned pods, pods on unknown nodes and terminal pods (phase
    /// Succeeded or Failed, which the scheduler's informer filters out) are
    /// ignored.
    pub fn new(nodes: impl IntoIterator<Item = Node>, pods: impl IntoIterator<Item = Pod>) -> Self {
        let mut snap = Self::default();
        for node in nodes {
            let info = NodeInfo::new(node);
            snap.index.insert(info.name().to_string(), snap.nodes.len());
            snap.nodes.push(info);
        }
        let mut spread: HashMap<String, usize> = HashMap::new();
        for n in &snap.nodes {
            let names: BTreeSet<&String> = n.image_states().keys().collect();
            for name in names {
                *spread.entry(name.clone()).or_default() += 1;
            }
        }
        for n in &mut snap.nodes {
            for (name, state) in n.image_states_mut() {
                state.num_nodes = spread.get(name).copied().unwrap_or(1);
            }
        }
        snap.image_nodes = spread;
        for pod in pods {
            if is_terminal(&pod) {
                continue;
            }
            let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
                continue;
            };
            match snap.index.get(&node) {
                Some(&i) => snap.nodes[i].add_pod(pod),
                None => tracing::debug!(pod = %pod_key(&pod), %node, "pod on unknown node ignored"),
            }
        }
        snap.recount_anti_affinity();
        snap
    }

    /// Adds namespace labels, used by pod affinity `namespaceSelector`s.
    pub fn with_namespace_labels(mut self, labels: BTreeMap<String, Labels>) -> Self {
        self.namespace_labels = labels;
        self
    }

    /// A namespace's labels, if known.
    pub fn namespace_labels(&self, namespace: &str) -> Option<&Labels> {
        self.namespace_labels.get(namespace)
    }

    /// Adds the cluster's claims, volumes and classes.
    pub fn with_storage(mut self, storage: StorageInfo) -> Self {
        self.storage = storage;
        self
    }

    /// The cluster's claims, volumes and classes.
    pub fn storage(&self) -> &StorageInfo {
        &self.storage
    }

    /// The same, to update from the informers.
    pub fn storage_mut(&mut self) -> &mut StorageInfo {
        &mut self.storage
    }

    fn recount_anti_affinity(&mut self) {
        self.required_anti_affinity_pods = self
            .nodes
            .iter()
            .map(NodeInfo::required_anti_affinity_pods)
            .sum();
    }

    /// Pods with required pod anti-affinity, over all nodes.
    pub fn required_anti_affinity_pods(&self) -> usize {
        self.required_anti_affinity_pods
    }

    /// All nodes, in snapshot order.
    pub fn node_infos(&self) -> &[NodeInfo] {
        &self.nodes
    }

    /// One node by name.
    pub fn get(&self, name: &str) -> Option<&NodeInfo> {
        self.index.get(name).map(|&i| &self.nodes[i])
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True without nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Adds a node, or replaces the object of a known node keeping its
    /// pods (an update). Returns the previous object.
    pub fn upsert_node(&mut self, node: Node) -> Option<Node> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let (i, old, old_images) = match self.index.get(&name) {
            Some(&i) => {
                let old_images = image_names(&self.nodes[i]);
                let old = self.nodes[i].set_node(node);
                (i, Some(old), old_images)
            }
            None => {
                self.index.insert(name, self.nodes.len());
                self.nodes.push(NodeInfo::new(node));
                (self.nodes.len() - 1, None, BTreeSet::new())
            }
        };
        let new_images = image_names(&self.nodes[i]);
        let changed: BTreeSet<String> = old_images
            .symmetric_difference(&new_images)
            .cloned()
            .collect();
        for name in old_images.difference(&new_images) {
            self.count_image(name, -1);
        }
        for name in new_images.difference(&old_images) {
            self.count_image(name, 1);
        }
        self.refresh_image_spread(&changed);
        let spread = &self.image_nodes;
        for (name, state) in self.nodes[i].image_states_mut() {
            state.num_nodes = spread.get(name).copied().unwrap_or(1);
        }
        old
    }

    /// Removes a node with its pods.
    pub fn remove_node(&mut self, name: &str) -> Option<NodeInfo> {
        let i = self.index.remove(name)?;
        let info = self.nodes.swap_remove(i);
        self.required_anti_affinity_pods -= info.required_anti_affinity_pods();
        if let Some(moved) = self.nodes.get(i) {
            self.index.insert(moved.name().to_string(), i);
        }
        let images = image_names(&info);
        for name in &images {
            self.count_image(name, -1);
        }
        self.refresh_image_spread(&images);
        Some(info)
    }

    fn count_image(&mut self, name: &str, delta: isize) {
        let n = self.image_nodes.entry(name.to_string()).or_default();
        *n = n.saturating_add_signed(delta);
        if *n == 0 {
            self.image_nodes.remove(name);
        }
    }

    /// Rewrites the spread of `images` on every node holding them.
    fn refresh_image_spread(&mut self, images: &BTreeSet<String>) {
        if images.is_empty() {
            return;
        }
        for n in &mut self.nodes {
            for (name, state) in n.image_states_mut() {
                if images.contains(name) {
                    state.num_nodes = self.image_nodes.get(name).copied().unwrap_or(1);
                }
            }
        }
    }

    /// Accounts `pod` on `node_name` before its binding is confirmed
    /// (upstream `AssumePod`). The pod is shared, not copied: its
    /// `spec.nodeName` may still be empty; the node it counts on is the
    /// one holding it.
    pub fn assume(
        &mut self,
        pod: impl Into<std::sync::Arc<Pod>>,
        node_name: &str,
    ) -> Result<(), SnapshotError> {
        let pod = pod.into();
        let &i = self
            .index
            .get(node_name)
            .ok_or_else(|| SnapshotError::NodeNotFound(node_name.to_string()))?;
        let before = self.nodes[i].required_anti_affinity_pods();
        self.nodes[i].add_pod(pod);
        self.required_anti_affinity_pods += self.nodes[i].required_anti_affinity_pods() - before;
        Ok(())
    }

    /// Swaps in a newer version of a pod on `node_name` that counts the
    /// same ([`NodeInfo::replace_pod`]). False if it is not there.
    pub fn replace_pod(&mut self, pod: std::sync::Arc<Pod>, node_name: &str) -> bool {
        match self.index.get(node_name) {
            Some(&i) => self.nodes[i].replace_pod(pod),
            None => false,
        }
    }

    /// Undoes [`Snapshot::assume`] (or removes a deleted pod).
    pub fn forget(
        &mut self,
        namespace: &str,
        name: &str,
        node_name: &str,
    ) -> Result<PodInfo, SnapshotError> {
        let &i = self
            .index
            .get(node_name)
            .ok_or_else(|| SnapshotError::NodeNotFound(node_name.to_string()))?;
        let before = self.nodes[i].required_anti_affinity_pods();
        let info = self.nodes[i].remove_pod(namespace, name).ok_or_else(|| {
            SnapshotError::PodNotFound {
                pod: format!("{namespace}/{name}"),
                node: node_name.to_string(),
            }
        })?;
        self.required_anti_affinity_pods -= before - self.nodes[i].required_anti_affinity_pods();
        Ok(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skiff_client::testing::{node, pod};

    #[test]
    fn builds_from_objects() {
        let nodes = vec![
            node("n1").image(&["nginx:1.25"], 100).build(),
            node("n2").image(&["nginx:1.25", "redis:7"], 100).build(),
        ];
        let pods = vec![
            pod("a").node_name("n1").req_cpu("1").build(),
            pod("b")
                .node_name("n1")
                .phase("Succeeded")
                .req_cpu("1")
                .build(),
            pod("c").node_name("gone").build(),
            pod("d").build(),
        ];
        let snap = Snapshot::new(nodes, pods);
        assert_eq!(snap.len(), 2);
        let n1 = snap.get("n1").expect("n1");
        assert_eq!(n1.pods().len(), 1);
        assert_eq!(n1.requested().milli_cpu, 1000);
        assert_eq!(n1.image_states()["nginx:1.25"].num_nodes, 2);
        assert_eq!(
            snap.get("n2").expect("n2").image_states()["redis:7"].num_nodes,
            1
        );
    }

    #[test]
    fn assume_and_forget() {
        let mut snap = Snapshot::new(vec![node("n1").build()], vec![]);
        snap.assume(pod("a").req_cpu("1").build(), "n1")
            .expect("assume");
        assert_eq!(snap.get("n1").expect("n1").requested().milli_cpu, 1000);
        assert_eq!(
            snap.assume(pod("b").build(), "n9"),
            Err(SnapshotError::NodeNotFound("n9".into()))
        );
        snap.forget("default", "a", "n1").expect("forget");
        assert_eq!(snap.get("n1").expect("n1").requested().milli_cpu, 0);
        assert!(matches!(
            snap.forget("default", "a", "n1"),
            Err(SnapshotError::PodNotFound { .. })
        ));
    }

    #[test]
    fn node_updates_keep_pods_and_image_spread() {
        let mut snap = Snapshot::new(
            vec![node("n1").image(&["nginx:1.25"], 100).build()],
            vec![pod("a").node_name("n1").req_cpu("1").build()],
        );
        assert!(snap
            .upsert_node(node("n2").image(&["nginx:1.25"], 100).build())
            .is_none());
        let spread =
            |s: &Snapshot, n: &str| s.get(n).expect(n).image_states()["nginx:1.25"].num_nodes;
        assert_eq!((spread(&snap, "n1"), spread(&snap, "n2")), (2, 2));

        let old = snap.upsert_node(node("n1").cpu("8").label("x", "y").build());
        assert!(old.is_some_and(|o| o.metadata.labels.is_none()));
        let n1 = snap.get("n1").expect("n1");
        assert_eq!(n1.requested().milli_cpu, 1000, "pods kept");
        assert_eq!(n1.allocatable().milli_cpu, 8000);
        assert_eq!(n1.label("x"), Some("y"));
        assert!(n1.image_states().is_empty());
        assert_eq!(spread(&snap, "n2"), 1);

        snap.upsert_node(node("n3").image(&["nginx:1.25"], 100).build());
        assert!(snap.remove_node("n1").is_some());
        assert!(snap.remove_node("n1").is_none());
        assert_eq!(snap.len(), 2);
        assert_eq!((spread(&snap, "n2"), spread(&snap, "n3")), (2, 2));
        snap.remove_node("n2");
        assert_eq!(spread(&snap, "n3"), 1);
        assert!(snap.get("n3").is_some());
    }
}
