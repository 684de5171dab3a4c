//! The DaemonSet controller (upstream's `daemonset-controller`): one pod
//! per eligible node, pinned to it by a required `matchFields`
//! `metadata.name` term (the scheduler binds it), made when a node
//! becomes eligible and removed when it stops being so, replaced by
//! `RollingUpdate` (maxUnavailable, maxSurge) or `OnDelete`, with the
//! template's history in ControllerRevisions and the status kept.
//!
//! - [`nodes`]: eligibility, tolerations, the daemon pod's template (pure);
//! - [`plan`]: creates, deletes and status counts (pure);
//! - `revisions`: the ControllerRevisions;
//! - `backoff`: the back-off on deleting failed pods per node;
//! - this file: the watches, the pod writes and the status.
//!
//! It must not bind pods (the scheduler does) nor remove pods bound to
//! nodes that are gone (the pod garbage collector does, as upstream).

mod backoff;
pub mod nodes;
pub mod plan;
mod revisions;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Api;
use serde_json::json;
use skiff_client::recorder::{reference_to, EventType, Recorder};
use skiff_client::selectors::Selector;
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::runner::{self, Failures};
use crate::workload::expectations::Expectations;
use crate::workload::history;
use crate::workload::ownership;
use crate::workload::pods as podutil;
use revisions::{cleanup_history, construct_history};
use skiff_client::{is_conflict as conflict, is_not_found as not_found};

/// The component name events are reported under.
pub const COMPONENT: &str = "daemonset-controller";

/// Errors of one sync (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A write to the API failed.
    #[error("{what}")]
    Write {
        /// What was being written.
        what: String,
        /// Why it failed.
        #[source]
        source: kube::Error,
    },
    /// The revision name is taken by another template: the collision
    /// count went up, the next sync uses the next name.
    #[error("hash collision on controllerrevision {0}")]
    Collision(String),
    /// The selector cannot be parsed.
    #[error("invalid selector")]
    Selector(#[source] skiff_client::selectors::SelectorError),
}

fn write(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Write { what, source }
}

struct State {
    context: Context,
    nodes: Store<Node>,
    pods: Store<Pod>,
    revisions: Store<ControllerRevision>,
    expectations: Expectations,
    failures: Failures,
    failed_pods: backoff::Backoff,
    recorder: Recorder,
}

/// Starts the controller in a controller manager.
pub(crate) fn start(
    context: Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let sets = context.informers.get::<DaemonSet>();
        let nodes = context.informers.get::<Node>();
        let pods = context.informers.get::<Pod>();
        let revisions = context.informers.get::<ControllerRevision>();
        let for_pods = sets.store();
        let for_nodes = sets.store();
        let controller = Controller::for_stream(sets.objects(), sets.store())
            .watches_stream(pods.objects(), move |pod: Pod| {
                ownership::owners_of(&for_pods, &pod.metadata, |d| selector(d).ok())
            })
            .watches_stream(nodes.objects(), move |_: Node| {
                for_nodes
                    .state()
                    .iter()
                    .map(|d| ObjectRef::from_obj(d.as_ref()))
                    .collect::<Vec<_>>()
            })
            .owns_stream(revisions.objects());
        let state = Arc::new(State {
            recorder: context.recorder(COMPONENT),
            nodes: nodes.store(),
            pods: pods.store(),
            revisions: revisions.store(),
            context,
            expectations: Expectations::default(),
            failures: Failures::default(),
            failed_pods: backoff::Backoff::default(),
        });
        nodes.ready().await;
        pods.ready().await;
        revisions.ready().await;
        runner::run(
            "daemonset",
            &sets,
            controller,
            2,
            reconcile,
            error_policy,
            state,
            shutdown,
        )
        .await;
    })
}

fn selector(ds: &DaemonSet) -> Result<Selector, Error> {
    Selector::from_label_selector(ds.spec.as_ref().map(|s| &s.selector)).map_err(Error::Selector)
}

