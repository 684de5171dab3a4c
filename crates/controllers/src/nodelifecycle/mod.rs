//! The node lifecycle controller (upstream's `nodelifecycle`, events from
//! `node-controller`): watches each node's heartbeat (its Lease in
//! `kube-node-lease` and its Ready condition) and, when neither moves for
//! `--node-monitor-grace-period` (`--node-startup-grace-period` for a node
//! that never posted a Ready condition), marks the node's conditions
//! Unknown ([`health`]); taints nodes by their conditions, NoSchedule and
//! the NoExecute `not-ready`/`unreachable` pair ([`taints`]) at a per-zone
//! rate ([`zones`]); and marks the pods of a node that is not Ready
//! Ready=False (upstream's MarkPodsNotReady).
//!
//! This module owns those writes: node status conditions when stale, the
//! node taints listed in [`taints`], the Ready condition of pods on
//! not-Ready nodes, and the node events RegisteredNode, RemovingNode and
//! NodeNotReady (and NodeNotReady on pods). It never evicts a pod (the
//! taint eviction controller does), and never edits conditions of a node
//! whose heartbeat moves: the kubelet owns them.
//!
//! Staleness is judged by when this controller saw the heartbeat move, by
//! the manager's clock (`Config::clock`); a node's next deadline is a
//! requeue, so nothing polls.

pub mod health;
pub mod taints;
pub mod zones;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Api;
use skiff_client::clock::Clock;
use skiff_client::recorder::{reference_to, EventType, Recorder};
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::runner::{self, Failures};
use health::Observed;
use taints::NoExecute;
use zones::{Bucket, Rates, ZoneState};

/// The events' source component, as upstream's.
pub const COMPONENT: &str = "node-controller";
/// Where kubelets keep their Leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// Errors of one reconcile (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Writing the node's Unknown conditions failed.
    #[error("updating the status of node {node}")]
    Status {
        /// The node.
        node: String,
        /// Why (boxed: kube's errors are large).
        #[source]
        source: Box<kube::Error>,
    },
    /// Writing the node's taints failed.
    #[error("updating the taints of node {node}")]
    Taints {
        /// The node.
        node: String,
        /// Why.
        #[source]
        source: Box<kube::Error>,
    },
    /// Marking a pod not ready failed.
    #[error("marking pod {pod} not ready")]
    Pod {
        /// `namespace/name`.
        pod: String,
        /// Why.
        #[source]
        source: Box<kube::Error>,
    },
}

struct State {
    context: Context,
    nodes: Store<Node>,
    leases: Store<Lease>,
    pods: Store<Pod>,
    recorder: Recorder,
    clock: Arc<dyn Clock>,
    /// What was seen of each node.
    health: Mutex<HashMap<String, Observed>>,
    /// The NoExecute tainting rate limiter of each zone.
    buckets: Mutex<HashMap<String, Bucket>>,
    failures: Failures,
}

/// Starts the controller in a controller manager.
pub(crate) fn start(
    context: Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let nodes = context.informers.get::<Node>();
        let leases = context.informers.get::<Lease>();
        let pods = context.informers.get::<Pod>();
        let controller = Controller::for_stream(nodes.objects(), nodes.store())
            .watches_stream(leases.objects(), |lease: Lease| {
                (lease.metadata.namespace.as_deref() == Some(LEASE_NAMESPACE))
                    .then(|| ObjectRef::new(lease.metadata.name.as_deref().unwrap_or_default()))
            })
            // A pod bound to a node that is not Ready is marked not ready.
            .watches_stream(pods.objects(), |pod: Pod| {
                pod.spec
                    .and_then(|s| s.node_name)
                    .filter(|n| !n.is_empty())
                    .map(|n| ObjectRef::new(&n))
            });
        let state = Arc::new(State {
            recorder: context.recorder(COMPONENT),
            clock: context.config.clock.clone(),
            nodes: nodes.store(),
            leases: leases.store(),
            pods: pods.store(),
            context,
            health: Mutex::default(),
            buckets: Mutex::default(),
            failures: Failures::default(),
        });
        leases.ready().await;
        pods.ready().await;
        nodes.ready().await;
        let removals = {
            let state = state.clone();
            runner::on_deleted(nodes.changes(), shutdown.clone(), move |n| {
                forget_removed(&state, n)
            })
        };
        let run = runner::run(
            "nodelifecycle",
            &nodes,
            controller,
            4,
            reconcile,
            error_policy,
            state,
            shutdown,
        );
        tokio::join!(run, removals);
    })
}

