//! Tests of the scheduling algorithm, with the default plugins and with
//! small test plugins.

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{NodeSelectorTerm, Pod};

use super::*;
use crate::framework::{Code, FilterPlugin, Plugin, ReservePlugin, ScorePlugin, MAX_NODE_SCORE};
use crate::plugins::default_framework;
use skiff_client::testing::{node, pod, req};

const CP: &str = "node-role.kubernetes.io/control-plane";

fn fit_message(fw: &mut Framework, p: &Pod, snap: &Snapshot) -> String {
    match fw.schedule_one(p, snap) {
        Err(ScheduleError::Unschedulable(e)) => e.to_string(),
        other => panic!("expected a FitError, got {other:?}"),
    }
}

#[test]
fn num_feasible_nodes_to_find_table() {
    let cases = [
        (0, 0, 0),
        (0, 50, 50),
        (0, 99, 99),
        (0, 100, 100),
        (0, 200, 100),  // 49% = 98 < 100
        (0, 1000, 420), // 50 - 8 = 42%
        (0, 5000, 500), // 50 - 40 = 10%
        (0, 6000, 300), // 50 - 48 = 2% → floor 5%
        (10, 500, 100), // 50 < minimum
        (10, 5000, 500),
        (100, 5000, 5000),
        (150, 5000, 5000), // clamped to 100%
    ];
    for (pct, n, want) in cases {
        assert_eq!(num_feasible_nodes_to_find(pct, n), want, "pct={pct} n={n}");
    }
}

#[test]
fn upstream_failed_scheduling_message() {
    let taints = || {
        vec![
            node("cp1").taint(CP, "", "NoSchedule").build(),
            node("cp2").taint(CP, "", "NoSchedule").build(),
        ]
    };
    let p = pod("web").req_cpu("2").build();
    // The pod asks for more than the node has at all: preemption cannot help.
    let mut nodes = taints();
    nodes.insert(0, node("small").cpu("1").build());
    assert_eq!(
        fit_message(&mut default_framework(), &p, &Snapshot::new(nodes, vec![])),
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint \
         {node-role.kubernetes.io/control-plane: }. preemption: 0/3 nodes are available: \
         3 Preemption is not helpful for scheduling.."
    );
    // The node is full: preemption could help if there were lower-priority pods.
    let mut nodes = taints();
    nodes.insert(0, node("full").cpu("2").build());
    let pods = vec![pod("x").node_name("full").req_cpu("1").build()];
    assert_eq!(
        fit_message(&mut default_framework(), &p, &Snapshot::new(nodes, pods)),
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint \
         {node-role.kubernetes.io/control-plane: }. preemption: 0/3 nodes are available: \
         1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.."
    );
}

#[test]
fn prefilter_restriction_and_rejection_messages() {
    let snap = Snapshot::new(
        vec![
            node("n1").unschedulable().build(),
            node("n2").build(),
            node("n3").build(),
        ],
        vec![],
    );
    let pinned = pod("p")
        .required_node_field("metadata.name", "In", "n1")
        .build();
    assert_eq!(
        fit_message(&mut default_framework(), &pinned, &snap),
        "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]. \
         preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
    );

    let mut conflict = pod("p").build();
    let term = NodeSelectorTerm {
        match_expressions: None,
        match_fields: Some(vec![
            req("metadata.name", "In", &["n1"]),
            req("metadata.name", "In", &["n2"]),
        ]),
    };
    conflict = skiff_client::testing::PodBuilder::from(conflict)
        .required_node_selector_term(term)
        .build();
    assert_eq!(
        fit_message(&mut default_framework(), &conflict, &snap),
        "0/3 nodes are available: pod affinity terms conflict. \
         preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."
    );
}

#[test]
fn preemption_never_message() {
    let snap = Snapshot::new(vec![node("n1").cpu("1").build()], vec![]);
    let p = pod("p").req_cpu("2").preemption_never().build();
    assert_eq!(
        fit_message(&mut default_framework(), &p, &snap),
        "0/1 nodes are available: 1 Insufficient cpu. not eligible due to preemptionPolicy=Never.."
    );
}

#[test]
fn errors() {
    let p = pod("p").build();
    assert_eq!(
        default_framework().schedule_one(&p, &Snapshot::default()),
        Err(ScheduleError::NoNodesAvailable)
    );
    assert_eq!(
        ScheduleError::NoNodesAvailable.to_string(),
        "no nodes available to schedule pods"
    );
    let snap = Snapshot::new(vec![node("n1").build()], vec![]);
    let bad = pod("p").req_mem("lots").build();
    let err = default_framework()
        .schedule_one(&bad, &snap)
        .expect_err("bad quantity");
    assert!(
        err.to_string().starts_with(
            "running PreFilter plugin \"NodeResourcesFit\": resource memory: quantities"
        ),
        "{err}"
    );
}

