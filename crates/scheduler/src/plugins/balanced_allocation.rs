//! NodeResourcesBalancedAllocation: prefers nodes whose cpu and memory
//! would be used in similar fractions: `(1 - std(fractions)) * 100`.
//! Best-effort pods (no requests) are not scored, like upstream.

use k8s_openapi::api::core::v1::Pod;

use super::names;
use crate::framework::{
    CycleState, NodeInfo, Plugin, ScorePlugin, Snapshot, Status, MAX_NODE_SCORE,
};
use crate::resources::{pod_requests, MissingRequests, ResourceKey};

const PRE_SCORE_KEY: &str = "PreScoreNodeResourcesBalancedAllocation";

/// The BalancedAllocation plugin.
#[derive(Debug, Clone)]
pub struct BalancedAllocation {
    resources: Vec<ResourceKey>,
}

impl Default for BalancedAllocation {
    fn default() -> Self {
        Self {
            resources: vec![ResourceKey::Cpu, ResourceKey::Memory],
        }
    }
}

/// Most resources scored on the stack; more spill to the heap.
const STACK: usize = 8;

impl Plugin for BalancedAllocation {
    fn name(&self) -> &'static str {
        names::NODE_RESOURCES_BALANCED_ALLOCATION
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

/// Upstream `balancedResourceScorer`.
pub fn balanced_score(requested: &[i64], allocatable: &[i64]) -> i64 {
    let mut stack = [0f64; STACK];
    let mut heap = Vec::new();
    let mut n = 0;
    for (r, a) in requested.iter().zip(allocatable).filter(|(_, a)| **a != 0) {
        let f = (*r as f64 / *a as f64).min(1.0);
        if n < STACK {
            stack[n] = f;
        } else {
            if heap.is_empty() {
                heap.extend_from_slice(&stack);
            }
            heap.push(f);
        }
        n += 1;
    }
    let fractions = if n <= STACK { &stack[..n] } else { &heap[..] };
    let std = match fractions {
        [a, b] => ((a - b) / 2.0).abs(),
        f if f.len() > 2 => {
            let mean = f.iter().sum::<f64>() / f.len() as f64;
            (f.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / f.len() as f64).sqrt()
        }
        _ => 0.0,
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

impl ScorePlugin for BalancedAllocation {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        _snapshot: &Snapshot,
        _nodes: &[&NodeInfo],
    ) -> Status {
        let req = match pod_requests(pod, MissingRequests::Zero) {
            Ok(r) => r,
            Err(e) => return Status::error(e.to_string()),
        };
        let per_resource: Vec<i64> = self.resources.iter().map(|k| req.amount(k)).collect();
        if per_resource.iter().all(|v| *v == 0) {
            return Status::skip();
        }
        state.write(PRE_SCORE_KEY, per_resource);
        Status::success()
    }

    fn score_nodes(
        &self,
        state: &CycleState,
        _pod: &Pod,
        nodes: &[&NodeInfo],
        out: &mut [i64],
    ) -> Result<(), Status> {
        state.score_each(PRE_SCORE_KEY, nodes, out, |req: &Vec<i64>, node| {
            self.score_node(req, node)
        })
    }
}

impl BalancedAllocation {
    fn score_node(&self, pod_req: &[i64], node: &NodeInfo) -> i64 {
        // On the stack for the usual few resources: this runs per node.
        let n = self.resources.len();
        let (mut req_buf, mut alloc_buf) = ([0i64; STACK], [0i64; STACK]);
        let (mut req_heap, mut alloc_heap) = (Vec::new(), Vec::new());
        let (requested, allocatable): (&mut [i64], &mut [i64]) = if n <= STACK {
            (&mut req_buf[..n], &mut alloc_buf[..n])
        } else {
            req_heap.resize(n, 0);
            alloc_heap.resize(n, 0);
            (&mut req_heap, &mut alloc_heap)
        };
        for (i, key) in self.resources.iter().enumerate() {
            let want = pod_req.get(i).copied().unwrap_or(0);
            if key.is_scalar() && want == 0 {
                continue;
            }
            allocatable[i] = node.allocatable().amount(key);
            requested[i] = node.requested().amount(key) + want;
        }
        balanced_score(requested, allocatable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skiff_client::testing::{node, pod};

    #[test]
    fn scores_like_upstream() {
        let ba = BalancedAllocation::default();
        let p = pod("p")
            .req_cpu("1")
            .req_mem("2000")
            .container("c1", "img")
            .req_cpu("2")
            .req_mem("3000")
            .build();
        let mut existing = NodeInfo::new(node("n3").cpu("10").mem("20000").build());
        existing.add_pod(pod("a").req_cpu("3").req_mem("0").build());
        let cases = [
            // 3000/4000=0.75 and 5000/10000=0.5 → std 0.125 → 87
            (NodeInfo::new(node("n1").cpu("4").mem("10000").build()), 87),
            // 0.5 and 0.5 → 100
            (NodeInfo::new(node("n2").cpu("6").mem("10000").build()), 100),
            // (3000+3000)/10000=0.6 and 5000/20000=0.25 → std 0.175 → 82
            (existing, 82),
            // over-committed fractions are capped at 1: 1 and 1 → 100
            (NodeInfo::new(node("n4").cpu("1").mem("1000").build()), 100),
        ];
        let mut state = CycleState::new();
        assert!(ba
            .pre_score(&mut state, &p, &Snapshot::default(), &[])
            .is_success());
        for (n, want) in cases {
            assert_eq!(ba.score(&state, &p, &n), Ok(want), "{}", n.name());
        }
    }

    #[test]
    fn best_effort_pods_are_skipped() {
        let s = BalancedAllocation::default().pre_score(
            &mut CycleState::new(),
            &pod("p").build(),
            &Snapshot::default(),
            &[],
        );
        assert!(s.is_skip());
    }

    #[test]
    fn std_over_three_resources() {
        // fractions 0.2, 0.4, 0.6 → mean 0.4, std sqrt(0.08/3)=0.1633 → 83
        assert_eq!(balanced_score(&[2, 4, 6], &[10, 10, 10]), 83);
        assert_eq!(balanced_score(&[5], &[10]), 100);
        assert_eq!(balanced_score(&[5, 5], &[0, 0]), 100);
    }
}
