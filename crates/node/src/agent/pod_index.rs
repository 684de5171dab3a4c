//! [`PodIndex`]: what the agent's server needs to know of this node's
//! pods: names to UIDs and containers (kept from the pod watch by the
//! dispatcher) and which containers run (from the relist). Cheap reads
//! behind locks.
//!
//! It only mirrors; it never asks the API or the runtime itself. It also
//! carries the agent's metrics (served by the same endpoint) to the
//! dispatcher that feeds them.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

/// What the agent's server needs to know of pods: names to UIDs and
/// containers (from the pod watch), and which containers run (from the
/// relist). Cheap reads; written by `run_pods`.
#[derive(Debug, Clone, Default)]
pub(crate) struct PodIndex {
    pods: Arc<std::sync::RwLock<HashMap<(String, String), crate::server::PodLogInfo>>>,
    running: Arc<std::sync::RwLock<HashSet<(String, String)>>>,
    /// Where the dispatcher reports pod starts, syncs and relists.
    metrics: Option<Arc<crate::metrics::NodeMetrics>>,
}

impl PodIndex {
    /// The index of an agent whose dispatcher feeds `metrics`.
    pub(crate) fn with_metrics(mut self, metrics: Arc<crate::metrics::NodeMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    pub(crate) fn metrics(&self) -> Option<&Arc<crate::metrics::NodeMetrics>> {
        self.metrics.as_ref()
    }

    pub(crate) fn lookup(&self, namespace: &str, name: &str) -> Option<crate::server::PodLogInfo> {
        let pods = self.pods.read().unwrap_or_else(|p| p.into_inner());
        pods.get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    pub(crate) fn is_running(&self, uid: &str, container: &str) -> bool {
        let running = self.running.read().unwrap_or_else(|p| p.into_inner());
        running.contains(&(uid.to_string(), container.to_string()))
    }

    pub(crate) fn set(&self, pod: &Pod) {
        let (Some(uid), Some(name)) = (pod.metadata.uid.clone(), pod.metadata.name.clone()) else {
            return;
        };
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let spec = pod.spec.as_ref();
        // (name, tty) of every container the spec names.
        let all: Vec<(String, bool)> = spec
            .into_iter()
            .flat_map(|s| {
                s.init_containers
                    .iter()
                    .flatten()
                    .map(|c| (c.name.clone(), c.tty == Some(true)))
                    .chain(
                        s.containers
                            .iter()
                            .map(|c| (c.name.clone(), c.tty == Some(true))),
                    )
                    .chain(
                        s.ephemeral_containers
                            .iter()
                            .flatten()
                            .map(|c| (c.name.clone(), c.tty == Some(true))),
                    )
            })
            .collect();
        let tty_containers = all
            .iter()
            .filter(|(_, tty)| *tty)
            .map(|(n, _)| n.clone())
            .collect();
        let containers = all.into_iter().map(|(n, _)| n).collect();
        let mut pods = self.pods.write().unwrap_or_else(|p| p.into_inner());
        pods.insert(
            (ns, name),
            crate::server::PodLogInfo {
                uid,
                containers,
                tty_containers,
            },
        );
    }

    pub(crate) fn remove(&self, pod: &Pod) {
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let mut pods = self.pods.write().unwrap_or_else(|p| p.into_inner());
        if pods
            .get(&(ns.clone(), name.clone()))
            .map(|i| i.uid.as_str())
            == pod.metadata.uid.as_deref()
        {
            pods.remove(&(ns, name));
        }
    }

    pub(crate) fn set_running(&self, running: HashSet<(String, String)>) {
        *self.running.write().unwrap_or_else(|p| p.into_inner()) = running;
    }
}
