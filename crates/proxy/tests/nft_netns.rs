//! The batches the proxier writes, applied by the real nft to the real
//! kernel inside a network namespace of the test's own (so the host's
//! tables are never touched): the full table, then changes one at a time,
//! each checked against what `nft list table` shows.

use std::process::Command;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;
use skiff_proxy::nft::{Nft, NftCommand};
use skiff_proxy::rules::Skeleton;
use skiff_proxy::sync::Proxier;

/// A network namespace removed on drop.
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Self {
        let name = format!("skp-{tag}-{}", std::process::id());
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .unwrap();
        assert!(ok.success(), "ip netns add {name}");
        Self(name)
    }

    fn nft(&self) -> NftCommand {
        NftCommand::with_prefix(&["ip", "netns", "exec", &self.0])
    }

    fn list(&self, table: &str) -> String {
        let out = Command::new("ip")
            .args([
                "netns", "exec", &self.0, "nft", "list", "table", "ip", table,
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn svc(name: &str, spec: serde_json::Value) -> Arc<Service> {
    Arc::new(
        serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": "ns"}, "spec": spec}),
        )
        .unwrap(),
    )
}

fn slice(svc: &str, eps: &[(&str, &str)]) -> Arc<EndpointSlice> {
    let eps: Vec<_> = eps
        .iter()
        .map(|(ip, node)| json!({"addresses": [ip], "nodeName": node, "conditions": {"ready": true}}))
        .collect();
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": format!("{svc}-x"), "namespace": "ns",
                         "labels": {"kubernetes.io/service-name": svc}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": eps,
        }))
        .unwrap(),
    )
}

fn sync(p: &mut Proxier, nft: &NftCommand) -> String {
    let plan = p.plan().expect("a change to sync");
    let script = plan.script.clone();
    nft.apply(&script)
        .unwrap_or_else(|e| panic!("{e}\nbatch:\n{script}"));
    p.commit(plan);
    script
}

/// Applies the batch that deletes the chains and sets flushed earlier.
fn cleanup(p: &mut Proxier, nft: &NftCommand) {
    let due = p.next_cleanup().expect("stale chains");
    let plan = p.plan_at(due).expect("a clean-up batch");
    assert!(plan.script.contains("delete chain"), "{}", plan.script);
    nft.apply(&plan.script)
        .unwrap_or_else(|e| panic!("{e}\nbatch:\n{}", plan.script));
    p.commit(plan);
}

#[test]
fn full_and_incremental_batches_are_taken_by_the_kernel() {
    let ns = Netns::new("sync");
    let nft = ns.nft();
    let table = "skiff-test";
    let mut p = Proxier::new(
        Skeleton {
            table: table.into(),
            node_ips: vec!["192.0.2.1".parse().unwrap()],
            cluster_cidr: Some("10.42.0.0/16".into()),
            service_cidr: Some("10.43.0.0/16".into()),
        },
        "n1",
    );
    p.apply_service(svc(
        "web",
        json!({"clusterIP": "10.43.0.5", "type": "NodePort",
        "externalTrafficPolicy": "Local", "sessionAffinity": "ClientIP",
        "ports": [{"name": "http", "port": 80, "nodePort": 30080}]}),
    ));
    p.apply_service(svc(
        "empty",
        json!({"clusterIP": "10.43.0.6", "ports": [{"name": "http", "port": 80}]}),
    ));
    p.apply_slice(slice("web", &[("10.42.0.5", "n1"), ("10.42.1.5", "n2")]));
    sync(&mut p, &nft);
    let listed = ns.list(table);
    assert!(
        listed.contains("10.43.0.5 . tcp . 80 : goto service-"),
        "{listed}"
    );
    assert!(
        listed.contains("10.43.0.6 . tcp . 80 : goto reject-chain"),
        "{listed}"
    );
    assert!(listed.contains("tcp . 30080 : goto external-"), "{listed}");
    assert!(listed.contains("dnat to 10.42.1.5:8080"), "{listed}");
    assert!(listed.contains("timeout 3h"), "{listed}");

    // One more endpoint: only web's chains change.
    p.apply_slice(slice(
        "web",
        &[
            ("10.42.0.5", "n1"),
            ("10.42.1.5", "n2"),
            ("10.42.0.7", "n1"),
        ],
    ));
    let script = sync(&mut p, &nft);
    assert!(!script.contains("10.43.0.6"), "{script}");
    let listed = ns.list(table);
    assert!(listed.contains("numgen random mod 3"), "{listed}");

    // Endpoints for the empty one, an endpoint gone, a Service gone.
    p.apply_slice(slice("empty", &[("10.42.0.9", "n1")]));
    p.apply_slice(slice("web", &[("10.42.0.7", "n1")]));
    sync(&mut p, &nft);
    let listed = ns.list(table);
    assert!(
        listed.contains("10.43.0.6 . tcp . 80 . 0 : 10.42.0.9 . 8080"),
        "{listed}"
    );
    // The endpoint's chain is emptied now and deleted in a later batch.
    assert!(!listed.contains("dnat to 10.42.1.5"), "{listed}");
    cleanup(&mut p, &nft);
    assert!(!ns.list(table).contains("10.42.1.5"));
    p.delete_service(&svc("web", json!({})));
    sync(&mut p, &nft);
    cleanup(&mut p, &nft);
    let listed = ns.list(table);
    assert!(!listed.contains("30080"), "{listed}");
    assert!(!listed.contains("ns/web/"), "{listed}");

    // A failed batch (the table removed behind our back) is followed by
    // a full rebuild that brings everything back.
    nft.delete_table(table).unwrap();
    assert!(ns.list(table).is_empty());
    p.fail();
    sync(&mut p, &nft);
    assert!(ns
        .list(table)
        .contains("10.43.0.6 . tcp . 80 . 0 : 10.42.0.9 . 8080"));
    nft.delete_table(table).unwrap();
    nft.delete_table(table).unwrap();
}
