//! `backoffLimitPerIndex` of Indexed Jobs: each index may fail that many
//! times before it is marked failed (`status.failedIndexes`); a pod
//! failing with the FailIndex action fails its index at once. A pod
//! carries the failures of its index before it in the
//! `batch.kubernetes.io/job-index-failure-count` annotation, and each
//! index waits out its own back-off before a new pod.
//!
//! Pure functions; no I/O. Unlike upstream, the count is read from the
//! index's failed pods still in the store (the controller never deletes
//! failed pods) rather than by holding the last one's finalizer.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::{facts, indexes, policy};

/// The annotation with the failures of a pod's index before it.
pub const FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-failure-count";

/// What the indexes' failures say.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PerIndex {
    /// Indexes that failed for good.
    pub failed: BTreeSet<i32>,
    /// Per index: failures so far and when the latest happened.
    pub history: HashMap<i32, (i32, Timestamp)>,
}

fn failures_before(pod: &Pod) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(FAILURE_COUNT))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Reads the failures of `job`'s pods: `previous` failed indexes stay
/// failed; succeeded indexes never fail.
pub fn read(
    job: &Job,
    pods: &[Arc<Pod>],
    previous: &BTreeSet<i32>,
    succeeded: &BTreeSet<i32>,
    now: Timestamp,
) -> PerIndex {
    let spec = job.spec.as_ref();
    let limit = spec.and_then(|s| s.backoff_limit_per_index).unwrap_or(0);
    let completions = spec.and_then(|s| s.completions).unwrap_or(0);
    let mut out = PerIndex {
        failed: previous.clone(),
        history: HashMap::new(),
    };
    for pod in pods.iter().filter(|p| facts::pod_failed(p, job)) {
        let Some(index) = indexes::of(pod).filter(|i| *i < completions) else {
            continue;
        };
        let verdict = spec
            .and_then(|s| s.pod_failure_policy.as_ref())
            .map(|pol| policy::matches(pol, pod));
        let fail_index = verdict
            .as_ref()
            .is_some_and(|v| v.action.as_deref() == Some("FailIndex"));
        let counts = verdict.as_ref().is_none_or(|v| v.count);
        let failures = failures_before(pod) + i32::from(counts);
        let at = facts::finish_time(pod, now);
        let entry = out.history.entry(index).or_insert((0, at));
        if failures > entry.0 || (failures == entry.0 && at > entry.1) {
            *entry = (failures, at);
        }
        if !succeeded.contains(&index) && (fail_index || failures > limit) {
            out.failed.insert(index);
        }
    }
    out
}

impl PerIndex {
    /// The failures of `index` so far (the next pod's annotation).
    pub fn failures(&self, index: i32) -> i32 {
        self.history.get(&index).map_or(0, |h| h.0)
    }

    /// How long `index` still waits at `now` before a new pod.
    pub fn remaining(&self, index: i32, now: Timestamp) -> Duration {
        let Some(&(failures, at)) = self.history.get(&index) else {
            return Duration::ZERO;
        };
        let record = facts::BackoffRecord {
            failures: u32::try_from(failures).unwrap_or(0),
            last_failure: Some(at),
        };
        record.remaining(now)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn failed_pod(index: i32, before: i32, exit: i32) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": format!("p{index}-{before}"), "annotations": {
                    indexes::INDEX_KEY: index.to_string(), FAILURE_COUNT: before.to_string()}},
                "status": {"phase": "Failed", "containerStatuses": [{"name": "main", "image": "i",
                    "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"terminated": {"exitCode": exit, "finishedAt": "2026-01-01T00:00:00Z"}}}]},
            }))
            .unwrap(),
        )
    }

    #[test]
    fn an_index_fails_past_its_limit_or_by_fail_index() {
        let job: Job = serde_json::from_value(json!({"spec": {"completions": 4, "backoffLimitPerIndex": 1,
            "completionMode": "Indexed", "template": {},
            "podFailurePolicy": {"rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [7]}}]}}}))
        .unwrap();
        let now: Timestamp = "2026-01-01T00:00:05Z".parse().unwrap();
        let pods = vec![
            failed_pod(0, 0, 1),
            failed_pod(1, 0, 1),
            failed_pod(1, 1, 1),
            failed_pod(2, 0, 7),
        ];
        let read = read(&job, &pods, &[3].into(), &BTreeSet::new(), now);
        assert_eq!(read.failed, [1, 2, 3].into());
        assert_eq!(read.failures(0), 1);
        assert_eq!(read.failures(1), 2);
        assert_eq!(read.failures(3), 0);
        // One failure: 10 s from its finish.
        assert_eq!(read.remaining(0, now), Duration::from_secs(5));
        assert_eq!(read.remaining(3, now), Duration::ZERO);
    }
}
