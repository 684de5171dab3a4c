use super::*;

pub(crate) fn node(name: &str, cidr: Option<&str>, annotations: &[(&str, &str)]) -> Node {
    serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": name,
            "annotations": annotations.iter().map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<std::collections::BTreeMap<_, _>>(),
        },
        "spec": { "podCIDR": cidr },
    }))
    .unwrap()
}

pub(crate) fn vxlan_node(name: &str, cidr: &str, ip: &str, mac: &str) -> Node {
    node(
        name,
        Some(cidr),
        &[
            (BACKEND_TYPE, "vxlan"),
            (PUBLIC_IP, ip),
            (BACKEND_DATA, &backend_data(1, mac)),
        ],
    )
}

const ME: Ipv4Addr = Ipv4Addr::new(172, 20, 0, 1);

#[test]
fn peers_are_other_hosts_with_the_same_backend_and_a_pod_cidr() {
    let nodes = [
        vxlan_node("me", "10.1.0.0/24", "172.20.0.1", "0a:00:00:00:00:01"),
        vxlan_node("b", "10.1.1.0/24", "172.20.0.11", "0A:00:00:00:00:0B"),
        // Same host as this node (tests run several in one namespace).
        vxlan_node("c", "10.1.2.0/24", "172.20.0.1", "0a:00:00:00:00:0c"),
        // Loopback: never a peer.
        vxlan_node("d", "10.1.3.0/24", "127.0.0.1", "0a:00:00:00:00:0d"),
        // Another backend, no podCIDR, no annotations (a simulated node).
        node(
            "e",
            Some("10.1.4.0/24"),
            &[(BACKEND_TYPE, "host-gw"), (PUBLIC_IP, "172.20.0.14")],
        ),
        node(
            "f",
            None,
            &[(BACKEND_TYPE, "vxlan"), (PUBLIC_IP, "172.20.0.15")],
        ),
        node("g", Some("10.1.6.0/24"), &[]),
        // No MAC yet: a candidate, not a peer.
        node(
            "h",
            Some("10.1.7.0/24"),
            &[(BACKEND_TYPE, "vxlan"), (PUBLIC_IP, "172.20.0.17")],
        ),
    ];
    let peers = peers(&nodes, "me", ME, Backend::Vxlan);
    assert_eq!(
        peers,
        [Peer {
            name: "b".into(),
            pod_cidr: Cidr::parse("10.1.1.0/24").unwrap(),
            public_ip: "172.20.0.11".parse().unwrap(),
            vtep_mac: Some("0a:00:00:00:00:0b".into()),
        }]
    );
    let names: Vec<String> = candidates(&nodes, "me", ME, Backend::Vxlan)
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["b", "h"]);
    assert!(candidates(&nodes, "me", ME, Backend::None).is_empty());
}

#[test]
fn vxlan_wants_a_route_an_arp_and_an_fdb_entry_per_peer() {
    let nodes = [vxlan_node(
        "b",
        "10.1.1.0/24",
        "172.20.0.11",
        "0a:00:00:00:00:0b",
    )];
    let peers = peers(&nodes, "me", ME, Backend::Vxlan);
    let steps = steps(Backend::Vxlan, "x.vxlan", &peers, &Observed::default());
    let gw: Ipv4Addr = "10.1.1.0".parse().unwrap();
    let mac = "0a:00:00:00:00:0b".to_string();
    assert_eq!(
        steps,
        [
            Step::AddFdb(mac.clone(), "172.20.0.11".parse().unwrap()),
            Step::AddNeighbor(gw, mac.clone()),
            Step::AddRoute(Route {
                dst: Cidr::parse("10.1.1.0/24").unwrap(),
                via: gw,
                dev: Some("x.vxlan".into()),
            }),
        ]
    );
    // Once the kernel has them, nothing is left to do.
    let observed = Observed {
        routes: vec![Route {
            dst: Cidr::parse("10.1.1.0/24").unwrap(),
            via: gw,
            dev: Some("x.vxlan".into()),
        }],
        neighbors: vec![(gw, "0A:00:00:00:00:0B".into())],
        fdb: vec![(mac, "172.20.0.11".parse().unwrap())],
    };
    assert_eq!(
        super::steps(Backend::Vxlan, "x.vxlan", &peers, &observed),
        []
    );
}

