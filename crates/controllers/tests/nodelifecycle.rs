//! The node lifecycle and taint eviction controllers against a real
//! in-process API server, the test acting as the kubelets (creating
//! Nodes, renewing their Leases, posting node and pod status): a node
//! whose Lease stops gets upstream's Unknown conditions, the unreachable
//! taints, its pods Ready=False and evicted when their tolerationSeconds
//! run out; a node that comes back loses the taints and its pods' pending
//! evictions; an untolerated NoExecute taint evicts at once; a node that
//! never reported is marked after the startup grace period (and a deleted
//! one is forgotten with RemovingNode); with every node lost nothing is
//! tainted NoExecute; and upstream's defaults (50 s grace, the admission
//! plugin's 300 s) hold on a fake clock.
//!
//! Nodes are cluster-scoped, so each test has its own server.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use kube::{Api, Client};
use serde_json::json;
use skiff_client::clock::{Clock, FakeClock, SystemClock};
use skiff_controllers::{Config, ControllerManager};
use skiff_testkit::apiserver::{Options, TestApiServer};
use tokio_util::sync::CancellationToken;

/// Upper bound for any wait.
const WAIT: Duration = Duration::from_secs(30);
/// How often the fake kubelets renew their Leases.
const RENEW: Duration = Duration::from_millis(300);
/// The grace periods of these tests.
const GRACE: Duration = Duration::from_secs(2);

struct Cluster {
    _server: TestApiServer,
    client: Client,
    stop: CancellationToken,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn start(monitor: Duration, startup: Duration) -> Cluster {
    start_with(monitor, startup, Arc::new(SystemClock)).await
}

async fn start_with(monitor: Duration, startup: Duration, clock: Arc<dyn Clock>) -> Cluster {
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let client = server.client().await;
    let stop = CancellationToken::new();
    let config = Config {
        leader_election: None,
        controllers: vec!["nodelifecycle".into(), "taint-eviction-controller".into()],
        node_monitor_grace_period: monitor,
        node_startup_grace_period: startup,
        clock,
        ..Config::default()
    };
    tokio::spawn(ControllerManager::new(config).run(client.clone(), stop.clone()));
    Cluster {
        _server: server,
        client,
        stop,
    }
}

async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

/// The kubelet's conditions, all healthy, with a fresh heartbeat.
fn healthy_conditions() -> serde_json::Value {
    let now = now();
    let c = |type_: &str, status: &str, reason: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": "fine",
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    json!([
        c("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        c("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        c("PIDPressure", "False", "KubeletHasSufficientPID"),
        c("Ready", "True", "KubeletReady"),
    ])
}

/// A fake kubelet renewing its node's Lease until stopped.
struct Kubelet {
    stop: CancellationToken,
}

impl Kubelet {
    fn stop(&self) {
        self.stop.cancel();
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Creates the node (with healthy conditions when `report`) and, when
/// `report`, its Lease renewed every [`RENEW`].
async fn register(client: &Client, name: &str, report: bool) -> Kubelet {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let stop = CancellationToken::new();
    if !report {
        return Kubelet { stop };
    }
    post_status(client, name).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now()},
    }))
    .unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
    renew(leases, name.to_string(), stop.clone());
    Kubelet { stop }
}

fn renew(leases: Api<Lease>, name: String, stop: CancellationToken) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(RENEW) => {}
            }
            let patch = json!({"spec": {"renewTime": now()}});
            let _ = leases
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
        }
    });
}

