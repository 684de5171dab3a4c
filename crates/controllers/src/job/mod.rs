//! The Job controller (upstream's `job-controller`): runs a Job's pods
//! until `completions` of them succeed (one per index for Indexed Jobs),
//! `parallelism` at a time, replacing failed ones after a back-off, and
//! ends the Job as Complete or Failed (backoffLimit, activeDeadlineSeconds,
//! podFailurePolicy) with 1.33's interim conditions (SuccessCriteriaMet,
//! FailureTarget) first. Pods are tracked with the
//! `batch.kubernetes.io/job-tracking` finalizer: a finished pod is listed
//! in `status.uncountedTerminatedPods`, its finalizer removed, then
//! counted, so no pod is counted twice or lost.
//!
//! This module owns the sync and its writes; [`facts`], [`indexes`] and
//! [`policy`] are the pure parts. It must not delete finished Jobs (that is
//! [`crate::ttlafterfinished`]).

pub mod facts;
pub mod indexes;
mod orphans;
pub mod perindex;
pub mod policy;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::Store;
use kube::Api;
use serde_json::json;
use skiff_client::recorder::{reference_to, EventType, Recorder};
use skiff_client::selectors::Selector;
use tokio_util::sync::CancellationToken;

use self::facts::{BackoffRecord, TRACKING_FINALIZER};
use crate::context::Context;
use crate::runner::{self, Failures};
use crate::workload::expectations::Expectations;
use crate::workload::{ownership, pods};

/// Errors of one sync (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A write to the API server failed.
    #[error("{what} for job {job}")]
    Write {
        /// What was written.
        what: &'static str,
        /// `namespace/name`.
        job: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The Job's selector cannot be read.
    #[error("job {0} has an invalid selector")]
    Selector(String),
}

struct State {
    context: Context,
    pods: Store<Pod>,
    recorder: Recorder,
    expectations: Expectations,
    /// Pods (uids) per Job whose finalizer removal was sent and not seen.
    removing: Mutex<HashMap<String, HashSet<String>>>,
    backoff: Mutex<HashMap<String, BackoffRecord>>,
    failures: Failures,
}

/// Starts the Job controller in a controller manager.
pub(crate) fn start(
    context: Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let jobs = context.informers.get::<Job>();
        let pod_informer = context.informers.get::<Pod>();
        let controller = Controller::for_stream(jobs.objects(), jobs.store())
            .owns_stream(pod_informer.objects());
        let state = Arc::new(State {
            pods: pod_informer.store(),
            recorder: context.recorder("job-controller"),
            context,
            expectations: Expectations::default(),
            removing: Mutex::default(),
            backoff: Mutex::default(),
            failures: Failures::default(),
        });
        pod_informer.ready().await;
        jobs.ready().await;
        let orphans = orphans::run(state.context.clone(), jobs.store(), shutdown.clone());
        let main = runner::run(
            "job",
            &jobs,
            controller,
            4,
            reconcile,
            error_policy,
            state,
            shutdown,
        );
        tokio::join!(main, orphans);
    })
}

fn error_policy(job: Arc<Job>, _: &Error, state: Arc<State>) -> Action {
    Action::requeue(state.failures.next_delay(&key(&job)))
}

fn key(job: &Job) -> String {
    format!(
        "{}/{}",
        job.metadata.namespace.as_deref().unwrap_or_default(),
        job.metadata.name.as_deref().unwrap_or_default()
    )
}

/// What one sync found and decided, carried to the status write.
struct Sync {
    job: Job,
    key: String,
    namespace: String,
    now: k8s_openapi::jiff::Timestamp,
    pods: Vec<Arc<Pod>>,
    removing: HashSet<String>,
    terminating: i32,
    requeue: Option<Duration>,
}

/// The `spec.managedBy` of Jobs this controller syncs (or none).
pub const MANAGED_BY: &str = "kubernetes.io/job-controller";