#[test]
fn a_node_that_left_has_its_entries_removed_and_a_moved_vtep_is_replaced() {
    let gw: Ipv4Addr = "10.1.1.0".parse().unwrap();
    let route = Route {
        dst: Cidr::parse("10.1.1.0/24").unwrap(),
        via: gw,
        dev: Some("x.vxlan".into()),
    };
    let observed = Observed {
        routes: vec![route.clone()],
        neighbors: vec![(gw, "0a:00:00:00:00:0b".into())],
        fdb: vec![("0a:00:00:00:00:0b".into(), "172.20.0.11".parse().unwrap())],
    };
    assert_eq!(
        steps(Backend::Vxlan, "x.vxlan", &[], &observed),
        [
            Step::DeleteRoute(route.clone()),
            Step::DeleteNeighbor(gw),
            Step::DeleteFdb("0a:00:00:00:00:0b".into(), "172.20.0.11".parse().unwrap()),
        ]
    );
    // The same node with a new device (new MAC) on a new address.
    let nodes = [vxlan_node(
        "b",
        "10.1.1.0/24",
        "172.20.0.12",
        "0a:00:00:00:00:0c",
    )];
    let peers = peers(&nodes, "me", ME, Backend::Vxlan);
    assert_eq!(
        steps(Backend::Vxlan, "x.vxlan", &peers, &observed),
        [
            Step::DeleteFdb("0a:00:00:00:00:0b".into(), "172.20.0.11".parse().unwrap()),
            Step::AddFdb("0a:00:00:00:00:0c".into(), "172.20.0.12".parse().unwrap()),
            // Replaced in place: the route stays.
            Step::AddNeighbor(gw, "0a:00:00:00:00:0c".into()),
        ]
    );
}

#[test]
fn host_gw_routes_via_the_peers_address() {
    let nodes = [node(
        "b",
        Some("10.1.1.0/24"),
        &[(BACKEND_TYPE, "host-gw"), (PUBLIC_IP, "172.20.0.11")],
    )];
    let peers = peers(&nodes, "me", ME, Backend::HostGw);
    assert_eq!(
        steps(Backend::HostGw, "x.vxlan", &peers, &Observed::default()),
        [Step::AddRoute(Route {
            dst: Cidr::parse("10.1.1.0/24").unwrap(),
            via: "172.20.0.11".parse().unwrap(),
            dev: None,
        })]
    );
}

#[test]
fn two_nodes_claiming_one_pod_cidr_give_one_route() {
    let nodes = [
        vxlan_node("b", "10.1.1.0/24", "172.20.0.11", "0a:00:00:00:00:0b"),
        vxlan_node("a", "10.1.1.0/24", "172.20.0.12", "0a:00:00:00:00:0a"),
    ];
    let peers = peers(&nodes, "me", ME, Backend::Vxlan);
    assert_eq!(peers.len(), 1);
    assert_eq!(peers[0].name, "a");
}

#[test]
fn published_annotations_and_the_patch_of_what_differs() {
    let wanted = own_annotations(Backend::Vxlan, ME, 7, Some("0a:00:00:00:00:01"));
    let own = Own {
        pod_cidr: None,
        annotations: [(BACKEND_TYPE.to_string(), "vxlan".to_string())].into(),
    };
    assert_eq!(
        annotation_patch(&own, &wanted).unwrap(),
        serde_json::json!({"metadata": {"annotations": {
            PUBLIC_IP: "172.20.0.1",
            BACKEND_DATA: r#"{"VNI":7,"VtepMAC":"0a:00:00:00:00:01"}"#,
        }}})
    );
    let all = Own {
        pod_cidr: None,
        annotations: wanted
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    };
    assert_eq!(annotation_patch(&all, &wanted), None);
    // host-gw publishes no VTEP.
    assert_eq!(
        own_annotations(Backend::HostGw, ME, 1, Some("0a:00:00:00:00:01")).len(),
        2
    );
}

#[test]
fn names_mtu_and_cidrs() {
    assert_eq!(device_for_bridge("skiff0"), "skiff0.vxlan");
    assert_eq!(device_for_bridge("a-very-long-bridge"), "a-very-lo.vxlan");
    assert!(device_for_bridge("a-very-long-bridge").len() <= 15);
    assert_eq!(vxlan_mtu(1500), 1450);
    assert_eq!(
        Cidr::parse("10.1.1.7/24").unwrap().to_string(),
        "10.1.1.0/24"
    );
    assert_eq!(Cidr::parse("10.1.1.7"), None);
    assert_eq!("host-gw".parse::<Backend>(), Ok(Backend::HostGw));
    assert!("flannel".parse::<Backend>().is_err());
}
