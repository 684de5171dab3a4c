//! The ReplicaSet controller (upstream's `replicaset`, and
//! `replicationcontroller` through the same logic): keeps as many active
//! pods as spec.replicas says, owned through a controller reference,
//! adopting orphans its selector matches and releasing pods that stop
//! matching; creates in slow-start batches (1, 2, 4, ...) and stops at
//! the first refusal, deletes the least settled pods first ([`rank`]),
//! waits for its own creates and deletes to show in the informer before
//! counting again ([`crate::workload::expectations`]), and writes status
//! ([`status`]) with the `ReplicaFailure` condition while the API refuses
//! it. Events: SuccessfulCreate, SuccessfulDelete, FailedCreate,
//! FailedDelete, worded as upstream's.
//!
//! This module owns the reconcile and its writes; [`replicated`] what it
//! reads of either kind. It must not decide rollouts (the Deployment
//! controller scales ReplicaSets; this one only follows spec.replicas).

mod rank;
pub mod replicated;
mod status;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, ResourceExt};
use serde_json::json;
use skiff_client::recorder::{reference_to, EventType, Recorder};
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::runner::{self, Failures};
use crate::workload::expectations::Expectations;
use crate::workload::{ownership, pods};
use replicated::Replicated;
use status::Failure;

/// The most pods created or deleted in one sync (upstream's BurstReplicas).
pub const BURST_REPLICAS: usize = 500;

/// Concurrent syncs (upstream's --concurrent-replicaset-syncs).
const WORKERS: u16 = 5;

/// Errors of one sync (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The selector does not parse.
    #[error("invalid selector")]
    Selector(#[source] skiff_client::selectors::SelectorError),
    /// A write to the API failed.
    #[error("{action} {name}")]
    Api {
        /// What was being done.
        action: &'static str,
        /// Of what.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Creating or deleting pods failed (the status says so).
    #[error("managing replicas: {0}")]
    Manage(String),
}

struct State<K: Replicated> {
    context: Context,
    owners: Store<K>,
    pods: Store<Pod>,
    expectations: Expectations,
    recorder: Recorder,
    failures: Failures,
}

/// Starts the ReplicaSet controller.
pub(crate) fn start_replicasets(
    context: Context,
    shutdown: CancellationToken,
) -> BoxFuture<'static, ()> {
    Box::pin(run::<ReplicaSet>(context, shutdown))
}

/// Starts the ReplicationController controller.
pub(crate) fn start_replication_controllers(
    context: Context,
    shutdown: CancellationToken,
) -> BoxFuture<'static, ()> {
    Box::pin(run::<ReplicationController>(context, shutdown))
}

async fn run<K: Replicated>(context: Context, shutdown: CancellationToken) {
    let owners = context.informers.get::<K>();
    let pods = context.informers.get::<Pod>();
    let owner_store = owners.store();
    let controller = Controller::for_stream(owners.objects(), owners.store())
        .owns_stream(pods.objects())
        // An orphan wakes the owners whose selector matches it.
        .watches_stream(pods.objects(), move |pod: Pod| {
            orphan_owners(&owner_store, &pod)
        });
    let state = Arc::new(State {
        recorder: context.recorder(K::COMPONENT),
        owners: owners.store(),
        pods: pods.store(),
        context,
        expectations: Expectations::default(),
        failures: Failures::default(),
    });
    pods.ready().await;
    runner::run(
        K::CONTROLLER,
        &owners,
        controller,
        WORKERS,
        reconcile::<K>,
        error_policy::<K>,
        state,
        shutdown,
    )
    .await;
}

/// The owners of `pod`'s namespace whose selector matches it, if it has no
/// controller.
fn orphan_owners<K: Replicated>(owners: &Store<K>, pod: &Pod) -> Vec<ObjectRef<K>> {
    if ownership::controller_of(&pod.metadata).is_some() || !pods::is_active(pod) {
        return Vec::new();
    }
    let namespace = pod.metadata.namespace.as_deref();
    owners
        .state()
        .iter()
        .filter(|o| o.meta().namespace.as_deref() == namespace)
        .filter(|o| {
            o.selector()
                .is_ok_and(|s| !s.is_empty() && s.matches(pod.metadata.labels.as_ref()))
        })
        .map(|o| ObjectRef::from_obj(&**o))
        .collect()
}

fn key<K: Replicated>(owner: &K) -> String {
    format!(
        "{}/{}",
        owner.namespace().unwrap_or_default(),
        owner.name_any()
    )
}

