//! NodeResourcesFit: the pod's requests must fit the node's allocatable
//! resources minus what its pods request, and the pod count must fit;
//! scores with the LeastAllocated strategy (cpu and memory, weight 1 each).

use k8s_openapi::api::core::v1::Pod;

use super::names;
use crate::framework::{
    CycleState, FilterPlugin, NodeInfo, Plugin, PreFilterPlugin, PreFilterResult, ScorePlugin,
    Snapshot, Status, MAX_NODE_SCORE,
};
use crate::resources::{
    pod_requests, MissingRequests, Resource, ResourceKey, CPU, EPHEMERAL_STORAGE, MEMORY,
};

const PRE_FILTER_KEY: &str = "PreFilterNodeResourcesFit";
const PRE_SCORE_KEY: &str = "PreScoreNodeResourcesFit";

/// The NodeResourcesFit plugin with the LeastAllocated scoring strategy.
#[derive(Debug, Clone)]
pub struct NodeResourcesFit {
    /// Scored resources and their weights.
    resources: Vec<(ResourceKey, i64)>,
}

impl Default for NodeResourcesFit {
    fn default() -> Self {
        Self {
            resources: vec![(ResourceKey::Cpu, 1), (ResourceKey::Memory, 1)],
        }
    }
}

impl NodeResourcesFit {
    /// LeastAllocated over the pod's (non-zero defaulted) requests `req`.
    fn least_allocated(&self, req: &Resource, node: &NodeInfo) -> i64 {
        let (mut total, mut weights) = (0, 0);
        for (key, weight) in &self.resources {
            let pod_req = req.amount(key);
            if key.is_scalar() && pod_req == 0 {
                continue;
            }
            let alloc = node.allocatable().amount(key);
            if alloc == 0 {
                continue;
            }
            let in_use = match key {
                ResourceKey::Cpu | ResourceKey::Memory => node.non_zero_requested().amount(key),
                _ => node.requested().amount(key),
            };
            total += least_requested_score(in_use + pod_req, alloc) * weight;
            weights += weight;
        }
        if weights == 0 {
            0
        } else {
            total / weights
        }
    }
}

impl Plugin for NodeResourcesFit {
    fn name(&self) -> &'static str {
        names::NODE_RESOURCES_FIT
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

/// One resource the node is short of (upstream `InsufficientResource`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsufficientResource {
    /// `Insufficient cpu`, `Too many pods`, ...
    pub reason: String,
    /// The pod's request alone exceeds the node's allocatable: preemption
    /// cannot help.
    pub unresolvable: bool,
}

/// Upstream `fitsRequest`: what the node lacks for a pod requesting `req`.
pub fn fits_request(req: &Resource, node: &NodeInfo) -> Vec<InsufficientResource> {
    let mut out = Vec::new();
    let alloc = node.allocatable();
    let used = node.requested();
    let pods = i64::try_from(node.pods().len()).unwrap_or(i64::MAX);
    if pods + 1 > alloc.allowed_pod_number {
        out.push(InsufficientResource {
            reason: "Too many pods".into(),
            unresolvable: false,
        });
    }
    if req.is_empty_request() {
        return out;
    }
    let mut check = |name: &str, want: i64, have: i64, in_use: i64| {
        if want > 0 && want > have - in_use {
            out.push(InsufficientResource {
                reason: format!("Insufficient {name}"),
                unresolvable: want > have,
            });
        }
    };
    check(CPU, req.milli_cpu, alloc.milli_cpu, used.milli_cpu);
    check(MEMORY, req.memory, alloc.memory, used.memory);
    check(
        EPHEMERAL_STORAGE,
        req.ephemeral_storage,
        alloc.ephemeral_storage,
        used.ephemeral_storage,
    );
    for (name, want) in &req.scalar {
        check(name, *want, alloc.get(name), used.get(name));
    }
    out
}

impl PreFilterPlugin for NodeResourcesFit {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        _snapshot: &Snapshot,
    ) -> Result<PreFilterResult, Status> {
        let req =
            pod_requests(pod, MissingRequests::Zero).map_err(|e| Status::error(e.to_string()))?;
        state.write(PRE_FILTER_KEY, req);
        Ok(PreFilterResult::AllNodes)
    }
}

impl FilterPlugin for NodeResourcesFit {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let req: &Resource = match state.require(PRE_FILTER_KEY) {
            Ok(r) => r,
            Err(s) => return s,
        };
        let insufficient = fits_request(req, node);
        if insufficient.is_empty() {
            return Status::success();
        }
        let code = if insufficient.iter().any(|i| i.unresolvable) {
            crate::framework::Code::UnschedulableAndUnresolvable
        } else {
            crate::framework::Code::Unschedulable
        };
        Status::with_reasons(code, insufficient.into_iter().map(|i| i.reason).collect())
    }
}

/// `(allocatable - requested) * 100 / allocatable`, 0 when over-committed.
fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

