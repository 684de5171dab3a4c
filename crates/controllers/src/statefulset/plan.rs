//! What one sync of a StatefulSet does next (upstream's
//! `updateStatefulSet`), decided from the set, its pods and its two
//! revisions without writing anything:
//!
//! - every ordinal in `[start, start + replicas)` gets a pod; with
//!   `OrderedReady` one at a time, each waiting for its predecessors to
//!   be Running, Ready and available; with `Parallel` all at once;
//! - failed or succeeded pods are deleted (to be made again);
//! - pods past the range go, highest ordinal first (one at a time, and
//!   only while the others are healthy, under `OrderedReady`);
//! - `RollingUpdate` deletes the highest-ordinal pod at or above the
//!   partition that is not at the update revision, once every higher one
//!   is healthy; `OnDelete` leaves that to the user;
//! - the status counts (replicas, ready, available, current, updated).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::identity::{ordinal_of, replicas, revision_of, start_ordinal};
use crate::workload::pods;

/// Which revision a new pod is made at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// `status.currentRevision` (below the partition).
    Current,
    /// `status.updateRevision`.
    Update,
}

/// Why a pod is deleted (for the log and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// It failed or succeeded and is to be made again.
    Finished,
    /// Its ordinal is past the range.
    ScaleDown,
    /// It is not at the update revision.
    Update,
}

/// One write.
#[derive(Debug, Clone)]
pub enum Step {
    /// Create the claims and the pod with this ordinal.
    Create {
        /// Its ordinal.
        ordinal: i32,
        /// At which revision.
        at: At,
    },
    /// Delete this pod.
    Delete(Arc<Pod>, Why),
    /// Put the identity labels right.
    FixIdentity(Arc<Pod>),
    /// Create missing claims and put their owner references right.
    FixClaims(Arc<Pod>),
}

/// The counts of `status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Pods that exist.
    pub replicas: i32,
    /// Running and Ready.
    pub ready: i32,
    /// Ready for minReadySeconds.
    pub available: i32,
    /// At the current revision (not terminating).
    pub current: i32,
    /// At the update revision (not terminating).
    pub updated: i32,
}

/// What the sync does and reports.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The writes, in order.
    pub steps: Vec<Step>,
    /// The status counts.
    pub counts: Counts,
    /// A ready pod becomes available in this long: sync again then.
    pub recheck: Option<Duration>,
    /// A pod waits for claims still owned by its predecessor.
    pub stale_claims: bool,
}

/// The facts about the set's pods the plan is made from.
#[allow(missing_debug_implementations)]
pub struct Input<'a> {
    /// The set.
    pub set: &'a StatefulSet,
    /// Its pods (controlled by it, named after it).
    pub pods: &'a [Arc<Pod>],
    /// The current revision's name.
    pub current: &'a str,
    /// The update revision's name.
    pub update: &'a str,
    /// Now.
    pub now: Timestamp,
    /// Whether a pod's claims exist and carry the right owners.
    pub claims_ok: &'a dyn Fn(&Pod) -> bool,
    /// Whether the claims of a pod to be created still carry an owner
    /// reference to an older pod of that name (wait for the collector).
    pub claims_stale: &'a dyn Fn(i32) -> bool,
}

fn min_ready(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0)
}

fn running_and_ready(pod: &Pod) -> bool {
    pods::phase(pod) == "Running" && pods::is_ready(pod)
}

fn terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

fn available(pod: &Pod, min_ready: i32, now: Timestamp) -> bool {
    running_and_ready(pod) && pods::is_available(pod, min_ready, now)
}

fn unavailable(pod: Option<&Pod>, min_ready: i32, now: Timestamp) -> bool {
    pod.is_none_or(|p| terminating(p) || !available(p, min_ready, now))
}

/// Counts the status of `pods` (upstream's `computeReplicaStatus`).
pub fn count(
    pods: &[Arc<Pod>],
    current: &str,
    update: &str,
    min_ready: i32,
    now: Timestamp,
) -> Counts {
    let mut c = Counts::default();
    for pod in pods {
        c.replicas += 1;
        if running_and_ready(pod) {
            c.ready += 1;
            if pods::is_available(pod, min_ready, now) {
                c.available += 1;
            }
        }
        if !terminating(pod) {
            let rev = revision_of(pod);
            if rev == current {
                c.current += 1;
            }
            if rev == update {
                c.updated += 1;
            }
        }
    }
    c
}

