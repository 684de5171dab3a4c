//! The node IPAM controller against a real in-process API server: nodes
//! get distinct podCIDRs, existing ones are kept (and one outside the
//! cluster CIDR left alone), a restart keeps every assignment, a deleted
//! node's CIDR goes to a waiting node, and an exhausted range records
//! upstream's CIDRNotAvailable event.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, NodeSpec};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::wait::await_condition;
use kube::{Api, Client};
use skiff_controllers::NodeIpam;
use skiff_testkit::apiserver::{Options, TestApiServer};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Upper bound for any wait.
const WAIT: Duration = Duration::from_secs(30);

struct Running {
    stop: CancellationToken,
    task: JoinHandle<skiff_controllers::nodeipam::Result<()>>,
}

impl Running {
    fn start(client: Client, cluster_cidr: &str, node_mask: u8) -> Running {
        let ipam = NodeIpam::new(cluster_cidr, node_mask).expect("node IPAM config");
        let stop = CancellationToken::new();
        let task = tokio::spawn(ipam.run(client, stop.clone()));
        Running { stop, task }
    }

    async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("controller stops in time")
            .expect("controller task")
            .expect("controller result");
    }
}

async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

async fn create_node(nodes: &Api<Node>, name: &str, pod_cidr: Option<&str>) {
    let mut node = skiff_client::testing::node(name).build();
    node.status = None;
    if let Some(cidr) = pod_cidr {
        node.spec = Some(NodeSpec {
            pod_cidr: Some(cidr.into()),
            pod_cidrs: Some(vec![cidr.into()]),
            ..Default::default()
        });
    }
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("create node");
}

fn pod_cidr(node: &Node) -> Option<String> {
    node.spec.as_ref()?.pod_cidr.clone()
}

/// Waits (watching) for node `name` to have a podCIDR; returns it and
/// checks spec.podCIDRs says the same.
async fn cidr_of(nodes: &Api<Node>, name: &str) -> String {
    let node = within(
        &format!("a podCIDR on {name}"),
        await_condition(nodes.clone(), name, |n: Option<&Node>| {
            n.and_then(pod_cidr).is_some()
        }),
    )
    .await
    .expect("watch node")
    .expect("node exists");
    let cidr = pod_cidr(&node).expect("podCIDR");
    assert_eq!(
        node.spec.and_then(|s| s.pod_cidrs),
        Some(vec![cidr.clone()]),
        "podCIDRs of {name}"
    );
    cidr
}

async fn current_cidr(nodes: &Api<Node>, name: &str) -> Option<String> {
    pod_cidr(&nodes.get(name).await.expect("get node"))
}

