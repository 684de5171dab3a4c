//! What one sync of a DaemonSet does next (upstream's `manage`,
//! `podsShouldBeOnNode`, `rollingUpdate` and `updateDaemonSetStatus`),
//! decided from the set, the nodes and its pods without writing:
//!
//! - a node that should run the daemon and has no pod gets one; failed
//!   pods go; extra pods on a node go (the oldest stays, or with surge
//!   the oldest updated one once available); pods on nodes that must not
//!   run it, and unscheduled pods for nodes that are gone, go;
//! - `RollingUpdate` replaces old pods within `maxUnavailable` (delete,
//!   then the first part makes the new one) or `maxSurge` (make the new
//!   one beside the old, delete the old once the new is available);
//! - the status counts.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;

use super::nodes::{is_updated, should_run, target_node};
use crate::workload::pods;

/// The writes of one sync.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Nodes to make a pod for.
    pub create_on: Vec<String>,
    /// Pods to delete.
    pub delete: Vec<Arc<Pod>>,
    /// Failed pods found: (namespace/name, node), for the warning event.
    pub failed: Vec<(String, String)>,
}

impl Plan {
    /// Nothing to write.
    pub fn is_empty(&self) -> bool {
        self.create_on.is_empty() && self.delete.is_empty() && self.failed.is_empty()
    }
}

/// The status counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Nodes that should run the daemon.
    pub desired: i32,
    /// Of those, the ones with a pod.
    pub current: i32,
    /// Nodes with a pod that should not.
    pub misscheduled: i32,
    /// Nodes whose (oldest) pod is ready.
    pub ready: i32,
    /// ... and available.
    pub available: i32,
    /// Nodes whose (oldest) pod is at the current template.
    pub updated: i32,
    /// desired - available.
    pub unavailable: i32,
}

/// The pods by the node they are for.
pub type ByNode = BTreeMap<String, Vec<Arc<Pod>>>;

/// Groups pods by target node (pods without one are left out).
pub fn by_node(pods: &[Arc<Pod>]) -> ByNode {
    let mut out = ByNode::new();
    for pod in pods {
        if let Some(node) = target_node(pod) {
            out.entry(node).or_default().push(pod.clone());
        }
    }
    out
}

fn terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

fn min_ready(ds: &DaemonSet) -> i32 {
    ds.spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0)
}

