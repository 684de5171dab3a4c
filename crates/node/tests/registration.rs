//! Node registration against a real in-process API server: the Node as
//! kubelet registers it, Ready following the agent's health without
//! waiting for the status tick, quiet ticks moving only heartbeats, the
//! Lease created and renewed, a restart keeping spec.podCIDR,
//! registration retried until the API server answers, and `kubectl get
//! nodes` showing the node Ready.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::wait::await_condition;
use kube::{Api, Client};
use skiff_node::registration::{self, parse_taints, Config, Health, Registration};
use skiff_testkit::apiserver::{Options, TestApiServer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Upper bound for any wait.
const WAIT: Duration = Duration::from_secs(30);

fn healthy() -> Health {
    Health {
        runtime_version: Some("containerd://1.6.20".into()),
        ..Health::default()
    }
}

fn config(name: &str, root: &Path) -> Config {
    Config {
        labels: BTreeMap::from([("tier".to_string(), "edge".to_string())]),
        taints: parse_taints("dedicated=gpu:NoSchedule").expect("taints"),
        node_ip: Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10))),
        status_update_frequency: Duration::from_secs(60),
        renew_interval: Duration::from_millis(300),
        ..Config::new(name, root)
    }
}

struct Running {
    stop: CancellationToken,
    task: JoinHandle<registration::Result<()>>,
    health: watch::Sender<Health>,
    pod_cidr: watch::Receiver<Option<String>>,
}

impl Running {
    fn start(client: Client, config: Config, health: Health) -> Running {
        let registration = Registration::new(client, config);
        let pod_cidr = registration.pod_cidr();
        let (tx, rx) = watch::channel(health);
        let stop = CancellationToken::new();
        let task = tokio::spawn(registration.run(rx, stop.clone()));
        Running {
            stop,
            task,
            health: tx,
            pod_cidr,
        }
    }

    /// Cancels and waits (bounded) for `run` to return `Ok`.
    async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("registration stops in time")
            .expect("registration task")
            .expect("registration result");
    }
}

async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Waits (watching) until node `name` satisfies `cond`; returns it.
async fn node_where(
    nodes: &Api<Node>,
    name: &str,
    what: &str,
    cond: impl Fn(&Node) -> bool,
) -> Node {
    within(
        what,
        await_condition(nodes.clone(), name, move |n: Option<&Node>| {
            n.is_some_and(&cond)
        }),
    )
    .await
    .expect("watch node")
    .expect("node exists")
}

fn condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

fn ready_is(node: &Node, status: &str) -> bool {
    condition(node, "Ready").is_some_and(|c| c.status == status)
}

fn quantity(node: &Node, field: &str, name: &str) -> Option<String> {
    let s = node.status.as_ref()?;
    let map = if field == "capacity" {
        s.capacity.as_ref()
    } else {
        s.allocatable.as_ref()
    };
    map?.get(name).map(|q| q.0.clone())
}

fn renew_time(lease: &Lease) -> Option<k8s_openapi::jiff::Timestamp> {
    lease.spec.as_ref()?.renew_time.as_ref().map(|t| t.0)
}

