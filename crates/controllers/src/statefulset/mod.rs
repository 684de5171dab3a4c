//! The StatefulSet controller (upstream's `statefulset-controller`):
//! pods with stable names `<set>-<ordinal>`, each with its own claims
//! from `volumeClaimTemplates`, made and removed in order
//! (`OrderedReady`) or all at once (`Parallel`), updated from the highest
//! ordinal down to the partition (`RollingUpdate`) or when deleted
//! (`OnDelete`), with the pod template's history in ControllerRevisions
//! and the set's status kept.
//!
//! - [`identity`]: names, labels, claims and claim owners (pure);
//! - [`plan`]: what one sync does (pure);
//! - `control`: the writes of pods and claims, with their events;
//! - this file: the watches, the revisions and the status.
//!
//! It must not bind claims or pods (the volume binder and the scheduler
//! do) nor delete claims itself (the garbage collector follows the owner
//! references the retention policy puts on them).

mod control;
pub mod identity;
pub mod plan;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::Store;
use kube::Api;
use serde_json::json;
use skiff_client::recorder::Recorder;
use skiff_client::selectors::Selector;
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::runner::{self, Failures};
use crate::workload::expectations::Expectations;
use crate::workload::history;
use crate::workload::ownership;
use control::{claims_ok, claims_stale, Writer};
use plan::{At, Input, Step};
use skiff_client::{is_conflict as conflict, is_not_found as not_found};

/// The component name events are reported under.
pub const COMPONENT: &str = "statefulset-controller";

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
    /// A claim the pod needs is being deleted.
    #[error("pvc {0} is being deleted")]
    ClaimDeleting(String),
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
    pods: Store<Pod>,
    claims: Store<PersistentVolumeClaim>,
    revisions: Store<ControllerRevision>,
    expectations: Expectations,
    failures: Failures,
    recorder: Recorder,
}

/// Starts the controller in a controller manager.
pub(crate) fn start(
    context: Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let sets = context.informers.get::<StatefulSet>();
        let pods = context.informers.get::<Pod>();
        let claims = context.informers.get::<PersistentVolumeClaim>();
        let revisions = context.informers.get::<ControllerRevision>();
        let set_store = sets.store();
        let controller = Controller::for_stream(sets.objects(), sets.store())
            .watches_stream(pods.objects(), move |pod: Pod| {
                ownership::owners_of(&set_store, &pod.metadata, |s| selector(s).ok())
            })
            .owns_stream(revisions.objects());
        let state = Arc::new(State {
            recorder: context.recorder(COMPONENT),
            pods: pods.store(),
            claims: claims.store(),
            revisions: revisions.store(),
            context,
            expectations: Expectations::default(),
            failures: Failures::default(),
        });
        pods.ready().await;
        claims.ready().await;
        revisions.ready().await;
        runner::run(
            "statefulset",
            &sets,
            controller,
            5,
            reconcile,
            error_policy,
            state,
            shutdown,
        )
        .await;
    })
}

fn selector(set: &StatefulSet) -> Result<Selector, Error> {
    Selector::from_label_selector(set.spec.as_ref().map(|s| &s.selector)).map_err(Error::Selector)
}

fn key(set: &StatefulSet) -> String {
    format!(
        "{}/{}",
        set.metadata.namespace.as_deref().unwrap_or_default(),
        set.metadata.name.as_deref().unwrap_or_default()
    )
}

