//! What the controller integration tests share: a server with some of
//! the controllers, namespaces, and waiting (with a timeout) for what
//! the controllers do. Each test file uses a part of it.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use skiff_controllers::{Config, ControllerManager};
use skiff_testkit::apiserver::{Options, TestApiServer};
use tokio_util::sync::CancellationToken;

/// How long a wait may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(60);

/// An in-process API server and a controller manager (no leader
/// election) running only `controllers`, until the token is cancelled.
pub async fn start(controllers: &[&str]) -> (TestApiServer, Client, CancellationToken) {
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let client = server.client().await;
    let stop = CancellationToken::new();
    let manager = ControllerManager::new(Config {
        leader_election: None,
        controllers: controllers.iter().map(|c| c.to_string()).collect(),
        ..Config::default()
    });
    tokio::spawn(manager.run(client.clone(), stop.clone()));
    (server, client, stop)
}

/// Polls `f` until it gives a value (every 100 ms, for [`WAIT`] at most).
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls `check` until it holds (every 50 ms, for [`WAIT`] at most).
pub async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "{what}: timed out");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates the namespace `name`.
pub async fn namespace(client: &Client, name: &str) {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}
