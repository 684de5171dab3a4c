//! What the Job controller reads off Jobs and pods, as upstream's job
//! controller does: finished or not, conditions (upstream's
//! `ensureJobConditionStatus`), when a pod counts as failed, the pod
//! failure back-off, the pods made for a Job, and which active pods go
//! first when some must.
//!
//! Pure functions; no I/O.

use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::indexes::INDEX_KEY;
use crate::workload::{ownership, pods};

/// The finalizer that keeps a pod until the Job has counted it.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// The first pod failure back-off (upstream's `DefaultJobPodFailureBackOff`).
pub const POD_FAILURE_BACKOFF: Duration = Duration::from_secs(10);
/// Its cap (upstream's `MaxJobPodFailureBackOff`, 10 min).
pub const MAX_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(600);
/// At most this many pods are created or deleted per sync.
pub const MAX_CREATE_DELETE_PER_SYNC: usize = 500;

/// The condition of `type_` that is true, if any.
pub fn true_condition<'a>(job: &'a Job, type_: &str) -> Option<&'a JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
}

/// Complete or Failed (upstream's `IsJobFinished`).
pub fn finished(job: &Job) -> Option<&JobCondition> {
    true_condition(job, "Complete").or_else(|| true_condition(job, "Failed"))
}

/// `spec.suspend` is true.
pub fn suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend) == Some(true)
}

/// `completionMode: Indexed`.
pub fn indexed(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.completion_mode.as_deref()) == Some("Indexed")
}

/// Replacement pods wait for failed ones to be Failed, not just deleted
/// (`podReplacementPolicy: Failed`, the default with a podFailurePolicy).
pub fn only_replace_failed(job: &Job) -> bool {
    let spec = job.spec.as_ref();
    match spec.and_then(|s| s.pod_replacement_policy.as_deref()) {
        Some(p) => p == "Failed",
        None => spec.is_some_and(|s| s.pod_failure_policy.is_some()),
    }
}

/// A new condition at `now`.
pub fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> JobCondition {
    JobCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// Sets the condition of `type_` (upstream's `ensureJobConditionStatus`:
/// a false condition that does not exist is not added). Whether anything
/// changed.
pub fn ensure_condition(
    conditions: &mut Vec<JobCondition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    if let Some(c) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if c.status != status {
            *c = condition(type_, status, reason, message, now);
            return true;
        }
        if c.reason.as_deref() != Some(reason) || c.message.as_deref() != Some(message) {
            c.reason = Some(reason.into());
            c.message = Some(message.into());
            c.last_probe_time = Some(Time(now));
            return true;
        }
        return false;
    }
    if status == "False" {
        return false;
    }
    conditions.push(condition(type_, status, reason, message, now));
    true
}

/// Whether the pod has the tracking finalizer.
pub fn tracked(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == TRACKING_FINALIZER))
}

/// Failed, or (unless only failed pods are replaced) being deleted
/// before it succeeded (upstream's `isPodFailed`).
pub fn pod_failed(pod: &Pod, job: &Job) -> bool {
    match pods::phase(pod) {
        "Failed" => true,
        "Succeeded" => false,
        _ => !only_replace_failed(job) && pod.metadata.deletion_timestamp.is_some(),
    }
}

/// Being deleted and not finished (upstream's `CountTerminatingPods`).
pub fn terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some() && !matches!(pods::phase(pod), "Succeeded" | "Failed")
}

/// When a finished pod finished: its containers' last finish, else its
/// deletion, else `now`.
pub fn finish_time(pod: &Pod, now: Timestamp) -> Timestamp {
    let status = pod.status.as_ref();
    let finished = status
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
        .map(|t| t.0)
        .max();
    finished
        .or_else(|| pod.metadata.deletion_timestamp.as_ref().map(|t| t.0))
        .unwrap_or(now)
}

/// The wait before a new pod after `failures` failures in a row (10 s
/// doubling, capped at 10 min).
pub fn pod_failure_backoff(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let exp = (failures - 1).min(16);
    POD_FAILURE_BACKOFF
        .saturating_mul(1 << exp)
        .min(MAX_POD_FAILURE_BACKOFF)
}

/// Failures since the last success and when the last one happened
/// (upstream's backoff record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BackoffRecord {
    /// Failed pods since the last succeeded one.
    pub failures: u32,
    /// When the latest of them failed.
    pub last_failure: Option<Timestamp>,
}

