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
    assert!(synced.peer_cidrs.is_empty());
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
    assert!(synced.peer_cidrs.is_empty());
    // Its MAC arrives: the entries are added, and its CIDR is routed.
    let peer = Arc::new(vxlan_node(
        "b",
        "10.1.1.0/24",
        "172.20.0.11",
        "0a:00:00:00:00:0b",
    ));
    let synced = sync_once(&settings(Backend::Vxlan), &links, &[own.clone(), peer]);
    assert_eq!(synced.peer_cidrs, ["10.1.1.0/24"]);
    assert!(synced.failed.is_empty(), "{:?}", synced.failed);
    assert_eq!(links.state.lock().unwrap().observed.routes.len(), 1);
    // It leaves: its entries go.
    let synced = sync_once(&settings(Backend::Vxlan), &links, &[own]);
    let observed = links.state.lock().unwrap().observed.clone();
    assert_eq!(observed, Observed::default());
    assert!(synced.peer_cidrs.is_empty());
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
    assert!(synced.peer_cidrs.is_empty());
}