fn key(ds: &DaemonSet) -> String {
    format!(
        "{}/{}",
        ds.metadata.namespace.as_deref().unwrap_or_default(),
        ds.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The hash of the template with the collision count (our stand-in for
/// upstream's `ComputeHash`, which hashes Go's in-memory struct).
pub fn template_hash(ds: &DaemonSet, collisions: Option<i32>) -> String {
    let template = ds
        .spec
        .as_ref()
        .map(|s| serde_json::to_vec(&s.template).unwrap_or_default())
        .unwrap_or_default();
    history::hash(&template, collisions)
}

async fn reconcile(ds: Arc<DaemonSet>, state: Arc<State>) -> Result<Action, Error> {
    let key = key(&ds);
    let ns = ds.metadata.namespace.clone().unwrap_or_default();
    let uid = ds.metadata.uid.clone().unwrap_or_default();
    let client = state.context.client.clone();
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let selector = selector(&ds)?;
    let deleting = ds.metadata.deletion_timestamp.is_some();

    // The set's pods, adopting orphans and releasing strays.
    let candidates = state
        .pods
        .state()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()));
    let claim = ownership::plan(candidates, &uid, &selector, deleting);
    let mut pods = claim.owned;
    for orphan in claim.adopt {
        match ownership::adopt(&pod_api, &orphan, ownership::controller_ref(&*ds)).await {
            Ok(p) => pods.push(Arc::new(p)),
            Err(e) if not_found(&e) || conflict(&e) => {}
            Err(e) => return Err(write("adopting a pod")(e)),
        }
    }
    for stray in claim.release {
        match ownership::release(&pod_api, &stray, &uid).await {
            Err(e) if !not_found(&e) && !conflict(&e) => return Err(write("releasing a pod")(e)),
            _ => {}
        }
    }
    let nodes: Vec<Arc<Node>> = state.nodes.state();
    let by_node = plan::by_node(&pods);
    let generation = ds
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(nodes::TEMPLATE_GENERATION_ANNOTATION))
        .cloned();
    let now = Timestamp::now();

    // The history: the current revision made or renumbered.
    let rev_api: Api<ControllerRevision> = Api::namespaced(client.clone(), &ns);
    let (hash, old) = if deleting {
        (
            template_hash(&ds, ds.status.as_ref().and_then(|s| s.collision_count)),
            Vec::new(),
        )
    } else {
        construct_history(&ds, &state, &rev_api).await?
    };

    let mut observed = false;
    let mut retry_failed: Option<Duration> = None;
    if !deleting && state.expectations.satisfied(&key, &ns, &state.pods) {
        observed = true;
        let mut plan = plan::manage(&ds, &nodes, &by_node, &hash, now);
        // Failed pods are deleted at most once per back-off per node.
        let instant = std::time::Instant::now();
        let mut held = Vec::new();
        plan.failed.retain(|(pod, node)| {
            let backoff_key = format!("{uid}/{node}");
            if let Some(wait) = state.failed_pods.waiting(&backoff_key, instant) {
                retry_failed = Some(retry_failed.map_or(wait, |r| r.min(wait)));
                held.push(pod.clone());
                return false;
            }
            state.failed_pods.next(&backoff_key, instant);
            true
        });
        plan.delete.retain(|p| {
            let full = format!(
                "{}/{}",
                p.metadata.namespace.as_deref().unwrap_or_default(),
                p.metadata.name.as_deref().unwrap_or_default()
            );
            !held.contains(&full)
        });
        let on_delete = ds
            .spec
            .as_ref()
            .and_then(|s| s.update_strategy.as_ref())
            .and_then(|s| s.type_.as_deref())
            == Some("OnDelete");
        if plan.is_empty() && !on_delete {
            plan = plan::rolling_update(&ds, &nodes, &by_node, &hash, generation.as_deref(), now);
        }
        sync_nodes(
            &state,
            &ds,
            &key,
            &pod_api,
            &plan,
            generation.as_deref(),
            &hash,
        )
        .await?;
        cleanup_history(&ds, &rev_api, &pods, &hash, old).await?;
    }

    let (counts, recheck) = plan::status(&ds, &nodes, &by_node, &hash, generation.as_deref(), now);
    write_status(&state, &ds, counts, observed).await?;
    state.failures.forget(&key);
    let min_ready = ds
        .spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0);
    let recheck = recheck.filter(|_| min_ready > 0);
    Ok(match (recheck, retry_failed) {
        (Some(a), Some(b)) => Action::requeue(a.min(b) + Duration::from_millis(100)),
        (Some(a), None) | (None, Some(a)) => Action::requeue(a + Duration::from_millis(100)),
        (None, None) => Action::await_change(),
    })
}