/// Polls (bounded) for events about `node` with `reason`.
async fn events_for(client: &Client, node: &str, reason: &str) -> Vec<Event> {
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let selector = format!("involvedObject.name={node},reason={reason}");
    within(&format!("a {reason} event for {node}"), async {
        loop {
            let found = events
                .list(&ListParams::default().fields(&selector))
                .await
                .expect("list events")
                .items;
            if !found.is_empty() {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_get_distinct_cidrs_that_survive_a_restart() {
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let client = server.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    // Assigned before the controller ever ran, and one from elsewhere.
    create_node(&nodes, "old", Some("10.244.0.0/24")).await;
    create_node(&nodes, "stray", Some("192.168.5.0/24")).await;

    let running = Running::start(client.clone(), "10.244.0.0/16", 24);
    for name in ["n1", "n2", "n3"] {
        create_node(&nodes, name, None).await;
    }
    let mut seen = BTreeSet::from(["10.244.0.0/24".to_string()]);
    let mut assigned = Vec::new();
    for name in ["n1", "n2", "n3"] {
        let cidr = cidr_of(&nodes, name).await;
        assert!(
            cidr.starts_with("10.244.") && cidr.ends_with(".0/24"),
            "{name}: {cidr}"
        );
        assert!(
            seen.insert(cidr.clone()),
            "{name} got {cidr}, already taken: {seen:?}"
        );
        assigned.push((name, cidr));
    }
    assert_eq!(
        current_cidr(&nodes, "stray").await.as_deref(),
        Some("192.168.5.0/24")
    );
    running.stop().await;

    // A node joins while the controller is down; after the restart it gets
    // a fresh CIDR and nobody else's changes.
    create_node(&nodes, "n4", None).await;
    let running = Running::start(client.clone(), "10.244.0.0/16", 24);
    let cidr = cidr_of(&nodes, "n4").await;
    assert!(
        seen.insert(cidr.clone()),
        "n4 got {cidr}, already taken: {seen:?}"
    );
    for (name, cidr) in &assigned {
        assert_eq!(
            current_cidr(&nodes, name).await.as_ref(),
            Some(cidr),
            "{name}"
        );
    }
    assert_eq!(
        current_cidr(&nodes, "old").await.as_deref(),
        Some("10.244.0.0/24")
    );
    assert_eq!(
        current_cidr(&nodes, "stray").await.as_deref(),
        Some("192.168.5.0/24")
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhaustion_is_reported_and_a_freed_cidr_is_reused() {
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let client = server.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    // Room for two /24s.
    let running = Running::start(client.clone(), "10.0.0.0/23", 24);
    create_node(&nodes, "a", None).await;
    let a = cidr_of(&nodes, "a").await;
    create_node(&nodes, "b", None).await;
    let b = cidr_of(&nodes, "b").await;
    assert_eq!(
        BTreeSet::from([a.clone(), b.clone()]),
        BTreeSet::from(["10.0.0.0/24".to_string(), "10.0.1.0/24".to_string()])
    );

    create_node(&nodes, "c", None).await;
    let events = events_for(&client, "c", "CIDRNotAvailable").await;
    let event = &events[0];
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(
        event.message.as_deref(),
        Some("Node c status is now: CIDRNotAvailable")
    );
    assert_eq!(
        event.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("cidrAllocator")
    );
    assert_eq!(event.involved_object.kind.as_deref(), Some("Node"));
    assert_eq!(event.involved_object.name.as_deref(), Some("c"));
    let c_uid = nodes.get("c").await.expect("get c").metadata.uid;
    assert_eq!(event.involved_object.uid, c_uid);
    assert_eq!(current_cidr(&nodes, "c").await, None);

    // a goes away: c gets its CIDR.
    nodes
        .delete("a", &DeleteParams::default())
        .await
        .expect("delete a");
    assert_eq!(cidr_of(&nodes, "c").await, a);
    assert_eq!(current_cidr(&nodes, "b").await, Some(b));
    running.stop().await;
}

/// Many nodes at once (more than the controller's patch workers), some
/// deleted while patches are in flight, then more: every node gets a
/// block no other live node holds, in a range with just enough room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_patches_never_hand_out_a_block_twice() {
    use futures::StreamExt as _;
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let client = server.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    // A /22 of /28s: 64 blocks for 100 nodes of which 40 are deleted.
    let running = Running::start(client.clone(), "10.9.0.0/22", 28);
    let names = |from: usize, to: usize| (from..to).map(|i| format!("c{i}")).collect::<Vec<_>>();
    let create_all = |list: Vec<String>| {
        let nodes = nodes.clone();
        async move {
            futures::stream::iter(list)
                .for_each_concurrent(16, |name| {
                    let nodes = nodes.clone();
                    async move { create_node(&nodes, &name, None).await }
                })
                .await
        }
    };
    within("creating 60 nodes", create_all(names(0, 60))).await;
    // Delete 40 of them right away: some still have a patch in flight.
    within(
        "deleting 40 nodes",
        futures::stream::iter(names(0, 40)).for_each_concurrent(16, |name| {
            let nodes = nodes.clone();
            async move {
                nodes
                    .delete(&name, &DeleteParams::default())
                    .await
                    .expect("delete node");
            }
        }),
    )
    .await;
    within("creating 40 more nodes", create_all(names(60, 100))).await;
    let mut holders: std::collections::BTreeMap<String, String> = Default::default();
    for name in names(40, 100) {
        let cidr = cidr_of(&nodes, &name).await;
        if let Some(other) = holders.insert(cidr.clone(), name.clone()) {
            panic!("{name} and {other} both hold {cidr}");
        }
    }
    assert_eq!(holders.len(), 60);
    running.stop().await;
}