/// Forgets a deleted node (upstream's RemovingNode event).
fn forget_removed(state: &State, node: &Node) {
    let name = node.metadata.name.clone().unwrap_or_default();
    if lock(&state.health).remove(&name).is_some() {
        node_event(
            &state.recorder,
            node,
            "RemovingNode",
            &format!("Node {name} event: Removing Node {name} from Controller"),
        );
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn node_event(recorder: &Recorder, node: &Node, reason: &str, message: &str) {
    let mut about = reference_to(node);
    about.resource_version = None;
    recorder.record_for(&about, EventType::Normal, reason, reason, message);
}

async fn reconcile(node: Arc<Node>, state: Arc<State>) -> Result<Action, Error> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let config = &state.context.config;
    let now = state.clock.now();
    let wall = Time(Timestamp::now());
    let renew = state
        .leases
        .get(&ObjectRef::new(&name).within(LEASE_NAMESPACE))
        .and_then(|l| l.spec.as_ref().and_then(|s| s.renew_time.clone()));
    let (observed, first) = {
        let mut health = lock(&state.health);
        let before = health.get(&name).cloned();
        let observed = health::observe(before.as_ref(), &node, renew.as_ref(), now);
        health.insert(name.clone(), observed.clone());
        (observed, before.is_none())
    };
    if first {
        node_event(
            &state.recorder,
            &node,
            "RegisteredNode",
            &format!("Node {name} event: Registered Node {name} in Controller"),
        );
    }
    let grace = health::grace(
        &node,
        config.node_monitor_grace_period,
        config.node_startup_grace_period,
    );
    let api: Api<Node> = Api::all(state.context.client.clone());
    let mut node = (*node).clone();
    let mut next: Option<Duration> = None;
    if health::stale(&observed, grace, now) {
        if let Some(conditions) = health::stale_conditions(&node, &wall) {
            let was_ready = health::ready(&node).is_some_and(|c| c.status == "True");
            node.status.get_or_insert_with(Default::default).conditions = Some(conditions);
            node = api
                .replace_status(&name, &PostParams::default(), &node)
                .await
                .map_err(|source| Error::Status {
                    node: name.clone(),
                    source: Box::new(source),
                })?;
            tracing::info!(node = %name, "node stopped posting status; conditions set to Unknown");
            if was_ready {
                node_event(
                    &state.recorder,
                    &node,
                    "NodeNotReady",
                    &format!("Node {name} status is now: NodeNotReady"),
                );
            }
        }
    } else {
        // One millisecond past the deadline: stale is strictly after it.
        next = Some(
            health::deadline(&observed, grace).saturating_duration_since(now)
                + Duration::from_millis(1),
        );
    }

    let ready = health::ready(&node).map(|c| c.status.clone());
    let mut no_execute = taints::no_execute_for(ready.as_deref());
    if let NoExecute::Set(key) = no_execute {
        match admit(&state, &node, key, now) {
            Admit::Taint => {}
            Admit::Clear => no_execute = NoExecute::Clear,
            Admit::Later(wait) => {
                no_execute = NoExecute::Leave;
                next = Some(next.map_or(wait, |n| n.min(wait)));
            }
        }
    }
    if let Some(wanted) = taints::desired(&node, no_execute, &wall) {
        let patch = serde_json::json!({
            "metadata": { "resourceVersion": node.metadata.resource_version },
            "spec": { "taints": wanted },
        });
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| Error::Taints {
                node: name.clone(),
                source: Box::new(source),
            })?;
    }

    if ready.as_deref().is_some_and(|s| s != "True") {
        mark_pods_not_ready(&state, &name).await?;
    }
    state.failures.forget(&name);
    Ok(next.map_or_else(Action::await_change, Action::requeue))
}

/// Whether a node may get its NoExecute taint now.
enum Admit {
    Taint,
    /// Every zone is fully disrupted: no NoExecute taints anywhere.
    Clear,
    /// The zone's rate limiter says wait.
    Later(Duration),
}

