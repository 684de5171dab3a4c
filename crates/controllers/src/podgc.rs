//! Pod garbage collection (upstream's `pod-garbage-collector`): every
//! [`crate::Config::pod_gc_period`] it force-deletes (grace 0)
//! - terminated pods (Succeeded or Failed) beyond
//!   `--terminated-pod-gc-threshold`, evicted ones first, then oldest;
//! - terminating pods on a node that is not Ready and carries the
//!   `node.kubernetes.io/out-of-service` taint;
//! - pods bound to a node that no longer exists: the node is
//!   quarantined first ([`crate::Config::pod_gc_quarantine`], upstream
//!   40 s) and checked again with a GET; such pods are first marked
//!   Failed with the DisruptionTarget condition (DeletionByPodGC);
//! - terminating pods never scheduled to a node.
//!
//! A pod not yet Succeeded or Failed is marked Failed before it is
//! deleted, as upstream does. This module reads pods and nodes from the
//! shared informers; it must not delete anything else.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Api;
use serde_json::json;
use skiff_client::is_not_found;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::context::Context;

/// The taint of a node shut down for good.
pub const OUT_OF_SERVICE_TAINT: &str = "node.kubernetes.io/out-of-service";

/// Errors of one pod's collection.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Marking the pod Failed failed.
    #[error("marking pod {namespace}/{name} failed")]
    MarkFailed {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The delete failed.
    #[error("deleting pod {namespace}/{name}")]
    Delete {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

fn terminated(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(phase, None | Some("Pending" | "Running" | "Unknown"))
}

fn evicted(pod: &Pod) -> bool {
    pod.status.as_ref().is_some_and(|s| {
        s.phase.as_deref() == Some("Failed") && s.reason.as_deref() == Some("Evicted")
    })
}

fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

fn terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Evicted first, then oldest, then by name (upstream's
/// byEvictionAndCreationTimestamp).
fn eviction_then_age(a: &Pod, b: &Pod) -> Ordering {
    evicted(b)
        .cmp(&evicted(a))
        .then_with(|| {
            let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            created(a).cmp(&created(b))
        })
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// The terminated pods beyond `threshold`, in the order they go; none
/// when the threshold is 0 or less.
pub fn terminated_beyond(pods: &[Arc<Pod>], threshold: i32) -> Vec<Arc<Pod>> {
    if threshold <= 0 {
        return Vec::new();
    }
    let mut done: Vec<Arc<Pod>> = pods.iter().filter(|p| terminated(p)).cloned().collect();
    let excess = done.len().saturating_sub(threshold as usize);
    if excess == 0 {
        return Vec::new();
    }
    done.sort_by(|a, b| eviction_then_age(a, b));
    done.truncate(excess);
    done
}

fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

fn out_of_service(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == OUT_OF_SERVICE_TAINT))
}

/// Terminating pods on nodes that are not Ready and out of service.
pub fn terminating_out_of_service(
    pods: &[Arc<Pod>],
    node: impl Fn(&str) -> Option<Arc<Node>>,
) -> Vec<Arc<Pod>> {
    let mut found: Vec<Arc<Pod>> = pods
        .iter()
        .filter(|p| terminating(p))
        .filter(|p| node(node_name(p)).is_some_and(|n| !ready(&n) && out_of_service(&n)))
        .cloned()
        .collect();
    found.sort_by(|a, b| eviction_then_age(a, b));
    found
}

/// The nodes pods are bound to that the informer does not know.
pub fn missing_nodes(pods: &[Arc<Pod>], existing: &HashSet<String>) -> BTreeSet<String> {
    pods.iter()
        .map(|p| node_name(p))
        .filter(|n| !n.is_empty() && !existing.contains(*n))
        .map(String::from)
        .collect()
}

/// Terminating pods that were never scheduled.
pub fn unscheduled_terminating(pods: &[Arc<Pod>]) -> Vec<Arc<Pod>> {
    pods.iter()
        .filter(|p| terminating(p) && node_name(p).is_empty())
        .cloned()
        .collect()
}

/// Nodes in quarantine: when each was first found missing.
#[derive(Debug, Default)]
pub struct Quarantine(HashMap<String, Instant>);

impl Quarantine {
    /// Adds the `missing` nodes not yet quarantined; returns those whose
    /// quarantine (`period`) is over at `now`, taking them out (they are
    /// quarantined again if still missing next time).
    pub fn due(
        &mut self,
        missing: &BTreeSet<String>,
        now: Instant,
        period: Duration,
    ) -> Vec<String> {
        for node in missing {
            self.0.entry(node.clone()).or_insert(now);
        }
        let due: Vec<String> = self
            .0
            .iter()
            .filter(|(_, since)| now.duration_since(**since) >= period)
            .map(|(n, _)| n.clone())
            .collect();
        for node in &due {
            self.0.remove(node);
        }
        due
    }
}

/// Starts pod GC in a controller manager.
pub(crate) fn start(
    context: Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        tracing::info!(controller = "podgc", "starting");
        let pods = context.informers.get::<Pod>();
        let nodes = context.informers.get::<Node>();
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = async { pods.ready().await; nodes.ready().await } => {}
        }
        let (pods, nodes) = (pods.store(), nodes.store());
        let mut quarantine = Quarantine::default();
        loop {
            gc(&context, &pods, &nodes, &mut quarantine).await;
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(context.config.pod_gc_period) => {}
            }
        }
        tracing::info!(controller = "podgc", "stopped");
    })
}