async fn reconcile(obj: Arc<Job>, state: Arc<State>) -> Result<Action, Error> {
    let job_key = key(&obj);
    let managed_by = obj.spec.as_ref().and_then(|s| s.managed_by.as_deref());
    if managed_by.is_some_and(|m| m != MANAGED_BY) {
        // Another controller owns this Job's pods and status.
        return Ok(Action::await_change());
    }
    let namespace = obj.metadata.namespace.clone().unwrap_or_default();
    let uid = obj.metadata.uid.clone().unwrap_or_default();
    let now = state.context.config.wall_clock.now();
    let pod_api: Api<Pod> = Api::namespaced(state.context.client.clone(), &namespace);
    let selector =
        Selector::from_label_selector(obj.spec.as_ref().and_then(|s| s.selector.as_ref()))
            .map_err(|_| Error::Selector(job_key.clone()))?;
    let candidates = state
        .pods
        .state()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(namespace.as_str()));
    let claim = ownership::plan(
        candidates,
        &uid,
        &selector,
        obj.metadata.deletion_timestamp.is_some(),
    );
    let mut owned = claim.owned;
    if facts::finished(&obj).is_none() {
        for orphan in &claim.adopt {
            if let Ok(p) =
                ownership::adopt(&pod_api, orphan, ownership::controller_ref(&*obj)).await
            {
                owned.push(Arc::new(p));
            }
        }
    }
    for stray in &claim.release {
        let _ = ownership::release(&pod_api, stray, &uid).await;
    }
    // Finalizer removals the store has shown are done with.
    let removing = {
        let mut all = state.removing.lock().unwrap_or_else(|e| e.into_inner());
        let set = all.entry(job_key.clone()).or_default();
        set.retain(|uid| {
            owned
                .iter()
                .any(|p| p.metadata.uid.as_deref() == Some(uid) && facts::tracked(p))
        });
        set.clone()
    };
    if facts::finished(&obj).is_some() {
        // Anything still carrying the finalizer is let go.
        let left: Vec<Arc<Pod>> = owned
            .iter()
            .filter(|p| {
                facts::tracked(p)
                    && !removing.contains(p.metadata.uid.as_deref().unwrap_or_default())
            })
            .cloned()
            .collect();
        remove_finalizers(&state, &job_key, &pod_api, &left).await?;
        state
            .backoff
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&job_key);
        state.failures.forget(&job_key);
        return Ok(Action::await_change());
    }
    let satisfied = state
        .expectations
        .satisfied(&job_key, &namespace, &state.pods);
    let mut sync = Sync {
        job: (*obj).clone(),
        key: job_key.clone(),
        namespace,
        now,
        pods: owned,
        removing,
        terminating: 0,
        requeue: None,
    };
    sync_job(&state, &mut sync, satisfied, &pod_api).await?;
    state.failures.forget(&job_key);
    Ok(sync
        .requeue
        .map_or_else(Action::await_change, Action::requeue))
}

