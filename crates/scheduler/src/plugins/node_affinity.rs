//! NodeAffinity: `spec.nodeSelector` and required node affinity filter
//! nodes; preferred node affinity scores them.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

use super::names;
use crate::framework::{
    default_normalize_score, CycleState, FilterPlugin, NodeInfo, NodeScore, Plugin,
    PreFilterPlugin, PreFilterResult, ScorePlugin, Snapshot, Status, MAX_NODE_SCORE,
};
use skiff_client::selectors::{PreferredTerms, RequiredNodeAffinity};

/// Upstream `ErrReasonPod`.
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";
/// Upstream `errReasonConflict`.
pub const ERR_REASON_CONFLICT: &str = "pod affinity terms conflict";

const PRE_FILTER_KEY: &str = "PreFilterNodeAffinity";
const PRE_SCORE_KEY: &str = "PreScoreNodeAffinity";

/// The NodeAffinity plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeAffinity;

impl Plugin for NodeAffinity {
    fn name(&self) -> &'static str {
        names::NODE_AFFINITY
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

/// Node names a required term pins the pod to through `matchFields`
/// `metadata.name In [..]`; `None` when some term allows any node.
fn pinned_node_names(pod: &Pod) -> Option<BTreeSet<String>> {
    let terms = &pod
        .spec
        .as_ref()?
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    if terms.is_empty() {
        return None;
    }
    let mut union = BTreeSet::new();
    for term in terms {
        let mut term_names: Option<BTreeSet<String>> = None;
        for r in term.match_fields.iter().flatten() {
            if r.key == "metadata.name" && r.operator == "In" {
                let values: BTreeSet<String> = r.values.iter().flatten().cloned().collect();
                term_names = Some(match term_names {
                    Some(prev) => prev.intersection(&values).cloned().collect(),
                    None => values,
                });
            }
        }
        // A term without a node-name constraint allows every node.
        union.extend(term_names?);
    }
    Some(union)
}

impl PreFilterPlugin for NodeAffinity {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        _snapshot: &Snapshot,
    ) -> Result<PreFilterResult, Status> {
        let required = RequiredNodeAffinity::of(pod);
        if required.is_empty() {
            return Ok(PreFilterResult::Skip);
        }
        state.write(PRE_FILTER_KEY, required);
        match pinned_node_names(pod) {
            Some(names) if names.is_empty() => Err(Status::unresolvable(ERR_REASON_CONFLICT)),
            Some(names) => Ok(PreFilterResult::Nodes(names)),
            None => Ok(PreFilterResult::AllNodes),
        }
    }
}

impl FilterPlugin for NodeAffinity {
    fn filter(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        let computed;
        let required = match state.read::<RequiredNodeAffinity>(PRE_FILTER_KEY) {
            Some(r) => r,
            None => {
                computed = RequiredNodeAffinity::of(pod);
                &computed
            }
        };
        if required.matches(node.node()) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_POD)
        }
    }
}

