//! When a pod has started, for `kubelet_pod_start_sli_duration_seconds`
//! and `kubelet_pod_start_total_duration_seconds`, as upstream's pod
//! startup latency tracker decides it: a pod is tracked if the agent
//! first sees it before any status start time (so pods that were running
//! before the agent started are not counted), and is counted once, when
//! the watch shows all its containers running. The total runs from the
//! pod's creation timestamp; the SLI leaves out the time its images were
//! pulled (first pull started to last pull finished). The first pod with
//! its own network on the node is labelled `first_with_network="true"`.
//!
//! Pure: times are given; it records nothing itself.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

/// One pod's start, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Start {
    pub total: f64,
    pub sli: f64,
    pub first_with_network: bool,
}

/// The pulls of one pod.
#[derive(Debug, Clone, Copy)]
struct Pulls {
    first_started: Instant,
    last_finished: Instant,
}

/// Pods being watched for their start.
#[derive(Debug, Default)]
pub struct Tracker {
    tracked: HashSet<String>,
    counted: HashSet<String>,
    pulls: HashMap<String, Pulls>,
    network_pod_seen: bool,
}

/// Whether the watch shows every container of `pod` running.
pub fn all_running(pod: &Pod) -> bool {
    let (Some(spec), Some(status)) = (&pod.spec, &pod.status) else {
        return false;
    };
    let statuses = status.container_statuses.as_deref().unwrap_or_default();
    !spec.containers.is_empty()
        && spec.containers.iter().all(|c| {
            statuses.iter().any(|s| {
                s.name == c.name
                    && s.state
                        .as_ref()
                        .and_then(|st| st.running.as_ref())
                        .is_some_and(|r| r.started_at.is_some())
            })
        })
}

impl Tracker {
    /// A pull for pod `uid` ran from `started` to `finished`.
    pub fn pulled(&mut self, uid: &str, started: Instant, finished: Instant) {
        let pulls = self.pulls.entry(uid.to_string()).or_insert(Pulls {
            first_started: started,
            last_finished: finished,
        });
        pulls.first_started = pulls.first_started.min(started);
        pulls.last_finished = pulls.last_finished.max(finished);
    }

    /// The watch delivered `pod` at `now`: its start, the first time
    /// every container of a tracked pod is seen running.
    pub fn observed(&mut self, pod: &Pod, now: Timestamp) -> Option<Start> {
        let uid = pod.metadata.uid.as_deref()?;
        if self.counted.contains(uid) {
            return None;
        }
        if !self.tracked.contains(uid) {
            let acknowledged = pod.status.as_ref().is_some_and(|s| s.start_time.is_some());
            if !acknowledged {
                self.tracked.insert(uid.to_string());
            }
            return None;
        }
        if !all_running(pod) {
            return None;
        }
        self.tracked.remove(uid);
        self.counted.insert(uid.to_string());
        let created = pod.metadata.creation_timestamp.as_ref()?.0;
        let total = now.duration_since(created).as_secs_f64().max(0.0);
        let pulling = self
            .pulls
            .remove(uid)
            .map(|p| p.last_finished.saturating_duration_since(p.first_started))
            .unwrap_or(Duration::ZERO);
        let host_network = pod
            .spec
            .as_ref()
            .and_then(|s| s.host_network)
            .unwrap_or(false);
        let first_with_network = !host_network && !self.network_pod_seen;
        if !host_network {
            self.network_pod_seen = true;
        }
        Some(Start {
            total,
            sli: (total - pulling.as_secs_f64()).max(0.0),
            first_with_network,
        })
    }

    /// The pod is gone: nothing more is kept of it.
    pub fn forget(&mut self, uid: &str) {
        self.tracked.remove(uid);
        self.counted.remove(uid);
        self.pulls.remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "uid": "u1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
            "status": status,
        }))
        .unwrap()
    }

    fn running(names: &[&str]) -> serde_json::Value {
        let statuses: Vec<_> = names
            .iter()
            .map(|n| {
                json!({"name": n, "image": "x", "imageID": "", "ready": true, "restartCount": 0,
                "state": {"running": {"startedAt": "2026-01-01T00:00:02Z"}}})
            })
            .collect();
        json!({"startTime": "2026-01-01T00:00:01Z", "containerStatuses": statuses})
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_pod_first_seen_unstarted_is_counted_once_when_all_containers_run() {
        let mut t = Tracker::default();
        assert_eq!(
            t.observed(&pod(json!({})), at("2026-01-01T00:00:00.5Z")),
            None
        );
        let started = Instant::now();
        t.pulled("u1", started, started + Duration::from_millis(1500));
        // One container running: not yet.
        assert_eq!(
            t.observed(&pod(running(&["a"])), at("2026-01-01T00:00:02Z")),
            None
        );
        let start = t
            .observed(&pod(running(&["a", "b"])), at("2026-01-01T00:00:03Z"))
            .unwrap();
        assert_eq!(start.total, 3.0);
        assert_eq!(start.sli, 1.5);
        assert!(start.first_with_network);
        // Counted once.
        assert_eq!(
            t.observed(&pod(running(&["a", "b"])), at("2026-01-01T00:00:09Z")),
            None
        );
    }

    #[test]
    fn a_pod_already_started_when_first_seen_is_not_counted() {
        let mut t = Tracker::default();
        assert_eq!(
            t.observed(&pod(running(&["a", "b"])), at("2026-01-01T00:00:03Z")),
            None
        );
        assert_eq!(
            t.observed(&pod(running(&["a", "b"])), at("2026-01-01T00:00:04Z")),
            None
        );
    }

    #[test]
    fn only_the_first_network_pod_is_first_with_network() {
        let mut t = Tracker::default();
        let mut second = pod(json!({}));
        second.metadata.uid = Some("u2".into());
        t.observed(&pod(json!({})), at("2026-01-01T00:00:00Z"));
        t.observed(&second, at("2026-01-01T00:00:00Z"));
        let first = t.observed(&pod(running(&["a", "b"])), at("2026-01-01T00:00:01Z"));
        let mut second_running = pod(running(&["a", "b"]));
        second_running.metadata.uid = Some("u2".into());
        let second = t.observed(&second_running, at("2026-01-01T00:00:01Z"));
        assert!(first.unwrap().first_with_network);
        assert!(!second.unwrap().first_with_network);
    }
}
