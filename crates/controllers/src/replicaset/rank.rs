//! Which pods a ReplicaSet deletes first when it has too many (upstream's
//! `ActivePodsWithRanks`, with pod deletion cost and logarithmic
//! scale-down as 1.33 has them on by default):
//!
//! 1. not yet on a node before on a node;
//! 2. Pending before Unknown before Running;
//! 3. not ready before ready;
//! 4. lower `controller.kubernetes.io/pod-deletion-cost` first;
//! 5. more pods of the same family (the owner and its siblings under one
//!    Deployment) on the same node first, so a node does not keep two
//!    while another has none;
//! 6. ready for less time first (compared in powers of two of the time,
//!    so near-equal pods fall through to the next rule);
//! 7. more container restarts first;
//! 8. newer first (also in powers of two).
//!
//! Pure; no I/O.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use crate::workload::pods;

/// The annotation that orders deletion among otherwise equal pods.
pub const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// The `count` pods of `pods` to delete first. `related` are the pods of
/// the whole family (this owner's and its siblings'), for rule 5.
pub fn to_delete(
    pods: &[Arc<Pod>],
    related: &[Arc<Pod>],
    count: usize,
    now: Timestamp,
) -> Vec<Arc<Pod>> {
    if count >= pods.len() {
        return pods.to_vec();
    }
    let mut per_node: HashMap<&str, usize> = HashMap::new();
    for p in related {
        if let Some(node) = node_of(p) {
            *per_node.entry(node).or_default() += 1;
        }
    }
    let mut ranked: Vec<(usize, &Arc<Pod>)> = pods
        .iter()
        .map(|p| {
            (
                node_of(p)
                    .and_then(|n| per_node.get(n).copied())
                    .unwrap_or(0),
                p,
            )
        })
        .collect();
    ranked.sort_by(|a, b| compare(a.1, a.0, b.1, b.0, now));
    ranked
        .into_iter()
        .take(count)
        .map(|(_, p)| p.clone())
        .collect()
}

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

fn phase_rank(pod: &Pod) -> u8 {
    match pods::phase(pod) {
        "Pending" => 0,
        "Unknown" => 1,
        "Running" => 2,
        _ => 3,
    }
}

fn deletion_cost(pod: &Pod) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DELETION_COST))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The power of two of the seconds since `t` (rules 6 and 8).
fn age_bucket(t: Option<Timestamp>, now: Timestamp) -> i64 {
    let Some(t) = t else { return -1 };
    let ns = now.duration_since(t).as_nanos();
    if ns <= 0 {
        return 0;
    }
    i64::from(127 - (ns as u128).leading_zeros() as i32)
}

/// Less is deleted first.
fn compare(a: &Pod, rank_a: usize, b: &Pod, rank_b: usize, now: Timestamp) -> Ordering {
    // 1. Unassigned first.
    let assigned = |p: &Pod| node_of(p).is_some();
    (assigned(a).cmp(&assigned(b)))
        // 2. Pending < Unknown < Running.
        .then_with(|| phase_rank(a).cmp(&phase_rank(b)))
        // 3. Not ready first.
        .then_with(|| pods::is_ready(a).cmp(&pods::is_ready(b)))
        // 4. Lower deletion cost first.
        .then_with(|| deletion_cost(a).cmp(&deletion_cost(b)))
        // 5. More doubled-up first.
        .then_with(|| rank_b.cmp(&rank_a))
        // 6. Ready more recently first.
        .then_with(|| {
            if pods::is_ready(a) && pods::is_ready(b) {
                let since = |p: &Pod| pods::ready_since(p).flatten();
                age_bucket(since(a), now).cmp(&age_bucket(since(b), now))
            } else {
                Ordering::Equal
            }
        })
        // 7. More restarts first.
        .then_with(|| pods::max_restarts(b).cmp(&pods::max_restarts(a)))
        // 8. Newer first.
        .then_with(|| {
            let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            age_bucket(created(a), now).cmp(&age_bucket(created(b), now))
        })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    struct P {
        name: &'static str,
        node: Option<&'static str>,
        phase: &'static str,
        ready_secs_ago: Option<u64>,
        created_secs_ago: u64,
        cost: Option<i32>,
    }

    fn pod(p: P, now: Timestamp) -> Arc<Pod> {
        let conditions = p.ready_secs_ago.map(|ago| {
            vec![PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                last_transition_time: Some(Time(now - Duration::from_secs(ago))),
                ..Default::default()
            }]
        });
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(p.name.into()),
                creation_timestamp: Some(Time(now - Duration::from_secs(p.created_secs_ago))),
                annotations: p
                    .cost
                    .map(|c| [(DELETION_COST.to_string(), c.to_string())].into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: p.node.map(String::from),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(p.phase.into()),
                conditions,
                ..Default::default()
            }),
        })
    }

    fn base(name: &'static str) -> P {
        P {
            name,
            node: Some("n1"),
            phase: "Running",
            ready_secs_ago: Some(1000),
            created_secs_ago: 2000,
            cost: None,
        }
    }

    fn order(pods: Vec<P>, related_extra: usize) -> Vec<String> {
        let now = Timestamp::now();
        let pods: Vec<Arc<Pod>> = pods.into_iter().map(|p| pod(p, now)).collect();
        let mut related = pods.clone();
        for _ in 0..related_extra {
            related.push(pod(
                P {
                    node: Some("crowded"),
                    ..base("sibling")
                },
                now,
            ));
        }
        to_delete(&pods, &related, pods.len() - 1, now)
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect()
    }

    #[test]
    fn the_least_settled_pods_go_first() {
        let order = order(
            vec![
                base("ready-old"),
                P {
                    ready_secs_ago: Some(10),
                    ..base("ready-new")
                },
                P {
                    ready_secs_ago: None,
                    ..base("running-not-ready")
                },
                P {
                    phase: "Pending",
                    ready_secs_ago: None,
                    ..base("pending")
                },
                P {
                    node: None,
                    phase: "Pending",
                    ready_secs_ago: None,
                    ..base("unscheduled")
                },
                P {
                    cost: Some(-5),
                    ..base("cheap")
                },
            ],
            0,
        );
        assert_eq!(
            order,
            [
                "unscheduled",
                "pending",
                "running-not-ready",
                "cheap",
                "ready-new"
            ]
        );
    }

    #[test]
    fn doubled_up_nodes_lose_pods_first_then_newer_pods() {
        let order = order(
            vec![
                P {
                    node: Some("crowded"),
                    ..base("on-crowded")
                },
                P {
                    node: Some("alone"),
                    ..base("on-alone")
                },
                P {
                    node: Some("alone2"),
                    created_secs_ago: 100,
                    ..base("newer")
                },
            ],
            // A sibling's pod on the crowded node.
            1,
        );
        assert_eq!(order, ["on-crowded", "newer"]);
    }
}