/// Upstream's `syncJob` for a Job that is not finished.
async fn sync_job(
    state: &State,
    s: &mut Sync,
    satisfied: bool,
    pod_api: &Api<Pod>,
) -> Result<(), Error> {
    let job = s.job.clone();
    let spec = job.spec.clone().unwrap_or_default();
    let now = s.now;
    let mut status = job.status.clone().unwrap_or_default();
    let uncounted = status.uncounted_terminated_pods.clone().unwrap_or_default();
    let unc_succeeded: HashSet<String> = uncounted
        .succeeded
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    let unc_failed: HashSet<String> = uncounted
        .failed
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    let uid_of = |p: &Pod| p.metadata.uid.clone().unwrap_or_default();
    let countable = |p: &&Arc<Pod>| {
        let uid = uid_of(p);
        facts::tracked(p)
            && !s.removing.contains(&uid)
            && !unc_succeeded.contains(&uid)
            && !unc_failed.contains(&uid)
    };
    let new_succeeded: Vec<Arc<Pod>> = s
        .pods
        .iter()
        .filter(countable)
        .filter(|p| pods::phase(p) == "Succeeded")
        .cloned()
        .collect();
    let new_failed: Vec<Arc<Pod>> = s
        .pods
        .iter()
        .filter(countable)
        .filter(|p| facts::pod_failed(p, &job))
        .cloned()
        .collect();
    let counted_failed = |p: &Pod| {
        spec.pod_failure_policy
            .as_ref()
            .is_none_or(|pol| policy::matches(pol, p).count)
    };
    let active: Vec<Arc<Pod>> = s
        .pods
        .iter()
        .filter(|p| pods::is_active(p))
        .cloned()
        .collect();
    s.terminating =
        i32::try_from(s.pods.iter().filter(|p| facts::terminating(p)).count()).unwrap_or(i32::MAX);
    let succeeded = status.succeeded.unwrap_or(0) + len(&new_succeeded) + len_hash(&unc_succeeded);
    let failed = status.failed.unwrap_or(0)
        + len(&new_failed
            .iter()
            .filter(|p| counted_failed(p))
            .collect::<Vec<_>>())
        + len_hash(&unc_failed);
    let mut ready = len(&active
        .iter()
        .filter(|p| pods::is_ready(p))
        .collect::<Vec<_>>());
    if status.start_time.is_none() && !facts::suspended(&job) {
        status.start_time = Some(Time(now));
    }
    let backoff = {
        let times = |ps: &[Arc<Pod>]| {
            ps.iter()
                .map(|p| facts::finish_time(p, now))
                .collect::<Vec<_>>()
        };
        let old = state
            .backoff
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&s.key)
            .copied()
            .unwrap_or_default();
        old.after(&times(&new_succeeded), &times(&new_failed))
    };

    // Why the Job ends, if it does.
    let mut finished: Option<JobCondition> = None;
    if facts::true_condition(&job, "SuccessCriteriaMet").is_none() {
        if let Some(target) = facts::true_condition(&job, "FailureTarget") {
            finished = Some(facts::condition(
                "Failed",
                "True",
                target.reason.as_deref().unwrap_or_default(),
                target.message.as_deref().unwrap_or_default(),
                now,
            ));
        } else if let Some(pol) = &spec.pod_failure_policy {
            let message = s
                .pods
                .iter()
                .filter(|p| facts::pod_failed(p, &job))
                .find_map(|p| policy::matches(pol, p).fail_job);
            finished = message
                .map(|m| facts::condition("FailureTarget", "True", "PodFailurePolicy", &m, now));
        }
    }
    if finished.is_none() && facts::true_condition(&job, "SuccessCriteriaMet").is_none() {
        let limit = spec.backoff_limit.unwrap_or(6);
        let started = status.start_time.as_ref().map(|t| t.0);
        if failed > limit || past_backoff_limit_on_failure(&job, &s.pods, limit) {
            finished = Some(facts::condition(
                "FailureTarget",
                "True",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
                now,
            ));
        } else if let (Some(deadline), Some(started), false) = (
            spec.active_deadline_seconds,
            started,
            facts::suspended(&job),
        ) {
            let allowed = Duration::from_secs(deadline.unsigned_abs());
            let elapsed = now.duration_since(started);
            if !elapsed.is_negative() && elapsed.unsigned_abs() >= allowed {
                finished = Some(facts::condition(
                    "FailureTarget",
                    "True",
                    "DeadlineExceeded",
                    "Job was active longer than specified deadline",
                    now,
                ));
            } else {
                let left = if elapsed.is_negative() {
                    allowed
                } else {
                    allowed.saturating_sub(elapsed.unsigned_abs())
                };
                requeue_at_most(&mut s.requeue, left);
            }
        }
    }
    let indexed = facts::indexed(&job);
    let completions = spec.completions;
    let mut succeeded_indexes: BTreeSet<i32> = BTreeSet::new();
    let prev_indexes = indexes::parse(
        status.completed_indexes.as_deref().unwrap_or_default(),
        completions.unwrap_or(0),
    );
    if indexed {
        succeeded_indexes = prev_indexes.clone();
        succeeded_indexes.extend(
            s.pods
                .iter()
                .filter(|p| pods::phase(p) == "Succeeded" && facts::tracked(p))
                .filter_map(|p| indexes::of(p))
                .filter(|i| *i < completions.unwrap_or(0)),
        );
    }

    let per_index = (indexed && spec.backoff_limit_per_index.is_some()).then(|| {
        let previous = indexes::parse(
            status.failed_indexes.as_deref().unwrap_or_default(),
            completions.unwrap_or(0),
        );
        perindex::read(&job, &s.pods, &previous, &succeeded_indexes, now)
    });
    if let (Some(per), None) = (&per_index, &finished) {
        let failed_n = len_set(&per.failed);
        if spec.max_failed_indexes.is_some_and(|m| failed_n > m) {
            finished = Some(facts::condition(
                "FailureTarget",
                "True",
                "MaxFailedIndexesExceeded",
                "Job has exceeded the specified maximal number of failed indexes",
                now,
            ));
        } else if failed_n > 0 && failed_n + len_set(&succeeded_indexes) >= completions.unwrap_or(0)
        {
            finished = Some(facts::condition(
                "FailureTarget",
                "True",
                "FailedIndexes",
                "Job has failed indexes",
                now,
            ));
        }
    }
    if let (true, None, Some(policy)) = (indexed, &finished, &spec.success_policy) {
        let met = indexes::success_policy_met(policy, completions.unwrap_or(0), &succeeded_indexes);
        finished =
            met.map(|m| facts::condition("SuccessCriteriaMet", "True", "SuccessPolicy", &m, now));
    }
    let mut active_n = len(&active);
    let mut conditions = status.conditions.clone().unwrap_or_default();
    if finished.is_some() {
        let (deleted, deleted_ready) = delete_pods(state, s, pod_api, &active, false).await;
        if deleted != len(&active) || !satisfied {
            finished = None;
        }
        active_n -= deleted;
        s.terminating += deleted;
        ready -= deleted_ready;
    } else {
        let mut managed = false;
        if satisfied && job.metadata.deletion_timestamp.is_none() {
            let done = if indexed {
                len_set(&succeeded_indexes)
            } else {
                succeeded
            };
            active_n = manage(
                state,
                s,
                pod_api,
                &active,
                done,
                &succeeded_indexes,
                &backoff,
                per_index.as_ref(),
                &mut ready,
            )
            .await?;
            managed = true;
        }
        let complete = match completions {
            None => succeeded > 0 && active_n == 0,
            Some(c) if indexed => len_set(&succeeded_indexes) >= c,
            Some(c) => succeeded >= c && active_n == 0,
        };
        if complete {
            finished = Some(facts::condition(
                "SuccessCriteriaMet",
                "True",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
                now,
            ));
        } else if managed {
            if facts::suspended(&job) {
                if facts::ensure_condition(
                    &mut conditions,
                    "Suspended",
                    "True",
                    "JobSuspended",
                    "Job suspended",
                    now,
                ) {
                    event(state, &job, EventType::Normal, "Suspended", "Job suspended");
                }
            } else if facts::ensure_condition(
                &mut conditions,
                "Suspended",
                "False",
                "JobResumed",
                "Job resumed",
                now,
            ) {
                event(state, &job, EventType::Normal, "Resumed", "Job resumed");
                status.start_time = Some(Time(now));
            }
        }
    }
    status.conditions = (!conditions.is_empty()).then_some(conditions);
    status.active = Some(active_n);
    status.ready = Some(ready);
    status.terminating = Some(s.terminating);

    // Track finished pods: list them as uncounted, drop their finalizers,
    // then count them.
    let mut unc = UncountedTerminatedPods {
        succeeded: Some(uncounted.succeeded.clone().unwrap_or_default()),
        failed: Some(uncounted.failed.clone().unwrap_or_default()),
    };
    let mut to_release = Vec::new();
    let mut new_indexes = Vec::new();
    for pod in &s.pods {
        let uid = uid_of(pod);
        if !facts::tracked(pod) || s.removing.contains(&uid) {
            continue;
        }
        let failed_pod = facts::pod_failed(pod, &job);
        let succeeded_pod = pods::phase(pod) == "Succeeded";
        if !(job.metadata.deletion_timestamp.is_some()
            || finished.is_some()
            || succeeded_pod
            || failed_pod)
        {
            continue;
        }
        to_release.push(pod.clone());
        let success_met = finished
            .as_ref()
            .is_some_and(|c| c.type_ == "SuccessCriteriaMet");
        if succeeded_pod && !unc_failed.contains(&uid) {
            if indexed {
                if let Some(ix) = indexes::of(pod)
                    .filter(|i| *i < completions.unwrap_or(0) && !prev_indexes.contains(i))
                {
                    new_indexes.push(ix);
                }
            } else if !unc_succeeded.contains(&uid) {
                push_uid(&mut unc.succeeded, uid);
            }
        } else if (failed_pod || (finished.is_some() && !success_met)) && !unc_failed.contains(&uid)
        {
            let valid = !indexed || indexes::of(pod).is_some_and(|i| i < completions.unwrap_or(0));
            if valid && counted_failed(pod) {
                push_uid(&mut unc.failed, uid);
            }
        }
    }
    if indexed {
        let mut all = prev_indexes.clone();
        all.extend(new_indexes);
        status.completed_indexes = Some(indexes::format(&all));
        status.succeeded = Some(len_set(&all));
        if let Some(per) = &per_index {
            status.failed_indexes = Some(indexes::format(&per.failed));
        }
    }
    status.uncounted_terminated_pods = Some(unc);
    if let Some(c) = finished.take() {
        finished = Some(match c.type_.as_str() {
            "FailureTarget" => {
                status
                    .conditions
                    .get_or_insert_with(Vec::new)
                    .push(c.clone());
                facts::condition(
                    "Failed",
                    "True",
                    c.reason.as_deref().unwrap_or_default(),
                    c.message.as_deref().unwrap_or_default(),
                    now,
                )
            }
            "SuccessCriteriaMet" => {
                if facts::true_condition(&job, "SuccessCriteriaMet").is_none() {
                    status
                        .conditions
                        .get_or_insert_with(Vec::new)
                        .push(c.clone());
                }
                facts::condition(
                    "Complete",
                    "True",
                    c.reason.as_deref().unwrap_or_default(),
                    c.message.as_deref().unwrap_or_default(),
                    now,
                )
            }
            _ => c,
        });
    }
    let mut current = job.clone();
    write_status(state, s, &mut current, &status).await?;
    state
        .backoff
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(s.key.clone(), backoff);

    let released = remove_finalizers(state, &s.key, pod_api, &to_release).await;
    let still_tracked: HashSet<String> = s
        .pods
        .iter()
        .filter(|p| facts::tracked(p))
        .map(|p| uid_of(p))
        .filter(|uid| {
            !released.as_ref().map(|r| r.contains(uid)).unwrap_or(false)
                && !s.removing.contains(uid)
        })
        .collect();
    count_uncounted(&mut status, &still_tracked);
    let uncounted_left = status.uncounted_terminated_pods.as_ref().is_some_and(|u| {
        u.succeeded.as_ref().is_some_and(|v| !v.is_empty())
            || u.failed.as_ref().is_some_and(|v| !v.is_empty())
    });
    let mut enacted = None;
    if let Some(c) = &finished {
        if !uncounted_left && s.terminating == 0 {
            let mut conditions = status.conditions.clone().unwrap_or_default();
            facts::ensure_condition(
                &mut conditions,
                &c.type_,
                "True",
                c.reason.as_deref().unwrap_or_default(),
                c.message.as_deref().unwrap_or_default(),
                now,
            );
            status.conditions = Some(conditions);
            if c.type_ == "Complete" {
                status.completion_time = Some(Time(now));
            }
            enacted = Some(c.clone());
        } else if s.terminating > 0 {
            requeue_at_most(&mut s.requeue, Duration::from_secs(1));
        }
    }
    write_status(state, s, &mut current, &status).await?;
    released?;
    if let Some(c) = enacted {
        if c.type_ == "Complete" {
            if completions.is_some_and(|n| status.succeeded.unwrap_or(0) > n) {
                event(
                    state,
                    &job,
                    EventType::Warning,
                    "TooManySucceededPods",
                    "Too many succeeded pods running after completion count reached",
                );
            }
            event(state, &job, EventType::Normal, "Completed", "Job completed");
        } else {
            event(
                state,
                &job,
                EventType::Warning,
                c.reason.as_deref().unwrap_or_default(),
                c.message.as_deref().unwrap_or_default(),
            );
        }
    }
    Ok(())
}

