//! Test support: the real API server in-process (temp dir, SQLite store),
//! a kube client for it, schedulers with short timings, and bounded waits.

#![allow(dead_code)] // each test binary uses a different part of this module

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use skiff_client::leader::LeaderElectionConfig;
use skiff_scheduler::queue::QueueConfig;
use skiff_scheduler::{Config, Scheduler};
use skiff_testkit::TestApiServer;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Upper bound for any wait in these tests.
pub const WAIT: Duration = Duration::from_secs(30);

/// The shared in-process server (`dir`, `store`, ...) and a kube client.
pub struct TestServer {
    server: TestApiServer,
    pub client: Client,
}

impl std::ops::Deref for TestServer {
    type Target = TestApiServer;
    fn deref(&self) -> &TestApiServer {
        &self.server
    }
}

impl TestServer {
    pub async fn start() -> TestServer {
        let server = TestApiServer::start(|c| c, Default::default()).await;
        let client = server.client().await;
        TestServer { server, client }
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), "default")
    }

    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    pub fn events(&self) -> Api<Event> {
        Api::namespaced(self.client.clone(), "default")
    }

    /// Creates a node with its status (allocatable), as an agent would.
    pub async fn create_node(&self, node: Node) {
        let name = node.metadata.name.clone().expect("node name");
        let created = self
            .nodes()
            .create(&PostParams::default(), &node)
            .await
            .expect("create node");
        if created
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .is_none()
        {
            let mut with_status = created;
            with_status.status = node.status;
            self.nodes()
                .replace_status(&name, &PostParams::default(), &with_status)
                .await
                .expect("node status");
        }
    }

    pub async fn create_pod(&self, pod: Pod) -> Pod {
        self.pods()
            .create(&PostParams::default(), &pod)
            .await
            .expect("create pod")
    }

    /// Events about pod `name` with `reason`.
    pub async fn events_for(&self, name: &str, reason: &str) -> Vec<Event> {
        let selector = format!("involvedObject.name={name},reason={reason}");
        self.events()
            .list(&ListParams::default().fields(&selector))
            .await
            .expect("list events")
            .items
    }
}

/// Fast timings: 3 s leases, 200 ms base backoff.
pub fn test_config(identity: &str) -> Config {
    Config {
        identity: identity.into(),
        leader_election: Some(LeaderElectionConfig {
            lease_duration: Duration::from_secs(3),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_millis(250),
            release_on_cancel: false,
            ..Default::default()
        }),
        queue: QueueConfig {
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(1),
            ..Default::default()
        },
        ..Default::default()
    }
}

pub struct RunningScheduler {
    pub stop: CancellationToken,
    pub task: JoinHandle<skiff_scheduler::Result<()>>,
    leading: tokio::sync::watch::Receiver<bool>,
}

impl RunningScheduler {
    pub fn start(client: Client, config: Config) -> RunningScheduler {
        let stop = CancellationToken::new();
        let scheduler = Scheduler::new(config);
        let leading = scheduler.leading();
        let task = tokio::spawn(scheduler.run(client, stop.clone()));
        RunningScheduler {
            stop,
            task,
            leading,
        }
    }

    /// Waits (bounded) until this instance is (or is not) scheduling.
    pub async fn wait_leading(&mut self, leading: bool) {
        tokio::time::timeout(WAIT, self.leading.wait_for(|l| *l == leading))
            .await
            .expect("leadership changes in time")
            .expect("scheduler alive");
    }

    /// Cancels and waits (bounded) for `run` to return.
    pub async fn stop(mut self) {
        self.stop.cancel();
        tokio::time::timeout(WAIT, &mut self.task)
            .await
            .expect("scheduler stops in time")
            .expect("scheduler task")
            .expect("scheduler result");
    }
}

impl Drop for RunningScheduler {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Polls `check` every 50 ms until it yields a value; fails after `WAIT`.
pub async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    wait_for_or(what, || {
        let fut = check();
        async move { fut.await.ok_or_else(String::new) }
    })
    .await
}

/// Like [`wait_for`]; `check` explains what it saw instead, for the
/// failure message.
pub async fn wait_for_or<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let seen = match check().await {
            Ok(v) => return v,
            Err(seen) => seen,
        };
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}; last saw {seen}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The PodScheduled condition's (status, reason, message).
pub fn pod_scheduled(pod: &Pod) -> Option<(String, Option<String>, Option<String>)> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

pub fn node_of(pod: &Pod) -> Option<String> {
    pod.spec.as_ref().and_then(|s| s.node_name.clone())
}
