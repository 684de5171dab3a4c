//! Registering the Node and keeping its status current through the API
//! (upstream's `registerWithAPIServer` and `updateNodeStatus`).
//!
//! This module owns the Node calls: create (or, when the Node exists,
//! reconcile its labels, keeping everything else such as spec.podCIDR),
//! retried with kubelet's backoff (100 ms doubling to 7 s) while the API
//! is unreachable; then, every `status_update_frequency`, the status is
//! computed from the Node last written and patched (from a fresh GET as
//! kubelet does, retried up to five times) when it changed beyond the
//! heartbeat times, when the agent's health changes, when its watch of
//! the Node shows other conditions than it would write (the node
//! lifecycle controller's Unknown, written while the agent was cut off;
//! kubelet compares with the Node it GETs), or when
//! `status_report_frequency` has passed since the last patch (kubelet's
//! nodeStatusReportFrequency: the Lease is the frequent heartbeat, so
//! thousands of nodes do not each patch their Node every 10 s). What the status says is
//! [`super::node`]'s; this module must not compute it, nor touch the
//! Node's spec.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus, Taint};
use k8s_openapi::jiff::Timestamp;
use kube::api::{GetParams, Patch, PatchParams, PostParams};
use kube::Api;
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::node::{desired_status, initial_node, label_patch, status_patch, Facts};
use super::Health;

/// kubelet's `nodeStatusUpdateRetry`.
const STATUS_UPDATE_RETRIES: usize = 5;
/// kubelet's registration backoff: first step and cap.
const REGISTER_FIRST_STEP: Duration = Duration::from_millis(100);
const REGISTER_MAX_STEP: Duration = Duration::from_secs(7);