impl ScorePlugin for NodeAffinity {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        _snapshot: &Snapshot,
        _nodes: &[&NodeInfo],
    ) -> Status {
        match PreferredTerms::of(pod) {
            Ok(terms) if terms.is_empty() => Status::skip(),
            Ok(terms) => {
                state.write(PRE_SCORE_KEY, terms);
                Status::success()
            }
            Err(e) => Status::error(format!("parsing pod's preferred node affinity: {e}")),
        }
    }

    fn score_nodes(
        &self,
        state: &CycleState,
        _pod: &Pod,
        nodes: &[&NodeInfo],
        out: &mut [i64],
    ) -> Result<(), Status> {
        state.score_each(PRE_SCORE_KEY, nodes, out, |terms: &PreferredTerms, node| {
            terms.score(node.node())
        })
    }

    fn normalize_scores(
        &self,
        _state: &CycleState,
        _pod: &Pod,
        scores: &mut [NodeScore],
    ) -> Status {
        default_normalize_score(MAX_NODE_SCORE, false, scores);
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use skiff_client::testing::{node, pod, req};

    #[test]
    fn pre_filter_results() {
        let set = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let cases = [
            (
                "no constraints",
                pod("p").build(),
                Ok(PreFilterResult::Skip),
            ),
            (
                "selector only",
                pod("p").node_selector("a", "b").build(),
                Ok(PreFilterResult::AllNodes),
            ),
            (
                "pinned to a node",
                pod("p")
                    .required_node_field("metadata.name", "In", "n1")
                    .build(),
                Ok(PreFilterResult::Nodes(set(&["n1"]))),
            ),
            (
                "terms ORed: union",
                pod("p")
                    .required_node_field("metadata.name", "In", "n1")
                    .required_node_field("metadata.name", "In", "n2")
                    .build(),
                Ok(PreFilterResult::Nodes(set(&["n1", "n2"]))),
            ),
            (
                "a label-only term allows all",
                pod("p")
                    .required_node_field("metadata.name", "In", "n1")
                    .required_node_term(vec![req("zone", "Exists", &[])])
                    .build(),
                Ok(PreFilterResult::AllNodes),
            ),
        ];
        for (name, p, want) in cases {
            let got = NodeAffinity.pre_filter(&mut CycleState::new(), &p, &Snapshot::default());
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn filter() {
        let n = NodeInfo::new(node("n1").label("zone", "a").label("gen", "3").build());
        let cases = [
            ("match", pod("p").node_selector("zone", "a").build(), true),
            (
                "selector miss",
                pod("p").node_selector("zone", "b").build(),
                false,
            ),
            (
                "Gt",
                pod("p")
                    .required_node_term(vec![req("gen", "Gt", &["2"])])
                    .build(),
                true,
            ),
            (
                "Lt",
                pod("p")
                    .required_node_term(vec![req("gen", "Lt", &["2"])])
                    .build(),
                false,
            ),
            (
                "DoesNotExist",
                pod("p")
                    .required_node_term(vec![req("gpu", "DoesNotExist", &[])])
                    .build(),
                true,
            ),
            (
                "NotIn",
                pod("p")
                    .required_node_term(vec![req("zone", "NotIn", &["a"])])
                    .build(),
                false,
            ),
        ];
        for (name, p, fits) in cases {
            let mut state = CycleState::new();
            let _ = NodeAffinity.pre_filter(&mut state, &p, &Snapshot::default());
            let s = NodeAffinity.filter(&state, &p, &n);
            if fits {
                assert!(s.is_success(), "{name}: {s:?}");
            } else {
                assert_eq!(
                    (s.code, s.message()),
                    (Code::UnschedulableAndUnresolvable, ERR_REASON_POD.into()),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn score_sums_matching_weights_and_normalizes() {
        let p = pod("p")
            .preferred_node_term(10, vec![req("zone", "In", &["a"])])
            .preferred_node_term(30, vec![req("ssd", "Exists", &[])])
            .preferred_node_term(0, vec![req("zone", "Exists", &[])])
            .build();
        let nodes = [
            NodeInfo::new(node("none").build()),
            NodeInfo::new(node("zone").label("zone", "a").build()),
            NodeInfo::new(node("both").label("zone", "a").label("ssd", "1").build()),
        ];
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        let mut state = CycleState::new();
        assert!(NodeAffinity
            .pre_score(&mut state, &p, &Snapshot::default(), &refs)
            .is_success());
        let mut scores: Vec<NodeScore> = nodes
            .iter()
            .map(|n| NodeScore {
                name: n.name(),
                score: NodeAffinity.score(&state, &p, n).expect("score"),
            })
            .collect();
        assert_eq!(
            scores.iter().map(|s| s.score).collect::<Vec<_>>(),
            vec![0, 10, 40]
        );
        NodeAffinity.normalize_scores(&state, &p, &mut scores);
        assert_eq!(
            scores.iter().map(|s| s.score).collect::<Vec<_>>(),
            vec![0, 25, 100]
        );
        let plain = pod("p").build();
        assert!(NodeAffinity
            .pre_score(&mut CycleState::new(), &plain, &Snapshot::default(), &refs)
            .is_skip());
    }
}
