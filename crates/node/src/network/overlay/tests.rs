use super::links::Fake;
use super::plan::tests::{node, vxlan_node};
use super::plan::*;
use super::*;

fn settings(backend: Backend) -> Settings {
    Settings {
        backend,
        node_name: "me".into(),
        public_ip: "172.20.0.1".parse().unwrap(),
        device: "x.vxlan".into(),
        vni: 9,
        port: 8472,
        cluster_cidr: None,
        resync: Duration::from_secs(30),
    }
}

fn me(annotations: &[(&str, &str)]) -> Arc<Node> {
    Arc::new(node("me", Some("10.1.0.0/24"), annotations))
}

#[test]
fn a_single_node_makes_no_device_and_publishes_its_backend() {
    let links = Fake::default();
    let synced = sync_once(&settings(Backend::Vxlan), &links, &[me(&[])]);
    let state = links.state.lock().unwrap().clone();
    assert!(state.vxlan.is_none(), "no peer, no device");
    assert!(state.applied.is_empty());
    assert_eq!(
        synced.patch.unwrap(),
        serde_json::json!({"metadata": {"annotations": {
            BACKEND_TYPE: "vxlan", PUBLIC_IP: "172.20.0.1",
        }}})
    );
    assert_eq!(synced.peer_cidrs, Some(vec![]));
}

#[test]
fn a_peer_makes_the_device_publishes_its_mac_and_adds_the_entries() {
    let links = Fake::default();
    let own = me(&[(BACKEND_TYPE, "vxlan"), (PUBLIC_IP, "172.20.0.1")]);
    // The peer's MAC is not known yet: the device is made and published.
    let early = Arc::new(node(
        "b",
        Some("10.1.1.0/24"),
        &[(BACKEND_TYPE, "vxlan"), (PUBLIC_IP, "172.20.0.11")],
    ));
    let synced = sync_once(&settings(Backend::Vxlan), &links, &[own.clone(), early]);
    let vxlan = links.state.lock().unwrap().vxlan.clone().unwrap();
    assert_eq!(vxlan.vni, 9);
    assert_eq!(vxlan.mtu, 1450);
    assert_eq!(
        vxlan.address,
        "10.1.0.0".parse::<std::net::Ipv4Addr>().unwrap()
    );
    assert_eq!(vxlan.underlay, "eth0");
    assert_eq!(
        synced.patch.unwrap(),
        serde_json::json!({"metadata": {"annotations": {
            BACKEND_DATA: r#"{"VNI":9,"VtepMAC":"0a:00:00:00:00:01"}"#,
        }}})
    );
    assert_eq!(synced.peer_cidrs, Some(vec![]));
    // Its MAC arrives: the entries are added, and its CIDR is routed.
    let peer = Arc::new(vxlan_node(
        "b",
        "10.1.1.0/24",
        "172.20.0.11",
        "0a:00:00:00:00:0b",
    ));
    let synced = sync_once(&settings(Backend::Vxlan), &links, &[own.clone(), peer]);
    assert_eq!(synced.peer_cidrs, Some(vec!["10.1.1.0/24".to_string()]));
    assert!(synced.failed.is_empty(), "{:?}", synced.failed);
    assert_eq!(links.state.lock().unwrap().observed.routes.len(), 1);
    // It leaves: its entries go.
    let synced = sync_once(&settings(Backend::Vxlan), &links, &[own]);
    let observed = links.state.lock().unwrap().observed.clone();
    assert_eq!(observed, Observed::default());
    assert_eq!(synced.peer_cidrs, Some(vec![]));
}

#[test]
fn backend_none_does_nothing() {
    let links = Fake::default();
    let peer = Arc::new(vxlan_node(
        "b",
        "10.1.1.0/24",
        "172.20.0.11",
        "0a:00:00:00:00:0b",
    ));
    let synced = sync_once(&settings(Backend::None), &links, &[me(&[]), peer]);
    assert_eq!(synced.patch, None);
    assert!(links.state.lock().unwrap().vxlan.is_none());
    assert!(synced.peer_cidrs.unwrap_or_default().is_empty());
}