/// Upstream's `manageJob`: deletes all active pods of a suspended Job,
/// extra pods otherwise, or creates missing ones (after the back-off).
/// Returns the number of active pods.
#[expect(clippy::too_many_arguments, reason = "one sync's parts")]
async fn manage(
    state: &State,
    s: &mut Sync,
    pod_api: &Api<Pod>,
    active: &[Arc<Pod>],
    succeeded: i32,
    succeeded_indexes: &BTreeSet<i32>,
    backoff: &BackoffRecord,
    per_index: Option<&perindex::PerIndex>,
    ready: &mut i32,
) -> Result<i32, Error> {
    let job = s.job.clone();
    let spec = job.spec.clone().unwrap_or_default();
    let mut active_n = len(active);
    if facts::suspended(&job) {
        let (deleted, deleted_ready) = delete_pods(state, s, pod_api, active, true).await;
        s.terminating += deleted;
        *ready -= deleted_ready;
        return Ok(active_n - deleted);
    }
    let parallelism = spec.parallelism.unwrap_or(1);
    let want = facts::want_active(spec.completions, parallelism, succeeded, active_n);
    let rm_at_least = usize::try_from(active_n - want).unwrap_or(0);
    let mut remove: Vec<Arc<Pod>> = if facts::indexed(&job) {
        let mut remove = indexes::invalid_or_repeated(active, spec.completions.unwrap_or(0));
        // Pods of indexes that failed for good.
        if let Some(per) = per_index {
            let extra: Vec<Arc<Pod>> = active
                .iter()
                .filter(|p| {
                    indexes::of(p).is_some_and(|i| per.failed.contains(&i))
                        && !remove.iter().any(|r| r.metadata.uid == p.metadata.uid)
                })
                .cloned()
                .collect();
            remove.extend(extra);
        }
        remove
    } else {
        Vec::new()
    };
    if remove.len() < rm_at_least {
        let mut left: Vec<Arc<Pod>> = active
            .iter()
            .filter(|p| !remove.iter().any(|r| r.metadata.uid == p.metadata.uid))
            .cloned()
            .collect();
        facts::sort_for_removal(&mut left);
        remove.extend(left.into_iter().take(rm_at_least - remove.len()));
    }
    remove.truncate(facts::MAX_CREATE_DELETE_PER_SYNC);
    if !remove.is_empty() {
        let (deleted, deleted_ready) = delete_pods(state, s, pod_api, &remove, true).await;
        s.terminating += deleted;
        *ready -= deleted_ready;
        return Ok(active_n - deleted);
    }
    let terminating = if facts::only_replace_failed(&job) {
        s.terminating
    } else {
        0
    };
    let diff = want - terminating - active_n;
    if diff <= 0 {
        return Ok(active_n);
    }
    let wait = if per_index.is_some() {
        Duration::ZERO
    } else {
        backoff.remaining(s.now)
    };
    if !wait.is_zero() {
        requeue_at_most(&mut s.requeue, wait);
        return Ok(active_n);
    }
    let diff = usize::try_from(diff)
        .unwrap_or(0)
        .min(facts::MAX_CREATE_DELETE_PER_SYNC);
    let to_create: Vec<Option<i32>> = if facts::indexed(&job) {
        let mut done = succeeded_indexes.clone();
        if let Some(per) = per_index {
            done.extend(per.failed.iter().copied());
        }
        let pending = indexes::first_pending(&done, active, spec.completions.unwrap_or(0), diff);
        let mut ready_now = Vec::new();
        let mut soonest: Option<Duration> = None;
        for i in pending {
            let left = per_index.map_or(Duration::ZERO, |p| p.remaining(i, s.now));
            if left.is_zero() {
                ready_now.push(Some(i));
            } else {
                soonest = Some(soonest.map_or(left, |x| x.min(left)));
            }
        }
        if let (true, Some(left)) = (ready_now.is_empty(), soonest) {
            requeue_at_most(&mut s.requeue, left);
        }
        ready_now
    } else {
        vec![None; diff]
    };
    let mut created = Vec::new();
    let mut error = None;
    for index in to_create {
        match pod_api
            .create(&PostParams::default(), &{
                let mut pod = facts::new_pod(&job, index);
                if let (Some(per), Some(i)) = (per_index, index) {
                    pod.metadata
                        .annotations
                        .get_or_insert_with(Default::default)
                        .insert(perindex::FAILURE_COUNT.into(), per.failures(i).to_string());
                }
                pod
            })
            .await
        {
            Ok(pod) => {
                let name = pod.metadata.name.unwrap_or_default();
                event(
                    state,
                    &job,
                    EventType::Normal,
                    "SuccessfulCreate",
                    &format!("Created pod: {name}"),
                );
                created.push(name);
                active_n += 1;
            }
            Err(e) if is_namespace_terminating(&e) => break,
            Err(e) => {
                event(
                    state,
                    &job,
                    EventType::Warning,
                    "FailedCreate",
                    &format!("Error creating: {e}"),
                );
                error = Some(e);
                break;
            }
        }
    }
    state.expectations.expect(&s.key, created, []);
    match error {
        Some(source) => Err(Error::Write {
            what: "creating pods",
            job: s.key.clone(),
            source,
        }),
        None => Ok(active_n),
    }
}