/// Oldest first; among equals, running before pending before unknown
/// (upstream's `podByCreationTimestampAndPhase`).
fn sort_oldest_first(pods: &mut [Arc<Pod>]) {
    fn rank(p: &Pod) -> u8 {
        match pods::phase(p) {
            "Running" => 0,
            "Pending" => 1,
            _ => 2,
        }
    }
    pods.sort_by(|a, b| {
        a.metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0)
            .cmp(&b.metadata.creation_timestamp.as_ref().map(|t| t.0))
            .then_with(|| rank(a).cmp(&rank(b)))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

/// Whether the strategy is RollingUpdate with a non-zero maxSurge.
fn surge(ds: &DaemonSet) -> Option<&IntOrString> {
    let strategy = ds.spec.as_ref()?.update_strategy.as_ref()?;
    if strategy.type_.as_deref() == Some("OnDelete") {
        return None;
    }
    strategy
        .rolling_update
        .as_ref()?
        .max_surge
        .as_ref()
        .filter(|s| {
            !matches!(s, IntOrString::Int(0))
                && !matches!(s, IntOrString::String(v) if v == "0%" || v == "0")
        })
}

/// `value` of `total`, rounding up for percentages.
pub fn scaled(value: Option<&IntOrString>, total: i32, default: i32) -> i32 {
    match value {
        None => default,
        Some(IntOrString::Int(i)) => *i,
        Some(IntOrString::String(s)) => {
            let pct: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
            let v = (pct * i64::from(total) + 99) / 100;
            i32::try_from(v).unwrap_or(i32::MAX)
        }
    }
}

/// Upstream's `manage`: creates and deletes that make every eligible node
/// run one pod and no other node any.
pub fn manage(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    pods: &ByNode,
    hash: &str,
    now: Timestamp,
) -> Plan {
    let mut plan = Plan::default();
    let allows_surge = surge(ds).is_some();
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let (run, keep) = should_run(node, ds);
        let on_node = pods.get(&name);
        match on_node {
            None if run => plan.create_on.push(name),
            Some(on_node) if keep => {
                let mut running = Vec::new();
                for pod in on_node {
                    if terminating(pod) {
                        continue;
                    }
                    match pods::phase(pod) {
                        "Failed" => {
                            plan.failed.push((
                                format!(
                                    "{}/{}",
                                    pod.metadata.namespace.as_deref().unwrap_or_default(),
                                    pod.metadata.name.as_deref().unwrap_or_default()
                                ),
                                name.clone(),
                            ));
                            plan.delete.push(pod.clone());
                        }
                        "Succeeded" => plan.delete.push(pod.clone()),
                        _ => running.push(pod.clone()),
                    }
                }
                if running.len() <= 1 {
                    continue;
                }
                sort_oldest_first(&mut running);
                if !allows_surge {
                    plan.delete.extend(running.into_iter().skip(1));
                    continue;
                }
                let (mut oldest_new, mut oldest_old) = (None, None);
                for pod in running {
                    let slot = if is_updated(&pod, hash, None) {
                        &mut oldest_new
                    } else {
                        &mut oldest_old
                    };
                    if slot.is_none() {
                        *slot = Some(pod);
                    } else {
                        plan.delete.push(pod);
                    }
                }
                if let (Some(new), Some(old)) = (oldest_new, oldest_old) {
                    if !pods::is_ready(&old) || pods::is_available(&new, min_ready(ds), now) {
                        plan.delete.push(old);
                    }
                }
            }
            Some(on_node) if !keep => {
                plan.delete
                    .extend(on_node.iter().filter(|p| !terminating(p)).cloned());
            }
            _ => {}
        }
    }
    // Unscheduled pods for nodes that are gone.
    for (node, on_node) in pods {
        if nodes
            .iter()
            .any(|n| n.metadata.name.as_deref() == Some(node.as_str()))
        {
            continue;
        }
        plan.delete.extend(
            on_node
                .iter()
                .filter(|p| !terminating(p))
                .filter(|p| {
                    p.spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_deref())
                        .is_none_or(str::is_empty)
                })
                .cloned(),
        );
    }
    plan
}

/// A node's pod at the current template and its old one, if any.
type NewAndOld = (Option<Arc<Pod>>, Option<Arc<Pod>>);

/// The new (at `hash`) and old pod on a node; `None` when there are
/// several of either (the first part cleans up).
fn new_and_old(pods: &[Arc<Pod>], hash: &str, generation: Option<&str>) -> Option<NewAndOld> {
    let (mut new, mut old) = (None, None);
    for pod in pods.iter().filter(|p| !terminating(p)) {
        let slot = if is_updated(pod, hash, generation) {
            &mut new
        } else {
            &mut old
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(pod.clone());
    }
    Some((new, old))
}

/// Upstream's `rollingUpdate`: which old pods to delete (and, with
/// surge, on which nodes to make new pods beside the old) this sync.
pub fn rolling_update(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    pods: &ByNode,
    hash: &str,
    generation: Option<&str>,
    now: Timestamp,
) -> Plan {
    let mut plan = Plan::default();
    let min_ready = min_ready(ds);
    // Every node that should run the daemon counts, with or without pods.
    let mut on_nodes: ByNode = pods.clone();
    let mut desired = 0;
    for node in nodes {
        if should_run(node, ds).0 {
            desired += 1;
            on_nodes
                .entry(node.metadata.name.clone().unwrap_or_default())
                .or_default();
        }
    }
    let rolling = ds
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref());
    let max_surge = surge(ds).map_or(0, |s| scaled(Some(s), desired, 0));
    let mut max_unavailable = scaled(rolling.and_then(|r| r.max_unavailable.as_ref()), desired, 1);
    if max_surge == 0 && max_unavailable == 0 {
        max_unavailable = 1;
    }
    let available = |p: &Pod| pods::is_available(p, min_ready, now);
    if max_surge == 0 {
        let mut unavailable = 0;
        let mut replace = Vec::new();
        let mut candidates = Vec::new();
        for on_node in on_nodes.values() {
            let Some((new, old)) = new_and_old(on_node, hash, generation) else {
                unavailable += 1;
                continue;
            };
            match (new, old) {
                (None, None) | (Some(_), Some(_)) => unavailable += 1,
                (Some(new), None) => {
                    if !available(&new) {
                        unavailable += 1;
                    }
                }
                (None, Some(old)) => {
                    if !available(&old) {
                        replace.push(old);
                    } else if unavailable < max_unavailable {
                        candidates.push(old);
                    }
                }
            }
        }
        let room = usize::try_from((max_unavailable - unavailable).max(0)).unwrap_or(0);
        plan.delete = replace;
        plan.delete.extend(candidates.into_iter().take(room));
        return plan;
    }
    let mut surged = 0;
    for (node_name, on_node) in &on_nodes {
        let Some((new, old)) = new_and_old(on_node, hash, generation) else {
            continue;
        };
        match (new, old) {
            (_, None) => {}
            (None, Some(old)) => {
                if !available(&old) {
                    let node = nodes
                        .iter()
                        .find(|n| n.metadata.name.as_deref() == Some(node_name.as_str()));
                    if node.is_none_or(|n| !should_run(n, ds).0) {
                        plan.delete.push(old);
                    } else {
                        plan.create_on.push(node_name.clone());
                    }
                } else if surged < max_surge {
                    surged += 1;
                    plan.create_on.push(node_name.clone());
                }
            }
            (Some(new), Some(old)) => {
                if available(&new) {
                    plan.delete.push(old);
                } else {
                    surged += 1;
                }
            }
        }
    }
    plan
}

