//! Table tests for PodTopologySpread filtering.

use k8s_openapi::api::core::v1::Pod;

use super::*;
use crate::framework::Code;
use skiff_client::testing::{label_selector, node, pod};

const ZONE: &str = "zone";

fn web(name: &str, on: &str) -> Pod {
    pod(name).label("app", "web").node_name(on).build()
}

fn snapshot(pods: Vec<Pod>) -> Snapshot {
    let nodes = vec![
        node("a1").label(ZONE, "a").build(),
        node("a2").label(ZONE, "a").build(),
        node("b1").label(ZONE, "b").build(),
        node("c1")
            .label(ZONE, "c")
            .label("gpu", "1")
            .taint("gpu", "", "NoSchedule")
            .build(),
        node("nolabel").build(),
    ];
    Snapshot::new(nodes, pods)
}

fn codes(p: &Pod, snap: &Snapshot) -> Vec<Code> {
    let mut state = CycleState::new();
    match PodTopologySpread.pre_filter(&mut state, p, snap) {
        Ok(PreFilterResult::Skip) => return vec![Code::Success; snap.len()],
        Ok(_) => {}
        Err(s) => panic!("prefilter: {s:?}"),
    }
    snap.node_infos()
        .iter()
        .map(|n| PodTopologySpread.filter(&state, p, n).code)
        .collect()
}

#[test]
fn filter_table() {
    use Code::{Success as Ok, Unschedulable as No, UnschedulableAndUnresolvable as Missing};
    let spread = |skew| {
        pod("p").label("app", "web").spread(
            skew,
            ZONE,
            "DoNotSchedule",
            label_selector(&[("app", "web")]),
        )
    };
    let cases: Vec<(&str, Pod, Vec<Pod>, Vec<Code>)> = vec![
        (
            "no constraints",
            pod("p").build(),
            vec![web("w", "a1")],
            vec![Ok, Ok, Ok, Ok, Ok],
        ),
        (
            "ScheduleAnyway is not filtered",
            pod("p")
                .spread(1, ZONE, "ScheduleAnyway", label_selector(&[("app", "web")]))
                .build(),
            vec![web("w1", "a1"), web("w2", "a2")],
            vec![Ok, Ok, Ok, Ok, Ok],
        ),
        (
            "empty cluster",
            spread(1).build(),
            vec![],
            vec![Ok, Ok, Ok, Ok, Missing],
        ),
        // a=2, b=0, c=0 → min 0: a would be 3 > 1.
        (
            "skew 1",
            spread(1).build(),
            vec![web("w1", "a1"), web("w2", "a2")],
            vec![No, No, Ok, Ok, Missing],
        ),
        (
            "skew 3 allows a",
            spread(3).build(),
            vec![web("w1", "a1"), web("w2", "a2")],
            vec![Ok, Ok, Ok, Ok, Missing],
        ),
        (
            "other namespaces and terminating pods do not count",
            spread(1).build(),
            vec![
                pod("x")
                    .ns("other")
                    .label("app", "web")
                    .node_name("a1")
                    .build(),
                {
                    let mut p = web("t", "a2");
                    p.metadata.deletion_timestamp =
                        pod("z").terminating().build().metadata.deletion_timestamp;
                    p
                },
            ],
            vec![Ok, Ok, Ok, Ok, Missing],
        ),
        (
            "nodeAffinity policy Honor drops excluded domains from the minimum",
            // Only zones a and b are eligible: a=1, b=1 → min 1; a → 2-1=1 ok.
            spread(1)
                .required_node_term(vec![skiff_client::testing::req(ZONE, "In", &["a", "b"])])
                .build(),
            vec![web("w1", "a1"), web("w2", "b1")],
            vec![Ok, Ok, Ok, Ok, Missing],
        ),
        (
            "without node affinity zone c (empty) is the minimum",
            spread(1).build(),
            vec![web("w1", "a1"), web("w2", "b1")],
            vec![No, No, No, Ok, Missing],
        ),
    ];
    for (name, p, pods, want) in cases {
        assert_eq!(codes(&p, &snapshot(pods)), want, "{name}");
    }
}

#[test]
fn taints_policy_and_min_domains() {
    let pods = vec![web("w1", "a1"), web("w2", "b1")];
    let base = || pod("p").label("app", "web");
    let mut c = TopologySpreadConstraint {
        max_skew: 1,
        topology_key: ZONE.into(),
        when_unsatisfiable: "DoNotSchedule".into(),
        label_selector: Some(label_selector(&[("app", "web")])),
        node_taints_policy: Some("Honor".into()),
        ..Default::default()
    };
    // The tainted zone c is not a domain: a=1, b=1 → min 1.
    let honor = base().spread_constraint(c.clone()).build();
    assert_eq!(
        codes(&honor, &snapshot(pods.clone()))[..3],
        [Code::Success; 3]
    );
    // minDomains 4 > 2 domains → global minimum 0 → a and b would be skew 2.
    c.min_domains = Some(4);
    let min_domains = base().spread_constraint(c).build();
    assert_eq!(
        codes(&min_domains, &snapshot(pods))[..3],
        [
            Code::Unschedulable,
            Code::Unschedulable,
            Code::Unschedulable
        ]
    );
}

#[test]
fn reasons() {
    let p = pod("p")
        .spread(1, ZONE, "DoNotSchedule", label_selector(&[("app", "web")]))
        .build();
    let snap = snapshot(vec![]);
    let mut state = CycleState::new();
    PodTopologySpread
        .pre_filter(&mut state, &p, &snap)
        .expect("prefilter");
    let s = PodTopologySpread.filter(&state, &p, snap.get("nolabel").expect("node"));
    assert_eq!(s.reasons, vec![ERR_REASON_NODE_LABEL_NOT_MATCH]);
}