async fn post_status(client: &Client, name: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let patch = json!({"status": {"conditions": healthy_conditions()}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// A running pod bound to `node`, Ready=True, with `tolerations`.
async fn running_pod(client: &Client, name: &str, node: &str, tolerations: serde_json::Value) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"nodeName": node, "tolerations": tolerations,
                 "containers": [{"name": "c", "image": "busybox"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let now = now();
    let status = json!({"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": now},
    ]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

fn condition<'a>(
    node: &'a Node,
    type_: &str,
) -> Option<&'a k8s_openapi::api::core::v1::NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

fn has_taint(node: &Node, key: &str, effect: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == key && t.effect == effect))
}

fn pod_condition(pod: &Pod, type_: &str) -> Option<(String, Option<String>, Option<String>)> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

fn evicted(pod: Option<&Pod>) -> bool {
    pod.is_none_or(|p| p.metadata.deletion_timestamp.is_some())
}

async fn node_where(client: &Client, name: &str, what: &str, f: impl Fn(&Node) -> bool) -> Node {
    let nodes: Api<Node> = Api::all(client.clone());
    within(
        what,
        await_condition(nodes, name, move |n: Option<&Node>| n.is_some_and(&f)),
    )
    .await
    .unwrap()
    .expect("node")
}

async fn pod_where(client: &Client, name: &str, what: &str, f: impl Fn(Option<&Pod>) -> bool) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    within(what, await_condition(pods, name, f)).await.unwrap();
}

/// Waits for an event with this reason and message about `name`.
async fn event(client: &Client, name: &str, reason: &str, message: &str) -> Event {
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    within(&format!("event {reason} {message:?}"), async {
        loop {
            let list = events.list(&ListParams::default()).await.unwrap();
            if let Some(e) = list.items.into_iter().find(|e| {
                e.involved_object.name.as_deref() == Some(name)
                    && e.reason.as_deref() == Some(reason)
                    && e.message.as_deref() == Some(message)
            }) {
                return e;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_node_is_marked_unknown_tainted_and_its_pods_evicted_in_time() {
    let cluster = start(GRACE, Duration::from_secs(60)).await;
    let client = &cluster.client;
    let _healthy = register(client, "healthy", true).await;
    let lost = register(client, "lost", true).await;
    // The admission plugin gives "patient" 300 s; "five" says 5 s.
    running_pod(client, "patient", "lost", json!([])).await;
    running_pod(
        client,
        "five",
        "lost",
        json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                "effect": "NoExecute", "tolerationSeconds": 5}]),
    )
    .await;
    running_pod(client, "bystander", "healthy", json!([])).await;
    event(
        client,
        "lost",
        "RegisteredNode",
        "Node lost event: Registered Node lost in Controller",
    )
    .await;

    lost.stop();
    let node = node_where(client, "lost", "lost Ready=Unknown", |n| {
        condition(n, "Ready").is_some_and(|c| c.status == "Unknown")
    })
    .await;
    for type_ in ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"] {
        let c = condition(&node, type_).expect(type_);
        assert_eq!(c.status, "Unknown", "{type_}");
        assert_eq!(c.reason.as_deref(), Some("NodeStatusUnknown"), "{type_}");
        assert_eq!(
            c.message.as_deref(),
            Some("Kubelet stopped posting node status."),
            "{type_}"
        );
    }
    let tainted = node_where(client, "lost", "the unreachable taints", |n| {
        has_taint(n, "node.kubernetes.io/unreachable", "NoExecute")
    })
    .await;
    let tainted_at = Instant::now();
    assert!(has_taint(
        &tainted,
        "node.kubernetes.io/unreachable",
        "NoSchedule"
    ));
    event(
        client,
        "lost",
        "NodeNotReady",
        "Node lost status is now: NodeNotReady",
    )
    .await;

    for name in ["patient", "five"] {
        pod_where(client, name, "pods on the lost node not ready", |p| {
            p.and_then(|p| pod_condition(p, "Ready"))
                .is_some_and(|c| c.0 == "False")
        })
        .await;
    }
    event(client, "patient", "NodeNotReady", "Node is not ready").await;

    // "five" goes after its 5 s, with the condition and the event.
    pod_where(client, "five", "five evicted", evicted).await;
    let waited = tainted_at.elapsed();
    assert!(
        waited >= Duration::from_secs(4),
        "evicted after only {waited:?}"
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    if let Some(five) = pods.get_opt("five").await.unwrap() {
        assert_eq!(
            pod_condition(&five, "DisruptionTarget"),
            Some((
                "True".into(),
                Some("DeletionByTaintManager".into()),
                Some("Taint manager: deleting due to NoExecute taint".into())
            ))
        );
    }
    let e = event(
        client,
        "five",
        "TaintManagerEviction",
        "Marking for deletion Pod default/five",
    )
    .await;
    assert_eq!(
        e.source.and_then(|s| s.component).as_deref(),
        Some("taint-eviction-controller")
    );

    // The healthy node and its pod are left alone.
    let healthy: Api<Node> = Api::all(client.clone());
    let healthy = healthy.get("healthy").await.unwrap();
    assert!(healthy
        .spec
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .is_empty());
    let bystander = pods.get("bystander").await.unwrap();
    assert_eq!(
        pod_condition(&bystander, "Ready").map(|c| c.0).as_deref(),
        Some("True")
    );

    // The node comes back: the taints go and "patient" stays.
    post_status(client, "lost").await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let back = CancellationToken::new();
    renew(leases, "lost".into(), back.clone());
    let node = node_where(client, "lost", "lost untainted", |n| {
        !has_taint(n, "node.kubernetes.io/unreachable", "NoExecute")
            && !has_taint(n, "node.kubernetes.io/unreachable", "NoSchedule")
    })
    .await;
    assert_eq!(
        condition(&node, "Ready").map(|c| c.status.as_str()),
        Some("True")
    );
    event(
        client,
        "patient",
        "TaintManagerEviction",
        "Cancelling deletion of Pod default/patient",
    )
    .await;
    let patient = pods.get("patient").await.unwrap();
    assert!(patient.metadata.deletion_timestamp.is_none());
    back.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untolerated_no_execute_taint_evicts_at_once_and_removal_cancels() {
    let cluster = start(Duration::from_secs(50), Duration::from_secs(60)).await;
    let client = &cluster.client;
    let _kubelet = register(client, "n1", true).await;
    let custom = |secs: Option<i64>| {
        let mut t =
            json!({"key": "example.com/drain", "operator": "Exists", "effect": "NoExecute"});
        if let Some(s) = secs {
            t["tolerationSeconds"] = json!(s);
        }
        json!([t])
    };
    running_pod(client, "doomed", "n1", json!([])).await;
    running_pod(client, "forever", "n1", custom(None)).await;
    running_pod(client, "hour", "n1", custom(Some(3600))).await;

    let nodes: Api<Node> = Api::all(client.clone());
    let taint = json!({"spec": {"taints": [{"key": "example.com/drain", "effect": "NoExecute"}]}});
    nodes
        .patch("n1", &PatchParams::default(), &Patch::Merge(&taint))
        .await
        .unwrap();
    pod_where(client, "doomed", "doomed evicted", |p| {
        p.is_some_and(|p| pod_condition(p, "DisruptionTarget").is_some()) || p.is_none()
    })
    .await;
    pod_where(client, "doomed", "doomed deleted", evicted).await;
    event(
        client,
        "doomed",
        "TaintManagerEviction",
        "Marking for deletion Pod default/doomed",
    )
    .await;

    // The others stay; removing the taint cancels "hour"'s deletion.
    nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"taints": null}})),
        )
        .await
        .unwrap();
    event(
        client,
        "hour",
        "TaintManagerEviction",
        "Cancelling deletion of Pod default/hour",
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for name in ["forever", "hour"] {
        let p = pods.get(name).await.unwrap();
        assert!(p.metadata.deletion_timestamp.is_none(), "{name} kept");
    }
    // The controller left the custom taint alone while it was there.
    let n1 = nodes.get("n1").await.unwrap();
    assert_eq!(
        condition(&n1, "Ready").map(|c| c.status.as_str()),
        Some("True")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_never_reported_is_marked_after_the_startup_grace() {
    let cluster = start(Duration::from_secs(50), GRACE).await;
    let client = &cluster.client;
    let _healthy = register(client, "healthy", true).await;
    let created = Instant::now();
    let _silent = register(client, "silent", false).await;
    let node = node_where(client, "silent", "silent marked", |n| {
        condition(n, "Ready").is_some()
    })
    .await;
    assert!(
        created.elapsed() >= GRACE,
        "marked after only {:?}",
        created.elapsed()
    );
    for type_ in ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"] {
        let c = condition(&node, type_).expect(type_);
        assert_eq!(c.status, "Unknown", "{type_}");
        assert_eq!(
            c.reason.as_deref(),
            Some("NodeStatusNeverUpdated"),
            "{type_}"
        );
        assert_eq!(
            c.message.as_deref(),
            Some("Kubelet never posted node status."),
            "{type_}"
        );
    }
    node_where(client, "silent", "silent tainted", |n| {
        has_taint(n, "node.kubernetes.io/unreachable", "NoExecute")
            && has_taint(n, "node.kubernetes.io/unreachable", "NoSchedule")
    })
    .await;
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .delete("silent", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    event(
        client,
        "silent",
        "RemovingNode",
        "Node silent event: Removing Node silent from Controller",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_every_node_lost_nothing_is_tainted_no_execute() {
    let cluster = start(GRACE, Duration::from_secs(60)).await;
    let client = &cluster.client;
    let only = register(client, "only", true).await;
    running_pod(
        client,
        "p",
        "only",
        json!([{"key": "node.kubernetes.io/unreachable",
        "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0}]),
    )
    .await;
    only.stop();
    // The NoSchedule taint is written in the same patch a NoExecute one
    // would be: once it is there, the decision has been made.
    let node = node_where(client, "only", "only tainted NoSchedule", |n| {
        has_taint(n, "node.kubernetes.io/unreachable", "NoSchedule")
    })
    .await;
    assert!(!has_taint(
        &node,
        "node.kubernetes.io/unreachable",
        "NoExecute"
    ));
    assert_eq!(
        condition(&node, "Ready").map(|c| c.status.as_str()),
        Some("Unknown")
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    assert!(pods
        .get("p")
        .await
        .unwrap()
        .metadata
        .deletion_timestamp
        .is_none());
}

/// Touches an object so its controllers look at it again (the fake clock
/// moved, which nothing watches).
async fn touch<K>(api: &Api<K>, name: &str, n: u32)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({"metadata": {"annotations": {"test/touch": n.to_string()}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstreams_defaults_on_a_fake_clock() {
    let clock = FakeClock::new();
    let cluster = start_with(
        Duration::from_secs(50),
        Duration::from_secs(60),
        Arc::new(clock.clone()),
    )
    .await;
    let client = &cluster.client;
    let _healthy = register(client, "healthy", true).await;
    let lost = register(client, "lost", true).await;
    // The admission plugin's 300 s.
    running_pod(client, "patient", "lost", json!([])).await;
    event(
        client,
        "lost",
        "RegisteredNode",
        "Node lost event: Registered Node lost in Controller",
    )
    .await;
    lost.stop();
    let nodes: Api<Node> = Api::all(client.clone());
    // Only the fake clock can pass the 50 s grace within the test's wait.
    clock.advance(Duration::from_secs(51));
    touch(&nodes, "lost", 1).await;
    let node = node_where(client, "lost", "lost tainted", |n| {
        has_taint(n, "node.kubernetes.io/unreachable", "NoExecute")
    })
    .await;
    assert_eq!(
        condition(&node, "Ready").map(|c| c.status.as_str()),
        Some("Unknown")
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pod_where(client, "patient", "patient not ready", |p| {
        p.and_then(|p| pod_condition(p, "Ready"))
            .is_some_and(|c| c.0 == "False")
    })
    .await;
    // 300 s after the taint was seen, the pod goes.
    clock.advance(Duration::from_secs(301));
    touch(&pods, "patient", 1).await;
    pod_where(client, "patient", "patient evicted", evicted).await;
}
