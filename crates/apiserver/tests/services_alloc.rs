//! Service ClusterIP and NodePort allocation with the real kubectl (1.27, 1.30
//! and 1.33): the `kubernetes` Service at the range's first address with
//! its Endpoints, ClusterIPs and IP family fields on create, headless and
//! ExternalName Services, requested addresses and ports honoured and
//! refused in upstream's words when taken or out of range, everything
//! given back on delete and on a type change, the ClusterIP immutable,
//! the IPAddress and ServiceCIDR objects, and the same state after the
//! API server restarts on the same store.

mod support;

use std::path::PathBuf;
use std::sync::Arc;

use skiff_apiserver::{ApiServer, Config};
use skiff_store::sqlite::SqliteStore;
use skiff_store::Store;
use support::{fails, ok, Kubectl, TestServer, KUBECTL_DIR};
use tokio_util::sync::CancellationToken;

async fn json(k: &Kubectl, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&ok(k, &all).await).expect("kubectl -o json")
}

fn ip_in_range(ip: &str) -> bool {
    let Ok(ip) = ip.parse::<std::net::Ipv4Addr>() else {
        return false;
    };
    let o = ip.octets();
    o[0] == 10 && o[1] == 43 && ip != std::net::Ipv4Addr::new(10, 43, 0, 0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubernetes_service_and_its_range() {
    let server = TestServer::start().await;
    let k = server.kubectl(33);
    let svc = json(&k, &["get", "svc", "kubernetes", "-n", "default"]).await;
    assert_eq!(svc["spec"]["clusterIP"], "10.43.0.1");
    assert_eq!(svc["spec"]["clusterIPs"], serde_json::json!(["10.43.0.1"]));
    assert_eq!(svc["spec"]["ports"][0]["port"], 443);
    assert_eq!(svc["metadata"]["labels"]["component"], "apiserver");
    let port: u16 = server.url.rsplit(':').next().unwrap().parse().unwrap();
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], port);
    let ep = json(&k, &["get", "endpoints", "kubernetes", "-n", "default"]).await;
    assert_eq!(ep["subsets"][0]["addresses"][0]["ip"], "127.0.0.1");
    assert_eq!(ep["subsets"][0]["ports"][0]["port"], port);
    let cidrs = ok(&k, &["get", "servicecidrs"]).await;
    assert!(
        cidrs.contains("kubernetes") && cidrs.contains("10.43.0.0/16"),
        "{cidrs}"
    );
    let ips = ok(&k, &["get", "ipaddresses"]).await;
    assert!(
        ips.contains("10.43.0.1") && ips.contains("services/default/kubernetes"),
        "{ips}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_ips_are_allocated_refused_and_released() {
    let server = TestServer::start().await;
    for minor in [27, 30, 33] {
        let k = server.kubectl(minor);
        let ns = format!("alloc{minor}");
        let n = ns.as_str();
        ok(&k, &["create", "namespace", n]).await;
        // A picked address, with the family fields upstream sets.
        ok(
            &k,
            &[
                "create",
                "service",
                "clusterip",
                "a",
                "--tcp=80:8080",
                "-n",
                n,
            ],
        )
        .await;
        let a = json(&k, &["get", "svc", "a", "-n", n]).await;
        let ip = a["spec"]["clusterIP"].as_str().unwrap().to_string();
        assert!(ip_in_range(&ip), "{ip}");
        assert_eq!(a["spec"]["clusterIPs"], serde_json::json!([ip]));
        assert_eq!(a["spec"]["ipFamilies"], serde_json::json!(["IPv4"]));
        assert_eq!(a["spec"]["ipFamilyPolicy"], "SingleStack");
        assert_eq!(a["spec"]["internalTrafficPolicy"], "Cluster");
        let addr = json(&k, &["get", "ipaddress", &ip]).await;
        assert_eq!(addr["spec"]["parentRef"]["name"], "a");
        assert_eq!(addr["spec"]["parentRef"]["namespace"], n);
        assert_eq!(addr["spec"]["parentRef"]["resource"], "services");
        // A requested address, then the same one again.
        let wanted = format!("10.43.0.{minor}");
        ok(
            &k,
            &[
                "create",
                "service",
                "clusterip",
                "b",
                "--tcp=80",
                "-n",
                n,
                &format!("--clusterip={wanted}"),
            ],
        )
        .await;
        assert_eq!(
            json(&k, &["get", "svc", "b", "-n", n]).await["spec"]["clusterIP"],
            wanted.as_str()
        );
        let err = fails(
            &k,
            &[
                "create",
                "service",
                "clusterip",
                "c",
                "--tcp=80",
                "-n",
                n,
                &format!("--clusterip={wanted}"),
            ],
        )
        .await;
        assert!(
            err.contains(&format!("Service \"c\" is invalid: spec.clusterIPs: Invalid value: []string{{\"{wanted}\"}}: failed to allocate IP {wanted}: provided IP is already allocated")),
            "{err}"
        );
        let err = fails(
            &k,
            &[
                "create",
                "service",
                "clusterip",
                "c",
                "--tcp=80",
                "-n",
                n,
                "--clusterip=10.99.0.1",
            ],
        )
        .await;
        assert!(
            err.contains("failed to allocate IP 10.99.0.1: the provided IP (10.99.0.1) is not in the valid range. The range of valid IPs is 10.43.0.0/16"),
            "{err}"
        );
        // Deleting b gives its address back.
        ok(&k, &["delete", "svc", "b", "-n", n]).await;
        ok(
            &k,
            &[
                "create",
                "service",
                "clusterip",
                "c",
                "--tcp=80",
                "-n",
                n,
                &format!("--clusterip={wanted}"),
            ],
        )
        .await;
        assert_eq!(
            json(&k, &["get", "ipaddress", &wanted]).await["spec"]["parentRef"]["name"],
            "c"
        );
        // The ClusterIP may not change.
        let err = fails(
            &k,
            &[
                "patch",
                "svc",
                "c",
                "-n",
                n,
                "-p",
                r#"{"spec":{"clusterIP":"10.43.0.200","clusterIPs":["10.43.0.200"]}}"#,
            ],
        )
        .await;
        assert!(
            err.contains(
                "spec.clusterIPs[0]: Invalid value: \"10.43.0.200\": may not change once set"
            ),
            "{err}"
        );
        // Headless and ExternalName Services get no address.
        ok(
            &k,
            &[
                "create",
                "service",
                "clusterip",
                "h",
                "--clusterip=None",
                "-n",
                n,
            ],
        )
        .await;
        let h = json(&k, &["get", "svc", "h", "-n", n]).await;
        assert_eq!(h["spec"]["clusterIP"], "None");
        assert_eq!(h["spec"]["clusterIPs"], serde_json::json!(["None"]));
        ok(
            &k,
            &[
                "create",
                "service",
                "externalname",
                "e",
                "--external-name=example.com",
                "-n",
                n,
            ],
        )
        .await;
        let e = json(&k, &["get", "svc", "e", "-n", n]).await;
        assert!(e["spec"].get("clusterIP").is_none(), "{e}");
        assert!(e["spec"].get("ipFamilies").is_none(), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_ports_are_allocated_refused_and_released() {
    let server = TestServer::start().await;
    // `kubectl delete namespace` waits for the namespace controller.
    let _controllers = server.namespace_controller().await;
    for minor in [27, 30, 33] {
        let k = server.kubectl(minor);
        let ns = format!("ports{minor}");
        let n = ns.as_str();
        let port = format!("{}", 30000 + minor * 10);
        ok(&k, &["create", "namespace", n]).await;
        ok(
            &k,
            &[
                "create",
                "service",
                "nodeport",
                "np",
                "--tcp=80:80",
                "-n",
                n,
                &format!("--node-port={port}"),
            ],
        )
        .await;
        let np = json(&k, &["get", "svc", "np", "-n", n]).await;
        assert_eq!(np["spec"]["ports"][0]["nodePort"].to_string(), port);
        assert_eq!(np["spec"]["externalTrafficPolicy"], "Cluster");
        assert!(ip_in_range(np["spec"]["clusterIP"].as_str().unwrap()));
        let err = fails(
            &k,
            &[
                "create",
                "service",
                "nodeport",
                "np2",
                "--tcp=80:80",
                "-n",
                n,
                &format!("--node-port={port}"),
            ],
        )
        .await;
        assert!(
            err.contains(&format!("Service \"np2\" is invalid: spec.ports[0].nodePort: Invalid value: {port}: provided port is already allocated")),
            "{err}"
        );
        let err = fails(
            &k,
            &[
                "create",
                "service",
                "nodeport",
                "np2",
                "--tcp=80:80",
                "-n",
                n,
                "--node-port=80",
            ],
        )
        .await;
        assert!(
            err.contains("spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767"),
            "{err}"
        );
        // Picked ports, LoadBalancers included.
        ok(
            &k,
            &[
                "create",
                "service",
                "loadbalancer",
                "lb",
                "--tcp=80:80,443:443",
                "-n",
                n,
            ],
        )
        .await;
        let lb = json(&k, &["get", "svc", "lb", "-n", n]).await;
        let p0 = lb["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
        let p1 = lb["spec"]["ports"][1]["nodePort"].as_i64().unwrap();
        assert!((30000..=32767).contains(&p0) && (30000..=32767).contains(&p1) && p0 != p1);
        assert_eq!(lb["spec"]["allocateLoadBalancerNodePorts"], true);
        assert!(lb["spec"].get("healthCheckNodePort").is_none(), "{lb}");
        // externalTrafficPolicy Local: a health check port too.
        ok(
            &k,
            &[
                "patch",
                "svc",
                "lb",
                "-n",
                n,
                "-p",
                r#"{"spec":{"externalTrafficPolicy":"Local"}}"#,
            ],
        )
        .await;
        let lb = json(&k, &["get", "svc", "lb", "-n", n]).await;
        let hc = lb["spec"]["healthCheckNodePort"]
            .as_i64()
            .unwrap_or_else(|| panic!("{lb}"));
        assert!(
            (30000..=32767).contains(&hc) && hc != p0 && hc != p1,
            "{lb}"
        );
        assert_eq!(lb["spec"]["ports"][0]["nodePort"].as_i64(), Some(p0));
        let err = fails(
            &k,
            &[
                "create",
                "service",
                "nodeport",
                "taken",
                "--tcp=80:80",
                "-n",
                n,
                &format!("--node-port={hc}"),
            ],
        )
        .await;
        assert!(err.contains("provided port is already allocated"), "{err}");
        // A type change to ClusterIP gives the port back.
        ok(
            &k,
            &[
                "patch",
                "svc",
                "np",
                "-n",
                n,
                "-p",
                r#"{"spec":{"type":"ClusterIP"}}"#,
            ],
        )
        .await;
        let np = json(&k, &["get", "svc", "np", "-n", n]).await;
        assert!(np["spec"]["ports"][0].get("nodePort").is_none(), "{np}");
        assert!(np["spec"].get("externalTrafficPolicy").is_none(), "{np}");
        ok(
            &k,
            &[
                "create",
                "service",
                "nodeport",
                "np2",
                "--tcp=80:80",
                "-n",
                n,
                &format!("--node-port={port}"),
            ],
        )
        .await;
        // Deleting gives it back too.
        ok(&k, &["delete", "svc", "np2", "-n", n]).await;
        ok(
            &k,
            &[
                "create",
                "service",
                "nodeport",
                "np3",
                "--tcp=80:80",
                "-n",
                n,
                &format!("--node-port={port}"),
            ],
        )
        .await;
        // Deleting the namespace gives back what its Services held.
        ok(&k, &["delete", "namespace", n]).await;
        ok(&k, &["create", "namespace", &format!("{n}b")]).await;
        ok(
            &k,
            &[
                "create",
                "service",
                "nodeport",
                "again",
                "--tcp=80:80",
                "-n",
                &format!("{n}b"),
                &format!("--node-port={port}"),
            ],
        )
        .await;
    }
}

/// One API server on `dir` and `store`, stopped when dropped.
struct Instance {
    kubeconfig: PathBuf,
    stop: CancellationToken,
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn start_on(dir: &std::path::Path, store: Arc<dyn Store>) -> Instance {
    let server = ApiServer::bind(
        Config::new(dir.to_path_buf(), "127.0.0.1:0".parse().unwrap()),
        store,
    )
    .await
    .expect("bind");
    let kubeconfig = server.kubeconfig.clone();
    let stop = CancellationToken::new();
    tokio::spawn(server.run(stop.clone()));
    Instance { kubeconfig, stop }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allocations_survive_a_restart() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(dir.path().join("db/state.db"), Default::default()).unwrap());
    let kubectl = |i: &Instance| Kubectl {
        binary: std::path::Path::new(KUBECTL_DIR).join("kubectl.1.33"),
        kubeconfig: i.kubeconfig.clone(),
        cache: dir.path().join("cache"),
    };
    let first = start_on(dir.path(), store.clone()).await;
    let k = kubectl(&first);
    ok(
        &k,
        &[
            "create",
            "service",
            "nodeport",
            "keep",
            "--tcp=80:80",
            "--node-port=30500",
        ],
    )
    .await;
    ok(
        &k,
        &[
            "create",
            "service",
            "clusterip",
            "pinned",
            "--tcp=80",
            "--clusterip=10.43.0.77",
        ],
    )
    .await;
    let picked = json(&k, &["get", "svc", "keep"]).await["spec"]["clusterIP"]
        .as_str()
        .unwrap()
        .to_string();
    drop(first);

    let second = start_on(dir.path(), store.clone()).await;
    let k = kubectl(&second);
    let err = fails(
        &k,
        &[
            "create",
            "service",
            "clusterip",
            "other",
            "--tcp=80",
            "--clusterip=10.43.0.77",
        ],
    )
    .await;
    assert!(err.contains("provided IP is already allocated"), "{err}");
    let err = fails(
        &k,
        &[
            "create",
            "service",
            "clusterip",
            "other",
            "--tcp=80",
            &format!("--clusterip={picked}"),
        ],
    )
    .await;
    assert!(err.contains("provided IP is already allocated"), "{err}");
    let err = fails(
        &k,
        &[
            "create",
            "service",
            "nodeport",
            "other",
            "--tcp=80:80",
            "--node-port=30500",
        ],
    )
    .await;
    assert!(err.contains("provided port is already allocated"), "{err}");
    // Still one kubernetes Service at .1, its Endpoints at the new port.
    assert_eq!(
        json(&k, &["get", "svc", "kubernetes"]).await["spec"]["clusterIP"],
        "10.43.0.1"
    );
    assert_eq!(
        json(&k, &["get", "ipaddress", "10.43.0.77"]).await["spec"]["parentRef"]["name"],
        "pinned"
    );
    // Deleting gives back across the restart too.
    ok(&k, &["delete", "svc", "pinned"]).await;
    ok(
        &k,
        &[
            "create",
            "service",
            "clusterip",
            "other",
            "--tcp=80",
            "--clusterip=10.43.0.77",
        ],
    )
    .await;
    ok(&k, &["delete", "svc", "keep"]).await;
    drop(second);
    // An IPAddress whose Service is gone (a crash between the two
    // writes) is repaired away at start.
    let orphan = serde_json::json!({"kind": "IPAddress", "apiVersion": "networking.k8s.io/v1",
        "metadata": {"name": "10.43.0.99", "uid": "x", "creationTimestamp": "2024-01-01T00:00:00Z",
            "labels": {"ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"}},
        "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "default", "name": "gone"}}});
    store
        .create(
            "/registry/ipaddresses/10.43.0.99",
            serde_json::to_vec(&orphan).unwrap().into(),
        )
        .await
        .unwrap();
    let third = start_on(dir.path(), store).await;
    let k = kubectl(&third);
    ok(
        &k,
        &[
            "create",
            "service",
            "nodeport",
            "reuse",
            "--tcp=80:80",
            "--node-port=30500",
        ],
    )
    .await;
    assert_eq!(
        json(&k, &["get", "ipaddress", "10.43.0.77"]).await["spec"]["parentRef"]["name"],
        "other"
    );
    assert!(fails(&k, &["get", "ipaddress", &picked])
        .await
        .contains("NotFound"));
    assert!(fails(&k, &["get", "ipaddress", "10.43.0.99"])
        .await
        .contains("NotFound"));
}
