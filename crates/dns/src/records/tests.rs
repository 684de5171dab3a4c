//! Records from JSON-built objects, asked through [`Records::lookup`]
//! (which runs the server's own answer path).

use std::str::FromStr;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Name, RData, RecordType};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

use super::{Lookup, Records};

const ZONE: &str = "cluster.local";

fn ports_json(ports: &[(&str, &str, i32)]) -> serde_json::Value {
    ports
        .iter()
        .map(|(name, proto, port)| {
            let mut p = json!({"protocol": proto, "port": port});
            if !name.is_empty() {
                p["name"] = json!(name);
            }
            p
        })
        .collect()
}

fn cluster_ip(ns: &str, name: &str, ips: &[&str], ports: &[(&str, &str, i32)]) -> Service {
    serde_json::from_value(json!({
        "metadata": {"namespace": ns, "name": name},
        "spec": {"clusterIP": ips[0], "clusterIPs": ips, "ports": ports_json(ports)},
    }))
    .unwrap()
}

fn headless(ns: &str, name: &str, publish_not_ready: bool) -> Service {
    serde_json::from_value(json!({
        "metadata": {"namespace": ns, "name": name},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": publish_not_ready},
    }))
    .unwrap()
}

fn external(ns: &str, name: &str, target: &str) -> Service {
    serde_json::from_value(json!({
        "metadata": {"namespace": ns, "name": name},
        "spec": {"type": "ExternalName", "externalName": target},
    }))
    .unwrap()
}

/// An endpoint: address, hostname, ready condition (None: unset).
type Ep<'a> = (&'a str, Option<&'a str>, Option<bool>);

fn slice(
    ns: &str,
    name: &str,
    svc: &str,
    endpoints: &[Ep<'_>],
    ports: &[(&str, &str, i32)],
) -> EndpointSlice {
    let v6 = endpoints.iter().any(|(ip, _, _)| ip.contains(':'));
    let endpoints: Vec<_> = endpoints
        .iter()
        .map(|(ip, hostname, ready)| {
            let mut e = json!({"addresses": [ip]});
            if let Some(h) = hostname {
                e["hostname"] = json!(h);
            }
            if let Some(r) = ready {
                e["conditions"] = json!({"ready": r, "serving": true, "terminating": false});
            }
            e
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {
            "namespace": ns,
            "name": name,
            "labels": {"kubernetes.io/service-name": svc},
        },
        "addressType": if v6 { "IPv6" } else { "IPv4" },
        "endpoints": endpoints,
        "ports": ports_json(ports),
    }))
    .unwrap()
}

fn ask(records: &Records, name: &str, qtype: RecordType) -> Lookup {
    records.lookup(&Name::from_ascii(name).unwrap(), qtype)
}