async fn reconcile(set: Arc<StatefulSet>, state: Arc<State>) -> Result<Action, Error> {
    let key = key(&set);
    let ns = set.metadata.namespace.clone().unwrap_or_default();
    let name = set.metadata.name.clone().unwrap_or_default();
    let uid = set.metadata.uid.clone().unwrap_or_default();
    let client = state.context.client.clone();
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let selector = selector(&set)?;
    let deleting = set.metadata.deletion_timestamp.is_some();

    // The set's pods: controlled members, adopting orphans by selector.
    let candidates = state.pods.state().into_iter().filter(|p| {
        p.metadata.namespace.as_deref() == Some(ns.as_str())
            && identity::ordinal_of(&name, p).is_some()
    });
    let claim = ownership::plan(candidates, &uid, &selector, deleting);
    let mut pods = claim.owned;
    for orphan in claim.adopt {
        match ownership::adopt(&pod_api, &orphan, ownership::controller_ref(&*set)).await {
            Ok(p) => pods.push(Arc::new(p)),
            Err(e) if not_found(&e) || conflict(&e) => {}
            Err(e) => {
                return Err(write(format!(
                    "adopting pod {ns}/{:?}",
                    orphan.metadata.name
                ))(e))
            }
        }
    }
    for stray in claim.release {
        match ownership::release(&pod_api, &stray, &uid).await {
            Err(e) if !not_found(&e) && !conflict(&e) => {
                return Err(write("releasing a pod")(e));
            }
            _ => {}
        }
    }

    // The revisions: the update one made or found, the current one.
    let rev_api: Api<ControllerRevision> = Api::namespaced(client.clone(), &ns);
    let in_ns: Vec<Arc<ControllerRevision>> = state
        .revisions
        .state()
        .into_iter()
        .filter(|r| r.metadata.namespace.as_deref() == Some(ns.as_str()))
        .collect();
    let mut revisions = history::claim(
        &rev_api,
        in_ns,
        ownership::controller_ref(&*set),
        &selector,
        deleting,
    )
    .await
    .map_err(write(format!("claiming the controllerrevisions of {key}")))?;
    history::sort(&mut revisions);
    let collisions = set
        .status
        .as_ref()
        .and_then(|s| s.collision_count)
        .unwrap_or(0);
    let (update, collisions) = update_revision(&set, &rev_api, &mut revisions, collisions).await?;
    let update_name = update.metadata.name.clone().unwrap_or_default();
    let current = set
        .status
        .as_ref()
        .and_then(|s| s.current_revision.as_deref())
        .and_then(|c| {
            revisions
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(c))
        })
        .cloned()
        .unwrap_or_else(|| update.clone());
    let current_name = current.metadata.name.clone().unwrap_or_default();

    // What to do.
    let claims_ok = |pod: &Pod| claims_ok(&state.claims, &set, pod);
    let claims_stale = |ordinal: i32| claims_stale(&state.claims, &set, ordinal);
    let plan = plan::plan(&Input {
        set: &set,
        pods: &pods,
        current: &current_name,
        update: &update_name,
        now: Timestamp::now(),
        claims_ok: &claims_ok,
        claims_stale: &claims_stale,
    });
    let mut stale = false;
    if state.expectations.satisfied(&key, &ns, &state.pods) {
        let mut writer = Writer {
            state: &state,
            set: &set,
            key: &key,
            pod_api: &pod_api,
        };
        for step in &plan.steps {
            match step {
                Step::Create { ordinal, at } => {
                    let (template, revision) = match at {
                        At::Current => (history::template_of(&current), &current_name),
                        At::Update => (history::template_of(&update), &update_name),
                    };
                    let template =
                        template.or_else(|| set.spec.as_ref().map(|s| s.template.clone()));
                    let pod =
                        identity::new_pod(&set, &template.unwrap_or_default(), *ordinal, revision);
                    writer.create(pod, *ordinal).await?;
                }
                Step::Delete(pod, why) => {
                    tracing::debug!(set = %key, pod = ?pod.metadata.name, ?why, "deleting");
                    writer.delete(pod).await?;
                }
                Step::FixIdentity(pod) => writer.fix_identity(pod).await?,
                Step::FixClaims(pod) => writer.fix_claims(pod).await?,
            }
        }
        stale = plan.stale_claims;
    }

    // The status.
    let mut status = StatefulSetStatus {
        observed_generation: set.metadata.generation,
        replicas: plan.counts.replicas,
        ready_replicas: Some(plan.counts.ready),
        available_replicas: Some(plan.counts.available),
        current_replicas: Some(plan.counts.current),
        updated_replicas: Some(plan.counts.updated),
        current_revision: Some(current_name.clone()),
        update_revision: Some(update_name.clone()),
        collision_count: Some(collisions),
        conditions: set.status.as_ref().and_then(|s| s.conditions.clone()),
    };
    complete_rolling_update(&set, &mut status);
    write_status(&state, &set, &status).await?;

    // Old history past the limit goes.
    let mut live: HashSet<String> = pods
        .iter()
        .map(|p| identity::revision_of(p).to_string())
        .collect();
    live.insert(status.current_revision.clone().unwrap_or_default());
    live.insert(update_name.clone());
    let limit = set
        .spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .unwrap_or(history::DEFAULT_HISTORY_LIMIT);
    for old in history::to_prune(&revisions, &live, limit) {
        let old_name = old.metadata.name.clone().unwrap_or_default();
        match rev_api.delete(&old_name, &DeleteParams::default()).await {
            Err(e) if !not_found(&e) => {
                return Err(write(format!(
                    "deleting controllerrevision {ns}/{old_name}"
                ))(e))
            }
            _ => {}
        }
    }
    state.failures.forget(&key);
    let min_ready = set
        .spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0);
    Ok(match plan.recheck {
        Some(left) if min_ready > 0 => Action::requeue(left + Duration::from_millis(100)),
        _ if stale => Action::requeue(Duration::from_secs(1)),
        _ => Action::await_change(),
    })
}