fn peer_b() -> Arc<Node> {
    Arc::new(vxlan_node(
        "b",
        "10.1.1.0/24",
        "172.20.0.11",
        "0a:00:00:00:00:0b",
    ))
}

#[test]
fn a_failing_device_leaves_the_entries_and_the_masquerade_set_as_they_are() {
    let links = Fake::default();
    let own = me(&[(BACKEND_TYPE, "vxlan"), (PUBLIC_IP, "172.20.0.1")]);
    let synced = sync_once(&settings(Backend::Vxlan), &links, &[own.clone(), peer_b()]);
    assert_eq!(synced.peer_cidrs, Some(vec!["10.1.1.0/24".to_string()]));
    let before = links.state.lock().unwrap().observed.clone();
    assert_eq!(before.routes.len(), 1);
    // `ip` fails once: nothing is removed, the peers stay accepted.
    links.state.lock().unwrap().fail_vxlan = true;
    let synced = sync_once(&settings(Backend::Vxlan), &links, &[own.clone(), peer_b()]);
    assert_eq!(synced.failed.len(), 1, "{:?}", synced.failed);
    assert_eq!(synced.peer_cidrs, None);
    assert_eq!(links.state.lock().unwrap().observed, before);
    // Nor when this node's podCIDR is not known (its Node not yet seen).
    links.state.lock().unwrap().fail_vxlan = false;
    let synced = sync_once(&settings(Backend::Vxlan), &links, &[peer_b()]);
    assert_eq!(synced.peer_cidrs, None);
    assert_eq!(links.state.lock().unwrap().observed, before);
}

#[test]
fn a_peer_claiming_this_nodes_pod_cidr_gets_no_route() {
    let links = Fake::default();
    let own = me(&[(BACKEND_TYPE, "vxlan"), (PUBLIC_IP, "172.20.0.1")]);
    let thief = Arc::new(vxlan_node(
        "b",
        "10.1.0.0/24",
        "172.20.0.11",
        "0a:00:00:00:00:0b",
    ));
    let synced = sync_once(&settings(Backend::Vxlan), &links, &[own, thief]);
    assert_eq!(synced.peer_cidrs, Some(vec![]));
    assert!(links.state.lock().unwrap().applied.is_empty());
}

#[test]
fn a_sync_runs_when_the_fingerprint_changes_or_it_is_due() {
    assert!(sync_needed(None, 1, false), "the first look syncs");
    assert!(!sync_needed(Some(1), 1, false), "a status update does not");
    assert!(sync_needed(Some(1), 2, false));
    assert!(sync_needed(Some(1), 1, true), "the resync does");
    // A heartbeat of a peer (its status only) keeps the fingerprint.
    let own = me(&[]);
    let mut beat = (*peer_b()).clone();
    beat.status = Some(Default::default());
    beat.metadata.resource_version = Some("2".into());
    let a = plan::fingerprint([own.as_ref(), peer_b().as_ref()]);
    let b = plan::fingerprint([own.as_ref(), &beat]);
    assert!(!sync_needed(Some(a), b, false));
}