/// A Node call that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused the Node as invalid: retrying cannot help
    /// (bad labels or taints in the agent's configuration).
    #[error("the API server refused to register node {name}")]
    Rejected {
        /// The node.
        name: String,
        /// The refusal.
        #[source]
        source: kube::Error,
    },
    /// POST of the Node failed.
    #[error("unable to register node {name:?} with API server")]
    Create {
        /// The node.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// GET of the Node failed.
    #[error("error getting node {name:?}")]
    Get {
        /// The node.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The label patch of a re-registration failed.
    #[error("unable to reconcile the labels of node {name:?}")]
    Labels {
        /// The node.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// PATCH of nodes/NAME/status failed.
    #[error("error patching the status of node {name:?}")]
    Patch {
        /// The node.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Registers until it succeeds, the Node is refused as invalid
/// ([`Error::Rejected`]) or `shutdown` fires (`Ok(None)`).
pub(super) async fn register(
    api: &Api<Node>,
    facts: &Facts,
    labels: &BTreeMap<String, String>,
    taints: &[Taint],
    health: &Health,
    shutdown: &CancellationToken,
) -> Result<Option<Node>> {
    let mut step = REGISTER_FIRST_STEP;
    loop {
        tracing::info!(node = %facts.node_name, "attempting to register node");
        match try_register(api, facts, labels, taints, health).await {
            Ok(node) => {
                tracing::info!(node = %facts.node_name, "successfully registered node");
                return Ok(Some(node));
            }
            Err(e @ Error::Rejected { .. }) => return Err(e),
            Err(e) => {
                tracing::warn!(error = %error_chain(&e), "node registration failed, will retry")
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(None),
            _ = tokio::time::sleep(step) => {}
        }
        step = (step * 2).min(REGISTER_MAX_STEP);
    }
}

/// One attempt of upstream's `tryRegisterWithAPIServer`.
async fn try_register(
    api: &Api<Node>,
    facts: &Facts,
    labels: &BTreeMap<String, String>,
    taints: &[Taint],
    health: &Health,
) -> Result<Node> {
    let name = facts.node_name.clone();
    let node = initial_node(facts, labels, taints, health, Timestamp::now());
    let err = match api.create(&PostParams::default(), &node).await {
        Ok(created) => return Ok(created),
        Err(e) => e,
    };
    match &err {
        kube::Error::Api(s) if s.reason == "AlreadyExists" => {}
        kube::Error::Api(s) if s.code == 422 || s.code == 400 => {
            return Err(Error::Rejected { name, source: err })
        }
        _ => return Err(Error::Create { name, source: err }),
    }
    let existing = api.get(&name).await.map_err(|source| Error::Get {
        name: name.clone(),
        source,
    })?;
    tracing::info!(node = %name, "node was previously registered");
    let Some(patch) = label_patch(facts, labels, &existing) else {
        return Ok(existing);
    };
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::Labels { name, source })
}

/// How often the status is looked at and how often it is patched
/// when nothing changed.
#[derive(Debug, Clone, Copy)]
pub(super) struct Every {
    pub update: Duration,
    pub report: Duration,
}

/// Patches the status when it changes (looked at every `every.update`),
/// when `health` changes, when the conditions `seen` on the API server
/// (the agent's watch of its Node) are not the ones it wrote (the node
/// lifecycle controller marked them Unknown while the agent was cut
/// off: kubelet compares with the server's Node each update) and every
/// `every.report`, until `shutdown`. `registered` is the Node as
/// registration left it.
#[allow(clippy::too_many_arguments)] // the heartbeat loop's whole context, passed once
pub(super) async fn run(
    api: Api<Node>,
    facts: &Facts,
    mut health: watch::Receiver<Health>,
    mut seen: watch::Receiver<Option<Vec<NodeCondition>>>,
    every: Every,
    registered: Node,
    events: Option<super::events::NodeEvents>,
    shutdown: CancellationToken,
) {
    let mut ticker = tokio::time::interval(every.update);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut health_open = true;
    // The status last written and when (registration wrote one).
    let mut last = Some((
        registered.status.unwrap_or_default(),
        tokio::time::Instant::now(),
    ));
    // The conditions last written, for the node's status events.
    let mut known = last
        .as_ref()
        .and_then(|(s, _)| s.conditions.clone())
        .unwrap_or_default();
    loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => return,
            changed = health.changed(), if health_open => {
                if changed.is_err() {
                    // The agent dropped its sender: keep the last health.
                    health_open = false;
                    continue;
                }
                ticker.reset();
                last = None;
            }
            _ = ticker.tick() => {}
        }
        let current = health.borrow_and_update().clone();
        if let Some((held, at)) = &last {
            let desired = desired_status(facts, &current, Some(held), Timestamp::now());
            // Only a Node seen since the last look or write counts, so a
            // watch that lags behind the agent's own write costs at most
            // one more write.
            let on_server = if seen.has_changed().unwrap_or(false) {
                seen.borrow_and_update()
                    .as_deref()
                    .filter(|s| overwritten(&desired, s))
                    .map(<[NodeCondition]>::to_vec)
            } else {
                None
            };
            if let Some(on_server) = on_server {
                // Its events tell the change from what the server says.
                known = on_server;
            } else if at.elapsed() < every.report && !status_changed(held, &desired) {
                continue;
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            result = update_status(&api, facts, &current) => match result {
                Ok(node) => {
                    let status = node.status.unwrap_or_default();
                    let written = status.conditions.clone().unwrap_or_default();
                    if let Some(ev) = &events {
                        ev.conditions(Some(known.as_slice()), &written);
                    }
                    known = written;
                    last = Some((status, tokio::time::Instant::now()));
                    seen.mark_unchanged();
                }
                Err(e) => {
                    last = None;
                    tracing::warn!(error = %error_chain(&e), "unable to update node status");
                }
            }
        }
    }
}

/// Whether a condition the agent reports is not on the server as it
/// would write it (status, reason, message), e.g. Ready made Unknown by
/// the node lifecycle controller. Conditions others own are not looked
/// at.
fn overwritten(desired: &NodeStatus, on_server: &[NodeCondition]) -> bool {
    desired.conditions.iter().flatten().any(|mine| {
        !on_server.iter().any(|theirs| {
            theirs.type_ == mine.type_
                && theirs.status == mine.status
                && theirs.reason == mine.reason
                && theirs.message == mine.message
        })
    })
}

/// Whether `desired` differs from `held` beyond the conditions'
/// heartbeat times (upstream's `nodeStatusHasChanged`).
fn status_changed(held: &NodeStatus, desired: &NodeStatus) -> bool {
    let without_beats = |s: &NodeStatus| {
        let mut s = s.clone();
        for c in s.conditions.iter_mut().flatten() {
            c.last_heartbeat_time = None;
        }
        s
    };
    without_beats(held) != without_beats(desired)
}

/// upstream's `updateNodeStatus`: up to five tries, the first reading the
/// Node from the API server's cache.
pub(super) async fn update_status(api: &Api<Node>, facts: &Facts, health: &Health) -> Result<Node> {
    let mut attempt = 0;
    loop {
        match try_update_status(api, facts, health, attempt).await {
            Ok(node) => return Ok(node),
            Err(e) if attempt + 1 >= STATUS_UPDATE_RETRIES => return Err(e),
            Err(e) => {
                tracing::debug!(error = %error_chain(&e), attempt, "error updating node status, will retry");
                attempt += 1;
            }
        }
    }
}

async fn try_update_status(
    api: &Api<Node>,
    facts: &Facts,
    health: &Health,
    attempt: usize,
) -> Result<Node> {
    let name = &facts.node_name;
    let params = if attempt == 0 {
        GetParams::any()
    } else {
        GetParams::default()
    };
    let node = api
        .get_with(name, &params)
        .await
        .map_err(|source| Error::Get {
            name: name.clone(),
            source,
        })?;
    let held = node.status.unwrap_or_default();
    let desired = desired_status(facts, health, Some(&held), Timestamp::now());
    let patch = status_patch(&held, &desired);
    api.patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .map_err(|source| Error::Patch {
            name: name.clone(),
            source,
        })
}

/// An error with its sources, for logs.
pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(type_: &str, status: &str, reason: &str) -> NodeCondition {
        NodeCondition {
            type_: type_.into(),
            status: status.into(),
            reason: Some(reason.into()),
            message: Some(format!("{type_} {status}")),
            ..Default::default()
        }
    }

    #[test]
    fn conditions_made_unknown_on_the_server_are_overwritten() {
        let desired = NodeStatus {
            conditions: Some(vec![condition("Ready", "True", "KubeletReady")]),
            ..Default::default()
        };
        let mut on_server = vec![
            condition("Ready", "True", "KubeletReady"),
            // Another component's condition is not the agent's to judge.
            condition("NetworkUnavailable", "False", "FlannelIsUp"),
        ];
        // A heartbeat time alone is no difference.
        on_server[0].last_heartbeat_time = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::now()),
        );
        assert!(!overwritten(&desired, &on_server));
        on_server[0] = condition("Ready", "Unknown", "NodeStatusUnknown");
        assert!(overwritten(&desired, &on_server));
        assert!(overwritten(&desired, &on_server[1..]), "missing");
    }
}