impl BackoffRecord {
    /// The record after newly finished pods (their finish times).
    pub fn after(self, succeeded: &[Timestamp], failed: &[Timestamp]) -> Self {
        let last_success = succeeded.iter().max().copied();
        let mut record = self;
        if let Some(s) = last_success {
            if record.last_failure.is_none_or(|f| f <= s) {
                record = Self::default();
            }
        }
        let later: Vec<Timestamp> = failed
            .iter()
            .copied()
            .filter(|f| last_success.is_none_or(|s| *f > s))
            .collect();
        if let Some(max) = later.iter().max() {
            record.failures += u32::try_from(later.len()).unwrap_or(u32::MAX);
            record.last_failure = Some(record.last_failure.map_or(*max, |l| l.max(*max)));
        }
        record
    }

    /// How long to wait at `now` before creating pods again.
    pub fn remaining(&self, now: Timestamp) -> Duration {
        let Some(last) = self.last_failure else {
            return Duration::ZERO;
        };
        let waited = now.duration_since(last);
        let wait = pod_failure_backoff(self.failures);
        if waited.is_negative() {
            return wait;
        }
        wait.saturating_sub(waited.unsigned_abs())
    }
}

/// A pod for `job` (with `index` for Indexed Jobs): the template's, the
/// tracking finalizer, the Job as controller, and for an index its
/// annotation, label, hostname and `JOB_COMPLETION_INDEX`.
pub fn new_pod(job: &Job, index: Option<i32>) -> Pod {
    let name = job.metadata.name.as_deref().unwrap_or_default();
    let namespace = job.metadata.namespace.as_deref().unwrap_or_default();
    let template = job
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let generate_name = match index {
        Some(i) => format!("{name}-{i}-"),
        None => format!("{name}-"),
    };
    let mut pod = pods::from_template(
        &template,
        namespace,
        &generate_name,
        Some(ownership::controller_ref(job)),
    );
    let finalizers = pod.metadata.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == TRACKING_FINALIZER) {
        finalizers.push(TRACKING_FINALIZER.into());
    }
    if let Some(i) = index {
        pod.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(INDEX_KEY.into(), i.to_string());
        pod.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(INDEX_KEY.into(), i.to_string());
        if let Some(spec) = pod.spec.as_mut() {
            spec.hostname = Some(format!("{name}-{i}"));
            let env = EnvVar {
                name: "JOB_COMPLETION_INDEX".into(),
                value: None,
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        api_version: None,
                        field_path: format!("metadata.annotations['{INDEX_KEY}']"),
                    }),
                    ..Default::default()
                }),
            };
            let containers = spec
                .init_containers
                .iter_mut()
                .flatten()
                .chain(spec.containers.iter_mut());
            for c in containers {
                let vars = c.env.get_or_insert_with(Vec::new);
                if !vars.iter().any(|v| v.name == env.name) {
                    vars.push(env.clone());
                }
            }
        }
    }
    pod
}

/// How many pods should be active (upstream's `manageJob`): with
/// completions, no more than are left to succeed, at most
/// `parallelism`; a work queue runs `parallelism` until one succeeded,
/// then starts no more.
pub fn want_active(completions: Option<i32>, parallelism: i32, succeeded: i32, active: i32) -> i32 {
    match completions {
        None if succeeded > 0 => active,
        None => parallelism,
        Some(c) => (c - succeeded).clamp(0, parallelism),
    }
}

