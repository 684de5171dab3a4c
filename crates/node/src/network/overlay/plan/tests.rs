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

fn me() -> Me<'static> {
    Me {
        name: "me",
        ip: ME,
        pod_cidr: Cidr::parse("10.1.0.0/24"),
        cluster_cidr: None,
    }
}

fn created(mut node: Node, seconds: i64) -> Node {
    node.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + seconds).unwrap(),
    ));
    node
}

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
    let peers = peers(&nodes, &me(), Backend::Vxlan, None);
    assert_eq!(
        peers,
        [Peer {
            name: "b".into(),
            pod_cidr: Cidr::parse("10.1.1.0/24").unwrap(),
            public_ip: "172.20.0.11".parse().unwrap(),
            vtep_mac: Some("0a:00:00:00:00:0b".into()),
        }]
    );
    let names: Vec<String> = candidates(&nodes, &me(), Backend::Vxlan)
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["b", "h"]);
    assert!(candidates(&nodes, &me(), Backend::None).is_empty());
}

#[test]
fn vxlan_wants_a_route_an_arp_and_an_fdb_entry_per_peer() {
    let nodes = [vxlan_node(
        "b",
        "10.1.1.0/24",
        "172.20.0.11",
        "0a:00:00:00:00:0b",
    )];
    let peers = peers(&nodes, &me(), Backend::Vxlan, None);
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
    let peers = peers(&nodes, &me(), Backend::Vxlan, None);
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
    let peers = peers(&nodes, &me(), Backend::HostGw, None);
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
fn of_two_nodes_claiming_one_pod_cidr_the_older_is_routed() {
    // The newer claim loses whatever its name.
    let nodes = [
        created(
            vxlan_node("b", "10.1.1.0/24", "172.20.0.11", "0a:00:00:00:00:0b"),
            0,
        ),
        created(
            vxlan_node("a", "10.1.1.0/25", "172.20.0.12", "0a:00:00:00:00:0a"),
            60,
        ),
    ];
    let peers = peers(&nodes, &me(), Backend::Vxlan, None);
    assert_eq!(peers.len(), 1);
    assert_eq!(peers[0].name, "b");
}

#[test]
fn claims_that_would_take_other_traffic_are_refused() {
    let nodes = [
        // This node's own podCIDR, or a range around it.
        vxlan_node("a", "10.1.0.0/24", "172.20.0.11", "0a:00:00:00:00:0a"),
        vxlan_node("b", "10.1.0.0/16", "172.20.0.12", "0a:00:00:00:00:0b"),
        // Everything: would replace the host's default route.
        vxlan_node("c", "0.0.0.0/0", "172.20.0.13", "0a:00:00:00:00:0c"),
        // The underlay's addresses.
        vxlan_node("d", "172.20.0.0/24", "172.20.0.14", "0a:00:00:00:00:0d"),
        // Outside the pod network.
        vxlan_node("e", "192.168.7.0/24", "172.20.0.15", "0a:00:00:00:00:0e"),
        // A group MAC is no VTEP; another node's MAC is not taken over.
        vxlan_node("f", "10.1.6.0/24", "172.20.0.16", "ff:ff:ff:ff:ff:ff"),
        created(
            vxlan_node("g", "10.1.7.0/24", "172.20.0.17", "0a:00:00:00:00:07"),
            0,
        ),
        created(
            vxlan_node("h", "10.1.8.0/24", "172.20.0.18", "0a:00:00:00:00:07"),
            60,
        ),
        // This node's own MAC.
        vxlan_node("i", "10.1.9.0/24", "172.20.0.19", "0a:00:00:00:00:01"),
        // A node on a multicast address.
        vxlan_node("j", "10.1.10.0/24", "224.0.0.1", "0a:00:00:00:00:10"),
        // A well-behaved one.
        vxlan_node("k", "10.1.11.0/24", "172.20.0.21", "0a:00:00:00:00:11"),
    ];
    let scope = Me {
        cluster_cidr: Cidr::parse("10.1.0.0/16"),
        ..me()
    };
    let names: Vec<String> = peers(&nodes, &scope, Backend::Vxlan, Some("0A:00:00:00:00:01"))
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["g", "k"]);
    // Without a cluster CIDR the range check is the only one skipped.
    let names: Vec<String> = peers(&nodes, &me(), Backend::Vxlan, Some("0a:00:00:00:00:01"))
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["e", "g", "k"]);
    // host-gw: the same podCIDR checks (no MACs).
    let hostgw = [node(
        "c",
        Some("0.0.0.0/0"),
        &[(BACKEND_TYPE, "host-gw"), (PUBLIC_IP, "172.20.0.13")],
    )];
    assert!(peers(&hostgw, &me(), Backend::HostGw, None).is_empty());
}