/// The answers' data, as text, in order.
fn data(lookup: &Lookup) -> Vec<String> {
    lookup.answers.iter().map(|r| r.data.to_string()).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn assert_nxdomain(records: &Records, name: &str) {
    let l = ask(records, name, RecordType::A);
    assert_eq!(l.rcode, ResponseCode::NXDomain, "{name}: {l:?}");
    assert!(l.local);
    assert!(l.answers.is_empty());
    assert_soa(&l);
}

fn assert_nodata(records: &Records, name: &str, qtype: RecordType) {
    let l = ask(records, name, qtype);
    assert_eq!(l.rcode, ResponseCode::NoError, "{name} {qtype}: {l:?}");
    assert!(l.local);
    assert!(l.answers.is_empty(), "{name} {qtype}: {l:?}");
    assert_soa(&l);
}

fn assert_soa(l: &Lookup) {
    assert_eq!(l.authorities.len(), 1, "{l:?}");
    let soa = &l.authorities[0];
    assert_eq!(soa.name, Name::from_str("cluster.local.").unwrap());
    let RData::SOA(soa) = &soa.data else {
        panic!("not an SOA: {soa:?}");
    };
    assert_eq!(soa.mname, Name::from_str("ns.dns.cluster.local.").unwrap());
    assert_eq!(soa.minimum, 5);
}

fn web() -> Service {
    cluster_ip(
        "default",
        "web",
        &["10.96.0.10"],
        &[("http", "TCP", 80), ("dns", "UDP", 53), ("", "TCP", 8080)],
    )
}

#[test]
fn cluster_ip_service_a_record_and_nodata_for_aaaa() {
    let mut r = Records::new(ZONE, 5);
    r.apply_service(&web());
    let l = ask(&r, "web.default.svc.cluster.local.", RecordType::A);
    assert_eq!(l.rcode, ResponseCode::NoError);
    assert!(l.local);
    assert_eq!(data(&l), ["10.96.0.10"]);
    assert_eq!(l.answers[0].ttl, 5);
    assert!(l.authorities.is_empty());
    assert_nodata(&r, "web.default.svc.cluster.local.", RecordType::AAAA);
    assert_nodata(&r, "web.default.svc.cluster.local.", RecordType::MX);
}

#[test]
fn names_are_case_insensitive_and_answered_as_asked() {
    let mut r = Records::new("Cluster.Local", 5);
    r.apply_service(&web());
    let l = ask(&r, "WEB.Default.svc.CLUSTER.local.", RecordType::A);
    assert_eq!(data(&l), ["10.96.0.10"]);
    assert!(l.answers[0]
        .name
        .eq_case(&Name::from_ascii("WEB.Default.svc.CLUSTER.local.").unwrap()));
}

#[test]
fn dual_stack_service_has_a_and_aaaa() {
    let mut r = Records::new(ZONE, 5);
    r.apply_service(&cluster_ip(
        "default",
        "dual",
        &["10.96.0.11", "fd00::11"],
        &[],
    ));
    assert_eq!(
        data(&ask(&r, "dual.default.svc.cluster.local.", RecordType::A)),
        ["10.96.0.11"]
    );
    assert_eq!(
        data(&ask(
            &r,
            "dual.default.svc.cluster.local.",
            RecordType::AAAA
        )),
        ["fd00::11"]
    );
    let ptr = ask(
        &r,
        "1.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.",
        RecordType::PTR,
    );
    assert_eq!(data(&ptr), ["dual.default.svc.cluster.local."]);
}

#[test]
fn srv_for_each_named_port_and_all_of_them_at_the_service_name() {
    let mut r = Records::new(ZONE, 5);
    r.apply_service(&web());
    let l = ask(
        &r,
        "_http._tcp.web.default.svc.cluster.local.",
        RecordType::SRV,
    );
    assert_eq!(data(&l), ["0 100 80 web.default.svc.cluster.local."]);
    // The target's address rides along in the additional section.
    assert_eq!(l.additionals.len(), 1);
    assert_eq!(l.additionals[0].data.to_string(), "10.96.0.10");
    let l = ask(
        &r,
        "_dns._udp.web.default.svc.cluster.local.",
        RecordType::SRV,
    );
    assert_eq!(data(&l), ["0 100 53 web.default.svc.cluster.local."]);
    // Unnamed ports have none; the protocol must match.
    assert_nxdomain(&r, "_dns._tcp.web.default.svc.cluster.local.");
    let l = ask(&r, "web.default.svc.cluster.local.", RecordType::SRV);
    assert_eq!(
        sorted(data(&l)),
        [
            "0 50 53 web.default.svc.cluster.local.",
            "0 50 80 web.default.svc.cluster.local."
        ]
    );
    // `_tcp.web...` lies between a record and the zone: it exists.
    assert_nodata(&r, "_tcp.web.default.svc.cluster.local.", RecordType::SRV);
}

#[test]
fn ptr_for_cluster_ips_and_unknown_reverse_names_are_not_ours() {
    let mut r = Records::new(ZONE, 5);
    r.apply_service(&web());
    let l = ask(&r, "10.0.96.10.in-addr.arpa.", RecordType::PTR);
    assert!(l.local);
    assert_eq!(data(&l), ["web.default.svc.cluster.local."]);
    assert!(!ask(&r, "11.0.96.10.in-addr.arpa.", RecordType::PTR).local);
    assert!(!ask(&r, "0.96.10.in-addr.arpa.", RecordType::PTR).local);
    assert!(!ask(&r, "in-addr.arpa.", RecordType::SOA).local);
}

#[test]
fn empty_non_terminals_are_nodata_and_the_rest_nxdomain() {
    let mut r = Records::new(ZONE, 5);
    r.apply_service(&web());
    assert_nodata(&r, "default.svc.cluster.local.", RecordType::A);
    assert_nodata(&r, "svc.cluster.local.", RecordType::A);
    assert_nodata(&r, "pod.cluster.local.", RecordType::A);
    assert_nxdomain(&r, "other.svc.cluster.local.");
    assert_nxdomain(&r, "nope.default.svc.cluster.local.");
    assert_nxdomain(&r, "x.web.default.svc.cluster.local.");
    assert_nxdomain(&r, "www.example.com.default.svc.cluster.local.");
    assert_nxdomain(&r, "nothing.cluster.local.");
    // The apex has its SOA.
    let l = ask(&r, "cluster.local.", RecordType::SOA);
    assert_eq!(l.answers.len(), 1);
    assert!(matches!(l.answers[0].data, RData::SOA(_)));
    assert_nodata(&r, "cluster.local.", RecordType::A);
}

#[test]
fn names_outside_the_zone_are_forwarded() {
    let r = Records::new(ZONE, 5);
    let l = ask(&r, "www.example.com.", RecordType::A);
    assert!(!l.local);
    assert!(l.answers.is_empty());
    assert!(!ask(&r, "local.", RecordType::A).local);
    assert!(!ask(&r, "xcluster.local.", RecordType::A).local);
}

#[test]
fn dns_version_txt() {
    let r = Records::new(ZONE, 5);
    let l = ask(&r, "dns-version.cluster.local.", RecordType::TXT);
    assert_eq!(data(&l), ["1.1.0"]);
}

#[test]
fn headless_service_serves_ready_endpoints_only() {
    let mut r = Records::new(ZONE, 5);
    r.apply_service(&headless("db", "pg", false));
    r.apply_slice(&slice(
        "db",
        "pg-abc",
        "pg",
        &[
            ("10.42.0.5", Some("pg-0"), Some(true)),
            ("10.42.0.6", None, None),
            ("10.42.0.7", Some("pg-2"), Some(false)),
        ],
        &[("postgres", "TCP", 5432), ("", "TCP", 9187)],
    ));
    let l = ask(&r, "pg.db.svc.cluster.local.", RecordType::A);
    assert_eq!(data(&l), ["10.42.0.5", "10.42.0.6"]);
    assert_eq!(
        data(&ask(&r, "pg-0.pg.db.svc.cluster.local.", RecordType::A)),
        ["10.42.0.5"]
    );
    // No hostname: the address with dashes, as CoreDNS names it.
    assert_eq!(
        data(&ask(
            &r,
            "10-42-0-6.pg.db.svc.cluster.local.",
            RecordType::A
        )),
        ["10.42.0.6"]
    );
    assert_nxdomain(&r, "pg-2.pg.db.svc.cluster.local.");
    let srv = ask(
        &r,
        "_postgres._tcp.pg.db.svc.cluster.local.",
        RecordType::SRV,
    );
    assert_eq!(
        sorted(data(&srv)),
        [
            "0 50 5432 10-42-0-6.pg.db.svc.cluster.local.",
            "0 50 5432 pg-0.pg.db.svc.cluster.local."
        ]
    );
    assert_eq!(srv.additionals.len(), 2);
    assert_eq!(
        data(&ask(&r, "pg.db.svc.cluster.local.", RecordType::SRV)).len(),
        2
    );
    assert_eq!(
        data(&ask(&r, "5.0.42.10.in-addr.arpa.", RecordType::PTR)),
        ["pg-0.pg.db.svc.cluster.local."]
    );
    assert_eq!(
        data(&ask(&r, "6.0.42.10.in-addr.arpa.", RecordType::PTR)),
        ["10-42-0-6.pg.db.svc.cluster.local."]
    );
    assert!(!ask(&r, "7.0.42.10.in-addr.arpa.", RecordType::PTR).local);
}

#[test]
fn publish_not_ready_addresses_includes_not_ready_endpoints() {
    let mut r = Records::new(ZONE, 5);
    r.apply_slice(&slice(
        "db",
        "pg-abc",
        "pg",
        &[
            ("10.42.0.5", None, Some(true)),
            ("10.42.0.7", Some("pg-2"), Some(false)),
        ],
        &[],
    ));
    r.apply_service(&headless("db", "pg", true));
    assert_eq!(
        data(&ask(&r, "pg.db.svc.cluster.local.", RecordType::A)),
        ["10.42.0.5", "10.42.0.7"]
    );
    assert_eq!(
        data(&ask(&r, "pg-2.pg.db.svc.cluster.local.", RecordType::A)),
        ["10.42.0.7"]
    );
    // Turning it off drops the not-ready one again.
    r.apply_service(&headless("db", "pg", false));
    assert_eq!(
        data(&ask(&r, "pg.db.svc.cluster.local.", RecordType::A)),
        ["10.42.0.5"]
    );
    assert_nxdomain(&r, "pg-2.pg.db.svc.cluster.local.");
}

#[test]
fn headless_without_ready_endpoints_is_nxdomain_but_its_namespace_exists() {
    let mut r = Records::new(ZONE, 5);
    r.apply_service(&headless("db", "pg", false));
    assert_nxdomain(&r, "pg.db.svc.cluster.local.");
    assert_nodata(&r, "db.svc.cluster.local.", RecordType::A);
    r.apply_slice(&slice(
        "db",
        "pg-1",
        "pg",
        &[("10.42.0.9", None, Some(false))],
        &[],
    ));
    assert_nxdomain(&r, "pg.db.svc.cluster.local.");
}

#[test]
fn ipv6_headless_endpoints() {
    let mut r = Records::new(ZONE, 5);
    r.apply_service(&headless("db", "pg", false));
    r.apply_slice(&slice(
        "db",
        "pg-v6",
        "pg",
        &[("fd00::5", None, Some(true))],
        &[("pg", "TCP", 5432)],
    ));
    assert_eq!(
        data(&ask(&r, "pg.db.svc.cluster.local.", RecordType::AAAA)),
        ["fd00::5"]
    );
    assert_nodata(&r, "pg.db.svc.cluster.local.", RecordType::A);
    assert_eq!(
        data(&ask(
            &r,
            "fd00--5.pg.db.svc.cluster.local.",
            RecordType::AAAA
        )),
        ["fd00::5"]
    );
    assert_eq!(
        data(&ask(
            &r,
            "_pg._tcp.pg.db.svc.cluster.local.",
            RecordType::SRV
        )),
        ["0 100 5432 fd00--5.pg.db.svc.cluster.local."]
    );
}

#[test]
fn slices_come_and_go() {
    let mut r = Records::new(ZONE, 5);
    r.apply_service(&headless("db", "pg", false));
    r.apply_slice(&slice(
        "db",
        "pg-1",
        "pg",
        &[("10.42.0.5", None, None)],
        &[],
    ));
    r.apply_slice(&slice(
        "db",
        "pg-2",
        "pg",
        &[("10.42.1.5", None, None)],
        &[],
    ));
    assert_eq!(
        data(&ask(&r, "pg.db.svc.cluster.local.", RecordType::A)),
        ["10.42.0.5", "10.42.1.5"]
    );
    // An update of one slice replaces its endpoints.
    r.apply_slice(&slice(
        "db",
        "pg-2",
        "pg",
        &[("10.42.1.6", None, None)],
        &[],
    ));
    assert_eq!(
        data(&ask(&r, "pg.db.svc.cluster.local.", RecordType::A)),
        ["10.42.0.5", "10.42.1.6"]
    );
    assert!(!ask(&r, "5.1.42.10.in-addr.arpa.", RecordType::PTR).local);
    r.delete_slice(&slice("db", "pg-1", "pg", &[], &[]));
    assert_eq!(
        data(&ask(&r, "pg.db.svc.cluster.local.", RecordType::A)),
        ["10.42.1.6"]
    );
    assert_nxdomain(&r, "10-42-0-5.pg.db.svc.cluster.local.");
    // A slice moved to another Service leaves the first.
    r.apply_slice(&slice(
        "db",
        "pg-2",
        "other",
        &[("10.42.1.6", None, None)],
        &[],
    ));
    assert_nxdomain(&r, "pg.db.svc.cluster.local.");
    // Slices without the service-name label are ignored.
    let mut unlabelled = slice("db", "pg-3", "pg", &[("10.42.2.1", None, None)], &[]);
    unlabelled.metadata.labels = None;
    r.apply_slice(&unlabelled);
    assert_nxdomain(&r, "pg.db.svc.cluster.local.");
}

#[test]
fn deleting_a_service_removes_its_names() {
    let mut r = Records::new(ZONE, 5);
    r.apply_service(&web());
    r.delete_service(&web());
    assert_nxdomain(&r, "web.default.svc.cluster.local.");
    assert_nxdomain(&r, "_http._tcp.web.default.svc.cluster.local.");
    assert_nxdomain(&r, "default.svc.cluster.local.");
    assert!(!ask(&r, "10.0.96.10.in-addr.arpa.", RecordType::PTR).local);
    // The zone's own names stay.
    assert_nodata(&r, "svc.cluster.local.", RecordType::A);
    assert_eq!(
        data(&ask(&r, "dns-version.cluster.local.", RecordType::TXT)),
        ["1.1.0"]
    );
}

#[test]
fn a_namespace_lives_while_any_of_its_services_does() {
    let mut r = Records::new(ZONE, 5);
    r.apply_service(&web());
    r.apply_service(&cluster_ip("default", "api", &["10.96.0.20"], &[]));
    r.delete_service(&web());
    assert_nodata(&r, "default.svc.cluster.local.", RecordType::A);
    assert_eq!(
        data(&ask(&r, "api.default.svc.cluster.local.", RecordType::A)),
        ["10.96.0.20"]
    );
}

#[test]
fn an_address_in_two_headless_services_has_two_ptrs() {
    let mut r = Records::new(ZONE, 5);
    for svc in ["a", "b"] {
        r.apply_service(&headless("ns", svc, false));
        r.apply_slice(&slice(
            "ns",
            &format!("{svc}-1"),
            svc,
            &[("10.42.0.8", None, None)],
            &[],
        ));
    }
    let ptr = "8.0.42.10.in-addr.arpa.";
    assert_eq!(
        sorted(data(&ask(&r, ptr, RecordType::PTR))),
        [
            "10-42-0-8.a.ns.svc.cluster.local.",
            "10-42-0-8.b.ns.svc.cluster.local."
        ]
    );
    r.delete_service(&headless("ns", "a", false));
    assert_eq!(
        data(&ask(&r, ptr, RecordType::PTR)),
        ["10-42-0-8.b.ns.svc.cluster.local."]
    );
}

#[test]
fn external_name_is_a_cname_for_every_type() {
    let mut r = Records::new(ZONE, 5);
    r.apply_service(&external("default", "search", "www.example.com"));
    for qtype in [
        RecordType::A,
        RecordType::AAAA,
        RecordType::CNAME,
        RecordType::SRV,
    ] {
        let l = ask(&r, "search.default.svc.cluster.local.", qtype);
        assert_eq!(l.rcode, ResponseCode::NoError);
        assert_eq!(data(&l), ["www.example.com."], "{qtype}");
        assert!(l.authorities.is_empty());
    }
}

#[test]
fn cnames_into_the_zone_are_followed() {
    let mut r = Records::new(ZONE, 5);
    r.apply_service(&web());
    r.apply_service(&external("other", "alias", "web.default.svc.cluster.local"));
    r.apply_service(&external(
        "other",
        "alias2",
        "alias.other.svc.cluster.local.",
    ));
    r.apply_service(&external(
        "other",
        "dangling",
        "gone.default.svc.cluster.local",
    ));
    r.apply_service(&external("other", "pod", "10-1-2-3.x.pod.cluster.local"));
    let l = ask(&r, "Alias2.other.svc.cluster.local.", RecordType::A);
    assert_eq!(
        data(&l),
        [
            "alias.other.svc.cluster.local.",
            "web.default.svc.cluster.local.",
            "10.96.0.10"
        ]
    );
    assert_eq!(
        l.answers[1].name,
        Name::from_str("alias.other.svc.cluster.local.").unwrap()
    );
    assert_eq!(
        l.answers[2].name,
        Name::from_str("web.default.svc.cluster.local.").unwrap()
    );
    let l = ask(&r, "alias.other.svc.cluster.local.", RecordType::AAAA);
    assert_eq!(data(&l), ["web.default.svc.cluster.local."]);
    assert_soa(&l);
    let l = ask(&r, "dangling.other.svc.cluster.local.", RecordType::A);
    assert_eq!(l.rcode, ResponseCode::NXDomain);
    assert_eq!(data(&l), ["gone.default.svc.cluster.local."]);
    let l = ask(&r, "pod.other.svc.cluster.local.", RecordType::A);
    assert_eq!(data(&l), ["10-1-2-3.x.pod.cluster.local.", "10.1.2.3"]);
}

#[test]
fn a_cname_loop_ends() {
    let mut r = Records::new(ZONE, 5);
    r.apply_service(&external("ns", "a", "b.ns.svc.cluster.local"));
    r.apply_service(&external("ns", "b", "a.ns.svc.cluster.local"));
    let l = ask(&r, "a.ns.svc.cluster.local.", RecordType::A);
    assert_eq!(l.rcode, ResponseCode::NoError);
    assert!(l.answers.len() <= 1 + super::MAX_CNAME_HOPS);
}

#[test]
fn pod_names_echo_their_address() {
    let r = Records::new(ZONE, 5);
    assert_eq!(
        data(&ask(
            &r,
            "10-1-2-3.default.pod.cluster.local.",
            RecordType::A
        )),
        ["10.1.2.3"]
    );
    assert_eq!(
        data(&ask(
            &r,
            "10-1-2-3.any-ns.pod.cluster.local.",
            RecordType::A
        )),
        ["10.1.2.3"]
    );
    assert_nodata(&r, "10-1-2-3.default.pod.cluster.local.", RecordType::AAAA);
    assert_eq!(
        data(&ask(
            &r,
            "fd00--1.default.pod.cluster.local.",
            RecordType::AAAA
        )),
        ["fd00::1"]
    );
    assert_nodata(&r, "default.pod.cluster.local.", RecordType::A);
    for bad in [
        "10-1-2.default.pod.cluster.local.",
        "300-1-2-3.default.pod.cluster.local.",
        "a-b-c-d.default.pod.cluster.local.",
        "10-1-2-3.x.default.pod.cluster.local.",
        "x.10-1-2-3.default.pod.cluster.local.",
    ] {
        assert_nxdomain(&r, bad);
    }
}

#[test]
fn not_ready_index_fails_names_in_the_zone_only() {
    let mut r = Records::new(ZONE, 5);
    r.apply_service(&web());
    r.set_ready(false);
    let l = ask(&r, "web.default.svc.cluster.local.", RecordType::A);
    assert_eq!(l.rcode, ResponseCode::ServFail);
    assert!(!ask(&r, "example.com.", RecordType::A).local);
}

#[test]
fn services_without_an_address_yet_only_make_their_namespace() {
    let mut r = Records::new(ZONE, 5);
    let pending: Service = serde_json::from_value(json!({
        "metadata": {"namespace": "ns", "name": "pending"},
        "spec": {"ports": [{"name": "http", "port": 80}]},
    }))
    .unwrap();
    r.apply_service(&pending);
    assert_nxdomain(&r, "pending.ns.svc.cluster.local.");
    assert_nodata(&r, "ns.svc.cluster.local.", RecordType::A);
}

#[test]
fn a_whole_list_at_once_equals_one_by_one() {
    let services = [
        web(),
        headless("db", "pg", false),
        external("x", "e", "example.org"),
    ];
    let slices = [slice(
        "db",
        "pg-1",
        "pg",
        &[("10.42.0.5", Some("pg-0"), None)],
        &[("postgres", "TCP", 5432)],
    )];
    let bulk = Records::from_objects(ZONE, 5, &services, &slices);
    let mut one = Records::new(ZONE, 5);
    for s in &slices {
        one.apply_slice(s);
    }
    for s in &services {
        one.apply_service(s);
    }
    for (name, qtype) in [
        ("web.default.svc.cluster.local.", RecordType::A),
        ("pg.db.svc.cluster.local.", RecordType::SRV),
        ("pg-0.pg.db.svc.cluster.local.", RecordType::A),
        ("e.x.svc.cluster.local.", RecordType::A),
        ("5.0.42.10.in-addr.arpa.", RecordType::PTR),
    ] {
        let (a, b) = (ask(&bulk, name, qtype), ask(&one, name, qtype));
        assert!(!a.answers.is_empty(), "{name}");
        assert_eq!(data(&a), data(&b), "{name}");
    }
}

#[test]
fn ttl_is_the_configured_one() {
    let mut r = Records::new(ZONE, 30);
    r.apply_service(&web());
    let l = ask(&r, "web.default.svc.cluster.local.", RecordType::A);
    assert_eq!(l.answers[0].ttl, 30);
}