/// (name, nodes, existing pods, pod, expected node)
type ScoreCase = (
    &'static str,
    Vec<k8s_openapi::api::core::v1::Node>,
    Vec<Pod>,
    Pod,
    &'static str,
);

#[test]
fn picks_by_weighted_scores() {
    let cases: Vec<ScoreCase> = vec![
        (
            "least allocated",
            vec![node("busy").build(), node("idle").build()],
            vec![pod("x")
                .node_name("busy")
                .req_cpu("3")
                .req_mem("6Gi")
                .build()],
            pod("p").req_cpu("100m").req_mem("100Mi").build(),
            "idle",
        ),
        (
            "PreferNoSchedule taint (weight 3) beats load",
            vec![
                node("tainted")
                    .taint("spot", "", "PreferNoSchedule")
                    .build(),
                node("loaded").build(),
            ],
            vec![pod("x")
                .node_name("loaded")
                .req_cpu("2")
                .req_mem("4Gi")
                .build()],
            pod("p").req_cpu("100m").build(),
            "loaded",
        ),
        (
            "preferred node affinity",
            vec![node("a").build(), node("b").label("disk", "ssd").build()],
            vec![],
            pod("p")
                .preferred_node_term(1, vec![req("disk", "In", &["ssd"])])
                .build(),
            "b",
        ),
        (
            "image locality",
            vec![
                node("cold").build(),
                node("warm").image(&["app:v1"], 500 * 1024 * 1024).build(),
            ],
            vec![],
            pod("p").image("app:v1").build(),
            "warm",
        ),
        (
            "filters before scores",
            vec![
                node("roomy").label("zone", "b").build(),
                node("tight").label("zone", "a").cpu("1").build(),
            ],
            vec![],
            pod("p").node_selector("zone", "a").build(),
            "tight",
        ),
    ];
    for (name, nodes, pods, p, want) in cases {
        let snap = Snapshot::new(nodes, pods);
        let got = default_framework()
            .schedule_one(&p, &snap)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got.node, want, "{name}");
    }
}

#[test]
fn one_feasible_node_skips_scoring() {
    let snap = Snapshot::new(
        vec![
            node("n1").cpu("1").build(),
            node("n2").build(),
            node("n3").unschedulable().build(),
        ],
        vec![],
    );
    let got = default_framework()
        .schedule_one(&pod("p").req_cpu("2").build(), &snap)
        .expect("fits n2");
    assert_eq!(
        got,
        ScheduleResult {
            node: "n2".into(),
            evaluated: 3,
            feasible: 1
        }
    );
}

#[test]
fn ties_rotate() {
    let snap = Snapshot::new(vec![node("n1").build(), node("n2").build()], vec![]);
    let mut fw = default_framework();
    let picks: Vec<String> = (0..4)
        .map(|_| {
            fw.schedule_one(&pod("p").build(), &snap)
                .expect("fits")
                .node
        })
        .collect();
    assert_eq!(picks, ["n1", "n2", "n1", "n2"]);
}

#[derive(Debug)]
struct PassAll;
impl Plugin for PassAll {
    fn name(&self) -> &'static str {
        "PassAll"
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}
impl FilterPlugin for PassAll {
    fn filter(&self, _: &CycleState, _: &Pod, _: &NodeInfo) -> Status {
        Status::success()
    }
}

#[test]
fn adaptive_search_with_round_robin_start() {
    let nodes = (0..200).map(|i| node(&format!("n{i:03}")).build());
    let snap = Snapshot::new(nodes, vec![]);
    let mut fw = Framework::new(Registry::new().register(PassAll, 0));
    let p = pod("p").build();
    let first = fw.schedule_one(&p, &snap).expect("fits");
    // 200 nodes → 49% → below the floor of 100 feasible nodes.
    assert_eq!(
        first,
        ScheduleResult {
            node: "n000".into(),
            evaluated: 100,
            feasible: 100
        }
    );
    // The next search starts where the last one stopped; ties rotate.
    let second = fw.schedule_one(&p, &snap).expect("fits");
    assert_eq!(
        second,
        ScheduleResult {
            node: "n101".into(),
            evaluated: 100,
            feasible: 100
        }
    );
    let mut all =
        Framework::new(Registry::new().register(PassAll, 0)).with_percentage_of_nodes_to_score(100);
    assert_eq!(all.schedule_one(&p, &snap).expect("fits").evaluated, 200);
}

#[derive(Debug)]
struct BadScore;
impl Plugin for BadScore {
    fn name(&self) -> &'static str {
        "BadScore"
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}
impl ScorePlugin for BadScore {
    fn score_nodes(
        &self,
        _: &CycleState,
        _: &Pod,
        _: &[&NodeInfo],
        out: &mut [i64],
    ) -> Result<(), Status> {
        out.fill(MAX_NODE_SCORE + 1);
        Ok(())
    }
}