/// upstream's zone handling, simplified: a node already carrying either
/// NoExecute taint swaps at once; otherwise every zone fully disrupted
/// means no taints at all (the control plane is more likely cut off than
/// every node dead), else the zone's token bucket at the zone's rate.
fn admit(state: &State, node: &Node, key: &str, now: std::time::Instant) -> Admit {
    // The store may not have this node's status just written yet.
    let all = state.nodes.state();
    let others = all
        .iter()
        .map(|n| n.as_ref())
        .filter(|n| n.metadata.name != node.metadata.name);
    let mut counts: HashMap<String, (usize, usize)> = HashMap::new();
    for n in others.chain([node]).filter(|n| zones::counted(n)) {
        let entry = counts.entry(zones::zone_key(n)).or_default();
        if health::ready(n).is_some_and(|c| c.status == "True") {
            entry.0 += 1;
        } else {
            entry.1 += 1;
        }
    }
    let config = &state.context.config;
    let zone_states: HashMap<&String, ZoneState> = counts
        .iter()
        .map(|(z, (r, nr))| {
            (
                z,
                zones::zone_state(*r, *nr, config.unhealthy_zone_threshold),
            )
        })
        .collect();
    if !zone_states.is_empty()
        && zone_states
            .values()
            .all(|s| *s == ZoneState::FullDisruption)
    {
        return Admit::Clear;
    }
    if taints::has(node, key, taints::NO_EXECUTE)
        || taints::has(node, taints::opposite(key), taints::NO_EXECUTE)
    {
        return Admit::Taint;
    }
    let zone = zones::zone_key(node);
    let (zone_state, size) = match (zone_states.get(&zone), counts.get(&zone)) {
        (Some(s), Some((r, nr))) => (*s, r + nr),
        _ => (ZoneState::Normal, 1),
    };
    let rate = zones::zone_rate(
        zone_state,
        size,
        Rates {
            normal: config.node_eviction_rate,
            secondary: config.secondary_node_eviction_rate,
            large_cluster: config.large_cluster_size_threshold,
        },
    );
    let mut buckets = lock(&state.buckets);
    let bucket = buckets.entry(zone).or_insert_with(|| Bucket::new(now));
    match bucket.take(rate, now) {
        Ok(()) => Admit::Taint,
        Err(wait) => Admit::Later(wait.unwrap_or(config.node_monitor_period)),
    }
}

/// upstream's MarkPodsNotReady: every pod bound to the node whose Ready
/// condition is not False gets it False, and the NodeNotReady event.
async fn mark_pods_not_ready(state: &State, node: &str) -> Result<(), Error> {
    let pods: Vec<Arc<Pod>> = state
        .pods
        .state()
        .into_iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .collect();
    for pod in pods {
        let Some(updated) = not_ready(&pod, &Time(Timestamp::now())) else {
            continue;
        };
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(state.context.client.clone(), &namespace);
        match api
            .replace_status(&name, &PostParams::default(), &updated)
            .await
        {
            Ok(_) => {}
            Err(e) if skiff_client::is_not_found(&e) => continue,
            Err(source) => {
                return Err(Error::Pod {
                    pod: format!("{namespace}/{name}"),
                    source: Box::new(source),
                })
            }
        }
        state.recorder.record(
            &pod,
            EventType::Warning,
            "NodeNotReady",
            "NodeNotReady",
            "Node is not ready",
        );
    }
    Ok(())
}

/// The pod with its Ready condition False (transition time `now`), or
/// `None` when it has no Ready condition or it is False already.
pub fn not_ready(pod: &Pod, now: &Time) -> Option<Pod> {
    let mut pod = pod.clone();
    let condition = pod
        .status
        .as_mut()?
        .conditions
        .as_mut()?
        .iter_mut()
        .find(|c| c.type_ == "Ready")?;
    if condition.status == "False" {
        return None;
    }
    condition.status = "False".into();
    condition.last_transition_time = Some(now.clone());
    Some(pod)
}

fn error_policy(node: Arc<Node>, error: &Error, state: Arc<State>) -> Action {
    let key = node.metadata.name.clone().unwrap_or_default();
    tracing::debug!(node = %key, error = %crate::runner::Chain(error), "node lifecycle");
    Action::requeue(state.failures.next_delay(&key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};

    #[test]
    fn pods_are_marked_not_ready_once() {
        let now = Time(Timestamp::now());
        let mut pod = Pod::default();
        assert!(not_ready(&pod, &now).is_none(), "no status");
        pod.status = Some(PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        let marked = not_ready(&pod, &now).expect("marked");
        let c = &marked
            .status
            .as_ref()
            .expect("status")
            .conditions
            .as_ref()
            .expect("conditions")[0];
        assert_eq!(c.status, "False");
        assert_eq!(c.last_transition_time.as_ref(), Some(&now));
        assert!(not_ready(&marked, &now).is_none(), "already False");
    }
}
