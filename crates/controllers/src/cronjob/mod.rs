//! The CronJob controller (upstream's v2 `cronjob-controller`): creates a
//! Job named `<cronjob>-<minutes since the epoch>` at each scheduled time
//! (in `spec.timeZone` or the schedule's `TZ=`), honours
//! `startingDeadlineSeconds`, `concurrencyPolicy` (Allow, Forbid,
//! Replace) and `suspend`, keeps `status.active`, `lastScheduleTime` and
//! `lastSuccessfulTime`, deletes finished Jobs beyond the history limits,
//! and wakes up again at the next scheduled time.
//!
//! This module owns the sync and its writes; [`schedule`] is the pure
//! cron arithmetic. It must not touch the Jobs' pods (the Job controller
//! and the garbage collector do).

pub mod schedule;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, PostParams, PropagationPolicy};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::Store;
use kube::Api;
use skiff_client::recorder::{reference_to, EventType, Recorder};
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::job::facts;
use crate::runner::{self, Failures};
use crate::workload::ownership;

/// The annotation with a Job's scheduled time (RFC 3339, in the
/// CronJob's time zone).
pub const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// Slack added to the wake-up so the next start is due when it comes.
const NEXT_SCHEDULE_DELTA: Duration = Duration::from_millis(100);

/// Errors of one sync (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A write to the API server failed.
    #[error("{what} for cronjob {cronjob}")]
    Write {
        /// What was written.
        what: &'static str,
        /// `namespace/name`.
        cronjob: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

struct State {
    context: Context,
    jobs: Store<Job>,
    recorder: Recorder,
    failures: Failures,
}

/// Starts the CronJob controller in a controller manager.
pub(crate) fn start(
    context: Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let cronjobs = context.informers.get::<CronJob>();
        let jobs = context.informers.get::<Job>();
        let controller = Controller::for_stream(cronjobs.objects(), cronjobs.store())
            .owns_stream(jobs.objects());
        let state = Arc::new(State {
            jobs: jobs.store(),
            recorder: context.recorder("cronjob-controller"),
            context,
            failures: Failures::default(),
        });
        jobs.ready().await;
        runner::run(
            "cronjob",
            &cronjobs,
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

fn key(cj: &CronJob) -> String {
    format!(
        "{}/{}",
        cj.metadata.namespace.as_deref().unwrap_or_default(),
        cj.metadata.name.as_deref().unwrap_or_default()
    )
}

fn error_policy(cj: Arc<CronJob>, _: &Error, state: Arc<State>) -> Action {
    Action::requeue(state.failures.next_delay(&key(&cj)))
}

/// The name of the Job scheduled at `at` (upstream's `getJobName`).
pub fn job_name(cronjob: &str, at: Timestamp) -> String {
    format!("{cronjob}-{}", at.as_second().div_euclid(60))
}

fn event(state: &State, cj: &CronJob, type_: EventType, reason: &str, message: &str) {
    state
        .recorder
        .record_for(&reference_to(cj), type_, reason, "", message);
}

fn reference(job: &Job) -> ObjectReference {
    ObjectReference {
        resource_version: job.metadata.resource_version.clone(),
        ..reference_to(job)
    }
}

async fn reconcile(obj: Arc<CronJob>, state: Arc<State>) -> Result<Action, Error> {
    let cj_key = key(&obj);
    let namespace = obj.metadata.namespace.clone().unwrap_or_default();
    let uid = obj.metadata.uid.clone().unwrap_or_default();
    let now = state.context.config.wall_clock.now();
    let job_api: Api<Job> = Api::namespaced(state.context.client.clone(), &namespace);
    let mut cj = (*obj).clone();
    let jobs: Vec<Arc<Job>> = state
        .jobs
        .state()
        .into_iter()
        .filter(|j| j.metadata.namespace.as_deref() == Some(namespace.as_str()))
        .filter(|j| ownership::is_controlled_by(&j.metadata, &uid))
        .collect();
    let in_active =
        |active: &[ObjectReference], uid: &Option<String>| active.iter().any(|r| r.uid == *uid);
    // A running Job missing from the informer's status may be in a newer
    // status the informer has not shown yet: read it before calling the
    // Job unexpected (as upstream does).
    let listed = cj
        .status
        .as_ref()
        .and_then(|s| s.active.clone())
        .unwrap_or_default();
    if jobs
        .iter()
        .any(|j| facts::finished(j).is_none() && !in_active(&listed, &j.metadata.uid))
    {
        let api: Api<CronJob> = Api::namespaced(state.context.client.clone(), &namespace);
        match api
            .get_opt(cj.metadata.name.as_deref().unwrap_or_default())
            .await
        {
            Ok(Some(fresh)) if fresh.metadata.uid == cj.metadata.uid => cj = fresh,
            Ok(_) => return Ok(Action::await_change()),
            Err(source) => {
                return Err(Error::Write {
                    what: "reading the cronjob",
                    cronjob: cj_key,
                    source,
                })
            }
        }
    }
    let mut status = cj.status.clone().unwrap_or_default();
    let old_status = status.clone();
    let mut active = status.active.take().unwrap_or_default();
    for j in &jobs {
        let name = j.metadata.name.clone().unwrap_or_default();
        let found = in_active(&active, &j.metadata.uid);
        let finished = facts::finished(j);
        if !found && finished.is_none() {
            if j.metadata.deletion_timestamp.is_none() {
                event(
                    &state,
                    &cj,
                    EventType::Warning,
                    "UnexpectedJob",
                    &format!("Saw a job that the controller did not create or forgot: {name}"),
                );
            }
        } else if let (true, Some(c)) = (found, finished) {
            active.retain(|r| r.uid != j.metadata.uid);
            event(
                &state,
                &cj,
                EventType::Normal,
                "SawCompletedJob",
                &format!("Saw completed job: {name}, condition: {}", c.type_),
            );
        }
        if facts::true_condition(j, "Complete").is_some() {
            if let Some(done) = j.status.as_ref().and_then(|s| s.completion_time.clone()) {
                if status
                    .last_successful_time
                    .as_ref()
                    .is_none_or(|t| done.0 > t.0)
                {
                    status.last_successful_time = Some(done);
                }
            }
        }
    }
    // Active Jobs that are gone.
    let known: HashSet<Option<String>> = jobs.iter().map(|j| j.metadata.uid.clone()).collect();
    let mut kept = Vec::new();
    for r in active {
        if known.contains(&r.uid) {
            kept.push(r);
            continue;
        }
        let name = r.name.clone().unwrap_or_default();
        match job_api.get_opt(&name).await {
            Ok(Some(j)) if j.metadata.uid == r.uid => kept.push(r),
            Ok(_) => event(
                &state,
                &cj,
                EventType::Normal,
                "MissingJob",
                &format!("Active job went missing: {name}"),
            ),
            Err(source) => {
                return Err(Error::Write {
                    what: "reading an active job",
                    cronjob: cj_key,
                    source,
                })
            }
        }
    }
    status.active = Some(kept);
    let requeue = if cj.metadata.deletion_timestamp.is_some() {
        None
    } else {
        schedule_next(&state, &mut cj, &mut status, &job_api, now).await?
    };
    cleanup(&state, &cj, &jobs, &job_api).await;
    let active_empty = status.active.as_ref().is_none_or(Vec::is_empty);
    if active_empty {
        status.active = None;
    }
    if status != old_status {
        let api: Api<CronJob> = Api::namespaced(state.context.client.clone(), &namespace);
        cj.status = Some(status);
        api.replace_status(
            cj.metadata.name.as_deref().unwrap_or_default(),
            &PostParams::default(),
            &cj,
        )
        .await
        .map_err(|source| Error::Write {
            what: "updating status",
            cronjob: cj_key.clone(),
            source,
        })?;
    }
    state.failures.forget(&cj_key);
    Ok(requeue.map_or_else(Action::await_change, Action::requeue))
}

/// Upstream's scheduling half of `syncCronJob`: starts the Job due now,
/// if any. Returns when to look again.
async fn schedule_next(
    state: &State,
    cj: &mut CronJob,
    status: &mut CronJobStatus,
    job_api: &Api<Job>,
    now: Timestamp,
) -> Result<Option<Duration>, Error> {
    let spec = cj.spec.clone().unwrap_or_default();
    if let Some(tz) = spec.time_zone.as_deref() {
        if jiff::tz::db().get(tz).is_err() && tz != "UTC" && tz != "Local" {
            event(
                state,
                cj,
                EventType::Warning,
                "UnknownTimeZone",
                &format!("invalid timeZone: {tz:?}: unknown time zone {tz}"),
            );
            return Ok(None);
        }
    }
    if spec.suspend == Some(true) {
        return Ok(None);
    }
    if schedule::has_tz_prefix(&spec.schedule) {
        event(state, cj, EventType::Warning, "UnsupportedSchedule", &format!(
            "CRON_TZ or TZ used in schedule {:?} is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details",
            spec.schedule
        ));
    }
    let sched = match schedule::parse(&spec.schedule, spec.time_zone.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            event(
                state,
                cj,
                EventType::Warning,
                "UnparseableSchedule",
                &format!("unparseable schedule: {:?} : {e}", spec.schedule),
            );
            return Ok(None);
        }
    };
    let created = cj.metadata.creation_timestamp.as_ref().map_or(now, |t| t.0);
    let last = status.last_schedule_time.as_ref().map_or(created, |t| t.0);
    let mut earliest = last;
    if let Some(sds) = spec.starting_deadline_seconds {
        let deadline = now - Duration::from_secs(sds.unsigned_abs());
        if deadline > earliest {
            earliest = deadline;
        }
    }
    // When to look again: just after the next start from the latest one.
    let wake = |from: Timestamp| -> Option<Duration> {
        let (recent, _) = schedule::most_recent(&sched, last, now).ok()?;
        let next = sched.next(recent.unwrap_or(from).max(from))?;
        let left = next.duration_since(now);
        let left = if left.is_negative() {
            Duration::ZERO
        } else {
            left.unsigned_abs()
        };
        Some(left + NEXT_SCHEDULE_DELTA)
    };
    let (scheduled, missed) = match schedule::most_recent(&sched, earliest, now) {
        Ok(found) => found,
        Err(e) => {
            event(
                state,
                cj,
                EventType::Warning,
                "InvalidSchedule",
                &format!("invalid schedule: {} : {e}", spec.schedule),
            );
            return Ok(None);
        }
    };
    let Some(scheduled) = scheduled else {
        return Ok(wake(now));
    };
    if missed > 100 {
        event(state, cj, EventType::Warning, "TooManyMissedTimes", &format!(
            "too many missed start times: {missed}. Set or decrease .spec.startingDeadlineSeconds or check clock skew"
        ));
    }
    if let Some(sds) = spec.starting_deadline_seconds {
        if scheduled + Duration::from_secs(sds.unsigned_abs()) < now {
            event(
                state,
                cj,
                EventType::Warning,
                "MissSchedule",
                &format!(
                    "Missed scheduled time to start a job: {}",
                    rfc1123z(scheduled)
                ),
            );
            return Ok(wake(scheduled));
        }
    }
    let cj_name = cj.metadata.name.clone().unwrap_or_default();
    let name = job_name(&cj_name, scheduled);
    let active = status.active.get_or_insert_with(Vec::new);
    let already = active
        .iter()
        .any(|r| r.name.as_deref() == Some(name.as_str()))
        || status
            .last_schedule_time
            .as_ref()
            .is_some_and(|t| t.0 == scheduled);
    if already {
        return Ok(wake(scheduled));
    }
    let policy = spec.concurrency_policy.as_deref().unwrap_or("Allow");
    if policy == "Forbid" && !active.is_empty() {
        event(
            state,
            cj,
            EventType::Normal,
            "JobAlreadyActive",
            "Not starting job because prior execution is running and concurrency policy is Forbid",
        );
        return Ok(wake(scheduled));
    }
    if policy == "Replace" {
        for r in std::mem::take(active) {
            let old = r.name.clone().unwrap_or_default();
            let params = DeleteParams {
                propagation_policy: Some(PropagationPolicy::Background),
                ..DeleteParams::default()
            };
            match job_api.delete(&old, &params).await {
                Ok(_) => event(
                    state,
                    cj,
                    EventType::Normal,
                    "SuccessfulDelete",
                    &format!("Deleted job {old}"),
                ),
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(source) => {
                    event(
                        state,
                        cj,
                        EventType::Warning,
                        "FailedDelete",
                        &format!("Deleted job: {source}"),
                    );
                    active.push(r);
                    return Err(Error::Write {
                        what: "replacing a job",
                        cronjob: key(cj),
                        source,
                    });
                }
            }
        }
    }
    // The annotation is written in spec.timeZone, UTC without one.
    let stamp_zone = spec
        .time_zone
        .as_deref()
        .and_then(|z| jiff::tz::db().get(z).ok())
        .unwrap_or(jiff::tz::TimeZone::UTC);
    let job = job_from_template(cj, &name, scheduled, &stamp_zone);
    let created = match job_api.create(&PostParams::default(), &job).await {
        Ok(j) => {
            event(
                state,
                cj,
                EventType::Normal,
                "SuccessfulCreate",
                &format!("Created job {name}"),
            );
            j
        }
        Err(kube::Error::Api(e)) if e.code == 409 => match job_api.get_opt(&name).await {
            Ok(Some(j))
                if ownership::is_controlled_by(
                    &j.metadata,
                    cj.metadata.uid.as_deref().unwrap_or_default(),
                ) =>
            {
                j
            }
            _ => {
                return Err(Error::Write {
                    what: "creating a job",
                    cronjob: key(cj),
                    source: kube::Error::Api(e),
                })
            }
        },
        Err(source) => {
            event(
                state,
                cj,
                EventType::Warning,
                "FailedCreate",
                &format!("Error creating job: {source}"),
            );
            return Err(Error::Write {
                what: "creating a job",
                cronjob: key(cj),
                source,
            });
        }
    };
    active.push(reference(&created));
    status.last_schedule_time = Some(Time(scheduled));
    Ok(wake(scheduled))
}

/// The Job for the start at `scheduled` (upstream's `getJobFromTemplate2`).
pub fn job_from_template(
    cj: &CronJob,
    name: &str,
    scheduled: Timestamp,
    tz: &jiff::tz::TimeZone,
) -> Job {
    let template = cj
        .spec
        .as_ref()
        .map(|s| s.job_template.clone())
        .unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    let mut annotations = meta.annotations.unwrap_or_default();
    let stamp = scheduled.to_zoned(tz.clone());
    annotations.insert(
        SCHEDULED_TIMESTAMP.into(),
        stamp
            .strftime("%Y-%m-%dT%H:%M:%S%:z")
            .to_string()
            .replace("+00:00", "Z"),
    );
    Job {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: cj.metadata.namespace.clone(),
            labels: meta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![ownership::controller_ref(cj)]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

/// Go's `time.RFC1123Z` in UTC.
fn rfc1123z(t: Timestamp) -> String {
    t.strftime("%a, %d %b %Y %H:%M:%S +0000").to_string()
}

/// Deletes the oldest finished Jobs beyond the history limits
/// (upstream's `cleanupFinishedJobs`).
async fn cleanup(state: &State, cj: &CronJob, jobs: &[Arc<Job>], job_api: &Api<Job>) {
    let spec = cj.spec.clone().unwrap_or_default();
    let mut succeeded = Vec::new();
    let mut failed = Vec::new();
    for j in jobs
        .iter()
        .filter(|j| j.metadata.deletion_timestamp.is_none())
    {
        match facts::finished(j).map(|c| c.type_.as_str()) {
            Some("Complete") => succeeded.push(j.clone()),
            Some("Failed") => failed.push(j.clone()),
            _ => {}
        }
    }
    for (mut list, limit) in [
        (succeeded, spec.successful_jobs_history_limit),
        (failed, spec.failed_jobs_history_limit),
    ] {
        let Some(limit) = limit else { continue };
        let limit = usize::try_from(limit).unwrap_or(0);
        if list.len() <= limit {
            continue;
        }
        sort_by_start(&mut list);
        let extra = list.len() - limit;
        for j in list.into_iter().take(extra) {
            let name = j.metadata.name.clone().unwrap_or_default();
            let params = DeleteParams {
                propagation_policy: Some(PropagationPolicy::Background),
                ..DeleteParams::default()
            };
            match job_api.delete(&name, &params).await {
                Ok(_) => event(
                    state,
                    cj,
                    EventType::Normal,
                    "SuccessfulDelete",
                    &format!("Deleted job {name}"),
                ),
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => event(
                    state,
                    cj,
                    EventType::Warning,
                    "FailedDelete",
                    &format!("Deleted job: {e}"),
                ),
            }
        }
    }
}

/// Oldest start first; Jobs that never started last; then by name
/// (upstream's `byJobStartTime`).
pub fn sort_by_start(jobs: &mut [Arc<Job>]) {
    jobs.sort_by(|a, b| {
        let start = |j: &Job| {
            j.status
                .as_ref()
                .and_then(|s| s.start_time.as_ref())
                .map(|t| t.0)
        };
        let key = |j: &Job| (start(j).is_none(), start(j), j.metadata.name.clone());
        key(a).cmp(&key(b))
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn jobs_are_named_after_their_minute() {
        let at: Timestamp = "2026-01-01T00:05:00Z".parse().unwrap();
        assert_eq!(
            job_name("backup", at),
            format!("backup-{}", at.as_second() / 60)
        );
    }

    #[test]
    fn a_job_from_the_template_carries_the_scheduled_time_and_owner() {
        let cj: CronJob = serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ns", "uid": "u"},
            "spec": {"schedule": "* * * * *", "jobTemplate": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"template": {"spec": {"containers": [{"name": "x"}]}}}}},
        }))
        .unwrap();
        let at: Timestamp = "2026-01-01T10:00:00Z".parse().unwrap();
        let tz = jiff::tz::db().get("Asia/Tokyo").unwrap();
        let job = job_from_template(&cj, "c-1", at, &tz);
        let annotations = job.metadata.annotations.unwrap();
        assert_eq!(
            annotations[SCHEDULED_TIMESTAMP],
            "2026-01-01T19:00:00+09:00"
        );
        let job = job_from_template(&cj, "c-1", at, &jiff::tz::TimeZone::UTC);
        assert_eq!(
            job.metadata.annotations.unwrap()[SCHEDULED_TIMESTAMP],
            "2026-01-01T10:00:00Z"
        );
        assert_eq!(job.metadata.labels.unwrap()["a"], "b");
        let owner = &job.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("CronJob", "u", Some(true))
        );
        assert_eq!(rfc1123z(at), "Thu, 01 Jan 2026 10:00:00 +0000");
    }

    #[test]
    fn history_is_cut_from_the_oldest_start() {
        let job = |name: &str, start: Option<&str>| {
            Arc::new(
                serde_json::from_value::<Job>(
                    json!({"metadata": {"name": name}, "status": {"startTime": start}}),
                )
                .unwrap(),
            )
        };
        let mut jobs = vec![
            job("c", None),
            job("b", Some("2026-01-02T00:00:00Z")),
            job("a", Some("2026-01-01T00:00:00Z")),
        ];
        sort_by_start(&mut jobs);
        let names: Vec<_> = jobs
            .iter()
            .map(|j| j.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
    }
}