#[test]
fn out_of_range_scores_are_errors() {
    let snap = Snapshot::new(vec![node("n1").build(), node("n2").build()], vec![]);
    let mut fw = Framework::new(Registry::new().register(BadScore, 1));
    let err = fw
        .schedule_one(&pod("p").build(), &snap)
        .expect_err("invalid score");
    assert!(
        err.to_string().contains("returns an invalid score 101"),
        "{err}"
    );
}

#[derive(Debug)]
struct Recorder {
    name: &'static str,
    fail: bool,
    log: Arc<Mutex<Vec<String>>>,
}
impl Plugin for Recorder {
    fn name(&self) -> &'static str {
        self.name
    }
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        Some(self)
    }
}
impl ReservePlugin for Recorder {
    fn reserve(&self, _: &mut CycleState, _: &Pod, node: &str) -> Status {
        if let Ok(mut l) = self.log.lock() {
            l.push(format!("reserve {} {node}", self.name));
        }
        if self.fail {
            Status::error("no room")
        } else {
            Status::success()
        }
    }
    fn unreserve(&self, _: &mut CycleState, _: &Pod, node: &str) {
        if let Ok(mut l) = self.log.lock() {
            l.push(format!("unreserve {} {node}", self.name));
        }
    }
}

#[test]
fn reserve_failure_unreserves_in_reverse() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let rec = |name, fail| Recorder {
        name,
        fail,
        log: log.clone(),
    };
    let fw = Framework::new(
        Registry::new()
            .register(rec("A", false), 0)
            .register(rec("B", true), 0),
    );
    let s = fw.run_reserve_plugins(&mut CycleState::new(), &pod("p").build(), "n1");
    assert_eq!((s.code, s.plugin), (Code::Error, Some("B")));
    let got = log.lock().map(|l| l.clone()).unwrap_or_default();
    assert_eq!(
        got,
        [
            "reserve A n1",
            "reserve B n1",
            "unreserve B n1",
            "unreserve A n1"
        ]
    );
}

#[test]
fn default_registry_order() {
    assert_eq!(
        crate::plugins::default_registry().names(),
        [
            "NodeUnschedulable",
            "NodeName",
            "TaintToleration",
            "NodeAffinity",
            "NodePorts",
            "NodeResourcesFit",
            "VolumeBinding",
            "PodTopologySpread",
            "InterPodAffinity",
            "DefaultPreemption",
            "NodeResourcesBalancedAllocation",
            "ImageLocality",
        ]
    );
}

/// Upstream's search start moves on every cycle, so with
/// percentageOfNodesToScore sampling (5,000 nodes: 10%, 500 a cycle)
/// identical pods still spread over the whole cluster rather than the
/// first window.
#[test]
fn sampling_spreads_over_every_node_at_5000_nodes() {
    let nodes: Vec<_> = (0..5000)
        .map(|i| {
            node(&format!("n{i:04}"))
                .cpu("32")
                .mem("256Gi")
                .pods(110)
                .build()
        })
        .collect();
    let mut snap = Snapshot::new(nodes, Vec::new());
    let mut fw = default_framework();
    let mut per_node = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..2000 {
        let p = pod(&format!("p{i}"))
            .req_cpu("100m")
            .req_mem("100Mi")
            .build();
        let result = fw.schedule_one(&p, &snap).expect("fits");
        assert_eq!(result.evaluated, 500, "the adaptive sample at 5,000 nodes");
        snap.assume(p, &result.node).expect("assume");
        *per_node.entry(result.node).or_default() += 1;
    }
    // Scores at these sizes tie between empty nodes and nodes with a pod
    // (integer scores), so ties decide, as upstream's random pick does:
    // not one pod per node, but far more nodes than one sampled window.
    assert!(
        per_node.len() > 1200,
        "2,000 pods on {} nodes",
        per_node.len()
    );
    assert!(
        per_node.values().all(|&n| n <= 3),
        "{:?}",
        per_node.values().max()
    );
    let mut more = 0;
    for i in 2000..10000 {
        let p = pod(&format!("p{i}"))
            .req_cpu("100m")
            .req_mem("100Mi")
            .build();
        let result = fw.schedule_one(&p, &snap).expect("fits");
        snap.assume(p, &result.node).expect("assume");
        *per_node.entry(result.node).or_default() += 1;
        more += 1;
    }
    assert_eq!(more, 8000);
    assert!(
        per_node.len() >= 4500,
        "10,000 pods on {} nodes",
        per_node.len()
    );
    assert!(
        per_node.values().all(|&n| n <= 6),
        "{:?}",
        per_node.values().max()
    );
}
