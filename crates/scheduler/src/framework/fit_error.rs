//! Why a pod fits no node, in the words users grep for.
//!
//! This module owns [`FitError`] and its [`Diagnosis`]: the per-node
//! statuses of one failed attempt and the PreFilter/PostFilter messages,
//! rendered exactly like upstream's FailedScheduling message, e.g.
//! `0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated
//! taint {node-role.kubernetes.io/control-plane: }. preemption: 0/3 nodes are
//! available: 3 Preemption is not helpful for scheduling.`

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::{Code, Status};

/// Statuses of the nodes an attempt looked at, plus one status standing in
/// for every node it did not (upstream `NodeToStatus`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeToStatus {
    statuses: BTreeMap<String, Status>,
    absent: Status,
}

impl Default for NodeToStatus {
    fn default() -> Self {
        Self {
            statuses: BTreeMap::new(),
            absent: Status::with_reasons(Code::UnschedulableAndUnresolvable, Vec::new()),
        }
    }
}

impl NodeToStatus {
    /// Records a node's status.
    pub fn set(&mut self, node: impl Into<String>, status: Status) {
        self.statuses.insert(node.into(), status);
    }

    /// A node's status, or the absent-nodes status.
    pub fn get(&self, node: &str) -> &Status {
        self.statuses.get(node).unwrap_or(&self.absent)
    }

    /// Sets the status of nodes without an entry.
    pub fn set_absent_nodes_status(&mut self, status: Status) {
        self.absent = status;
    }

    /// The status of nodes without an entry.
    pub fn absent_nodes_status(&self) -> &Status {
        &self.absent
    }

    /// Number of nodes with an entry.
    pub fn len(&self) -> usize {
        self.statuses.len()
    }

    /// True when no node has an entry.
    pub fn is_empty(&self) -> bool {
        self.statuses.is_empty()
    }

    /// Entries by node name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Status)> {
        self.statuses.iter().map(|(k, v)| (k.as_str(), v))
    }
}

/// What went wrong in one attempt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnosis {
    /// Per-node statuses.
    pub node_to_status: NodeToStatus,
    /// Plugins that rejected the pod somewhere (the queue requeues it when
    /// an event concerning one of them happens).
    pub unschedulable_plugins: BTreeSet<&'static str>,
    /// The PreFilter rejection message, when PreFilter rejected the pod.
    pub pre_filter_msg: String,
    /// The PostFilter (preemption) message.
    pub post_filter_msg: String,
}

/// No node fits the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FitError {
    /// The pod, `namespace/name`.
    pub pod: String,
    /// Nodes in the snapshot.
    pub num_all_nodes: usize,
    /// The details.
    pub diagnosis: Diagnosis,
}

impl FitError {
    /// The reasons histogram, `"<count> <reason>"` sorted as strings (the
    /// order upstream's `sort.Strings` gives).
    pub fn reason_histogram(&self) -> Vec<String> {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        let nts = &self.diagnosis.node_to_status;
        for (_, status) in nts.iter() {
            for r in &status.reasons {
                *counts.entry(r).or_default() += 1;
            }
        }
        if nts.len() < self.num_all_nodes {
            let absent = self.num_all_nodes - nts.len();
            for r in &nts.absent_nodes_status().reasons {
                *counts.entry(r).or_default() += absent;
            }
        }
        let mut out: Vec<String> = counts
            .into_iter()
            .map(|(r, n)| format!("{n} {r}"))
            .collect();
        out.sort();
        out
    }
}

impl fmt::Display for FitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0/{} nodes are available:", self.num_all_nodes)?;
        let d = &self.diagnosis;
        if !d.pre_filter_msg.is_empty() {
            write!(f, " {}.", d.pre_filter_msg)?;
        } else {
            let histogram = self.reason_histogram();
            if !histogram.is_empty() {
                write!(f, " {}.", histogram.join(", "))?;
            }
        }
        if !d.post_filter_msg.is_empty() {
            write!(f, " {}.", d.post_filter_msg)?;
        }
        Ok(())
    }
}

impl std::error::Error for FitError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn fit_error(n: usize, statuses: &[(&str, Status)]) -> FitError {
        let mut d = Diagnosis::default();
        for (node, s) in statuses {
            d.node_to_status.set(*node, s.clone());
        }
        FitError {
            pod: "default/p".into(),
            num_all_nodes: n,
            diagnosis: d,
        }
    }

    #[test]
    fn renders_upstream_message() {
        let taint = "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }";
        let mut e = fit_error(
            3,
            &[
                ("n1", Status::unschedulable("Insufficient cpu")),
                ("n2", Status::unresolvable(taint)),
                ("n3", Status::unresolvable(taint)),
            ],
        );
        e.diagnosis.post_filter_msg =
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
                .into();
        assert_eq!(
            e.to_string(),
            format!(
                "0/3 nodes are available: 1 Insufficient cpu, 2 {taint}. preemption: 0/3 nodes are \
                 available: 3 Preemption is not helpful for scheduling.."
            )
        );
    }

    #[test]
    fn counts_multiple_reasons_and_sorts_as_strings() {
        let both = Status::with_reasons(
            Code::Unschedulable,
            vec!["Insufficient cpu".into(), "Insufficient memory".into()],
        );
        let mut statuses: Vec<(String, Status)> =
            (0..10).map(|i| (format!("a{i}"), both.clone())).collect();
        statuses.push(("b".into(), Status::unschedulable("Too many pods")));
        statuses.push(("c".into(), Status::unschedulable("Too many pods")));
        let refs: Vec<(&str, Status)> = statuses
            .iter()
            .map(|(n, s)| (n.as_str(), s.clone()))
            .collect();
        let e = fit_error(12, &refs);
        // "10 ..." sorts before "2 ..." byte-wise, as in Go.
        assert_eq!(
            e.to_string(),
            "0/12 nodes are available: 10 Insufficient cpu, 10 Insufficient memory, 2 Too many pods."
        );
    }

    #[test]
    fn prefilter_message_replaces_histogram_and_absent_nodes_count() {
        let mut e = fit_error(2, &[]);
        e.diagnosis.pre_filter_msg = "pod affinity terms conflict".into();
        e.diagnosis
            .node_to_status
            .set_absent_nodes_status(Status::unresolvable("pod affinity terms conflict"));
        assert_eq!(
            e.to_string(),
            "0/2 nodes are available: pod affinity terms conflict."
        );

        let mut e = fit_error(
            3,
            &[("n1", Status::unresolvable("node(s) were unschedulable"))],
        );
        e.diagnosis
            .node_to_status
            .set_absent_nodes_status(Status::unresolvable(
                "node(s) didn't satisfy plugin(s) [NodeAffinity]",
            ));
        assert_eq!(
            e.to_string(),
            "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]."
        );
    }
}
