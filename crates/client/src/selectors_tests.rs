//! Tests of label and node selector matching.

use super::*;
use crate::testing::{label_selector, node, pod, req};

#[test]
fn label_requirements() {
    let labels: Labels = [
        ("zone".to_string(), "a".to_string()),
        ("gen".to_string(), "5".to_string()),
    ]
    .into();
    let cases = [
        (req("zone", "In", &["a", "b"]), true),
        (req("zone", "In", &["b"]), false),
        (req("zone", "NotIn", &["b"]), true),
        (req("missing", "NotIn", &["b"]), true),
        (req("zone", "Exists", &[]), true),
        (req("zone", "DoesNotExist", &[]), false),
        (req("gen", "Gt", &["4"]), true),
        (req("gen", "Gt", &["5"]), false),
        (req("gen", "Lt", &["6"]), true),
        (req("zone", "Gt", &["1"]), false), // non-numeric label value
        (req("missing", "Lt", &["1"]), false),
    ];
    for (r, want) in cases {
        let parsed = requirement_from_node(&r).expect("valid");
        assert_eq!(parsed.matches(&labels), want, "{r:?}");
    }
    for bad in [
        req("k", "In", &[]),
        req("k", "Exists", &["x"]),
        req("k", "Gt", &["x"]),
        req("k", "Foo", &[]),
    ] {
        assert!(requirement_from_node(&bad).is_err(), "{bad:?}");
    }
}

#[test]
fn label_selector_nil_and_empty() {
    let labels: Labels = [("app".to_string(), "web".to_string())].into();
    assert!(!Selector::from_label_selector(None)
        .expect("ok")
        .matches(Some(&labels)));
    let empty = Selector::from_label_selector(Some(&LabelSelector::default())).expect("ok");
    assert!(empty.is_empty() && empty.matches(Some(&labels)));
    let web = Selector::from_label_selector(Some(&label_selector(&[("app", "web")]))).expect("ok");
    assert!(web.matches(Some(&labels)) && !web.matches(None));
}

#[test]
fn required_node_affinity() {
    let n = node("n1").label("zone", "a").build();
    let cases = [
        ("nothing", pod("p").build(), true),
        (
            "selector match",
            pod("p").node_selector("zone", "a").build(),
            true,
        ),
        (
            "selector miss",
            pod("p").node_selector("zone", "b").build(),
            false,
        ),
        (
            "term match",
            pod("p")
                .required_node_term(vec![req("zone", "In", &["a"])])
                .build(),
            true,
        ),
        (
            "terms ORed",
            pod("p")
                .required_node_term(vec![req("zone", "In", &["b"])])
                .required_node_term(vec![req("zone", "Exists", &[])])
                .build(),
            true,
        ),
        (
            "empty term matches nothing",
            pod("p").required_node_term(vec![]).build(),
            false,
        ),
        (
            "bad term never matches",
            pod("p")
                .required_node_term(vec![req("zone", "Gt", &["a"])])
                .build(),
            false,
        ),
        (
            "field name",
            pod("p")
                .required_node_field("metadata.name", "In", "n1")
                .build(),
            true,
        ),
        (
            "field other name",
            pod("p")
                .required_node_field("metadata.name", "In", "n2")
                .build(),
            false,
        ),
        (
            "selector AND affinity",
            pod("p")
                .node_selector("zone", "a")
                .required_node_term(vec![req("zone", "NotIn", &["a"])])
                .build(),
            false,
        ),
    ];
    for (name, p, want) in cases {
        assert_eq!(RequiredNodeAffinity::of(&p).matches(&n), want, "{name}");
    }
}