async fn kubectl_get_nodes(server: &TestApiServer) -> String {
    let mut cmd = std::process::Command::new("/usr/lib/google-cloud-sdk/bin/kubectl.1.33");
    cmd.arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .arg("--cache-dir")
        .arg(server.dir.path().join("kubectl-cache"))
        .args(["get", "nodes", "-o", "wide"]);
    let out = tokio::task::spawn_blocking(move || cmd.output().expect("run kubectl"))
        .await
        .expect("kubectl task");
    assert!(
        out.status.success(),
        "kubectl get nodes failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registers_the_node_and_follows_health() {
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let client = server.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let root = tempfile::tempdir().expect("root dir");
    let running = Running::start(client.clone(), config("n1", root.path()), healthy());

    let node = node_where(&nodes, "n1", "the node to be Ready", |n| {
        ready_is(n, "True")
    })
    .await;

    let labels = node.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("kubernetes.io/hostname").map(String::as_str),
        Some("n1")
    );
    assert_eq!(
        labels.get("kubernetes.io/os").map(String::as_str),
        Some("linux")
    );
    assert!(labels.contains_key("kubernetes.io/arch"));
    assert_eq!(labels.get("tier").map(String::as_str), Some("edge"));
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    assert_eq!(taints.len(), 1);
    assert_eq!(
        (
            taints[0].key.as_str(),
            taints[0].value.as_deref(),
            taints[0].effect.as_str()
        ),
        ("dedicated", Some("gpu"), "NoSchedule")
    );
    for resource in [
        "cpu",
        "memory",
        "ephemeral-storage",
        "pods",
        "hugepages-2Mi",
        "hugepages-1Gi",
    ] {
        assert!(
            quantity(&node, "capacity", resource).is_some(),
            "capacity {resource}"
        );
        assert!(
            quantity(&node, "allocatable", resource).is_some(),
            "allocatable {resource}"
        );
    }
    assert_eq!(quantity(&node, "capacity", "pods").as_deref(), Some("110"));
    let status = node.status.clone().expect("status");
    let addresses: Vec<(String, String)> = status
        .addresses
        .iter()
        .flatten()
        .map(|a| (a.type_.clone(), a.address.clone()))
        .collect();
    assert_eq!(
        addresses,
        [
            ("InternalIP".to_string(), "192.0.2.10".to_string()),
            ("Hostname".to_string(), "n1".to_string())
        ]
    );
    let info = status.node_info.clone().expect("nodeInfo");
    assert_eq!(info.container_runtime_version, "containerd://1.6.20");
    assert_eq!(info.kubelet_version, registration::KUBELET_VERSION);
    assert_eq!(info.operating_system, "linux");
    assert!(!info.kernel_version.is_empty());
    assert!(!info.os_image.is_empty());
    assert!(!info.boot_id.is_empty());
    assert_eq!(
        status
            .daemon_endpoints
            .and_then(|d| d.kubelet_endpoint)
            .map(|e| e.port),
        Some(10250)
    );
    let types: Vec<&str> = status
        .conditions
        .iter()
        .flatten()
        .map(|c| c.type_.as_str())
        .collect();
    assert_eq!(
        types,
        ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
    );
    let ready = condition(&node, "Ready").expect("Ready");
    assert_eq!(ready.reason.as_deref(), Some("KubeletReady"));
    assert_eq!(
        ready.message.as_deref(),
        Some("kubelet is posting ready status")
    );

    // kubectl sees it Ready.
    let table = kubectl_get_nodes(&server).await;
    let row = table
        .lines()
        .find(|l| l.starts_with("n1 "))
        .unwrap_or_else(|| panic!("no n1 row in:\n{table}"));
    let columns: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(columns.get(1), Some(&"Ready"), "{table}");
    assert!(row.contains(registration::KUBELET_VERSION), "{table}");
    assert!(row.contains("192.0.2.10"), "{table}");
    assert!(row.contains("containerd://1.6.20"), "{table}");

    // The Lease exists, is the node's, and is renewed.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let lease = within(
        "the lease",
        await_condition(leases.clone(), "n1", |l: Option<&Lease>| l.is_some()),
    )
    .await
    .expect("watch lease")
    .expect("lease");
    let spec = lease.spec.clone().expect("lease spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("n1"));
    assert_eq!(spec.lease_duration_seconds, Some(40));
    let owners = lease.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1);
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].name.as_str()),
        ("Node", "n1")
    );
    assert_eq!(Some(owners[0].uid.as_str()), node.metadata.uid.as_deref());
    let first = renew_time(&lease).expect("renewTime");
    within(
        "the lease to be renewed",
        await_condition(leases.clone(), "n1", move |l: Option<&Lease>| {
            l.and_then(renew_time).is_some_and(|t| t > first)
        }),
    )
    .await
    .expect("watch lease");

    // The runtime goes down: Ready=False with kubelet's message, long
    // before the 60 s status tick (the wait gives up after 30 s).
    running.health.send_replace(Health {
        runtime_problem: Some(registration::RUNTIME_DOWN.into()),
        ..healthy()
    });
    let down = node_where(&nodes, "n1", "the node to be NotReady", |n| {
        ready_is(n, "False")
    })
    .await;
    let ready = condition(&down, "Ready").expect("Ready");
    assert_eq!(ready.reason.as_deref(), Some("KubeletNotReady"));
    assert_eq!(ready.message.as_deref(), Some("container runtime is down"));

    // And the network too: both problems, as upstream aggregates them.
    running.health.send_replace(Health {
        runtime_problem: Some(registration::RUNTIME_DOWN.into()),
        network_problem: Some(registration::network_not_ready(
            "NetworkPluginNotReady",
            "Network plugin returns error: cni plugin not initialized",
        )),
        ..healthy()
    });
    let expected = "[container runtime is down, container runtime network not ready: \
                    NetworkReady=false reason:NetworkPluginNotReady message:Network plugin \
                    returns error: cni plugin not initialized]";
    node_where(&nodes, "n1", "the aggregated message", |n| {
        condition(n, "Ready").and_then(|c| c.message.as_deref()) == Some(expected)
    })
    .await;

    running.health.send_replace(healthy());
    let back = node_where(&nodes, "n1", "the node to be Ready again", |n| {
        ready_is(n, "True")
    })
    .await;
    assert!(kubectl_get_nodes(&server)
        .await
        .lines()
        .any(|l| l.starts_with("n1 ") && l.split_whitespace().nth(1) == Some("Ready")));
    // Pressure conditions never flipped.
    assert_eq!(
        condition(&back, "MemoryPressure").and_then(|c| c.last_transition_time.clone()),
        condition(&node, "MemoryPressure").and_then(|c| c.last_transition_time.clone())
    );
    running.stop().await;
}