/// Active pods in the order they are removed (upstream's `ActivePods`
/// sort): unscheduled before scheduled, pending before running, not
/// ready before ready, more restarts first, newer first.
pub fn sort_for_removal(active: &mut [std::sync::Arc<Pod>]) {
    active.sort_by_key(|p| {
        let scheduled = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
        let phase = match pods::phase(p) {
            "Pending" => 0,
            "Unknown" => 1,
            _ => 2,
        };
        let created = p.metadata.creation_timestamp.as_ref().map(|t| t.0);
        (
            scheduled,
            phase,
            pods::is_ready(p),
            std::cmp::Reverse(pods::max_restarts(p)),
            std::cmp::Reverse(created),
        )
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn job(spec: serde_json::Value) -> Job {
        serde_json::from_value(
            json!({"metadata": {"name": "j", "namespace": "ns", "uid": "u"}, "spec": spec}),
        )
        .unwrap()
    }

    #[test]
    fn wanted_pods_follow_completions_and_parallelism() {
        assert_eq!(want_active(Some(3), 2, 0, 0), 2);
        assert_eq!(want_active(Some(3), 2, 2, 0), 1);
        assert_eq!(want_active(Some(3), 2, 4, 1), 0);
        assert_eq!(want_active(None, 2, 0, 1), 2);
        assert_eq!(want_active(None, 2, 1, 1), 1);
    }

    #[test]
    fn pods_in_earlier_stages_are_removed_first() {
        let pod = |name: &str, node: Option<&str>, phase: &str, ready: bool| {
            std::sync::Arc::new(
                serde_json::from_value::<Pod>(json!({
                    "metadata": {"name": name},
                    "spec": {"nodeName": node, "containers": []},
                    "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
                }))
                .unwrap(),
            )
        };
        let mut pods = vec![
            pod("running-ready", Some("n"), "Running", true),
            pod("running", Some("n"), "Running", false),
            pod("pending", Some("n"), "Pending", false),
            pod("unscheduled", None, "Pending", false),
        ];
        sort_for_removal(&mut pods);
        let names: Vec<_> = pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(
            names,
            ["unscheduled", "pending", "running", "running-ready"]
        );
    }

    #[test]
    fn backoff_doubles_from_ten_seconds_to_ten_minutes() {
        assert_eq!(pod_failure_backoff(0), Duration::ZERO);
        assert_eq!(pod_failure_backoff(1), Duration::from_secs(10));
        assert_eq!(pod_failure_backoff(3), Duration::from_secs(40));
        assert_eq!(pod_failure_backoff(7), Duration::from_secs(600));
        assert_eq!(pod_failure_backoff(70), Duration::from_secs(600));
    }

    #[test]
    fn the_backoff_record_resets_on_a_later_success() {
        let t0 = Timestamp::UNIX_EPOCH;
        let s = |n: i64| t0 + Duration::from_secs(n.unsigned_abs());
        let r = BackoffRecord::default().after(&[], &[s(10), s(20)]);
        assert_eq!(
            r,
            BackoffRecord {
                failures: 2,
                last_failure: Some(s(20))
            }
        );
        assert_eq!(r.remaining(s(25)), Duration::from_secs(15));
        assert_eq!(r.remaining(s(100)), Duration::ZERO);
        let r = r.after(&[s(30)], &[]);
        assert_eq!(r, BackoffRecord::default());
        let r = r.after(&[s(40)], &[s(35), s(45)]);
        assert_eq!(r.failures, 1);
    }

    #[test]
    fn conditions_are_ensured_as_upstream() {
        let now = Timestamp::UNIX_EPOCH;
        let mut c = Vec::new();
        assert!(!ensure_condition(
            &mut c,
            "Suspended",
            "False",
            "JobResumed",
            "Job resumed",
            now
        ));
        assert!(c.is_empty());
        assert!(ensure_condition(
            &mut c,
            "Suspended",
            "True",
            "JobSuspended",
            "Job suspended",
            now
        ));
        assert!(!ensure_condition(
            &mut c,
            "Suspended",
            "True",
            "JobSuspended",
            "Job suspended",
            now
        ));
        assert!(ensure_condition(
            &mut c,
            "Suspended",
            "False",
            "JobResumed",
            "Job resumed",
            now
        ));
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].status, "False");
    }

    #[test]
    fn deleted_pods_count_as_failed_unless_only_failed_ones_are_replaced() {
        let mut pod = Pod::default();
        pod.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        assert!(pod_failed(&pod, &job(json!({}))));
        assert!(terminating(&pod));
        assert!(!pod_failed(
            &pod,
            &job(json!({"podReplacementPolicy": "Failed"}))
        ));
        assert!(!pod_failed(
            &pod,
            &job(json!({"podFailurePolicy": {"rules": []}}))
        ));
    }

    #[test]
    fn indexed_pods_carry_their_index() {
        let j = job(
            json!({"completionMode": "Indexed", "template": {"spec": {"containers": [{"name": "c"}]}}}),
        );
        let pod = new_pod(&j, Some(2));
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("j-2-"));
        assert_eq!(pod.metadata.annotations.unwrap()[INDEX_KEY], "2");
        assert_eq!(pod.metadata.labels.unwrap()[INDEX_KEY], "2");
        let spec = pod.spec.unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("j-2"));
        assert_eq!(
            spec.containers[0].env.as_ref().unwrap()[0].name,
            "JOB_COMPLETION_INDEX"
        );
        assert_eq!(pod.metadata.finalizers.unwrap(), [TRACKING_FINALIZER]);
        let owner = &pod.metadata.owner_references.unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.controller), ("Job", Some(true)));
    }
}
