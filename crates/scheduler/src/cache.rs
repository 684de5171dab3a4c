//! The scheduler's view of the cluster: nodes, assigned pods and assumed
//! pods, and the claims, volumes and classes the volume plugins read, kept
//! as one incrementally updated [`Snapshot`].
//!
//! This module owns [`Cache`] (upstream `schedulerCache`). Watch events
//! feed it nodes and assigned pods; the scheduling loop *assumes* a pod on
//! its chosen node the moment it decides, so the next pod already sees its
//! resources while the binding is in flight, and *forgets* it if the
//! binding fails. When the watch shows the pod assigned, the assumption is
//! confirmed (replaced by the real object). Pods whose node is not known
//! yet are kept and counted once the node appears. Each change reports the
//! [`ClusterEvent`] it amounts to, for the queue. It does no I/O.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::cluster_event::{ClusterEvent, NodeChanges};
use crate::framework::{pod_key, Snapshot, SnapshotError};

/// Errors from assuming a pod.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The pod is already assumed or assigned.
    #[error("pod {0} is already in the scheduler cache")]
    AlreadyCached(String),
    /// The node is not in the cache.
    #[error("assuming pod {pod}")]
    Assume {
        /// `namespace/name`.
        pod: String,
        /// Why.
        #[source]
        source: SnapshotError,
    },
}

/// `Result` with [`CacheError`].
pub type Result<T, E = CacheError> = std::result::Result<T, E>;

#[derive(Debug)]
struct CachedPod {
    /// Shared with the snapshot; `spec.nodeName` is still empty while
    /// assumed.
    pod: Arc<Pod>,
    node: String,
    assumed: bool,
}

/// Nodes and pods as the scheduler counts them.
#[derive(Debug, Default)]
pub struct Cache {
    snapshot: Snapshot,
    pods: HashMap<String, CachedPod>,
    by_node: HashMap<String, BTreeSet<String>>,
}

fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// Whether two versions of a pod weigh the same for the node they are on:
/// labels (pod affinity, spread), containers (requests, ports, images),
/// overhead and affinity terms.
fn counts_the_same(a: &Pod, b: &Pod) -> bool {
    let same_spec = match (&a.spec, &b.spec) {
        (Some(x), Some(y)) => {
            x.containers == y.containers
                && x.init_containers == y.init_containers
                && x.overhead == y.overhead
                && x.affinity == y.affinity
                && x.topology_spread_constraints == y.topology_spread_constraints
        }
        (None, None) => true,
        _ => false,
    };
    a.metadata.labels == b.metadata.labels && a.metadata.uid == b.metadata.uid && same_spec
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

impl Cache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current view, assumed pods included.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Adds or updates a node. Returns `NodeAdd`, a `NodeUpdate` with the
    /// relaxing changes, or `None` for an update that relaxes nothing.
    pub fn upsert_node(&mut self, node: Node) -> Option<ClusterEvent> {
        let name = node.metadata.name.clone().unwrap_or_default();
        match self.snapshot.upsert_node(node) {
            None => {
                for key in self.by_node.get(&name).into_iter().flatten() {
                    if let Some(p) = self.pods.get(key) {
                        if let Err(e) = self.snapshot.assume(p.pod.clone(), &name) {
                            tracing::warn!(pod = %key, error = %e, "pod not counted on its node");
                        }
                    }
                }
                Some(ClusterEvent::NodeAdd)
            }
            Some(old) => {
                let new = self.snapshot.get(&name).map(|n| n.node())?;
                let changes = NodeChanges::between(&old, new);
                (!changes.is_empty()).then_some(ClusterEvent::NodeUpdate(changes))
            }
        }
    }

    /// Removes a node; its pods stay cached in case it comes back.
    pub fn remove_node(&mut self, name: &str) -> Option<ClusterEvent> {
        self.snapshot
            .remove_node(name)
            .map(|_| ClusterEvent::NodeDelete)
    }

    fn insert(&mut self, key: String, pod: Arc<Pod>, node: String, assumed: bool) {
        // One copy shared by the queue, the cache and the snapshot: an
        // assumed pod keeps its empty spec.nodeName (its node is `node`).
        if let Err(e) = self.snapshot.assume(pod.clone(), &node) {
            tracing::debug!(pod = %key, error = %e, "pod on a node not seen yet");
        }
        self.by_node
            .entry(node.clone())
            .or_default()
            .insert(key.clone());
        self.pods.insert(key, CachedPod { pod, node, assumed });
    }

    fn take(&mut self, key: &str) -> Option<CachedPod> {
        let p = self.pods.remove(key)?;
        let ns = p.pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = p.pod.metadata.name.as_deref().unwrap_or_default();
        // The node may be unknown: then the pod was not counted.
        let _ = self.snapshot.forget(ns, name, &p.node);
        if let Some(keys) = self.by_node.get_mut(&p.node) {
            keys.remove(key);
            if keys.is_empty() {
                self.by_node.remove(&p.node);
            }
        }
        Some(p)
    }

    /// Counts `pod` on `node` before its binding is confirmed.
    pub fn assume(&mut self, pod: impl Into<Arc<Pod>>, node: &str) -> Result<()> {
        let pod = pod.into();
        let key = pod_key(&pod);
        if self.pods.contains_key(&key) {
            return Err(CacheError::AlreadyCached(key));
        }
        if self.snapshot.get(node).is_none() {
            return Err(CacheError::Assume {
                pod: key,
                source: SnapshotError::NodeNotFound(node.to_string()),
            });
        }
        self.insert(key, pod, node.to_string(), true);
        Ok(())
    }

    /// Undoes an assumption (the binding failed). False if the pod is not
    /// assumed (e.g. the watch confirmed it meanwhile).
    pub fn forget(&mut self, key: &str) -> bool {
        if !self.is_assumed(key) {
            return false;
        }
        self.take(key).is_some()
    }

    /// An assigned pod from the watch: confirms an assumption or adds or
    /// updates the pod. Terminal pods are removed.
    pub fn add_or_update_pod(&mut self, pod: impl Into<Arc<Pod>>) -> Option<ClusterEvent> {
        let pod = pod.into();
        let key = pod_key(&pod);
        if is_terminal(&pod) {
            return self.remove_pod(&key);
        }
        let node = node_name(&pod)?.to_string();
        // The common case: the binding of a pod we assumed. Its accounting
        // on the node is already right; only the object (in the cache and
        // the snapshot alike: the assumed version is let go) and the flag
        // change.
        if let Some(cached) = self.pods.get_mut(&key) {
            if cached.assumed && cached.node == node && counts_the_same(&cached.pod, &pod) {
                // The node may be unknown: then the pod was not counted.
                self.snapshot.replace_pod(pod.clone(), &node);
                cached.pod = pod;
                cached.assumed = false;
                return Some(ClusterEvent::AssignedPodAdd);
            }
        }
        let old = self.take(&key);
        let event = match &old {
            Some(old) if !old.assumed => (old.pod.metadata.labels != pod.metadata.labels)
                .then_some(ClusterEvent::AssignedPodUpdate),
            _ => Some(ClusterEvent::AssignedPodAdd),
        };
        self.insert(key, pod, node, false);
        event
    }

    /// An assigned pod went away.
    pub fn remove_pod(&mut self, key: &str) -> Option<ClusterEvent> {
        self.take(key).map(|_| ClusterEvent::AssignedPodDelete)
    }

    /// Whether the pod is assumed and not yet confirmed.
    pub fn is_assumed(&self, key: &str) -> bool {
        self.pods.get(key).is_some_and(|p| p.assumed)
    }

    /// Whether the pod is assumed or assigned.
    pub fn contains_pod(&self, key: &str) -> bool {
        self.pods.contains_key(key)
    }

    /// Keys of assigned (confirmed) pods.
    pub fn confirmed_pods(&self) -> Vec<String> {
        self.pods
            .iter()
            .filter(|(_, p)| !p.assumed)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Names of known nodes.
    pub fn node_names(&self) -> Vec<String> {
        self.snapshot
            .node_infos()
            .iter()
            .map(|n| n.name().to_string())
            .collect()
    }

    /// Pods cached (assumed and assigned).
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// Adds or updates a claim: `ClaimAdd` or `ClaimUpdate`.
    pub fn upsert_claim(&mut self, claim: PersistentVolumeClaim) -> Option<ClusterEvent> {
        let added = self.snapshot.storage_mut().upsert_claim(claim);
        Some(if added {
            ClusterEvent::ClaimAdd
        } else {
            ClusterEvent::ClaimUpdate
        })
    }

    /// Removes claim `namespace/name` (no plugin waits for that).
    pub fn remove_claim(&mut self, key: &str) -> Option<ClusterEvent> {
        self.snapshot.storage_mut().remove_claim(key);
        None
    }

    /// Adds or updates a volume: `VolumeAdd` or `VolumeUpdate`.
    pub fn upsert_volume(&mut self, volume: PersistentVolume) -> Option<ClusterEvent> {
        let added = self.snapshot.storage_mut().upsert_volume(volume);
        Some(if added {
            ClusterEvent::VolumeAdd
        } else {
            ClusterEvent::VolumeUpdate
        })
    }

    /// Removes a volume.
    pub fn remove_volume(&mut self, name: &str) -> Option<ClusterEvent> {
        self.snapshot.storage_mut().remove_volume(name);
        None
    }

    /// Adds or updates a class: `StorageClassAdd` or `StorageClassUpdate`.
    pub fn upsert_class(&mut self, class: StorageClass) -> Option<ClusterEvent> {
        let added = self.snapshot.storage_mut().upsert_class(class);
        Some(if added {
            ClusterEvent::StorageClassAdd
        } else {
            ClusterEvent::StorageClassUpdate
        })
    }

    /// Removes a class.
    pub fn remove_class(&mut self, name: &str) -> Option<ClusterEvent> {
        self.snapshot.storage_mut().remove_class(name);
        None
    }
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