async fn reconcile<K: Replicated>(owner: Arc<K>, state: Arc<State<K>>) -> Result<Action, Error> {
    let key = key(&*owner);
    let namespace = owner.namespace().unwrap_or_default();
    let uid = owner.meta().uid.clone().unwrap_or_default();
    let deleting = owner.meta().deletion_timestamp.is_some();
    let selector = owner.selector().map_err(Error::Selector)?;
    // Look before counting: are our own writes in the store yet?
    let satisfied = state.expectations.satisfied(&key, &namespace, &state.pods);

    let active: Vec<Arc<Pod>> = state
        .pods
        .state()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(&namespace) && pods::is_active(p))
        .collect();
    let claim = ownership::plan(active, &uid, &selector, deleting);
    let mut owned = claim.owned;
    let pod_api: Api<Pod> = Api::namespaced(state.context.client.clone(), &namespace);
    if !claim.adopt.is_empty() && still_adoptable(&state, &owner, &namespace).await? {
        let reference = ownership::controller_ref(&*owner);
        for pod in claim.adopt {
            match ownership::adopt(&pod_api, &pod, reference.clone()).await {
                Ok(adopted) => owned.push(Arc::new(adopted)),
                // Changed or gone meanwhile: looked at again on its event.
                Err(e) if is_gone_or_changed(&e) => {}
                Err(source) => {
                    return Err(Error::Api {
                        action: "adopting pod",
                        name: pod.name_any(),
                        source,
                    })
                }
            }
        }
    }
    for pod in claim.release {
        match ownership::release(&pod_api, &pod, &uid).await {
            Ok(_) => {}
            Err(e) if is_gone_or_changed(&e) => {}
            Err(source) => {
                return Err(Error::Api {
                    action: "releasing pod",
                    name: pod.name_any(),
                    source,
                })
            }
        }
    }

    let failure = if satisfied && !deleting {
        manage(&state, &owner, &key, &owned, &pod_api).await
    } else {
        None
    };

    let now = Timestamp::now();
    let min_ready = owner.min_ready_seconds();
    let template_labels = owner
        .template()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let current = serde_json::to_value(&*owner)
        .ok()
        .and_then(|v| v.get("status").cloned())
        .unwrap_or_else(|| json!({}));
    let desired = status::compute(
        &owned,
        &template_labels,
        min_ready,
        owner.meta().generation,
        &current,
        failure.as_ref(),
        now,
    );
    if status::differs(&desired, &current) {
        let api: Api<K> = Api::namespaced(state.context.client.clone(), &namespace);
        match api
            .patch_status(
                &owner.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": desired})),
            )
            .await
        {
            Ok(_) => {}
            Err(e) if is_gone_or_changed(&e) => {}
            Err(source) => {
                return Err(Error::Api {
                    action: "updating status of",
                    name: key,
                    source,
                })
            }
        }
    }
    if let Some(f) = failure {
        return Err(Error::Manage(f.message));
    }
    state.failures.forget(&key);
    // Pods still waiting out minReadySeconds: look again when the first
    // becomes available.
    let next = owned
        .iter()
        .filter_map(|p| pods::available_in(p, min_ready, now))
        .min();
    Ok(match next {
        Some(wait) => Action::requeue(wait + Duration::from_millis(100)),
        None => Action::await_change(),
    })
}

/// Upstream's `canAdopt` recheck: a fresh read of the owner (not the
/// cache) must show the same uid and no deletion before it adopts.
async fn still_adoptable<K: Replicated>(
    state: &State<K>,
    owner: &K,
    namespace: &str,
) -> Result<bool, Error> {
    let api: Api<K> = Api::namespaced(state.context.client.clone(), namespace);
    match api.get_opt(&owner.name_any()).await {
        Ok(Some(fresh)) => {
            Ok(fresh.meta().uid == owner.meta().uid && fresh.meta().deletion_timestamp.is_none())
        }
        Ok(None) => Ok(false),
        Err(source) => Err(Error::Api {
            action: "reading",
            name: owner.name_any(),
            source,
        }),
    }
}

