//! Pods that still carry the `batch.kubernetes.io/job-tracking`
//! finalizer after their Job is gone (deleted, or replaced by another
//! object of the same name): nobody will count them any more, so the
//! finalizer is removed and the garbage collector can finish deleting
//! them (upstream's orphan pod cleanup in the job controller).
//!
//! This module owns only that removal; pods of existing Jobs are the
//! sync's.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Api;
use tokio_util::sync::CancellationToken;

use super::facts;
use crate::context::Context;
use crate::runner::{self, Failures};
use crate::workload::ownership;

/// The removal failed (retried with back-off).
#[derive(Debug, thiserror::Error)]
#[error("removing the tracking finalizer of orphan pod {0}")]
pub struct Error(String, #[source] kube::Error);

struct State {
    context: Context,
    jobs: Store<Job>,
    failures: Failures,
}

/// The controller over pods, until `shutdown`.
pub(super) async fn run(context: Context, jobs: Store<Job>, shutdown: CancellationToken) {
    let pods = context.informers.get::<Pod>();
    let controller = Controller::for_stream(pods.objects(), pods.store());
    let state = Arc::new(State {
        context,
        jobs,
        failures: Failures::default(),
    });
    runner::run(
        "job-orphan-pods",
        &pods,
        controller,
        1,
        reconcile,
        error_policy,
        state,
        shutdown,
    )
    .await;
}

/// The Job that should count `pod`, if the pod is tracked and has one.
fn owning_job(pod: &Pod) -> Option<(String, String)> {
    if !facts::tracked(pod) {
        return None;
    }
    let owner = ownership::controller_of(&pod.metadata);
    match owner {
        Some(r) if r.kind == "Job" && r.api_version == "batch/v1" => {
            Some((r.name.clone(), r.uid.clone()))
        }
        // Not a Job's (any more): nothing will count it.
        _ => Some((String::new(), String::new())),
    }
}

async fn reconcile(pod: Arc<Pod>, state: Arc<State>) -> Result<Action, Error> {
    let Some((name, uid)) = owning_job(&pod) else {
        return Ok(Action::await_change());
    };
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let in_store = state
        .jobs
        .get(&ObjectRef::new(&name).within(&namespace))
        .is_some_and(|j| j.metadata.uid.as_deref() == Some(uid.as_str()));
    if !name.is_empty() && in_store {
        return Ok(Action::await_change());
    }
    let jobs: Api<Job> = Api::namespaced(state.context.client.clone(), &namespace);
    if !name.is_empty() {
        // The store may be behind a Job just created: ask.
        match jobs.get_opt(&name).await {
            Ok(Some(j)) if j.metadata.uid.as_deref() == Some(uid.as_str()) => {
                return Ok(Action::await_change());
            }
            Ok(_) => {}
            Err(e) => return Err(Error(pod_key(&pod), e)),
        }
    }
    let pods: Api<Pod> = Api::namespaced(state.context.client.clone(), &namespace);
    super::remove_finalizer(&pods, &pod)
        .await
        .map_err(|e| Error(pod_key(&pod), e))?;
    state.failures.forget(&pod_key(&pod));
    Ok(Action::await_change())
}

fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn error_policy(pod: Arc<Pod>, _: &Error, state: Arc<State>) -> Action {
    Action::requeue(state.failures.next_delay(&pod_key(&pod)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_tracked_pods_are_looked_at() {
        let pod = |v: serde_json::Value| serde_json::from_value::<Pod>(v).unwrap();
        assert_eq!(owning_job(&pod(json!({"metadata": {"name": "p"}}))), None);
        let owned = pod(json!({"metadata": {"name": "p",
            "finalizers": [facts::TRACKING_FINALIZER],
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": true}]}}));
        assert_eq!(owning_job(&owned), Some(("j".into(), "u".into())));
        let stray =
            pod(json!({"metadata": {"name": "p", "finalizers": [facts::TRACKING_FINALIZER]}}));
        assert_eq!(owning_job(&stray), Some((String::new(), String::new())));
    }
}