/// Upstream's `updateDaemonSetStatus` counts; and when a ready pod
/// becomes available (to look again then).
pub fn status(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    pods: &ByNode,
    hash: &str,
    generation: Option<&str>,
    now: Timestamp,
) -> (Counts, Option<Duration>) {
    let min_ready = min_ready(ds);
    let mut c = Counts::default();
    let mut recheck: Option<Duration> = None;
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let (run, _) = should_run(node, ds);
        let mut on_node: Vec<Arc<Pod>> = pods.get(name).cloned().unwrap_or_default();
        let scheduled = !on_node.is_empty();
        if !run {
            if scheduled {
                c.misscheduled += 1;
            }
            continue;
        }
        c.desired += 1;
        if !scheduled {
            continue;
        }
        c.current += 1;
        sort_oldest_first(&mut on_node);
        let pod = &on_node[0];
        if pods::is_ready(pod) {
            c.ready += 1;
            if pods::is_available(pod, min_ready, now) {
                c.available += 1;
            } else if let Some(left) = pods::available_in(pod, min_ready, now) {
                recheck = Some(recheck.map_or(left, |r| r.min(left)));
            }
        }
        if is_updated(pod, hash, generation) {
            c.updated += 1;
        }
    }
    c.unavailable = c.desired - c.available;
    (c, recheck)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::workload::history::POD_REVISION_LABEL;

    fn ds(strategy: serde_json::Value) -> DaemonSet {
        serde_json::from_value(json!({
            "metadata": {"name": "d", "namespace": "ns"},
            "spec": {
                "selector": {"matchLabels": {"app": "d"}},
                "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": []}},
                "updateStrategy": strategy,
            },
        }))
        .unwrap()
    }

    fn nodes(n: usize) -> Vec<Arc<Node>> {
        (0..n)
            .map(|i| {
                Arc::new(
                    serde_json::from_value(json!({"metadata": {"name": format!("n{i}")}})).unwrap(),
                )
            })
            .collect()
    }

    fn pod(name: &str, node: &str, hash: &str, ready: bool) -> Arc<Pod> {
        let conditions = if ready {
            json!([{"type": "Ready", "status": "True"}])
        } else {
            json!([])
        };
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns", "labels": {POD_REVISION_LABEL: hash}},
                "spec": {"nodeName": node, "containers": []},
                "status": {"phase": "Running", "conditions": conditions},
            }))
            .unwrap(),
        )
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<&str> {
        let mut v: Vec<&str> = pods
            .iter()
            .map(|p| p.metadata.name.as_deref().unwrap())
            .collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn every_node_gets_one_pod_and_gone_nodes_lose_theirs() {
        let d = ds(json!({"type": "RollingUpdate"}));
        let now = Timestamp::now();
        let pods = by_node(&[pod("a", "n0", "h", true), pod("b", "n0", "h", true)]);
        let plan = manage(&d, &nodes(3), &pods, "h", now);
        assert_eq!(plan.create_on, ["n1", "n2"]);
        assert_eq!(plan.delete.len(), 1, "one of the two pods on n0 goes");
        // An unscheduled pod for a node that is gone is deleted.
        let mut unscheduled = (*pod("c", "", "h", false)).clone();
        let spec = unscheduled.spec.as_mut().unwrap();
        spec.node_name = None;
        spec.affinity = Some(super::super::nodes::pin_to_node(None, "n9"));
        let pods = by_node(&[Arc::new(unscheduled)]);
        let plan = manage(&d, &nodes(1), &pods, "h", now);
        assert_eq!(plan.create_on, ["n0"]);
        assert_eq!(names(&plan.delete), ["c"]);
        // Failed pods are deleted and reported.
        let mut failed = (*pod("f", "n0", "h", false)).clone();
        failed.status.as_mut().unwrap().phase = Some("Failed".into());
        let plan = manage(&d, &nodes(1), &by_node(&[Arc::new(failed)]), "h", now);
        assert_eq!(names(&plan.delete), ["f"]);
        assert_eq!(plan.failed, [("ns/f".to_string(), "n0".to_string())]);
    }

    #[test]
    fn rolling_update_stays_within_max_unavailable() {
        let now = Timestamp::now();
        let pods: Vec<_> = (0..4)
            .map(|i| pod(&format!("p{i}"), &format!("n{i}"), "old", true))
            .collect();
        let d = ds(json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}));
        let plan = rolling_update(&d, &nodes(4), &by_node(&pods), "new", None, now);
        assert_eq!(plan.delete.len(), 1);
        assert!(plan.create_on.is_empty());
        let d = ds(json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "50%"}}));
        let plan = rolling_update(&d, &nodes(4), &by_node(&pods), "new", None, now);
        assert_eq!(plan.delete.len(), 2);
        // A new pod not ready yet uses up the budget.
        let mut mixed = pods.clone();
        mixed[0] = pod("p0new", "n0", "new", false);
        let d = ds(json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}));
        let plan = rolling_update(&d, &nodes(4), &by_node(&mixed), "new", None, now);
        assert!(plan.delete.is_empty());
        // Unavailable old pods are replaced regardless.
        mixed[1] = pod("p1", "n1", "old", false);
        let plan = rolling_update(&d, &nodes(4), &by_node(&mixed), "new", None, now);
        assert_eq!(names(&plan.delete), ["p1"]);
    }

    #[test]
    fn surge_makes_new_pods_before_deleting_old_ones() {
        let now = Timestamp::now();
        let d = ds(
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}),
        );
        let pods: Vec<_> = (0..3)
            .map(|i| pod(&format!("p{i}"), &format!("n{i}"), "old", true))
            .collect();
        let plan = rolling_update(&d, &nodes(3), &by_node(&pods), "new", None, now);
        assert_eq!(plan.create_on, ["n0"]);
        assert!(plan.delete.is_empty());
        let mut surged = pods.clone();
        surged.push(pod("p0new", "n0", "new", false));
        let plan = rolling_update(&d, &nodes(3), &by_node(&surged), "new", None, now);
        assert!(plan.is_empty(), "waiting for the new pod: {plan:?}");
        surged[3] = pod("p0new", "n0", "new", true);
        let plan = rolling_update(&d, &nodes(3), &by_node(&surged), "new", None, now);
        assert_eq!(names(&plan.delete), ["p0"]);
        assert_eq!(plan.create_on, ["n1"]);
    }

    #[test]
    fn status_counts_nodes() {
        let now = Timestamp::now();
        let d: DaemonSet = serde_json::from_value(json!({
            "metadata": {"name": "d"},
            "spec": {"selector": {}, "template": {"spec": {"nodeSelector": {"run": "yes"}}}},
        }))
        .unwrap();
        let mut ns = nodes(3);
        for n in ns.iter_mut().take(2) {
            Arc::make_mut(n).metadata.labels =
                Some([("run".to_string(), "yes".to_string())].into());
        }
        let pods = by_node(&[
            pod("a", "n0", "h", true),
            pod("b", "n1", "old", false),
            pod("c", "n2", "h", true),
        ]);
        let (c, _) = status(&d, &ns, &pods, "h", None, now);
        assert_eq!(
            c,
            Counts {
                desired: 2,
                current: 2,
                misscheduled: 1,
                ready: 1,
                available: 1,
                updated: 1,
                unavailable: 1
            }
        );
    }
}