/// Deletes `pods` (first dropping the tracking finalizer when
/// `release`, so they are not counted): how many were deleted, how many
/// of those were ready.
async fn delete_pods(
    state: &State,
    s: &Sync,
    pod_api: &Api<Pod>,
    pods: &[Arc<Pod>],
    release: bool,
) -> (i32, i32) {
    let mut deleted = 0;
    let mut deleted_ready = 0;
    let mut expected = Vec::new();
    for pod in pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        if release && facts::tracked(pod) {
            if let Err(e) = remove_finalizer(pod_api, pod).await {
                tracing::debug!(pod = %name, error = %e, "removing the tracking finalizer");
                continue;
            }
        }
        match pod_api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                expected.push((name.clone(), pod.metadata.uid.clone().unwrap_or_default()));
                event(
                    state,
                    &s.job,
                    EventType::Normal,
                    "SuccessfulDelete",
                    &format!("Deleted pod: {name}"),
                );
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                event(
                    state,
                    &s.job,
                    EventType::Warning,
                    "FailedDelete",
                    &format!("Error deleting: {e}"),
                );
                continue;
            }
        }
        deleted += 1;
        if pods::is_ready(pod) {
            deleted_ready += 1;
        }
    }
    state.expectations.expect(&s.key, [], expected);
    (deleted, deleted_ready)
}

