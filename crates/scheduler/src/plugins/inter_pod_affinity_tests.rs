//! Table tests for InterPodAffinity filtering.

use k8s_openapi::api::core::v1::Pod;

use super::*;
use crate::framework::Code;
use skiff_client::testing::{affinity_term, label_selector, node, pod};

const ZONE: &str = "topology.kubernetes.io/zone";
const HOST: &str = "kubernetes.io/hostname";

fn cluster(pods: Vec<Pod>) -> Snapshot {
    let nodes = vec![
        node("a1").label(ZONE, "a").label(HOST, "a1").build(),
        node("a2").label(ZONE, "a").label(HOST, "a2").build(),
        node("b1").label(ZONE, "b").label(HOST, "b1").build(),
        node("nolabel").build(),
    ];
    Snapshot::new(nodes, pods)
}

/// A node's filter result: `None` for success, else code and message.
type Outcome = Option<(Code, String)>;

/// The outcome per node (a1, a2, b1, nolabel).
fn run(p: &Pod, snap: &Snapshot) -> Vec<Outcome> {
    let mut state = CycleState::new();
    match InterPodAffinity.pre_filter(&mut state, p, snap) {
        Ok(PreFilterResult::Skip) => return vec![None; 4],
        Ok(_) => {}
        Err(s) => panic!("prefilter: {s:?}"),
    }
    snap.node_infos()
        .iter()
        .map(|n| {
            let s = InterPodAffinity.filter(&state, p, n);
            (!s.is_success()).then(|| (s.code, s.message()))
        })
        .collect()
}

#[test]
fn filter_table() {
    let aff = || {
        Some((
            Code::UnschedulableAndUnresolvable,
            ERR_REASON_AFFINITY.to_string(),
        ))
    };
    let anti = || Some((Code::Unschedulable, ERR_REASON_ANTI_AFFINITY.to_string()));
    let existing = || {
        Some((
            Code::Unschedulable,
            ERR_REASON_EXISTING_ANTI_AFFINITY.to_string(),
        ))
    };
    let db_on_a1 = || pod("db").label("app", "db").node_name("a1").build();
    let cases: Vec<(&str, Pod, Vec<Pod>, Vec<Outcome>)> = vec![
        (
            "no terms: skip",
            pod("p").build(),
            vec![db_on_a1()],
            vec![None, None, None, None],
        ),
        (
            "affinity to db's zone",
            pod("p")
                .pod_affinity(ZONE, label_selector(&[("app", "db")]))
                .build(),
            vec![db_on_a1()],
            vec![None, None, aff(), aff()],
        ),
        (
            "affinity to db's host",
            pod("p")
                .pod_affinity(HOST, label_selector(&[("app", "db")]))
                .build(),
            vec![db_on_a1()],
            vec![None, aff(), aff(), aff()],
        ),
        (
            "affinity ignores other namespaces",
            pod("p")
                .ns("other")
                .pod_affinity(ZONE, label_selector(&[("app", "db")]))
                .build(),
            vec![db_on_a1()],
            vec![aff(), aff(), aff(), aff()],
        ),
        (
            "first pod of a self-selecting group goes where the key exists",
            pod("p")
                .label("app", "web")
                .pod_affinity(ZONE, label_selector(&[("app", "web")]))
                .build(),
            vec![db_on_a1()],
            vec![None, None, None, aff()],
        ),
        (
            "anti-affinity to db's zone",
            pod("p")
                .pod_anti_affinity(ZONE, label_selector(&[("app", "db")]))
                .build(),
            vec![db_on_a1()],
            vec![anti(), anti(), None, None],
        ),
        (
            "existing pod's anti-affinity keeps us out of its host",
            pod("p").label("app", "web").build(),
            vec![pod("x")
                .node_name("a1")
                .pod_anti_affinity(HOST, label_selector(&[("app", "web")]))
                .build()],
            vec![existing(), None, None, None],
        ),
        (
            "existing anti-affinity in another namespace does not select us",
            pod("p").label("app", "web").build(),
            vec![pod("x")
                .ns("other")
                .node_name("a1")
                .pod_anti_affinity(HOST, label_selector(&[("app", "web")]))
                .build()],
            vec![None, None, None, None],
        ),
    ];
    for (name, p, pods, want) in cases {
        assert_eq!(run(&p, &cluster(pods)), want, "{name}");
    }
}

#[test]
fn namespace_selector_and_match_label_keys() {
    let snap = cluster(vec![pod("db")
        .ns("data")
        .label("app", "db")
        .label("v", "1")
        .node_name("b1")
        .build()])
    .with_namespace_labels(
        [(
            "data".to_string(),
            [("team".to_string(), "x".to_string())].into(),
        )]
        .into(),
    );
    let mut term = affinity_term(ZONE, label_selector(&[("app", "db")]));
    term.namespace_selector = Some(label_selector(&[("team", "x")]));
    let p = pod("p").pod_affinity_term(term.clone()).build();
    let aff = Some((
        Code::UnschedulableAndUnresolvable,
        ERR_REASON_AFFINITY.to_string(),
    ));
    assert_eq!(
        run(&p, &snap),
        vec![aff.clone(), aff.clone(), None, aff.clone()]
    );

    term.match_label_keys = Some(vec!["v".to_string()]);
    let same_version = pod("p")
        .label("v", "1")
        .pod_affinity_term(term.clone())
        .build();
    assert_eq!(run(&same_version, &snap)[2], None);
    let other_version = pod("p").label("v", "2").pod_affinity_term(term).build();
    assert_eq!(run(&other_version, &snap)[2], aff);
}
