//! The plugin traits, one per extension point.
//!
//! This module owns the contracts between the framework and plugins
//! (upstream `framework/interface.go`). A plugin is one value implementing
//! [`Plugin`]; it opts into extension points by returning itself from the
//! matching `as_*` accessor, so one registration covers PreFilter, Filter
//! and Score alike. Plugins are pure: they see the pod, the [`Snapshot`]
//! or one [`NodeInfo`], and the [`CycleState`] of the attempt, nothing else.
//! Even PreBind, upstream's API-writing point, only describes the work
//! ([`PreBind`]); the binder does it.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, Pod};

use super::{CycleState, NodeInfo, NodeToStatus, Snapshot, Status};

/// The highest score a Score plugin may give after normalization.
pub const MAX_NODE_SCORE: i64 = 100;
/// The lowest score.
pub const MIN_NODE_SCORE: i64 = 0;

/// A named plugin and the extension points it implements.
pub trait Plugin: fmt::Debug + Send + Sync {
    /// The upstream plugin name, e.g. `NodeResourcesFit`.
    fn name(&self) -> &'static str;
    /// The PreFilter side, if any.
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        None
    }
    /// The Filter side, if any.
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        None
    }
    /// The PostFilter side, if any.
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        None
    }
    /// The PreScore/Score/NormalizeScore side, if any.
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        None
    }
    /// The Reserve/Unreserve side, if any.
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        None
    }
    /// The PreBind side, if any.
    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        None
    }
}

/// What a PreFilter plugin tells the framework about candidate nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreFilterResult {
    /// Every node stays a candidate.
    AllNodes,
    /// Only these nodes can fit (e.g. node affinity on `metadata.name`).
    Nodes(BTreeSet<String>),
    /// The plugin has nothing to check for this pod: skip its Filter.
    Skip,
}

/// Runs once per attempt before filtering: precomputes state, may reject.
pub trait PreFilterPlugin: Plugin {
    /// `Err` carries an `Unschedulable*` status (the pod fits nowhere) or
    /// an `Error`.
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        snapshot: &Snapshot,
    ) -> Result<PreFilterResult, Status>;
}

/// Decides whether the pod can run on one node.
pub trait FilterPlugin: Plugin {
    /// `Success`, an `Unschedulable*` status with reasons, or `Error`.
    fn filter(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status;
}

/// Runs when no node fits (upstream: preemption).
pub trait PostFilterPlugin: Plugin {
    /// The status's message is appended to the FailedScheduling message.
    fn post_filter(
        &self,
        state: &CycleState,
        pod: &Pod,
        snapshot: &Snapshot,
        statuses: &NodeToStatus,
    ) -> Status;
}

/// One node's score from one plugin (the name borrowed from the
/// snapshot: a cycle scores hundreds of nodes, and copying each name for
/// each plugin would cost more than the scoring).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeScore<'a> {
    /// The node.
    pub name: &'a str,
    /// Its score.
    pub score: i64,
}

/// Ranks feasible nodes.
pub trait ScorePlugin: Plugin {
    /// Runs once before scoring; `Skip` means this plugin does not score
    /// this pod.
    fn pre_score(
        &self,
        _state: &mut CycleState,
        _pod: &Pod,
        _snapshot: &Snapshot,
        _nodes: &[&NodeInfo],
    ) -> Status {
        Status::success()
    }

    /// Raw scores of all `nodes` into `out` (same order and length): the
    /// whole list at once, so a plugin reads its PreScore state once per
    /// cycle rather than per node (see [`CycleState::score_each`]).
    fn score_nodes(
        &self,
        state: &CycleState,
        pod: &Pod,
        nodes: &[&NodeInfo],
        out: &mut [i64],
    ) -> Result<(), Status>;

    /// The raw score of one node (upstream's `Score`).
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Result<i64, Status> {
        let mut out = [0];
        self.score_nodes(state, pod, &[node], &mut out)?;
        Ok(out[0])
    }

    /// Rescales raw scores into `[MIN_NODE_SCORE, MAX_NODE_SCORE]`; the
    /// default leaves them alone.
    fn normalize_scores(
        &self,
        _state: &CycleState,
        _pod: &Pod,
        _scores: &mut [NodeScore<'_>],
    ) -> Status {
        Status::success()
    }
}

/// Claims or releases resources for the chosen node before binding.
pub trait ReservePlugin: Plugin {
    /// Reserve; a failure makes the framework unreserve everything.
    fn reserve(&self, state: &mut CycleState, pod: &Pod, node_name: &str) -> Status;
    /// Undo [`ReservePlugin::reserve`]; must be idempotent.
    fn unreserve(&self, state: &mut CycleState, pod: &Pod, node_name: &str);
}

/// API work to do before the pod is bound to its node (upstream PreBind),
/// as data: the binder's task does it and binds only if it succeeded.
#[derive(Debug, Clone, PartialEq)]
pub enum PreBind {
    /// VolumeBinding's: bind volumes to claims, ask for claims to be
    /// provisioned on the node, then wait until the claims are bound.
    Volumes(VolumeBindings),
}

/// A claim by namespace and name, with the UID the decision was made for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRef {
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
    /// The UID (a precondition of the writes).
    pub uid: Option<String>,
}

/// What VolumeBinding's PreBind does (upstream `BindPodVolumes`).
#[derive(Debug, Clone, PartialEq)]
pub struct VolumeBindings {
    /// Volumes pre-bound to a claim (claimRef set): PUT as they are, so a
    /// volume changed meanwhile fails the binding.
    pub volumes: Vec<PersistentVolume>,
    /// Claims to annotate with `volume.kubernetes.io/selected-node` for the
    /// provisioner.
    pub provision: Vec<ClaimRef>,
    /// Claims that must be bound before the pod is.
    pub wait_for: Vec<ClaimRef>,
    /// How long to wait (upstream `bindTimeoutSeconds`).
    pub timeout: Duration,
}

/// Says what to do through the API once the pod's node is chosen and
/// reserved, before the binding (upstream PreBind).
pub trait PreBindPlugin: Plugin {
    /// The work for binding `pod` to `node_name`; `Ok(None)` for none, an
    /// `Error` status when the reserved state is missing.
    fn pre_bind(
        &self,
        state: &CycleState,
        pod: &Pod,
        node_name: &str,
    ) -> Result<Option<PreBind>, Status>;
}

/// Upstream `helper.DefaultNormalizeScore`: scales scores so the highest is
/// `max`, optionally reversed (`max - score`), all `max` when `reverse` and
/// every score is zero.
pub fn default_normalize_score(max: i64, reverse: bool, scores: &mut [NodeScore<'_>]) {
    let highest = scores.iter().map(|s| s.score).max().unwrap_or(0).max(0);
    if highest == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| s.score = max);
        }
        return;
    }
    for s in scores.iter_mut() {
        let scaled = max * s.score / highest;
        s.score = if reverse { max - scaled } else { scaled };
    }
}
