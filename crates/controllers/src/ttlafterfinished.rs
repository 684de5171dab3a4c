//! The TTL-after-finished controller (upstream's `ttl-after-finished`):
//! a Job with `spec.ttlSecondsAfterFinished` is deleted (background
//! propagation, so its pods follow through the garbage collector) that
//! many seconds after its Complete or Failed condition became true.
//!
//! This module owns only that deletion; it never changes a Job.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Preconditions, PropagationPolicy};
use kube::runtime::controller::{Action, Controller};
use kube::Api;
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::runner::{self, Failures};

/// Errors of one reconcile (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or deleting the Job failed.
    #[error("deleting finished job {0}")]
    Delete(String, #[source] kube::Error),
}

struct State {
    context: Context,
    failures: Failures,
}

/// Starts the controller in a controller manager.
pub(crate) fn start(
    context: Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let jobs = context.informers.get::<Job>();
        let controller = Controller::for_stream(jobs.objects(), jobs.store());
        let state = Arc::new(State {
            context,
            failures: Failures::default(),
        });
        runner::run(
            "ttl-after-finished",
            &jobs,
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

/// When `job` expires: `None` without a TTL or before it finished.
pub fn expires_at(job: &Job) -> Option<Timestamp> {
    let ttl = job.spec.as_ref()?.ttl_seconds_after_finished?;
    let finished = job
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")?;
    let at = finished.last_transition_time.as_ref()?.0;
    Some(at + Duration::from_secs(u64::from(ttl.unsigned_abs())))
}

/// How long from `now` until `job` expires (zero: it has).
pub fn time_left(job: &Job, now: Timestamp) -> Option<Duration> {
    let at = expires_at(job)?;
    let left = at.duration_since(now);
    Some(if left.is_negative() {
        Duration::ZERO
    } else {
        left.unsigned_abs()
    })
}

async fn reconcile(job: Arc<Job>, state: Arc<State>) -> Result<Action, Error> {
    if job.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let now = state.context.config.wall_clock.now();
    let Some(left) = time_left(&job, now) else {
        return Ok(Action::await_change());
    };
    if !left.is_zero() {
        return Ok(Action::requeue(left));
    }
    let namespace = job.metadata.namespace.clone().unwrap_or_default();
    let name = job.metadata.name.clone().unwrap_or_default();
    let key = format!("{namespace}/{name}");
    let api: Api<Job> = Api::namespaced(state.context.client.clone(), &namespace);
    // The informer may be behind: the TTL or the finish time may have
    // changed. Look again before deleting.
    let fresh = match api.get_opt(&name).await {
        Ok(Some(j)) => j,
        Ok(None) => return Ok(Action::await_change()),
        Err(e) => return Err(Error::Delete(key, e)),
    };
    match time_left(&fresh, now) {
        Some(left) if left.is_zero() => {}
        Some(left) => return Ok(Action::requeue(left)),
        None => return Ok(Action::await_change()),
    }
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: Some(Preconditions {
            uid: fresh.metadata.uid.clone(),
            resource_version: fresh.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    match api.delete(&name, &params).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
        Err(e) => return Err(Error::Delete(key, e)),
    }
    state.failures.forget(&key);
    Ok(Action::await_change())
}

fn error_policy(job: Arc<Job>, _: &Error, state: Arc<State>) -> Action {
    let key = format!(
        "{}/{}",
        job.metadata.namespace.as_deref().unwrap_or_default(),
        job.metadata.name.as_deref().unwrap_or_default()
    );
    Action::requeue(state.failures.next_delay(&key))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_finished_job_expires_its_ttl_after_finishing() {
        let job: Job = serde_json::from_value(json!({
            "spec": {"ttlSecondsAfterFinished": 30, "template": {}},
            "status": {"conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:10Z"},
            ]},
        }))
        .unwrap();
        let t = |s: &str| s.parse::<Timestamp>().unwrap();
        assert_eq!(expires_at(&job), Some(t("2026-01-01T00:00:40Z")));
        assert_eq!(
            time_left(&job, t("2026-01-01T00:00:30Z")),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            time_left(&job, t("2026-01-01T00:01:00Z")),
            Some(Duration::ZERO)
        );
        let mut running = job.clone();
        running.status = None;
        assert_eq!(expires_at(&running), None);
    }
}
