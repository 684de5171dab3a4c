//! The scheduling algorithm: PreFilter, Filter, PostFilter, Score, pick.
//!
//! This module owns [`Framework`], which runs a [`Registry`]'s plugins over
//! a [`Snapshot`] for one pod (upstream `schedulePod`; the per-extension-point
//! loops are in `run_plugins`): adaptive `percentageOfNodesToScore` with a
//! round-robin start, weighted normalized scores, and a deterministic
//! rotating tie-break instead of a random one. It does not bind, queue or
//! talk to the API server.

use k8s_openapi::api::core::v1::Pod;

use super::node_info::pod_key;
use super::{
    CycleState, Diagnosis, FitError, NodeInfo, NodeScore, PreFilterResult, Registry, Snapshot,
    Status,
};

/// Fewer feasible nodes than this are never searched for (upstream
/// `minFeasibleNodesToFind`).
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// Floor of the adaptive percentage (upstream
/// `minFeasibleNodesPercentageToFind`).
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: usize = 5;

/// Why scheduling one pod failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The snapshot has no nodes (upstream `ErrNoNodesAvailable`).
    #[error("no nodes available to schedule pods")]
    NoNodesAvailable,
    /// No node fits; the message is the FailedScheduling event text.
    #[error(transparent)]
    Unschedulable(Box<FitError>),
    /// A plugin returned an `Error` status.
    #[error("running {extension_point} plugin {plugin:?}: {message}")]
    Plugin {
        /// `PreFilter`, `Filter`, `PreScore`, `Score` or `NormalizeScore`.
        extension_point: &'static str,
        /// The plugin's name.
        plugin: &'static str,
        /// The status message.
        message: String,
    },
}

impl From<FitError> for ScheduleError {
    fn from(e: FitError) -> Self {
        Self::Unschedulable(Box::new(e))
    }
}

/// Where a pod should go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleResult {
    /// The chosen node.
    pub node: String,
    /// Nodes the filters ran on (feasible plus rejected).
    pub evaluated: usize,
    /// Nodes that passed the filters.
    pub feasible: usize,
}

/// Upstream `numFeasibleNodesToFind`: how many feasible nodes to look for
/// before scoring. `percentage` 0 means adaptive: `50 - n/125`, at least 5.
pub fn num_feasible_nodes_to_find(percentage: u32, num_all_nodes: usize) -> usize {
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND {
        return num_all_nodes;
    }
    let mut pct = usize::try_from(percentage).unwrap_or(100).min(100);
    if pct == 0 {
        pct = 50usize
            .saturating_sub(num_all_nodes / 125)
            .max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND);
    }
    (num_all_nodes * pct / 100).max(MIN_FEASIBLE_NODES_TO_FIND)
}

pub(super) fn plugin_error(
    extension_point: &'static str,
    plugin: &'static str,
    s: &Status,
) -> ScheduleError {
    ScheduleError::Plugin {
        extension_point,
        plugin,
        message: s.message(),
    }
}

/// Runs plugins for pods; keeps the round-robin and tie-break positions.
#[derive(Debug)]
pub struct Framework {
    registry: Registry,
    percentage_of_nodes_to_score: u32,
    next_start_node_index: usize,
    next_tie_break: usize,
}

impl Framework {
    /// A framework over `registry` with adaptive percentage of nodes to score.
    pub fn new(registry: Registry) -> Self {
        Self {
            registry,
            percentage_of_nodes_to_score: 0,
            next_start_node_index: 0,
            next_tie_break: 0,
        }
    }

    /// Sets `percentageOfNodesToScore` (0 = adaptive, 100 = all nodes).
    pub fn with_percentage_of_nodes_to_score(mut self, percentage: u32) -> Self {
        self.percentage_of_nodes_to_score = percentage;
        self
    }

