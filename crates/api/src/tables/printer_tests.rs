//! Tests of the Node, Event, Service, Endpoints and small core printers.

use chrono::Duration;
use serde_json::{json, Value};

use super::row_cells;
use super::tests::{ago, meta, now};

fn node(ready: Option<&str>, unschedulable: bool, labels: Value) -> Value {
    let conditions: Vec<Value> = ready
        .map(|s| json!({"type": "Ready", "status": s}))
        .into_iter()
        .collect();
    json!({
        "metadata": {"name": "n1", "creationTimestamp": ago(Duration::days(3)), "labels": labels},
        "spec": {"unschedulable": unschedulable},
        "status": {"conditions": conditions, "nodeInfo": {"kubeletVersion": "v1.33.1", "osImage": "Ubuntu"},
            "addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "10.0.0.5"}]},
    })
}

#[test]
fn node_status_and_roles() {
    let cases = [
        (node(Some("True"), false, json!({})), "Ready", "<none>"),
        (
            node(
                Some("True"),
                true,
                json!({"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/control-plane": ""}),
            ),
            "Ready,SchedulingDisabled",
            "control-plane,worker",
        ),
        (
            node(Some("False"), false, json!({"kubernetes.io/role": "infra"})),
            "NotReady",
            "infra",
        ),
        (
            node(
                Some("Unknown"),
                false,
                json!({"node-role.kubernetes.io/": ""}),
            ),
            "NotReady",
            "<none>",
        ),
        (
            node(None, true, json!({})),
            "Unknown,SchedulingDisabled",
            "<none>",
        ),
    ];
    for (n, status, roles) in cases {
        let cells = row_cells("Node", &n, now());
        assert_eq!(
            (cells[1].as_str().unwrap(), cells[2].as_str().unwrap()),
            (status, roles)
        );
    }
    let cells = row_cells("Node", &node(Some("True"), false, json!({})), now());
    assert_eq!(
        cells,
        [
            "n1",
            "Ready",
            "<none>",
            "3d",
            "v1.33.1",
            "10.0.0.5",
            "<none>",
            "Ubuntu",
            "<unknown>",
            "<unknown>"
        ]
    );
}

#[test]
fn event_cells() {
    let core = json!({
        "metadata": {"name": "p.17a"},
        "involvedObject": {"kind": "Pod", "name": "web-0", "fieldPath": "spec.containers{web}"},
        "reason": "BackOff", "type": "Warning", "message": "Back-off restarting failed container\n",
        "source": {"component": "kubelet", "host": "node-a"},
        "firstTimestamp": ago(Duration::minutes(30)), "lastTimestamp": ago(Duration::seconds(90)), "count": 12,
    });
    assert_eq!(
        row_cells("Event", &core, now()),
        [
            json!("90s"),
            json!("Warning"),
            json!("BackOff"),
            json!("pod/web-0"),
            json!("spec.containers{web}"),
            json!("kubelet, node-a"),
            json!("Back-off restarting failed container"),
            json!("30m"),
            json!(12),
            json!("p.17a"),
        ]
    );
    let new_api = json!({
        "metadata": {"name": "e2"}, "regarding": {"kind": "Node"}, "reason": "Starting", "type": "Normal",
        "note": "Starting kubelet.", "reportingController": "kubelet", "reportingInstance": "node-b",
        "eventTime": ago(Duration::hours(4)),
        "series": {"count": 4, "lastObservedTime": ago(Duration::minutes(3))},
    });
    let cells = row_cells("Event", &new_api, now());
    assert_eq!(
        cells[..4],
        [
            json!("3m"),
            json!("Normal"),
            json!("Starting"),
            json!("node")
        ]
    );
    assert_eq!(
        cells[5..],
        [
            json!("kubelet, node-b"),
            json!("Starting kubelet."),
            json!("4h"),
            json!(4),
            json!("e2")
        ]
    );
    let singleton = json!({"metadata": {"name": "e3"}, "eventTime": ago(Duration::seconds(5)), "reportingComponent": "sched"});
    let cells = row_cells("Event", &singleton, now());
    assert_eq!(
        (&cells[0], &cells[5], &cells[7], &cells[8]),
        (&json!("5s"), &json!("sched"), &json!("5s"), &json!(1))
    );
    assert_eq!(row_cells("Event", &json!({}), now())[0], "<unknown>");
}

fn service(spec: Value, status: Value) -> Value {
    json!({"metadata": meta("svc"), "spec": spec, "status": status})
}

#[test]
fn service_cells() {
    let cases = [
        (
            service(
                json!({"clusterIP": "10.96.0.10", "selector": {"tier": "fe", "app": "web"},
                "ports": [{"port": 53, "protocol": "UDP"}, {"port": 443, "nodePort": 30443}]}),
                json!({}),
            ),
            [
                "ClusterIP",
                "10.96.0.10",
                "<none>",
                "53/UDP,443:30443/TCP",
                "app=web,tier=fe",
            ],
        ),
        (
            service(
                json!({"type": "NodePort", "clusterIPs": ["10.96.0.11", "fd00::11"], "externalIPs": ["1.2.3.4"]}),
                json!({}),
            ),
            ["NodePort", "10.96.0.11", "1.2.3.4", "<none>", "<none>"],
        ),
        (
            service(
                json!({"type": "LoadBalancer", "clusterIP": "None"}),
                json!({}),
            ),
            ["LoadBalancer", "None", "<pending>", "<none>", "<none>"],
        ),
        (
            service(
                json!({"type": "LoadBalancer", "externalIPs": ["9.9.9.9"]}),
                json!({"loadBalancer": {"ingress": [{"ip": "5.6.7.8"}, {"hostname": "lb.example"}, {"ip": "1.1.1.1"}]}}),
            ),
            [
                "LoadBalancer",
                "<none>",
                "1.1.1.1,5.6.7.8,lb.example,9.9.9.9",
                "<none>",
                "<none>",
            ],
        ),
        (
            service(
                json!({"type": "ExternalName", "externalName": "db.example.com"}),
                json!({}),
            ),
            [
                "ExternalName",
                "<none>",
                "db.example.com",
                "<none>",
                "<none>",
            ],
        ),
    ];
    for (svc, want) in cases {
        let cells = row_cells("Service", &svc, now());
        assert_eq!(
            cells[1..5],
            want[..4].iter().map(|s| json!(s)).collect::<Vec<_>>()
        );
        assert_eq!((&cells[5], &cells[6]), (&json!("3d"), &json!(want[4])));
    }
}

#[test]
fn endpoints_cells() {
    let addrs = |ips: &[&str]| ips.iter().map(|ip| json!({"ip": ip})).collect::<Vec<_>>();
    let cases = [
        (json!([]), "<none>"),
        (
            json!([{"addresses": addrs(&["10.0.0.1"]), "ports": [{"port": 80}, {"port": 443}]}]),
            "10.0.0.1:80,10.0.0.1:443",
        ),
        (
            json!([{"addresses": addrs(&["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"]), "ports": [{"port": 8080}]}]),
            "10.0.0.1:8080,10.0.0.2:8080,10.0.0.3:8080 + 2 more...",
        ),
        (
            json!([{"addresses": addrs(&["fd00::1"]), "ports": [{"port": 80}]}]),
            "[fd00::1]:80",
        ),
        (json!([{"addresses": addrs(&["10.0.0.9"])}]), "10.0.0.9"),
        (
            json!([{"notReadyAddresses": addrs(&["10.0.0.9"]), "ports": [{"port": 80}]}]),
            "",
        ),
    ];
    for (subsets, want) in cases {
        let ep = json!({"metadata": meta("ep"), "subsets": subsets});
        assert_eq!(
            row_cells("Endpoints", &ep, now()),
            [json!("ep"), json!(want), json!("3d")]
        );
    }
}

#[test]
fn simple_kinds() {
    let cm = json!({"metadata": meta("cm"), "data": {"a": "1", "b": "2"}, "binaryData": {"c": ""}});
    assert_eq!(
        row_cells("ConfigMap", &cm, now()),
        [json!("cm"), json!(3), json!("3d")]
    );
    let secret = json!({"metadata": meta("s"), "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}});
    assert_eq!(
        row_cells("Secret", &secret, now()),
        [
            json!("s"),
            json!("kubernetes.io/tls"),
            json!(2),
            json!("3d")
        ]
    );
    let opaque = json!({"metadata": meta("o"), "stringData": {"x": "y"}});
    assert_eq!(
        row_cells("Secret", &opaque, now())[1..3],
        [json!("Opaque"), json!(1)]
    );
    let sa = json!({"metadata": meta("default"), "secrets": [{"name": "t"}]});
    assert_eq!(
        row_cells("ServiceAccount", &sa, now()),
        [json!("default"), json!(1), json!("3d")]
    );
    let lease = json!({"metadata": meta("kube-scheduler"), "spec": {"holderIdentity": "cp-1_abc"}});
    assert_eq!(
        row_cells("Lease", &lease, now()),
        [json!("kube-scheduler"), json!("cp-1_abc"), json!("3d")]
    );
    let ns = json!({"metadata": meta("dev"), "status": {"phase": "Terminating"}});
    assert_eq!(
        row_cells("Namespace", &ns, now()),
        [json!("dev"), json!("Terminating"), json!("3d")]
    );
    assert_eq!(
        row_cells("Namespace", &json!({"metadata": meta("x")}), now())[1],
        "Active"
    );
}