/// Finds or makes the revision of the set's template (upstream's
/// `getStatefulSetRevisions`).
async fn update_revision(
    set: &StatefulSet,
    api: &Api<ControllerRevision>,
    revisions: &mut Vec<Arc<ControllerRevision>>,
    collisions: i32,
) -> Result<(Arc<ControllerRevision>, i32), Error> {
    let ns = set.metadata.namespace.clone().unwrap_or_default();
    let name = set.metadata.name.clone().unwrap_or_default();
    let data = history::template_patch(&serde_json::to_value(set).unwrap_or_default());
    let mut candidate = history::new_revision(
        &ns,
        &name,
        ownership::controller_ref(set),
        set.spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.labels.as_ref()),
        &data,
        history::next_revision(revisions),
        Some(collisions),
    );
    if let Some(annotations) = set.metadata.annotations.clone() {
        candidate
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .extend(annotations);
    }
    let equal = history::find_equal(revisions, &candidate);
    if let Some(last_equal) = equal.last() {
        if revisions
            .last()
            .is_some_and(|last| Arc::ptr_eq(last, last_equal))
        {
            return Ok((last_equal.clone(), collisions));
        }
        let renumbered = history::renumber(api, last_equal, candidate.revision)
            .await
            .map_err(write(format!("renumbering controllerrevision {ns}/{name}")))?;
        let renumbered = Arc::new(renumbered);
        revisions.retain(|r| r.metadata.name != renumbered.metadata.name);
        revisions.push(renumbered.clone());
        history::sort(revisions);
        return Ok((renumbered, collisions));
    }
    let (created, collisions) = history::create(api, &name, candidate, collisions)
        .await
        .map_err(write(format!(
            "creating a controllerrevision of {ns}/{name}"
        )))?;
    let created = Arc::new(created);
    if !revisions
        .iter()
        .any(|r| r.metadata.name == created.metadata.name)
    {
        revisions.push(created.clone());
        history::sort(revisions);
    }
    Ok((created, collisions))
}

/// A finished rolling update makes the update revision current.
fn complete_rolling_update(set: &StatefulSet, status: &mut StatefulSetStatus) {
    let rolling = set
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        != Some("OnDelete");
    if rolling
        && status.updated_replicas == Some(status.replicas)
        && status.ready_replicas == Some(status.replicas)
    {
        status.current_replicas = status.updated_replicas;
        status.current_revision = status.update_revision.clone();
    }
}

async fn write_status(
    state: &State,
    set: &StatefulSet,
    status: &StatefulSetStatus,
) -> Result<(), Error> {
    let old = set.status.clone().unwrap_or_default();
    let same = old.observed_generation >= status.observed_generation
        && old.replicas == status.replicas
        && old.ready_replicas.unwrap_or(0) == status.ready_replicas.unwrap_or(0)
        && old.available_replicas.unwrap_or(0) == status.available_replicas.unwrap_or(0)
        && old.current_replicas.unwrap_or(0) == status.current_replicas.unwrap_or(0)
        && old.updated_replicas.unwrap_or(0) == status.updated_replicas.unwrap_or(0)
        && old.current_revision == status.current_revision
        && old.update_revision == status.update_revision
        && old.collision_count.unwrap_or(0) == status.collision_count.unwrap_or(0);
    if same {
        return Ok(());
    }
    let ns = set.metadata.namespace.clone().unwrap_or_default();
    let name = set.metadata.name.clone().unwrap_or_default();
    let api: Api<StatefulSet> = Api::namespaced(state.context.client.clone(), &ns);
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

fn error_policy(set: Arc<StatefulSet>, error: &Error, state: Arc<State>) -> Action {
    tracing::debug!(set = %key(&set), error = %runner::Chain(error), "sync failed");
    Action::requeue(state.failures.next_delay(&key(&set)))
}