#[test]
fn the_device_is_kept_only_with_our_settings() {
    // `ip -j -d link show` of a device made as ensure_vxlan makes it.
    let shown: serde_json::Value = serde_json::from_str(
        r#"{"ifname":"x.vxlan","link_type":"ether","address":"72:0e:42:8e:a8:bb",
            "linkinfo":{"info_kind":"vxlan","info_data":{"id":9,"local":"172.20.0.1",
            "link":"eth0","port":8472,"learning":false}}}"#,
    )
    .unwrap();
    let spec = links::Vxlan {
        device: "x.vxlan".into(),
        vni: 9,
        port: 8472,
        local: "172.20.0.1".parse().unwrap(),
        underlay: "eth0".into(),
        mtu: 1450,
        address: "10.1.0.0".parse().unwrap(),
    };
    assert!(links::vxlan_matches(&shown, &spec));
    for other in [
        links::Vxlan {
            vni: 1,
            ..spec.clone()
        },
        links::Vxlan {
            port: 4789,
            ..spec.clone()
        },
        links::Vxlan {
            local: "172.20.0.2".parse().unwrap(),
            ..spec.clone()
        },
        links::Vxlan {
            underlay: "eth1".into(),
            ..spec.clone()
        },
    ] {
        assert!(!links::vxlan_matches(&shown, &other), "{other:?}");
    }
    let mut learning = shown.clone();
    learning["linkinfo"]["info_data"]["learning"] = true.into();
    assert!(!links::vxlan_matches(&learning, &spec));
    let mut bridge = shown.clone();
    bridge["linkinfo"]["info_kind"] = "bridge".into();
    assert!(!links::vxlan_matches(&bridge, &spec));
}

#[test]
fn the_kernels_tables_are_read_from_iproute2s_json() {
    let routes = r#"[{"dst":"10.1.1.0/24","gateway":"10.1.1.0","dev":"x.vxlan","flags":["onlink"]},
        {"dst":"10.9.0.0/24","gateway":"10.9.0.0","dev":"other.vxlan","flags":["onlink"]},
        {"dst":"10.1.2.0/24","gateway":"172.20.0.12","dev":"eth0","flags":[]},
        {"dst":"default","gateway":"172.20.0.254","dev":"eth0","flags":[]}]"#;
    assert_eq!(
        links::parse_routes(routes, &["x.vxlan", "eth0"], "x.vxlan"),
        [
            Route {
                dst: Cidr::parse("10.1.1.0/24").unwrap(),
                via: "10.1.1.0".parse().unwrap(),
                dev: Some("x.vxlan".into()),
            },
            Route {
                dst: Cidr::parse("10.1.2.0/24").unwrap(),
                via: "172.20.0.12".parse().unwrap(),
                dev: None,
            },
        ]
    );
    let neighbors = r#"[{"dst":"10.1.1.0","lladdr":"0A:00:00:00:00:0B","state":["PERMANENT"]},
        {"dst":"10.1.3.0","lladdr":"0a:00:00:00:00:0c","state":["STALE"]}]"#;
    assert_eq!(
        links::parse_neighbors(neighbors),
        [("10.1.1.0".parse().unwrap(), "0a:00:00:00:00:0b".to_string())]
    );
    let fdb = r#"[{"mac":"0a:00:00:00:00:0b","dst":"172.20.0.11","flags":["self"],"state":"permanent"},
        {"mac":"00:00:00:00:00:00","dst":"172.20.0.11","flags":["self"],"state":"permanent"}]"#;
    assert_eq!(
        links::parse_fdb(fdb),
        [(
            "0a:00:00:00:00:0b".to_string(),
            "172.20.0.11".parse().unwrap()
        )]
    );
}

#[test]
fn host_gw_routes_once_this_nodes_own_node_is_seen() {
    let links = Fake::default();
    let peer = Arc::new(node(
        "b",
        Some("10.1.1.0/24"),
        &[(BACKEND_TYPE, "host-gw"), (PUBLIC_IP, "172.20.0.11")],
    ));
    let synced = sync_once(
        &settings(Backend::HostGw),
        &links,
        std::slice::from_ref(&peer),
    );
    assert_eq!(synced.peer_cidrs, None);
    assert!(links.state.lock().unwrap().applied.is_empty());
    let synced = sync_once(&settings(Backend::HostGw), &links, &[me(&[]), peer]);
    assert_eq!(synced.peer_cidrs, Some(vec!["10.1.1.0/24".to_string()]));
    assert!(links.state.lock().unwrap().vxlan.is_none());
}