/// The rolling update's partition, `None` for `OnDelete`.
fn partition(set: &StatefulSet) -> Option<i32> {
    let strategy = set.spec.as_ref()?.update_strategy.as_ref();
    match strategy.and_then(|s| s.type_.as_deref()) {
        Some("OnDelete") => None,
        _ => Some(
            strategy
                .and_then(|s| s.rolling_update.as_ref())
                .and_then(|r| r.partition)
                .unwrap_or(0)
                .max(0),
        ),
    }
}

/// The revision a new pod with `ordinal` is made at (upstream's
/// `newVersionedStatefulSetPod`).
pub fn revision_for(set: &StatefulSet, ordinal: i32) -> At {
    let start = start_ordinal(set);
    let strategy = set.spec.as_ref().and_then(|s| s.update_strategy.as_ref());
    let rolling = strategy.and_then(|s| s.type_.as_deref()) != Some("OnDelete");
    let below = match strategy.and_then(|s| s.rolling_update.as_ref()) {
        None => {
            let current = set
                .status
                .as_ref()
                .and_then(|s| s.current_replicas)
                .unwrap_or(0);
            rolling && ordinal < start + current
        }
        Some(r) => ordinal < start + r.partition.unwrap_or(0),
    };
    if below {
        At::Current
    } else {
        At::Update
    }
}