async fn gc(
    context: &Context,
    pods: &Store<Pod>,
    nodes: &Store<Node>,
    quarantine: &mut Quarantine,
) {
    let all = pods.state();
    let node = |name: &str| nodes.get(&ObjectRef::new(name));
    let threshold = context.config.terminated_pod_gc_threshold;
    let mut doomed: Vec<(Arc<Pod>, Option<PodCondition>)> = Vec::new();
    doomed.extend(
        terminated_beyond(&all, threshold)
            .into_iter()
            .map(|p| (p, None)),
    );
    doomed.extend(
        terminating_out_of_service(&all, node)
            .into_iter()
            .map(|p| (p, None)),
    );

    let existing: HashSet<String> = nodes
        .state()
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    let missing = missing_nodes(&all, &existing);
    let due = quarantine.due(&missing, Instant::now(), context.config.pod_gc_quarantine);
    let api: Api<Node> = Api::all(context.client.clone());
    let mut deleted_nodes = HashSet::new();
    for name in due.into_iter().filter(|n| !existing.contains(n)) {
        match api.get_opt(&name).await {
            Ok(None) => {
                deleted_nodes.insert(name);
            }
            Ok(Some(_)) => {}
            Err(e) => tracing::warn!(node = name, error = %e, "pod GC: getting node"),
        }
    }
    for pod in all.iter().filter(|p| deleted_nodes.contains(node_name(p))) {
        let condition = PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            reason: Some("DeletionByPodGC".into()),
            message: Some("PodGC: node no longer exists".into()),
            ..Default::default()
        };
        doomed.push((pod.clone(), Some(condition)));
    }
    doomed.extend(unscheduled_terminating(&all).into_iter().map(|p| (p, None)));

    let mut seen = HashSet::new();
    for (pod, condition) in doomed {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if !seen.insert(uid) {
            continue;
        }
        if let Err(e) = mark_failed_and_delete(context, &pod, condition).await {
            tracing::warn!(error = %crate::runner::Chain(&e), "pod GC");
        }
    }
}