/// Creates and deletes the plan's pods with upstream's pod-control events
/// (`SuccessfulCreate` "Created pod: ...", `SuccessfulDelete` "Deleted
/// pod: ...", and `FailedDaemonPod` for failed pods).
async fn sync_nodes(
    state: &State,
    ds: &DaemonSet,
    key: &str,
    api: &Api<Pod>,
    plan: &plan::Plan,
    generation: Option<&str>,
    hash: &str,
) -> Result<(), Error> {
    let reference = reference_to(ds);
    for (pod, node) in &plan.failed {
        state.recorder.record_for(
            &reference,
            EventType::Warning,
            "FailedDaemonPod",
            "Delete",
            &format!("Found failed daemon pod {pod} on node {node}, will try to kill it"),
        );
    }
    let Some(spec) = ds.spec.as_ref() else {
        return Ok(());
    };
    let template = nodes::pod_template(&spec.template, generation, hash);
    let name = ds.metadata.name.clone().unwrap_or_default();
    let ns = ds.metadata.namespace.clone().unwrap_or_default();
    let mut first_error = None;
    for node in &plan.create_on {
        let mut pod = podutil::from_template(
            &template,
            &ns,
            &format!("{name}-"),
            Some(ownership::controller_ref(ds)),
        );
        let pod_spec = pod.spec.get_or_insert_with(Default::default);
        pod_spec.affinity = Some(nodes::pin_to_node(pod_spec.affinity.take(), node));
        match api.create(&PostParams::default(), &pod).await {
            Ok(created) => {
                let created_name = created.metadata.name.clone().unwrap_or_default();
                state.expectations.expect(key, [created_name.clone()], []);
                state.recorder.record_for(
                    &reference,
                    EventType::Normal,
                    "SuccessfulCreate",
                    "Create",
                    &format!("Created pod: {created_name}"),
                );
            }
            Err(e) => {
                let forbidden_terminating = matches!(&e, kube::Error::Api(s) if s.code == 403 && s.message.contains("terminat"));
                if !forbidden_terminating {
                    state.recorder.record_for(
                        &reference,
                        EventType::Warning,
                        "FailedCreate",
                        "Create",
                        &format!("Error creating: {e}"),
                    );
                }
                first_error.get_or_insert(write(format!("creating a pod for node {node}"))(e));
            }
        }
    }
    for pod in &plan.delete {
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        match api.delete(&pod_name, &DeleteParams::default()).await {
            Ok(_) => {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                state
                    .expectations
                    .expect(key, [], [(pod_name.clone(), uid)]);
                state.recorder.record_for(
                    &reference,
                    EventType::Normal,
                    "SuccessfulDelete",
                    "Delete",
                    &format!("Deleted pod: {pod_name}"),
                );
            }
            Err(e) if not_found(&e) => {}
            Err(e) => {
                state.recorder.record_for(
                    &reference,
                    EventType::Warning,
                    "FailedDelete",
                    "Delete",
                    &format!("Error deleting: {e}"),
                );
                first_error.get_or_insert(write(format!("deleting pod {pod_name}"))(e));
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

async fn write_status(
    state: &State,
    ds: &DaemonSet,
    c: plan::Counts,
    observed: bool,
) -> Result<(), Error> {
    let old = ds.status.clone().unwrap_or_default();
    let observed_generation = if observed {
        ds.metadata.generation
    } else {
        old.observed_generation
    };
    let status = DaemonSetStatus {
        collision_count: old.collision_count,
        conditions: old.conditions.clone(),
        current_number_scheduled: c.current,
        desired_number_scheduled: c.desired,
        number_available: Some(c.available),
        number_misscheduled: c.misscheduled,
        number_ready: c.ready,
        number_unavailable: Some(c.unavailable),
        observed_generation,
        updated_number_scheduled: Some(c.updated),
    };
    let same = old.current_number_scheduled == status.current_number_scheduled
        && old.desired_number_scheduled == status.desired_number_scheduled
        && old.number_available.unwrap_or(0) == c.available
        && old.number_misscheduled == status.number_misscheduled
        && old.number_ready == status.number_ready
        && old.number_unavailable.unwrap_or(0) == c.unavailable
        && old.updated_number_scheduled.unwrap_or(0) == c.updated
        && old.observed_generation == status.observed_generation;
    if same {
        return Ok(());
    }
    let ns = ds.metadata.namespace.clone().unwrap_or_default();
    let name = ds.metadata.name.clone().unwrap_or_default();
    let api: Api<DaemonSet> = Api::namespaced(state.context.client.clone(), &ns);
    match api
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await
    {
        Err(e) if !not_found(&e) => Err(write(format!("updating the status of {ns}/{name}"))(e)),
        _ => Ok(()),
    }
}

fn error_policy(ds: Arc<DaemonSet>, error: &Error, state: Arc<State>) -> Action {
    tracing::debug!(set = %key(&ds), error = %runner::Chain(error), "sync failed");
    Action::requeue(state.failures.next_delay(&key(&ds)))
}