impl ScorePlugin for NodeResourcesFit {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        _snapshot: &Snapshot,
        _nodes: &[&NodeInfo],
    ) -> Status {
        match pod_requests(pod, MissingRequests::NonZeroDefaults) {
            Ok(req) => {
                state.write(PRE_SCORE_KEY, req);
                Status::success()
            }
            Err(e) => Status::error(e.to_string()),
        }
    }

    fn score_nodes(
        &self,
        state: &CycleState,
        _pod: &Pod,
        nodes: &[&NodeInfo],
        out: &mut [i64],
    ) -> Result<(), Status> {
        state.score_each(PRE_SCORE_KEY, nodes, out, |req: &Resource, node| {
            self.least_allocated(req, node)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use skiff_client::testing::{node, pod};

    fn filter(p: &Pod, n: &NodeInfo) -> Status {
        let mut state = CycleState::new();
        NodeResourcesFit::default()
            .pre_filter(&mut state, p, &Snapshot::default())
            .expect("prefilter");
        NodeResourcesFit::default().filter(&state, p, n)
    }

    #[test]
    fn filter_cases() {
        let mut busy = NodeInfo::new(node("n").cpu("2").mem("2Gi").pods(2).build());
        busy.add_pod(pod("a").req_cpu("1500m").req_mem("1Gi").build());
        let full = {
            let mut n = NodeInfo::new(node("n").pods(1).build());
            n.add_pod(pod("a").build());
            n
        };
        let cases: Vec<(&str, Pod, &NodeInfo, Code, Vec<&str>)> = vec![
            (
                "fits",
                pod("p").req_cpu("500m").req_mem("1Gi").build(),
                &busy,
                Code::Success,
                vec![],
            ),
            (
                "cpu",
                pod("p").req_cpu("600m").build(),
                &busy,
                Code::Unschedulable,
                vec!["Insufficient cpu"],
            ),
            (
                "cpu and memory",
                pod("p").req_cpu("1").req_mem("2Gi").build(),
                &busy,
                Code::Unschedulable,
                vec!["Insufficient cpu", "Insufficient memory"],
            ),
            (
                "larger than the node",
                pod("p").req_cpu("3").build(),
                &busy,
                Code::UnschedulableAndUnresolvable,
                vec!["Insufficient cpu"],
            ),
            (
                "too many pods",
                pod("p").build(),
                &full,
                Code::Unschedulable,
                vec!["Too many pods"],
            ),
            (
                "extended resource",
                pod("p").req("example.com/gpu", "1").build(),
                &busy,
                Code::UnschedulableAndUnresolvable,
                vec!["Insufficient example.com/gpu"],
            ),
            (
                "init container max counts",
                pod("p")
                    .req_cpu("100m")
                    .init_container("i", "1", "")
                    .build(),
                &busy,
                Code::Unschedulable,
                vec!["Insufficient cpu"],
            ),
            (
                "overhead counts",
                pod("p").req_cpu("400m").overhead("200m", "0").build(),
                &busy,
                Code::Unschedulable,
                vec!["Insufficient cpu"],
            ),
        ];
        for (name, p, n, code, reasons) in cases {
            let s = filter(&p, n);
            assert_eq!(s.code, code, "{name}");
            assert_eq!(s.reasons, reasons, "{name}");
        }
    }

    #[test]
    fn invalid_quantity_is_an_error() {
        let p = pod("p").req_cpu("a lot").build();
        let s = NodeResourcesFit::default().pre_filter(
            &mut CycleState::new(),
            &p,
            &Snapshot::default(),
        );
        assert!(
            matches!(
                s,
                Err(Status {
                    code: Code::Error,
                    ..
                })
            ),
            "{s:?}"
        );
    }

    #[test]
    fn least_allocated_scores() {
        // Upstream least_allocated_test "nothing scheduled, resources requested, differently sized nodes":
        // cpu (4000-3000)*100/4000=25, memory (10000-5000)*100/10000=50 → 37;
        // cpu (6000-3000)*100/6000=50, memory (10000-5000)*100/10000=50 → 50.
        let p = pod("p")
            .req_cpu("1")
            .req_mem("2000")
            .container("c1", "img")
            .req_cpu("2")
            .req_mem("3000")
            .build();
        let n1 = NodeInfo::new(node("n1").cpu("4").mem("10000").build());
        let n2 = NodeInfo::new(node("n2").cpu("6").mem("10000").build());
        let mut state = CycleState::new();
        let fit = NodeResourcesFit::default();
        assert!(fit
            .pre_score(&mut state, &p, &Snapshot::default(), &[])
            .is_success());
        assert_eq!(fit.score(&state, &p, &n1), Ok(37));
        assert_eq!(fit.score(&state, &p, &n2), Ok(50));
        // Best-effort pods count as 100m / 200Mi; existing best-effort pods too.
        let mut n3 = NodeInfo::new(node("n3").cpu("1").mem("1Gi").build());
        n3.add_pod(pod("be").build());
        let be = pod("p").build();
        assert!(fit
            .pre_score(&mut state, &be, &Snapshot::default(), &[])
            .is_success());
        // cpu (1000-200)*100/1000=80, memory (1024-400)*100/1024=60 → 70.
        assert_eq!(fit.score(&state, &be, &n3), Ok(70));
    }
}
