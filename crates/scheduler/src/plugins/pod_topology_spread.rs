//! PodTopologySpread (`whenUnsatisfiable: DoNotSchedule` constraints):
//! placing the pod must keep `matching pods in the domain + self - global
//! minimum <= maxSkew`. ScheduleAnyway constraints (scoring) and the
//! cluster-default constraints are not implemented yet.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, TopologySpreadConstraint};

use super::{names, taint_toleration};
use crate::framework::{
    CycleState, FilterPlugin, NodeInfo, Plugin, PodInfo, PreFilterPlugin, PreFilterResult,
    Snapshot, Status,
};
use skiff_client::selectors::{
    Operator, RequiredNodeAffinity, Requirement, Selector, SelectorError,
};

/// Upstream `ErrReasonConstraintsNotMatch`.
pub const ERR_REASON_CONSTRAINTS_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints";
/// Upstream `ErrReasonNodeLabelNotMatch`.
pub const ERR_REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

const PRE_FILTER_KEY: &str = "PreFilterPodTopologySpread";

#[derive(Debug, Clone)]
struct Constraint {
    max_skew: i64,
    topology_key: String,
    selector: Selector,
    min_domains: usize,
    honor_node_affinity: bool,
    honor_node_taints: bool,
}

impl Constraint {
    fn parse(pod: &Pod, c: &TopologySpreadConstraint) -> Result<Self, SelectorError> {
        let mut selector = Selector::from_label_selector(c.label_selector.as_ref())?;
        let labels = pod.metadata.labels.as_ref();
        for key in c.match_label_keys.iter().flatten() {
            if let Some(v) = labels.and_then(|l| l.get(key)) {
                selector.add(Requirement::new(key, Operator::In, vec![v.clone()])?);
            }
        }
        Ok(Self {
            max_skew: i64::from(c.max_skew),
            topology_key: c.topology_key.clone(),
            selector,
            min_domains: usize::try_from(c.min_domains.unwrap_or(1)).unwrap_or(1),
            honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
            honor_node_taints: c.node_taints_policy.as_deref() == Some("Honor"),
        })
    }

    fn includes(&self, pod: &Pod, node: &NodeInfo, required: &RequiredNodeAffinity) -> bool {
        if self.honor_node_affinity && !required.matches(node.node()) {
            return false;
        }
        let tolerations = taint_toleration::pod_tolerations(pod);
        !(self.honor_node_taints
            && taint_toleration::find_untolerated_taint(
                node.taints(),
                tolerations,
                taint_toleration::is_do_not_schedule,
            )
            .is_some())
    }
}

fn count_matching(pods: &[PodInfo], selector: &Selector, namespace: &str) -> i64 {
    if selector.is_empty() {
        return 0;
    }
    let n = pods
        .iter()
        .filter(|p| p.pod.metadata.deletion_timestamp.is_none() && p.namespace() == namespace)
        .filter(|p| selector.matches(p.pod.metadata.labels.as_ref()))
        .count();
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[derive(Debug)]
struct State {
    constraints: Vec<Constraint>,
    /// Per constraint: domain value → matching pods.
    counts: Vec<BTreeMap<String, i64>>,
}

impl State {
    fn min_match(&self, i: usize) -> i64 {
        let counts = &self.counts[i];
        if counts.len() < self.constraints[i].min_domains {
            return 0;
        }
        counts
            .values()
            .copied()
            .min()
            .unwrap_or(i64::from(i32::MAX))
    }
}

/// The PodTopologySpread plugin (filtering only).
#[derive(Debug, Clone, Copy, Default)]
pub struct PodTopologySpread;

impl Plugin for PodTopologySpread {
    fn name(&self) -> &'static str {
        names::POD_TOPOLOGY_SPREAD
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for PodTopologySpread {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        snapshot: &Snapshot,
    ) -> Result<PreFilterResult, Status> {
        let specs = pod
            .spec
            .as_ref()
            .and_then(|s| s.topology_spread_constraints.as_deref())
            .unwrap_or_default();
        let constraints = specs
            .iter()
            .filter(|c| c.when_unsatisfiable == "DoNotSchedule")
            .map(|c| Constraint::parse(pod, c))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Status::error(format!("calculating preFilterState: {e}")))?;
        if constraints.is_empty() {
            return Ok(PreFilterResult::Skip);
        }
        let required = RequiredNodeAffinity::of(pod);
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let mut counts = vec![BTreeMap::new(); constraints.len()];
        for node in snapshot.node_infos() {
            if constraints
                .iter()
                .any(|c| node.label(&c.topology_key).is_none())
            {
                continue;
            }
            for (i, c) in constraints.iter().enumerate() {
                if !c.includes(pod, node, &required) {
                    continue;
                }
                let value = node.label(&c.topology_key).unwrap_or_default().to_string();
                *counts[i].entry(value).or_default() +=
                    count_matching(node.pods(), &c.selector, namespace);
            }
        }
        state.write(
            PRE_FILTER_KEY,
            State {
                constraints,
                counts,
            },
        );
        Ok(PreFilterResult::AllNodes)
    }
}

impl FilterPlugin for PodTopologySpread {
    fn filter(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        let s: &State = match state.require(PRE_FILTER_KEY) {
            Ok(s) => s,
            Err(e) => return e,
        };
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(value) = node.label(&c.topology_key) else {
                return Status::unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH);
            };
            let self_match = i64::from(c.selector.matches(pod.metadata.labels.as_ref()));
            let matching = s.counts[i].get(value).copied().unwrap_or(0);
            if matching + self_match - s.min_match(i) > c.max_skew {
                return Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH);
            }
        }
        Status::success()
    }
}

#[cfg(test)]
#[path = "pod_topology_spread_tests.rs"]
mod tests;
