//! InterPodAffinity (required terms): the pod must land in a topology
//! domain holding pods its affinity selects, outside domains holding pods
//! its anti-affinity selects, and outside domains whose pods' anti-affinity
//! select it. Preferred terms (scoring) are not implemented yet.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm};

use super::names;
use crate::framework::{
    CycleState, FilterPlugin, NodeInfo, Plugin, PreFilterPlugin, PreFilterResult, Snapshot, Status,
};
use skiff_client::selectors::{Labels, Operator, Requirement, Selector, SelectorError};

/// Upstream `ErrReasonAffinityRulesNotMatch`.
pub const ERR_REASON_AFFINITY: &str = "node(s) didn't match pod affinity rules";
/// Upstream `ErrReasonAntiAffinityRulesNotMatch`.
pub const ERR_REASON_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
/// Upstream `ErrReasonExistingAntiAffinityRulesNotMatch`.
pub const ERR_REASON_EXISTING_ANTI_AFFINITY: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

const PRE_FILTER_KEY: &str = "PreFilterInterPodAffinity";

/// A parsed affinity term (upstream `framework.AffinityTerm`).
#[derive(Debug, Clone)]
struct Term {
    namespaces: BTreeSet<String>,
    namespace_selector: Selector,
    selector: Selector,
    topology_key: String,
}

