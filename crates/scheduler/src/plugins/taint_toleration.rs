//! TaintToleration: filters nodes with untolerated NoSchedule/NoExecute
//! taints and prefers nodes with fewer untolerated PreferNoSchedule taints.

use k8s_openapi::api::core::v1::{Pod, Taint, Toleration};

use super::names;
use crate::framework::{
    default_normalize_score, CycleState, FilterPlugin, NodeInfo, NodeScore, Plugin, ScorePlugin,
    Snapshot, Status, MAX_NODE_SCORE,
};

const PRE_SCORE_KEY: &str = "PreScoreTaintToleration";

/// Upstream `Toleration.ToleratesTaint`.
pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    fn set(s: &Option<String>) -> Option<&str> {
        s.as_deref().filter(|v| !v.is_empty())
    }
    if set(&t.effect).is_some_and(|e| e != taint.effect) {
        return false;
    }
    if set(&t.key).is_some_and(|k| k != taint.key) {
        return false;
    }
    match t.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => {
            t.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default()
        }
        "Exists" => true,
        _ => false,
    }
}

/// The pod's tolerations.
pub fn pod_tolerations(pod: &Pod) -> &[Toleration] {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default()
}

/// The first taint passing `filter` that no toleration tolerates
/// (upstream `FindMatchingUntoleratedTaint`).
pub fn find_untolerated_taint<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    filter: impl Fn(&Taint) -> bool,
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| filter(t))
        .find(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
}

/// NoSchedule and NoExecute taints keep pods off a node.
pub fn is_do_not_schedule(taint: &Taint) -> bool {
    taint.effect == "NoSchedule" || taint.effect == "NoExecute"
}

/// The TaintToleration plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaintToleration;

impl Plugin for TaintToleration {
    fn name(&self) -> &'static str {
        names::TAINT_TOLERATION
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl FilterPlugin for TaintToleration {
    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        match find_untolerated_taint(node.taints(), pod_tolerations(pod), is_do_not_schedule) {
            None => Status::success(),
            Some(t) => Status::unresolvable(format!(
                "node(s) had untolerated taint {{{}: {}}}",
                t.key,
                t.value.as_deref().unwrap_or_default()
            )),
        }
    }
}

