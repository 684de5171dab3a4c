//! Running one extension point's plugins (upstream `frameworkImpl.Run*`).
//!
//! This module owns the per-extension-point loops of [`Framework`]: merging
//! PreFilter node sets, first-failure Filter, PostFilter reasons, weighted
//! normalized scores with range checks, Reserve with unreserve on
//! failure, and PreBind's work. The algorithm that strings them together
//! is in `runtime`.

use crate::framework::FilterPlugin;
use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

use super::runtime::plugin_error;
use super::{
    Code, CycleState, Diagnosis, Framework, NodeInfo, NodeScore, PreBind, PreFilterResult,
    ScheduleError, Snapshot, Status, MAX_NODE_SCORE, MIN_NODE_SCORE,
};

impl Framework {
    /// Runs every PreFilter plugin; merges node restrictions by
    /// intersection. `Ok` carries the merged result and the plugins that
    /// restricted nodes; `Err` the first rejecting or failing status.
    pub fn run_pre_filter_plugins(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        snapshot: &Snapshot,
    ) -> Result<(PreFilterResult, Vec<&'static str>), Status> {
        let mut merged: Option<BTreeSet<String>> = None;
        let mut restricting = Vec::new();
        for e in self.registry().entries() {
            let Some(pl) = e.plugin.as_pre_filter() else {
                continue;
            };
            let name = e.plugin.name();
            match pl.pre_filter(state, pod, snapshot) {
                Ok(PreFilterResult::Skip) => {
                    state.skip_filter_plugins.insert(name);
                }
                Ok(PreFilterResult::AllNodes) => {}
                Ok(PreFilterResult::Nodes(names)) => {
                    restricting.push(name);
                    let next = match merged.take() {
                        Some(m) => m.intersection(&names).cloned().collect(),
                        None => names,
                    };
                    if next.is_empty() {
                        let msg = match restricting.as_slice() {
                            [one] => format!("node(s) didn't satisfy plugin {one}"),
                            many => format!(
                                "node(s) didn't satisfy plugin(s) [{}] simultaneously",
                                many.join(" ")
                            ),
                        };
                        return Err(Status::unresolvable(msg).with_plugin(name));
                    }
                    merged = Some(next);
                }
                Err(status) if status.is_skip() => {
                    state.skip_filter_plugins.insert(name);
                }
                Err(status) => return Err(status.with_plugin(name)),
            }
        }
        Ok((
            merged.map_or(PreFilterResult::AllNodes, PreFilterResult::Nodes),
            restricting,
        ))
    }

    /// Runs Filter plugins in order; the first non-success wins.
    pub fn run_filter_plugins(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        Self::run_filters(&self.active_filters(state), state, pod, node)
    }

    /// The Filter plugins that run for this cycle (not skipped by their
    /// PreFilter), worked out once rather than for every node.
    pub(super) fn active_filters(
        &self,
        state: &CycleState,
    ) -> Vec<(&'static str, &dyn FilterPlugin)> {
        self.registry()
            .entries()
            .iter()
            .filter_map(|e| Some((e.plugin.name(), e.plugin.as_filter()?)))
            .filter(|(name, _)| !state.skips_filter(name))
            .collect()
    }