    /// The plugins this framework runs.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    fn has_filter_plugins(&self) -> bool {
        self.registry
            .entries()
            .iter()
            .any(|e| e.plugin.as_filter().is_some())
    }

    /// Schedules one pod with a fresh [`CycleState`].
    pub fn schedule_one(
        &mut self,
        pod: &Pod,
        snapshot: &Snapshot,
    ) -> Result<ScheduleResult, ScheduleError> {
        self.schedule_one_with_state(&mut CycleState::new(), pod, snapshot)
    }

    /// Schedules one pod; `state` is kept for Reserve afterwards.
    pub fn schedule_one_with_state(
        &mut self,
        state: &mut CycleState,
        pod: &Pod,
        snapshot: &Snapshot,
    ) -> Result<ScheduleResult, ScheduleError> {
        if snapshot.is_empty() {
            return Err(ScheduleError::NoNodesAvailable);
        }
        let (feasible, diagnosis) = self.find_nodes_that_fit(state, pod, snapshot)?;
        if feasible.is_empty() {
            return Err(self.fit_error(state, pod, snapshot, diagnosis).into());
        }
        let evaluated = feasible.len() + diagnosis.node_to_status.len();
        if feasible.len() == 1 {
            let node = feasible[0].name().to_string();
            tracing::debug!(pod = %pod_key(pod), %node, "only one feasible node");
            return Ok(ScheduleResult {
                node,
                evaluated,
                feasible: 1,
            });
        }
        let scores = self.prioritize(state, pod, snapshot, &feasible)?;
        let node = self.select_host(&scores);
        tracing::debug!(pod = %pod_key(pod), %node, evaluated, feasible = feasible.len(), "selected node");
        Ok(ScheduleResult {
            node,
            evaluated,
            feasible: feasible.len(),
        })
    }

    fn fit_error(
        &self,
        state: &CycleState,
        pod: &Pod,
        snapshot: &Snapshot,
        mut diagnosis: Diagnosis,
    ) -> FitError {
        if let Some(status) = self.run_post_filter_plugins(state, pod, snapshot, &diagnosis) {
            diagnosis.post_filter_msg = status.message();
        }
        FitError {
            pod: pod_key(pod),
            num_all_nodes: snapshot.len(),
            diagnosis,
        }
    }

    fn find_nodes_that_fit<'s>(
        &mut self,
        state: &mut CycleState,
        pod: &Pod,
        snapshot: &'s Snapshot,
    ) -> Result<(Vec<&'s NodeInfo>, Diagnosis), ScheduleError> {
        let mut diagnosis = Diagnosis::default();
        let all = snapshot.node_infos();
        // Only a PreFilter restriction builds a node list; otherwise the
        // snapshot's nodes are walked in place (no 5,000-entry vector per pod).
        let restricted: Option<Vec<&NodeInfo>> =
            match self.run_pre_filter_plugins(state, pod, snapshot) {
                Ok((PreFilterResult::Nodes(names), restricting)) => {
                    let msg = format!(
                        "node(s) didn't satisfy plugin(s) [{}]",
                        restricting.join(" ")
                    );
                    diagnosis
                        .node_to_status
                        .set_absent_nodes_status(Status::unresolvable(msg));
                    diagnosis
                        .unschedulable_plugins
                        .extend(restricting.iter().copied());
                    Some(all.iter().filter(|n| names.contains(n.name())).collect())
                }
                Ok(_) => None,
                Err(status) if status.is_rejected() => {
                    diagnosis.pre_filter_msg = status.message();
                    diagnosis.unschedulable_plugins.extend(status.plugin);
                    diagnosis.node_to_status.set_absent_nodes_status(status);
                    return Ok((Vec::new(), diagnosis));
                }
                Err(status) => {
                    return Err(plugin_error(
                        "PreFilter",
                        status.plugin.unwrap_or_default(),
                        &status,
                    ))
                }
            };
        let n = restricted.as_ref().map_or(all.len(), Vec::len);
        if n == 0 {
            return Ok((Vec::new(), diagnosis));
        }
        let node_at = |i: usize| match &restricted {
            Some(nodes) => nodes[i],
            None => &all[i],
        };
        let to_find = if self.has_filter_plugins() {
            num_feasible_nodes_to_find(self.percentage_of_nodes_to_score, n)
        } else {
            n
        };
        let start = self.next_start_node_index % n;
        let mut feasible = Vec::new();
        let mut processed = 0;
        let filters = self.active_filters(state);
        for i in 0..n {
            let node = node_at((start + i) % n);
            processed += 1;
            let status = Self::run_filters(&filters, state, pod, node);
            if status.is_success() {
                feasible.push(node);
                if feasible.len() >= to_find {
                    break;
                }
            } else if status.is_rejected() {
                diagnosis.unschedulable_plugins.extend(status.plugin);
                diagnosis.node_to_status.set(node.name(), status);
            } else {
                return Err(plugin_error(
                    "Filter",
                    status.plugin.unwrap_or_default(),
                    &status,
                ));
            }
        }
        self.next_start_node_index = (start + processed) % n;
        Ok((feasible, diagnosis))
    }

    /// The highest total; ties rotate deterministically between attempts.
    fn select_host(&mut self, scores: &[NodeScore<'_>]) -> String {
        let best = scores.iter().map(|s| s.score).max().unwrap_or(0);
        let ties: Vec<&NodeScore> = scores.iter().filter(|s| s.score == best).collect();
        let pick = ties
            .get(self.next_tie_break % ties.len().max(1))
            .map(|s| s.name.to_string());
        self.next_tie_break = self.next_tie_break.wrapping_add(1);
        pick.unwrap_or_default()
    }
}

#[cfg(test)]
#[path = "runtime_tests.rs"]
mod tests;