/// Marks `pod` Failed (with `condition`) unless it finished, then
/// deletes it with grace 0.
async fn mark_failed_and_delete(
    context: &Context,
    pod: &Pod,
    condition: Option<PodCondition>,
) -> Result<(), Error> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    tracing::info!(pod = %format!("{namespace}/{name}"), "PodGC is force deleting Pod");
    let api: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    if !terminated(pod) {
        let mut conditions = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        if let Some(mut condition) = condition {
            condition.last_transition_time = Some(Time(Timestamp::now()));
            match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
                Some(existing) if existing.status == condition.status => {
                    condition.last_transition_time = existing.last_transition_time.clone();
                    *existing = condition;
                }
                Some(existing) => *existing = condition,
                None => conditions.push(condition),
            }
        }
        let patch = json!({
            "metadata": {"uid": pod.metadata.uid},
            "status": {"phase": "Failed", "conditions": conditions},
        });
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(source) => {
                return Err(Error::MarkFailed {
                    namespace,
                    name,
                    source,
                })
            }
        }
    }
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&name, &params).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(source) => Err(Error::Delete {
            namespace,
            name,
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        NodeCondition, NodeSpec, NodeStatus, PodSpec, PodStatus, Taint,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn pod(name: &str, age_secs: i64, phase: &str, node: &str) -> Arc<Pod> {
        let created = Timestamp::from_second(1_700_000_000 - age_secs).unwrap();
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                creation_timestamp: Some(Time(created)),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: (!node.is_empty()).then(|| node.to_string()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        })
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<String> {
        pods.iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect()
    }

    fn deleting(p: Arc<Pod>) -> Arc<Pod> {
        let mut p = (*p).clone();
        p.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        Arc::new(p)
    }

    #[test]
    fn terminated_pods_beyond_the_threshold_go_evicted_then_oldest_first() {
        let mut evicted = (*pod("evicted", 1, "Failed", "n")).clone();
        evicted.status.as_mut().unwrap().reason = Some("Evicted".into());
        let pods = vec![
            pod("young", 10, "Succeeded", "n"),
            pod("old", 100, "Failed", "n"),
            pod("running", 1000, "Running", "n"),
            pod("middle", 50, "Succeeded", "n"),
            Arc::new(evicted),
        ];
        assert_eq!(names(&terminated_beyond(&pods, 2)), vec!["evicted", "old"]);
        assert_eq!(names(&terminated_beyond(&pods, 3)), vec!["evicted"]);
        assert!(terminated_beyond(&pods, 4).is_empty());
        assert!(terminated_beyond(&pods, 0).is_empty(), "0 turns it off");
    }

    #[test]
    fn terminating_pods_on_out_of_service_nodes_that_are_not_ready() {
        let node = |ready: bool, tainted: bool| {
            Arc::new(Node {
                metadata: ObjectMeta::default(),
                spec: Some(NodeSpec {
                    taints: tainted.then(|| {
                        vec![Taint {
                            key: OUT_OF_SERVICE_TAINT.into(),
                            effect: "NoExecute".into(),
                            ..Default::default()
                        }]
                    }),
                    ..Default::default()
                }),
                status: Some(NodeStatus {
                    conditions: Some(vec![NodeCondition {
                        type_: "Ready".into(),
                        status: if ready { "True" } else { "False" }.into(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
            })
        };
        let pods = vec![
            deleting(pod("down", 1, "Running", "down")),
            deleting(pod("ready", 1, "Running", "ready")),
            deleting(pod("untainted", 1, "Running", "untainted")),
            pod("alive", 1, "Running", "down"),
        ];
        let lookup = |name: &str| match name {
            "down" => Some(node(false, true)),
            "ready" => Some(node(true, true)),
            "untainted" => Some(node(false, false)),
            _ => None,
        };
        assert_eq!(
            names(&terminating_out_of_service(&pods, lookup)),
            vec!["down"]
        );
    }

    #[test]
    fn pods_on_missing_nodes_wait_out_the_quarantine() {
        let pods = vec![
            pod("a", 1, "Running", "gone"),
            pod("b", 1, "Running", "here"),
            pod("c", 1, "Pending", ""),
        ];
        let existing = HashSet::from(["here".to_string()]);
        let missing = missing_nodes(&pods, &existing);
        assert_eq!(missing, BTreeSet::from(["gone".to_string()]));
        let mut q = Quarantine::default();
        let t0 = Instant::now();
        let period = Duration::from_secs(40);
        assert!(q.due(&missing, t0, period).is_empty());
        assert!(q
            .due(&missing, t0 + Duration::from_secs(39), period)
            .is_empty());
        assert_eq!(
            q.due(&missing, t0 + period, period),
            vec!["gone".to_string()]
        );
        // Checked: quarantined afresh if still missing.
        assert!(q.due(&missing, t0 + period, period).is_empty());
    }

    #[test]
    fn unscheduled_terminating_pods() {
        let pods = vec![
            deleting(pod("unscheduled", 1, "Pending", "")),
            deleting(pod("bound", 1, "Running", "n")),
            pod("waiting", 1, "Pending", ""),
        ];
        assert_eq!(names(&unscheduled_terminating(&pods)), vec!["unscheduled"]);
    }
}