/// Creates or deletes pods to match spec.replicas; the failure, if the
/// API refused any.
async fn manage<K: Replicated>(
    state: &State<K>,
    owner: &Arc<K>,
    key: &str,
    owned: &[Arc<Pod>],
    pod_api: &Api<Pod>,
) -> Option<Failure> {
    let wanted = usize::try_from(owner.replicas().max(0)).unwrap_or(0);
    let reference = reference_to(&**owner);
    if owned.len() < wanted {
        let count = (wanted - owned.len()).min(BURST_REPLICAS);
        let Some(template) = owner.template() else {
            return Some(Failure {
                reason: "FailedCreate",
                message: "the pod template is missing".into(),
            });
        };
        let pod = pods::from_template(
            template,
            &owner.namespace().unwrap_or_default(),
            &format!("{}-", owner.name_any()),
            Some(ownership::controller_ref(&**owner)),
        );
        let post = PostParams::default();
        let mut created = Vec::new();
        let mut failure = None;
        let mut batch = 1;
        let mut left = count;
        while left > 0 && failure.is_none() {
            let size = batch.min(left);
            let results =
                futures::future::join_all((0..size).map(|_| pod_api.create(&post, &pod))).await;
            for result in results {
                match result {
                    Ok(p) => {
                        let name = p.name_any();
                        state.recorder.record_for(
                            &reference,
                            EventType::Normal,
                            "SuccessfulCreate",
                            "Create",
                            &format!("Created pod: {name}"),
                        );
                        created.push(name);
                    }
                    Err(e) => {
                        let message = api_message(&e);
                        state.recorder.record_for(
                            &reference,
                            EventType::Warning,
                            "FailedCreate",
                            "Create",
                            &format!("Error creating: {message}"),
                        );
                        failure.get_or_insert(Failure {
                            reason: "FailedCreate",
                            message,
                        });
                    }
                }
            }
            left -= size;
            batch *= 2;
        }
        state.expectations.expect(key, created, []);
        return failure;
    }
    if owned.len() > wanted {
        let count = (owned.len() - wanted).min(BURST_REPLICAS);
        let related = related_pods(state, owner, owned);
        let doomed = rank::to_delete(owned, &related, count, Timestamp::now());
        let params = DeleteParams::default();
        let results = futures::future::join_all(
            doomed
                .iter()
                .map(|p| pod_api.delete(p.metadata.name.as_deref().unwrap_or_default(), &params)),
        )
        .await;
        let mut deleted = Vec::new();
        let mut failure = None;
        for (pod, result) in doomed.iter().zip(results) {
            let name = pod.name_any();
            match result {
                Ok(_) => {
                    state.recorder.record_for(
                        &reference,
                        EventType::Normal,
                        "SuccessfulDelete",
                        "Delete",
                        &format!("Deleted pod: {name}"),
                    );
                    deleted.push((name, pod.metadata.uid.clone().unwrap_or_default()));
                }
                Err(e) if skiff_client::is_not_found(&e) => {}
                Err(e) => {
                    let message = api_message(&e);
                    state.recorder.record_for(
                        &reference,
                        EventType::Warning,
                        "FailedDelete",
                        "Delete",
                        &format!("Error deleting: {message}"),
                    );
                    failure.get_or_insert(Failure {
                        reason: "FailedDelete",
                        message,
                    });
                }
            }
        }
        state.expectations.expect(key, [], deleted);
        return failure;
    }
    None
}

/// The pods of the owner's family: its own and those of the other
/// ReplicaSets with the same controller (a Deployment's), for ranking.
fn related_pods<K: Replicated>(state: &State<K>, owner: &K, owned: &[Arc<Pod>]) -> Vec<Arc<Pod>> {
    let Some(parent) = ownership::controller_of(owner.meta()) else {
        return owned.to_vec();
    };
    let namespace = owner.namespace();
    let siblings: Vec<String> = state
        .owners
        .state()
        .iter()
        .filter(|o| o.namespace() == namespace)
        .filter(|o| ownership::is_controlled_by(o.meta(), &parent.uid))
        .filter_map(|o| o.meta().uid.clone())
        .collect();
    state
        .pods
        .state()
        .into_iter()
        .filter(|p| p.metadata.namespace == namespace && pods::is_active(p))
        .filter(|p| {
            ownership::controller_of(&p.metadata).is_some_and(|r| siblings.contains(&r.uid))
        })
        .collect()
}

/// The API's own message for an error (what upstream's events quote).
fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

fn is_gone_or_changed(e: &kube::Error) -> bool {
    skiff_client::is_not_found(e) || skiff_client::is_conflict(e)
}

fn error_policy<K: Replicated>(owner: Arc<K>, error: &Error, state: Arc<State<K>>) -> Action {
    let key = key(&*owner);
    if !matches!(error, Error::Manage(_)) {
        tracing::debug!(owner = %key, error = %runner::Chain(error), "sync failed");
    }
    Action::requeue(state.failures.next_delay(&key))
}