/// Plans one sync.
pub fn plan(input: &Input<'_>) -> Plan {
    let set = input.set;
    let name = set.metadata.name.as_deref().unwrap_or_default();
    let min_ready = min_ready(set);
    let now = input.now;
    let mut out = Plan {
        counts: count(input.pods, input.current, input.update, min_ready, now),
        ..Plan::default()
    };
    for pod in input.pods {
        if let Some(left) = pods::available_in(pod, min_ready, now) {
            out.recheck = Some(out.recheck.map_or(left, |r: Duration| r.min(left)));
        }
    }
    if set.metadata.deletion_timestamp.is_some() {
        return out;
    }
    let start = start_ordinal(set);
    let count = replicas(set);
    let mut slots: Vec<Option<Arc<Pod>>> = vec![None; usize::try_from(count).unwrap_or(0)];
    let mut condemned: Vec<(i32, Arc<Pod>)> = Vec::new();
    for pod in input.pods {
        let Some(ordinal) = ordinal_of(name, pod) else {
            continue;
        };
        if ordinal >= start && ordinal < start + count {
            slots[usize::try_from(ordinal - start).unwrap_or(0)] = Some(pod.clone());
        } else {
            condemned.push((ordinal, pod.clone()));
        }
    }
    condemned.sort_by_key(|c| std::cmp::Reverse(c.0));
    // The first unavailable pod: of the replicas in order, else the
    // lowest-ordinal condemned one.
    let first_unavailable: Option<i32> = slots
        .iter()
        .enumerate()
        .find(|(_, p)| unavailable(p.as_deref(), min_ready, now))
        .map(|(i, _)| start + i32::try_from(i).unwrap_or(0))
        .or_else(|| {
            condemned
                .iter()
                .rev()
                .find(|(_, p)| unavailable(Some(p), min_ready, now))
                .map(|(o, _)| *o)
        });
    let monotonic = set
        .spec
        .as_ref()
        .and_then(|s| s.pod_management_policy.as_deref())
        != Some("Parallel");

    // The replicas, in order of ordinal.
    let mut blocked = false;
    for (i, slot) in slots.iter().enumerate() {
        let ordinal = start + i32::try_from(i).unwrap_or(0);
        let Some(pod) = slot else {
            if (input.claims_stale)(ordinal) {
                out.stale_claims = true;
                blocked = true;
                if monotonic {
                    break;
                }
                continue;
            }
            out.steps.push(Step::Create {
                ordinal,
                at: revision_for(set, ordinal),
            });
            if monotonic {
                blocked = true;
                break;
            }
            continue;
        };
        let phase = pods::phase(pod);
        if phase == "Failed" || phase == "Succeeded" {
            if !terminating(pod) {
                out.steps.push(Step::Delete(pod.clone(), Why::Finished));
            }
            blocked = true;
            if monotonic {
                break;
            }
            continue;
        }
        if phase == "Pending" && !(input.claims_ok)(pod) {
            out.steps.push(Step::FixClaims(pod.clone()));
        }
        if monotonic && (terminating(pod) || !available(pod, min_ready, now)) {
            blocked = true;
            break;
        }
        if super::identity::identity_fix(set, pod).is_some() {
            out.steps.push(Step::FixIdentity(pod.clone()));
        }
        if phase != "Pending" && !(input.claims_ok)(pod) {
            out.steps.push(Step::FixClaims(pod.clone()));
        }
    }
    if blocked && monotonic {
        return out;
    }

    // The condemned pods' claims follow the policy before they go.
    for (_, pod) in &condemned {
        if !(input.claims_ok)(pod) {
            out.steps.push(Step::FixClaims(pod.clone()));
        }
    }
    // Then the condemned pods, highest ordinal first.
    for (ordinal, pod) in &condemned {
        if terminating(pod) {
            if monotonic {
                return out;
            }
            continue;
        }
        if monotonic
            && unavailable(Some(pod), min_ready, now)
            && first_unavailable != Some(*ordinal)
        {
            return out;
        }
        out.steps.push(Step::Delete(pod.clone(), Why::ScaleDown));
        if monotonic {
            return out;
        }
    }
    // The rolling update, from the highest ordinal down to the partition.
    let Some(partition) = partition(set) else {
        return out;
    };
    for (i, slot) in slots.iter().enumerate().rev() {
        if i32::try_from(i).unwrap_or(0) < partition {
            break;
        }
        let Some(pod) = slot else {
            return out;
        };
        if revision_of(pod) != input.update && !terminating(pod) {
            out.steps.push(Step::Delete(pod.clone(), Why::Update));
            out.counts.current -= 1;
            return out;
        }
        if unavailable(Some(pod), min_ready, now) {
            return out;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::StatefulSet;
    use serde_json::json;

    use super::*;

    fn set(replicas: i32, policy: &str, partition: Option<i32>) -> StatefulSet {
        let strategy = match partition {
            Some(p) => json!({"type": "RollingUpdate", "rollingUpdate": {"partition": p}}),
            None => json!({"type": "OnDelete"}),
        };
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u"},
            "spec": {
                "replicas": replicas,
                "podManagementPolicy": policy,
                "updateStrategy": strategy,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}},
                "serviceName": "web",
            },
        }))
        .unwrap()
    }

    fn pod(ordinal: i32, rev: &str, ready: bool) -> Arc<Pod> {
        let conditions = if ready {
            json!([{"type": "Ready", "status": "True"}])
        } else {
            json!([])
        };
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": format!("web-{ordinal}"), "labels": {
                    "controller-revision-hash": rev,
                    "statefulset.kubernetes.io/pod-name": format!("web-{ordinal}"),
                    "apps.kubernetes.io/pod-index": ordinal.to_string(),
                }},
                "status": {"phase": if ready { "Running" } else { "Pending" }, "conditions": conditions},
            }))
            .unwrap(),
        )
    }

    fn run(set: &StatefulSet, pods: &[Arc<Pod>]) -> Plan {
        plan(&Input {
            set,
            pods,
            current: "r1",
            update: "r2",
            now: Timestamp::now(),
            claims_ok: &|_| true,
            claims_stale: &|_| false,
        })
    }

    fn summary(p: &Plan) -> Vec<String> {
        p.steps
            .iter()
            .map(|s| match s {
                Step::Create { ordinal, at } => format!("create {ordinal} {at:?}"),
                Step::Delete(p, why) => {
                    format!("delete {} {why:?}", p.metadata.name.as_deref().unwrap())
                }
                Step::FixIdentity(p) => format!("identity {}", p.metadata.name.as_deref().unwrap()),
                Step::FixClaims(p) => format!("claims {}", p.metadata.name.as_deref().unwrap()),
            })
            .collect()
    }

    #[test]
    fn ordered_ready_creates_one_at_a_time() {
        let s = set(3, "OrderedReady", Some(0));
        assert_eq!(summary(&run(&s, &[])), ["create 0 Update"]);
        // web-0 exists but is not ready: wait.
        let p = run(&s, &[pod(0, "r2", false)]);
        assert!(p.steps.is_empty());
        assert_eq!(p.counts.replicas, 1);
        assert_eq!(p.counts.ready, 0);
        let p = run(&s, &[pod(0, "r2", true)]);
        assert_eq!(summary(&p), ["create 1 Update"]);
    }

    #[test]
    fn parallel_creates_every_missing_ordinal() {
        let s = set(3, "Parallel", Some(0));
        assert_eq!(
            summary(&run(&s, &[pod(1, "r2", false)])),
            ["create 0 Update", "create 2 Update"]
        );
    }

    #[test]
    fn scale_down_removes_the_highest_ordinal_first() {
        let s = set(1, "OrderedReady", Some(0));
        let pods = [pod(0, "r2", true), pod(1, "r2", true), pod(2, "r2", true)];
        assert_eq!(summary(&run(&s, &pods)), ["delete web-2 ScaleDown"]);
        // An unhealthy survivor blocks the scale down.
        let pods = [pod(0, "r2", false), pod(1, "r2", true), pod(2, "r2", true)];
        assert!(run(&s, &pods).steps.is_empty());
        let s = set(1, "Parallel", Some(0));
        let pods = [pod(0, "r2", true), pod(1, "r2", true), pod(2, "r2", true)];
        assert_eq!(
            summary(&run(&s, &pods)),
            ["delete web-2 ScaleDown", "delete web-1 ScaleDown"]
        );
        // In parallel, scaling and the rolling update go on together.
        let pods = [pod(0, "r1", true), pod(1, "r2", true)];
        assert_eq!(
            summary(&run(&s, &pods)),
            ["delete web-1 ScaleDown", "delete web-0 Update"]
        );
    }

    #[test]
    fn failed_pods_are_replaced() {
        let s = set(1, "OrderedReady", Some(0));
        let mut failed = (*pod(0, "r2", false)).clone();
        failed.status.as_mut().unwrap().phase = Some("Failed".into());
        assert_eq!(
            summary(&run(&s, &[Arc::new(failed)])),
            ["delete web-0 Finished"]
        );
    }

    #[test]
    fn rolling_update_goes_down_from_the_highest_ordinal_to_the_partition() {
        let s = set(3, "OrderedReady", Some(1));
        let pods = [pod(0, "r1", true), pod(1, "r1", true), pod(2, "r1", true)];
        let p = run(&s, &pods);
        assert_eq!(summary(&p), ["delete web-2 Update"]);
        assert_eq!(p.counts.current, 2);
        let pods = [pod(0, "r1", true), pod(1, "r1", true), pod(2, "r2", false)];
        assert!(run(&s, &pods).steps.is_empty(), "web-2 not ready yet");
        let pods = [pod(0, "r1", true), pod(1, "r1", true), pod(2, "r2", true)];
        assert_eq!(summary(&run(&s, &pods)), ["delete web-1 Update"]);
        let pods = [pod(0, "r1", true), pod(1, "r2", true), pod(2, "r2", true)];
        assert!(
            run(&s, &pods).steps.is_empty(),
            "web-0 is below the partition"
        );
        // Missing pods below the partition are made at the current revision.
        assert_eq!(revision_for(&s, 0), At::Current);
        assert_eq!(revision_for(&s, 1), At::Update);
        // OnDelete never deletes for an update.
        let s = set(3, "OrderedReady", None);
        let pods = [pod(0, "r1", true), pod(1, "r1", true), pod(2, "r1", true)];
        assert!(run(&s, &pods).steps.is_empty());
        assert_eq!(revision_for(&s, 0), At::Update);
    }

    #[test]
    fn start_ordinal_shifts_the_range() {
        let mut s = set(2, "OrderedReady", Some(0));
        s.spec.as_mut().unwrap().ordinals =
            Some(k8s_openapi::api::apps::v1::StatefulSetOrdinals { start: Some(5) });
        assert_eq!(summary(&run(&s, &[])), ["create 5 Update"]);
        let pods = [pod(0, "r2", true), pod(5, "r2", true), pod(6, "r2", true)];
        assert_eq!(summary(&run(&s, &pods)), ["delete web-0 ScaleDown"]);
    }
}