fn namespace_of(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

impl Term {
    fn parse(owner: &Pod, t: &PodAffinityTerm) -> Result<Self, SelectorError> {
        let mut namespaces: BTreeSet<String> = t.namespaces.iter().flatten().cloned().collect();
        if namespaces.is_empty() && t.namespace_selector.is_none() {
            namespaces.insert(namespace_of(owner).to_string());
        }
        let namespace_selector = match &t.namespace_selector {
            Some(s) => Selector::from_label_selector(Some(s))?,
            None => Selector::nothing(),
        };
        let mut selector = Selector::from_label_selector(t.label_selector.as_ref())?;
        if t.label_selector.is_some() {
            let labels = owner.metadata.labels.as_ref();
            let keys = [
                (&t.match_label_keys, Operator::In),
                (&t.mismatch_label_keys, Operator::NotIn),
            ];
            for (keys, op) in keys {
                for k in keys.iter().flatten() {
                    if let Some(v) = labels.and_then(|l| l.get(k)) {
                        selector.add(Requirement::new(k, op, vec![v.clone()])?);
                    }
                }
            }
        }
        Ok(Self {
            namespaces,
            namespace_selector,
            selector,
            topology_key: t.topology_key.clone(),
        })
    }

    fn matches(&self, pod: &Pod, ns_labels: Option<&Labels>) -> bool {
        (self.namespaces.contains(namespace_of(pod)) || self.namespace_selector.matches(ns_labels))
            && self.selector.matches(pod.metadata.labels.as_ref())
    }
}

fn required_terms(pod: &Pod, anti: bool) -> Result<Vec<Term>, SelectorError> {
    let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
    let terms = if anti {
        affinity
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
    } else {
        affinity
            .and_then(|a| a.pod_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
    };
    terms
        .into_iter()
        .flatten()
        .map(|t| Term::parse(pod, t))
        .collect()
}

type Counts = BTreeMap<(String, String), i64>;

fn bump(counts: &mut Counts, node: &NodeInfo, key: &str) {
    if let Some(v) = node.label(key) {
        *counts.entry((key.to_string(), v.to_string())).or_default() += 1;
    }
}

#[derive(Debug)]
struct State {
    affinity: Vec<Term>,
    anti_affinity: Vec<Term>,
    affinity_counts: Counts,
    anti_affinity_counts: Counts,
    existing_anti_affinity_counts: Counts,
    matches_own_affinity: bool,
}

/// The InterPodAffinity plugin (filtering only).
#[derive(Debug, Clone, Copy, Default)]
pub struct InterPodAffinity;

impl Plugin for InterPodAffinity {
    fn name(&self) -> &'static str {
        names::INTER_POD_AFFINITY
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for InterPodAffinity {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        snapshot: &Snapshot,
    ) -> Result<PreFilterResult, Status> {
        let parse_err = |e: SelectorError| Status::unresolvable(format!("parsing pod: {e}"));
        let affinity = required_terms(pod, false).map_err(parse_err)?;
        let anti_affinity = required_terms(pod, true).map_err(parse_err)?;
        let own_ns_labels = snapshot.namespace_labels(namespace_of(pod));
        let mut s = State {
            matches_own_affinity: affinity.iter().all(|t| t.matches(pod, own_ns_labels)),
            affinity,
            anti_affinity,
            affinity_counts: Counts::new(),
            anti_affinity_counts: Counts::new(),
            existing_anti_affinity_counts: Counts::new(),
        };
        let has_own_terms = !s.affinity.is_empty() || !s.anti_affinity.is_empty();
        if !has_own_terms && snapshot.required_anti_affinity_pods() == 0 {
            // Nothing constrains this pod and it constrains nothing.
            return Ok(PreFilterResult::Skip);
        }
        for node in snapshot.node_infos() {
            if !has_own_terms && node.required_anti_affinity_pods() == 0 {
                continue;
            }
            for existing in node.pods() {
                let existing = &existing.pod;
                // Most pods have no affinity at all: skip them without
                // parsing anything (this loop runs for every pod scheduled).
                if !has_own_terms && !has_required_anti_affinity(existing) {
                    continue;
                }
                let ns_labels = snapshot.namespace_labels(namespace_of(existing));
                match required_terms(existing, true) {
                    Ok(terms) => {
                        for t in terms.iter().filter(|t| t.matches(pod, own_ns_labels)) {
                            bump(&mut s.existing_anti_affinity_counts, node, &t.topology_key);
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "ignoring existing pod's unparsable anti-affinity")
                    }
                }
                if !s.affinity.is_empty()
                    && s.affinity.iter().all(|t| t.matches(existing, ns_labels))
                {
                    for t in &s.affinity {
                        bump(&mut s.affinity_counts, node, &t.topology_key);
                    }
                }
                for t in s
                    .anti_affinity
                    .iter()
                    .filter(|t| t.matches(existing, ns_labels))
                {
                    bump(&mut s.anti_affinity_counts, node, &t.topology_key);
                }
            }
        }
        if s.existing_anti_affinity_counts.is_empty()
            && s.affinity.is_empty()
            && s.anti_affinity.is_empty()
        {
            return Ok(PreFilterResult::Skip);
        }
        state.write(PRE_FILTER_KEY, s);
        Ok(PreFilterResult::AllNodes)
    }
}

use crate::framework::has_required_anti_affinity;

fn domain(node: &NodeInfo, key: &str) -> Option<(String, String)> {
    node.label(key).map(|v| (key.to_string(), v.to_string()))
}

fn satisfies_affinity(s: &State, node: &NodeInfo) -> bool {
    let mut pods_exist = true;
    for t in &s.affinity {
        let Some(d) = domain(node, &t.topology_key) else {
            return false;
        };
        if s.affinity_counts.get(&d).copied().unwrap_or(0) <= 0 {
            pods_exist = false;
        }
    }
    // The first pod of a group that selects itself may go anywhere its
    // topology keys exist.
    pods_exist || (s.affinity_counts.is_empty() && s.matches_own_affinity)
}

fn satisfies_anti_affinity(s: &State, node: &NodeInfo) -> bool {
    s.anti_affinity.iter().all(|t| {
        domain(node, &t.topology_key)
            .is_none_or(|d| s.anti_affinity_counts.get(&d).copied().unwrap_or(0) <= 0)
    })
}

fn satisfies_existing_anti_affinity(s: &State, node: &NodeInfo) -> bool {
    node.labels().into_iter().flatten().all(|(k, v)| {
        s.existing_anti_affinity_counts
            .get(&(k.clone(), v.clone()))
            .copied()
            .unwrap_or(0)
            <= 0
    })
}

impl FilterPlugin for InterPodAffinity {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let s: &State = match state.require(PRE_FILTER_KEY) {
            Ok(s) => s,
            Err(e) => return e,
        };
        if !satisfies_affinity(s, node) {
            return Status::unresolvable(ERR_REASON_AFFINITY);
        }
        if !satisfies_anti_affinity(s, node) {
            return Status::unschedulable(ERR_REASON_ANTI_AFFINITY);
        }
        if !satisfies_existing_anti_affinity(s, node) {
            return Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY);
        }
        Status::success()
    }
}

#[cfg(test)]
#[path = "inter_pod_affinity_tests.rs"]
mod tests;