pub(super) async fn remove_finalizer(pod_api: &Api<Pod>, pod: &Pod) -> kube::Result<()> {
    // Upstream's patch: only this finalizer goes, whatever else changed,
    // and only from this pod (uid precondition).
    let patch = json!({"metadata": {
        "$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER],
        "uid": pod.metadata.uid,
    }});
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    match pod_api
        .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Removes the tracking finalizer from `pods`: the uids it was removed
/// from (or that are gone).
async fn remove_finalizers(
    state: &State,
    key: &str,
    pod_api: &Api<Pod>,
    pods: &[Arc<Pod>],
) -> Result<HashSet<String>, Error> {
    let mut done = HashSet::new();
    let mut error = None;
    for pod in pods {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        match remove_finalizer(pod_api, pod).await {
            Ok(()) => {
                done.insert(uid);
            }
            Err(e) => error = Some(e),
        }
    }
    state
        .removing
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(key.to_string())
        .or_default()
        .extend(done.iter().cloned());
    match error {
        Some(source) => Err(Error::Write {
            what: "removing tracking finalizers",
            job: key.to_string(),
            source,
        }),
        None => Ok(done),
    }
}

/// Moves uids whose pods no longer carry the finalizer from
/// `uncountedTerminatedPods` to the counters.
fn count_uncounted(status: &mut JobStatus, still_tracked: &HashSet<String>) {
    let Some(unc) = status.uncounted_terminated_pods.as_mut() else {
        return;
    };
    for (list, counter) in [
        (&mut unc.succeeded, &mut status.succeeded),
        (&mut unc.failed, &mut status.failed),
    ] {
        let uids = list.take().unwrap_or_default();
        let (keep, counted): (Vec<String>, Vec<String>) =
            uids.into_iter().partition(|u| still_tracked.contains(u));
        *counter = Some(counter.unwrap_or(0) + len(&counted));
        *list = Some(keep);
    }
}

/// Replaces the status when it changed (guarded by resourceVersion, so
/// a stale Job is refused and synced again).
async fn write_status(
    state: &State,
    s: &Sync,
    current: &mut Job,
    status: &JobStatus,
) -> Result<(), Error> {
    let mut status = status.clone();
    for counter in [&mut status.succeeded, &mut status.failed] {
        counter.get_or_insert(0);
    }
    // Written as upstream does: `uncountedTerminatedPods: {}` when empty.
    if let Some(unc) = status.uncounted_terminated_pods.as_mut() {
        for list in [&mut unc.succeeded, &mut unc.failed] {
            if list.as_ref().is_some_and(Vec::is_empty) {
                *list = None;
            }
        }
    }
    if current.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let mut next = current.clone();
    next.status = Some(status);
    let api: Api<Job> = Api::namespaced(state.context.client.clone(), &s.namespace);
    let name = current.metadata.name.clone().unwrap_or_default();
    *current = api
        .replace_status(&name, &PostParams::default(), &next)
        .await
        .map_err(|source| Error::Write {
            what: "updating status",
            job: s.key.clone(),
            source,
        })?;
    Ok(())
}

/// Restart counts of running pods reach the limit (restartPolicy
/// OnFailure; upstream's `pastBackoffLimitOnFailure`).
fn past_backoff_limit_on_failure(job: &Job, pods: &[Arc<Pod>], limit: i32) -> bool {
    let policy = job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.restart_policy.as_deref());
    if policy != Some("OnFailure") {
        return false;
    }
    let restarts: i32 = pods
        .iter()
        .filter(|p| matches!(pods::phase(p), "Running" | "Pending"))
        .filter_map(|p| p.status.as_ref())
        .flat_map(|s| {
            s.init_container_statuses
                .iter()
                .flatten()
                .chain(s.container_statuses.iter().flatten())
        })
        .map(|c| c.restart_count)
        .sum();
    if limit == 0 {
        restarts > 0
    } else {
        restarts >= limit
    }
}

fn event(state: &State, job: &Job, type_: EventType, reason: &str, message: &str) {
    state
        .recorder
        .record_for(&reference_to(job), type_, reason, "", message);
}

fn is_namespace_terminating(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 403 && s.message.contains("terminat"))
}

fn requeue_at_most(requeue: &mut Option<Duration>, after: Duration) {
    let after = after.max(Duration::from_millis(100));
    *requeue = Some(requeue.map_or(after, |r| r.min(after)));
}

fn push_uid(list: &mut Option<Vec<String>>, uid: String) {
    list.get_or_insert_with(Vec::new).push(uid);
}

fn len<T>(v: &[T]) -> i32 {
    i32::try_from(v.len()).unwrap_or(i32::MAX)
}

fn len_set<T>(v: &std::collections::BTreeSet<T>) -> i32 {
    i32::try_from(v.len()).unwrap_or(i32::MAX)
}

fn len_hash(v: &HashSet<String>) -> i32 {
    i32::try_from(v.len()).unwrap_or(i32::MAX)
}