fn later_beat_gap(first: &Time, later: &Time) -> i64 {
    later.0.as_second() - first.0.as_second()
}

/// Quiet ticks patch nothing until the report frequency has passed; then
/// only the heartbeat times move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_ticks_move_only_heartbeats() {
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let client = server.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let root = tempfile::tempdir().expect("root dir");
    let running = Running::start(
        client.clone(),
        Config {
            status_update_frequency: Duration::from_millis(100),
            status_report_frequency: Duration::from_secs(3),
            ..config("quiet", root.path())
        },
        healthy(),
    );
    let first = node_where(&nodes, "quiet", "the node to be Ready", |n| {
        ready_is(n, "True")
    })
    .await;
    let beat = |n: &Node| condition(n, "Ready").and_then(|c| c.last_heartbeat_time.clone());
    let first_beat = beat(&first).expect("heartbeat");
    let later = node_where(&nodes, "quiet", "the heartbeat to move", |n| {
        beat(n).is_some_and(|t| t.0 > first_beat.0)
    })
    .await;
    // Ticks every 100 ms find nothing changed: the next patch comes with
    // the report frequency (heartbeats have whole seconds: 3 s apart at
    // least reads as 2 or more; a patch per tick would read 1).
    let gap = later_beat_gap(&first_beat, &beat(&later).expect("heartbeat"));
    assert!(
        gap >= 2,
        "heartbeats {gap} s apart with a 3 s report frequency"
    );
    let mut before = first.status.clone().expect("status");
    let mut after = later.status.clone().expect("status");
    for status in [&mut before, &mut after] {
        for c in status.conditions.iter_mut().flatten() {
            c.last_heartbeat_time = None;
        }
    }
    assert_eq!(before, after, "a quiet tick changed more than heartbeats");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_the_pod_cidr() {
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let client = server.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let root = tempfile::tempdir().expect("root dir");
    // The node IP detected from this machine this time.
    let detect = Config {
        node_ip: None,
        ..config("n2", root.path())
    };
    let mut running = Running::start(client.clone(), detect.clone(), healthy());
    let node = node_where(&nodes, "n2", "the node to be Ready", |n| {
        ready_is(n, "True")
    })
    .await;
    let internal_ip = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
        .map(|a| a.address.clone())
        .expect("InternalIP");
    let ip: IpAddr = internal_ip.parse().expect("an IP");
    assert!(!ip.is_loopback() && !ip.is_unspecified(), "{ip}");
    assert_eq!(*running.pod_cidr.borrow(), None);

    // The IPAM controller's patch.
    let patch = serde_json::json!({
        "spec": { "podCIDR": "10.244.7.0/24", "podCIDRs": ["10.244.7.0/24"] }
    });
    nodes
        .patch("n2", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .expect("assign podCIDR");
    within("the podCIDR", running.pod_cidr.wait_for(|c| c.is_some()))
        .await
        .expect("registration alive");
    assert_eq!(running.pod_cidr.borrow().as_deref(), Some("10.244.7.0/24"));
    running.stop().await;

    // Someone moved a label we own; the restart puts it back and keeps
    // the podCIDR, other labels and the taints.
    let patch = serde_json::json!({
        "metadata": { "labels": { "tier": "core", "other": "kept" } }
    });
    nodes
        .patch("n2", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("relabel");
    let restarted = Running::start(client.clone(), detect, healthy());
    let mut pod_cidr = restarted.pod_cidr.clone();
    within(
        "the podCIDR after restart",
        pod_cidr.wait_for(|c| c.is_some()),
    )
    .await
    .expect("registration alive");
    assert_eq!(pod_cidr.borrow().as_deref(), Some("10.244.7.0/24"));
    let node = node_where(&nodes, "n2", "the label to be reconciled", |n| {
        n.metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.get("tier").map(String::as_str) == Some("edge"))
    })
    .await;
    let spec = node.spec.clone().expect("spec");
    assert_eq!(spec.pod_cidr.as_deref(), Some("10.244.7.0/24"));
    assert_eq!(spec.taints.map(|t| t.len()), Some(1));
    assert_eq!(
        node.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("other"))
            .map(String::as_str),
        Some("kept")
    );
    restarted.stop().await;
}

