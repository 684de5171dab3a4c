//! The taint eviction controller (upstream's `taint-eviction-controller`,
//! formerly the node lifecycle controller's taint manager): deletes pods
//! bound to nodes with NoExecute taints they do not tolerate, at once, or
//! when the tolerationSeconds of the matching tolerations run out
//! ([`schedule`]). A taint removed in time cancels the deletion.
//!
//! This module owns only those deletions, the DisruptionTarget condition
//! written just before (reason `DeletionByTaintManager`) and the
//! `TaintManagerEviction` events. Deadlines are kept in memory from when
//! this controller first saw the taints (as upstream, so a restart starts
//! them again) by the manager's clock, and reached by requeueing the pod.
//! It never taints nodes.

pub mod schedule;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Api;
use skiff_client::clock::Clock;
use skiff_client::recorder::{reference_to, EventType, Recorder};
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::runner::{self, Failures};
use schedule::{Decision, Scheduled};

/// The events' source component, as upstream's.
pub const COMPONENT: &str = "taint-eviction-controller";
/// The condition's reason, as upstream's.
pub const REASON: &str = "DeletionByTaintManager";
/// The condition's message, as upstream's.
pub const MESSAGE: &str = "Taint manager: deleting due to NoExecute taint";
/// The events' reason.
pub const EVENT_REASON: &str = "TaintManagerEviction";

/// Errors of one reconcile (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Writing the DisruptionTarget condition failed.
    #[error("adding the DisruptionTarget condition to pod {pod}")]
    Condition {
        /// `namespace/name`.
        pod: String,
        /// Why (boxed: kube's errors are large).
        #[source]
        source: Box<kube::Error>,
    },
    /// Deleting the pod failed.
    #[error("deleting pod {pod}")]
    Delete {
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
    recorder: Recorder,
    clock: Arc<dyn Clock>,
    /// Planned deletions by `namespace/name`.
    planned: Mutex<HashMap<String, Scheduled>>,
    failures: Failures,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn key_of(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// Starts the controller in a controller manager.
pub(crate) fn start(
    context: Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let nodes = context.informers.get::<Node>();
        let pods = context.informers.get::<Pod>();
        let pod_store = pods.store();
        // Only a change of a node's NoExecute taints brings its pods here.
        let seen: Mutex<HashMap<String, Vec<Taint>>> = Mutex::default();
        let controller = Controller::for_stream(pods.objects(), pods.store()).watches_stream(
            nodes.objects(),
            move |node: Node| {
                let name = node.metadata.name.clone().unwrap_or_default();
                let taints = schedule::no_execute(&node);
                let before = lock(&seen).insert(name.clone(), taints.clone());
                if before.unwrap_or_default() == taints {
                    return Vec::new();
                }
                pod_store
                    .state()
                    .iter()
                    .filter(|p| node_of(p) == Some(name.as_str()))
                    .map(|p| ObjectRef::from_obj(p.as_ref()))
                    .collect()
            },
        );
        let state = Arc::new(State {
            recorder: context.recorder(COMPONENT),
            clock: context.config.clock.clone(),
            nodes: nodes.store(),
            context,
            planned: Mutex::default(),
            failures: Failures::default(),
        });
        nodes.ready().await;
        pods.ready().await;
        let deletions = {
            let state = state.clone();
            runner::on_deleted(pods.changes(), shutdown.clone(), move |p| {
                forget_deleted(&state, p)
            })
        };
        let run = runner::run(
            "taint-eviction-controller",
            &pods,
            controller,
            4,
            reconcile,
            error_policy,
            state,
            shutdown,
        );
        tokio::join!(run, deletions);
    })
}

/// A deleted pod's planned deletion is cancelled (with upstream's event).
fn forget_deleted(state: &State, pod: &Pod) {
    if lock(&state.planned).remove(&key_of(pod)).is_some() {
        cancelled(&state.recorder, pod);
    }
}

fn event(recorder: &Recorder, pod: &Pod, message: String) {
    let mut about = reference_to(pod);
    about.resource_version = None;
    recorder.record_for(
        &about,
        EventType::Normal,
        EVENT_REASON,
        EVENT_REASON,
        &message,
    );
}

fn cancelled(recorder: &Recorder, pod: &Pod) {
    event(
        recorder,
        pod,
        format!("Cancelling deletion of Pod {}", key_of(pod)),
    );
}

async fn reconcile(pod: Arc<Pod>, state: Arc<State>) -> Result<Action, Error> {
    let key = key_of(&pod);
    let now = state.clock.now();
    let taints = match node_of(&pod) {
        // Already being deleted: nothing more to do.
        Some(_) if pod.metadata.deletion_timestamp.is_some() => Vec::new(),
        Some(node) => state
            .nodes
            .get(&ObjectRef::new(node))
            .map(|n| schedule::no_execute(&n))
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    let planned = lock(&state.planned).get(&key).copied();
    let decision = schedule::decide(&taints, &tolerations, planned, now);
    let action = match decision {
        Decision::Cancel => {
            if lock(&state.planned).remove(&key).is_some()
                && pod.metadata.deletion_timestamp.is_none()
            {
                cancelled(&state.recorder, &pod);
            }
            Action::await_change()
        }
        Decision::Wait(s) => {
            lock(&state.planned).insert(key.clone(), s);
            Action::requeue(s.fire.saturating_duration_since(now))
        }
        Decision::Evict => {
            evict(&state, &pod).await?;
            lock(&state.planned).remove(&key);
            Action::await_change()
        }
    };
    state.failures.forget(&key);
    Ok(action)
}

/// upstream's deletion: the event, the DisruptionTarget condition, then
/// the delete (a pod already gone is fine).
async fn evict(state: &State, pod: &Pod) -> Result<(), Error> {
    let key = key_of(pod);
    tracing::info!(pod = %key, "deleting pod for a NoExecute taint");
    event(
        &state.recorder,
        pod,
        format!("Marking for deletion Pod {key}"),
    );
    let api: Api<Pod> = Api::namespaced(
        state.context.client.clone(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
    );
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let has_condition = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter().any(|c| {
                c.type_ == "DisruptionTarget"
                    && c.status == "True"
                    && c.reason.as_deref() == Some(REASON)
            })
        });
    if !has_condition {
        let patch = serde_json::json!({
            "status": { "conditions": [{
                "type": "DisruptionTarget",
                "status": "True",
                "reason": REASON,
                "message": MESSAGE,
                "lastTransitionTime": Time(Timestamp::now()),
            }]}
        });
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => {}
            Err(e) if skiff_client::is_not_found(&e) => return Ok(()),
            Err(source) => {
                return Err(Error::Condition {
                    pod: key,
                    source: Box::new(source),
                })
            }
        }
    }
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if skiff_client::is_not_found(&e) => Ok(()),
        Err(source) => Err(Error::Delete {
            pod: key,
            source: Box::new(source),
        }),
    }
}

fn error_policy(pod: Arc<Pod>, error: &Error, state: Arc<State>) -> Action {
    let key = key_of(&pod);
    tracing::debug!(pod = %key, error = %crate::runner::Chain(error), "taint eviction");
    Action::requeue(state.failures.next_delay(&key))
}