/// How many PreferNoSchedule taints of the node the tolerations miss.
fn intolerable_prefer_no_schedule(tolerations: &[Toleration], node: &NodeInfo) -> i64 {
    let intolerable = node
        .taints()
        .iter()
        .filter(|taint| taint.effect == "PreferNoSchedule")
        .filter(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
        .count();
    i64::try_from(intolerable).unwrap_or(i64::MAX)
}

impl ScorePlugin for TaintToleration {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        _snapshot: &Snapshot,
        _nodes: &[&NodeInfo],
    ) -> Status {
        let prefer: Vec<Toleration> = pod_tolerations(pod)
            .iter()
            .filter(|t| {
                matches!(
                    t.effect.as_deref(),
                    None | Some("") | Some("PreferNoSchedule")
                )
            })
            .cloned()
            .collect();
        state.write(PRE_SCORE_KEY, prefer);
        Status::success()
    }

    fn score_nodes(
        &self,
        state: &CycleState,
        _pod: &Pod,
        nodes: &[&NodeInfo],
        out: &mut [i64],
    ) -> Result<(), Status> {
        state.score_each(PRE_SCORE_KEY, nodes, out, |t: &Vec<Toleration>, node| {
            intolerable_prefer_no_schedule(t, node)
        })
    }

    fn normalize_scores(
        &self,
        _state: &CycleState,
        _pod: &Pod,
        scores: &mut [NodeScore],
    ) -> Status {
        default_normalize_score(MAX_NODE_SCORE, true, scores);
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use skiff_client::testing::{node, pod};

    #[test]
    fn toleration_matching() {
        let taint = |k: &str, v: &str, e: &str| Taint {
            key: k.into(),
            value: (!v.is_empty()).then(|| v.into()),
            effect: e.into(),
            time_added: None,
        };
        let tol = |k: &str, op: &str, v: &str, e: &str| {
            let p = pod("p").toleration(k, op, v, e).build();
            pod_tolerations(&p)[0].clone()
        };
        let cases = [
            (
                tol("k", "Equal", "v", "NoSchedule"),
                taint("k", "v", "NoSchedule"),
                true,
            ),
            (tol("k", "", "v", ""), taint("k", "v", "NoExecute"), true),
            (
                tol("k", "Equal", "v", "NoSchedule"),
                taint("k", "w", "NoSchedule"),
                false,
            ),
            (
                tol("k", "Equal", "v", "NoExecute"),
                taint("k", "v", "NoSchedule"),
                false,
            ),
            (
                tol("k", "Exists", "", ""),
                taint("k", "anything", "NoSchedule"),
                true,
            ),
            (
                tol("", "Exists", "", ""),
                taint("any", "", "NoExecute"),
                true,
            ),
            (
                tol("k", "Equal", "", ""),
                taint("k", "", "NoSchedule"),
                true,
            ),
            (
                tol("other", "Exists", "", ""),
                taint("k", "", "NoSchedule"),
                false,
            ),
            (
                tol("k", "Bogus", "", ""),
                taint("k", "", "NoSchedule"),
                false,
            ),
        ];
        for (t, taint, want) in cases {
            assert_eq!(tolerates(&t, &taint), want, "{t:?} vs {taint:?}");
        }
    }

    #[test]
    fn filter() {
        let cp = "node-role.kubernetes.io/control-plane";
        let cases = [
            ("no taints", pod("p").build(), node("n").build(), None),
            (
                "untolerated",
                pod("p").build(),
                node("n").taint(cp, "", "NoSchedule").build(),
                Some("node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }"),
            ),
            (
                "value shown",
                pod("p").build(),
                node("n").taint("dedicated", "gpu", "NoExecute").build(),
                Some("node(s) had untolerated taint {dedicated: gpu}"),
            ),
            (
                "prefer is not filtered",
                pod("p").build(),
                node("n").taint("k", "", "PreferNoSchedule").build(),
                None,
            ),
            (
                "tolerated",
                pod("p").toleration(cp, "Exists", "", "NoSchedule").build(),
                node("n").taint(cp, "", "NoSchedule").build(),
                None,
            ),
            (
                "first untolerated reported",
                pod("p").toleration("a", "Exists", "", "").build(),
                node("n")
                    .taint("a", "", "NoSchedule")
                    .taint("b", "1", "NoSchedule")
                    .build(),
                Some("node(s) had untolerated taint {b: 1}"),
            ),
        ];
        for (name, p, n, want) in cases {
            let s = TaintToleration.filter(&CycleState::new(), &p, &NodeInfo::new(n));
            match want {
                None => assert!(s.is_success(), "{name}: {s:?}"),
                Some(r) => {
                    assert_eq!(s.code, Code::UnschedulableAndUnresolvable, "{name}");
                    assert_eq!(s.reasons, vec![r.to_string()], "{name}");
                }
            }
        }
    }

    #[test]
    fn score_prefers_fewer_intolerable_taints() {
        let p = pod("p")
            .toleration("ok", "Exists", "", "PreferNoSchedule")
            .build();
        let nodes = [
            NodeInfo::new(node("clean").build()),
            NodeInfo::new(
                node("tolerated")
                    .taint("ok", "", "PreferNoSchedule")
                    .build(),
            ),
            NodeInfo::new(node("one").taint("a", "", "PreferNoSchedule").build()),
            NodeInfo::new(
                node("two")
                    .taint("a", "", "PreferNoSchedule")
                    .taint("b", "", "PreferNoSchedule")
                    .build(),
            ),
        ];
        let mut state = CycleState::new();
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        assert!(TaintToleration
            .pre_score(&mut state, &p, &Snapshot::default(), &refs)
            .is_success());
        let mut scores: Vec<NodeScore> = nodes
            .iter()
            .map(|n| NodeScore {
                name: n.name(),
                score: TaintToleration.score(&state, &p, n).expect("score"),
            })
            .collect();
        assert_eq!(
            scores.iter().map(|s| s.score).collect::<Vec<_>>(),
            vec![0, 0, 1, 2]
        );
        TaintToleration.normalize_scores(&state, &p, &mut scores);
        assert_eq!(
            scores.iter().map(|s| s.score).collect::<Vec<_>>(),
            vec![100, 100, 50, 0]
        );
    }
}