/// A TCP proxy to the API server that drops connections until opened,
/// counting the attempts it dropped.
struct Gate {
    port: u16,
    open: watch::Sender<bool>,
    dropped: watch::Receiver<usize>,
}

impl Gate {
    async fn start(upstream: &str) -> Gate {
        let upstream = upstream.trim_start_matches("https://").to_string();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind gate");
        let port = listener.local_addr().expect("gate addr").port();
        let (open, is_open) = watch::channel(false);
        let (count, dropped) = watch::channel(0usize);
        tokio::spawn(async move {
            loop {
                let Ok((mut conn, _)) = listener.accept().await else {
                    return;
                };
                if !*is_open.borrow() {
                    count.send_modify(|n| *n += 1);
                    drop(conn);
                    continue;
                }
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut conn, &mut server).await;
                    }
                });
            }
        });
        Gate {
            port,
            open,
            dropped,
        }
    }

    /// A client for the server through this gate.
    async fn client(&self, server: &TestApiServer) -> Client {
        let mut kc =
            kube::config::Kubeconfig::read_from(&server.kubeconfig).expect("read kubeconfig");
        for named in &mut kc.clusters {
            if let Some(cluster) = named.cluster.as_mut() {
                cluster.server = Some(format!("https://127.0.0.1:{}", self.port));
            }
        }
        let config =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .expect("kube config");
        Client::try_from(config).expect("kube client")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_retries_until_the_api_server_answers() {
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let nodes: Api<Node> = Api::all(server.client().await);
    let mut gate = Gate::start(&server.url).await;
    let root = tempfile::tempdir().expect("root dir");
    let running = Running::start(
        gate.client(&server).await,
        config("late", root.path()),
        healthy(),
    );

    // Refused twice (kubelet's backoff: 100 ms, then 200 ms)...
    within("two refused attempts", gate.dropped.wait_for(|n| *n >= 2))
        .await
        .expect("gate alive");
    assert!(nodes.get_opt("late").await.expect("get node").is_none());
    // ...then the API answers and the node registers.
    gate.open.send_replace(true);
    node_where(&nodes, "late", "the node to be Ready", |n| {
        ready_is(n, "True")
    })
    .await;
    running.stop().await;
}