#[test]
fn the_fingerprint_follows_only_what_the_overlay_reads() {
    let b = vxlan_node("b", "10.1.1.0/24", "172.20.0.11", "0a:00:00:00:00:0b");
    let c = vxlan_node("c", "10.1.2.0/24", "172.20.0.12", "0a:00:00:00:00:0c");
    let base = fingerprint([&b, &c]);
    // The order of the store does not matter.
    assert_eq!(fingerprint([&c, &b]), base);
    // A status heartbeat, a label, another annotation: the same.
    let mut heartbeat = b.clone();
    heartbeat.status = Some(
        serde_json::from_value(serde_json::json!({
            "conditions": [{"type": "Ready", "status": "True",
                            "lastHeartbeatTime": "2026-12-05T22:00:10Z"}],
        }))
        .unwrap(),
    );
    heartbeat.metadata.resource_version = Some("99".into());
    heartbeat.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
    heartbeat
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("node.alpha.kubernetes.io/ttl".into(), "0".into());
    assert_eq!(fingerprint([&heartbeat, &c]), base);
    // Each field it reads changes it.
    let mut changed = vec![];
    let mut mac = b.clone();
    mac.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(BACKEND_DATA.into(), backend_data(1, "0a:00:00:00:00:ff"));
    changed.push(mac);
    let mut ip = b.clone();
    ip.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(PUBLIC_IP.into(), "172.20.0.99".into());
    changed.push(ip);
    let mut kind = b.clone();
    kind.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(BACKEND_TYPE.into(), "host-gw".into());
    changed.push(kind);
    let mut cidr = b.clone();
    cidr.spec.as_mut().unwrap().pod_cidr = Some("10.1.9.0/24".into());
    changed.push(cidr);
    let mut deleted = b.clone();
    deleted.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).unwrap(),
        ));
    changed.push(deleted);
    changed.push(created(b.clone(), 5));
    for n in &changed {
        assert_ne!(fingerprint([n, &c]), base, "{:?}", n.metadata);
    }
    // A node joining or leaving.
    assert_ne!(fingerprint([&b]), base);
    let d = node("d", None, &[]);
    assert_ne!(fingerprint([&b, &c, &d]), base);
}

#[test]
fn cidr_arithmetic() {
    let net = Cidr::parse("10.1.0.0/16").unwrap();
    assert!(net.contains("10.1.255.7".parse().unwrap()));
    assert!(!net.contains("10.2.0.1".parse().unwrap()));
    assert!(net.contains_cidr(&Cidr::parse("10.1.3.0/24").unwrap()));
    assert!(!net.contains_cidr(&Cidr::parse("10.0.0.0/8").unwrap()));
    assert!(net.overlaps(&Cidr::parse("10.0.0.0/8").unwrap()));
    assert!(!net.overlaps(&Cidr::parse("10.2.0.0/24").unwrap()));
    let all = Cidr::parse("0.0.0.0/0").unwrap();
    assert!(all.contains("8.8.8.8".parse().unwrap()));
    assert!(all.overlaps(&net));
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