    /// Runs the given Filter plugins on one node; the first non-success wins.
    pub(super) fn run_filters(
        filters: &[(&'static str, &dyn FilterPlugin)],
        state: &CycleState,
        pod: &Pod,
        node: &NodeInfo,
    ) -> Status {
        for (name, pl) in filters {
            let status = pl.filter(state, pod, node);
            if !status.is_success() {
                return status.with_plugin(name);
            }
        }
        Status::success()
    }

    pub(super) fn run_post_filter_plugins(
        &self,
        state: &CycleState,
        pod: &Pod,
        snapshot: &Snapshot,
        diagnosis: &Diagnosis,
    ) -> Option<Status> {
        let mut reasons = Vec::new();
        let mut rejector = None;
        let mut any = false;
        for e in self.registry().entries() {
            let Some(pl) = e.plugin.as_post_filter() else {
                continue;
            };
            any = true;
            let status = pl.post_filter(state, pod, snapshot, &diagnosis.node_to_status);
            if status.is_success() || !status.is_rejected() {
                return Some(status.with_plugin(e.plugin.name()));
            }
            if status.code == Code::UnschedulableAndUnresolvable {
                return Some(status.with_plugin(e.plugin.name()));
            }
            rejector.get_or_insert(e.plugin.name());
            reasons.extend(status.reasons);
        }
        any.then_some(Status {
            code: Code::Unschedulable,
            reasons,
            plugin: rejector,
        })
    }

    /// PreScore, Score, NormalizeScore and weights: the total per node, in
    /// `nodes` order.
    pub fn prioritize<'n>(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        snapshot: &Snapshot,
        nodes: &[&'n NodeInfo],
    ) -> Result<Vec<NodeScore<'n>>, ScheduleError> {
        let mut totals: Vec<NodeScore<'n>> = nodes
            .iter()
            .map(|n| NodeScore {
                name: n.name(),
                score: 0,
            })
            .collect();
        let scorers: Vec<_> = self
            .registry()
            .entries()
            .iter()
            .filter_map(|e| e.plugin.as_score().map(|s| (e, s)))
            .collect();
        if scorers.is_empty() {
            totals.iter_mut().for_each(|t| t.score = 1);
            return Ok(totals);
        }
        for (e, pl) in &scorers {
            let status = pl.pre_score(state, pod, snapshot, nodes);
            if status.is_skip() {
                state.skip_score_plugins.insert(e.plugin.name());
            } else if !status.is_success() {
                return Err(plugin_error("PreScore", e.plugin.name(), &status));
            }
        }
        let mut raw = vec![0i64; nodes.len()];
        let mut scores = totals.clone();
        for (e, pl) in &scorers {
            let name = e.plugin.name();
            if state.skips_score(name) {
                continue;
            }
            pl.score_nodes(state, pod, nodes, &mut raw)
                .map_err(|s| plugin_error("Score", name, &s))?;
            for (s, r) in scores.iter_mut().zip(&raw) {
                s.score = *r;
            }
            let status = pl.normalize_scores(state, pod, &mut scores);
            if !status.is_success() {
                return Err(plugin_error("NormalizeScore", name, &status));
            }
            for (total, s) in totals.iter_mut().zip(&scores) {
                if !(MIN_NODE_SCORE..=MAX_NODE_SCORE).contains(&s.score) {
                    let message = format!(
                        "plugin {name:?} returns an invalid score {}, it should in the range of [{MIN_NODE_SCORE}, \
                         {MAX_NODE_SCORE}] after normalizing",
                        s.score
                    );
                    return Err(ScheduleError::Plugin {
                        extension_point: "Score",
                        plugin: name,
                        message,
                    });
                }
                total.score += s.score * e.weight;
            }
        }
        Ok(totals)
    }

    /// Runs Reserve in order; on failure runs Unreserve on all of them in
    /// reverse order and returns the failing status.
    pub fn run_reserve_plugins(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        node_name: &str,
    ) -> Status {
        for e in self.registry().entries() {
            let Some(pl) = e.plugin.as_reserve() else {
                continue;
            };
            let status = pl.reserve(state, pod, node_name);
            if !status.is_success() {
                self.run_unreserve_plugins(state, pod, node_name);
                return status.with_plugin(e.plugin.name());
            }
        }
        Status::success()
    }

    /// Runs Unreserve on every Reserve plugin, in reverse order.
    pub fn run_unreserve_plugins(&self, state: &mut CycleState, pod: &Pod, node_name: &str) {
        for e in self.registry().entries().iter().rev() {
            if let Some(pl) = e.plugin.as_reserve() {
                pl.unreserve(state, pod, node_name);
            }
        }
    }

    /// The PreBind work of every PreBind plugin, in order, with the
    /// plugin's name; the first `Error` status stops it.
    pub fn run_pre_bind_plugins(
        &self,
        state: &CycleState,
        pod: &Pod,
        node_name: &str,
    ) -> Result<Vec<(&'static str, PreBind)>, Status> {
        let mut work = Vec::new();
        for e in self.registry().entries() {
            let Some(pl) = e.plugin.as_pre_bind() else {
                continue;
            };
            match pl.pre_bind(state, pod, node_name) {
                Ok(Some(w)) => work.push((e.plugin.name(), w)),
                Ok(None) => {}
                Err(status) => return Err(status.with_plugin(e.plugin.name())),
            }
        }
        Ok(work)
    }
}
