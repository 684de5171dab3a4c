//! The etcd backend on a three-member etcd cluster (issue [multinode]
//! deliverable 3): with every member's endpoint given, a member killed
//! with SIGKILL leaves the store working: writes and reads go on within
//! a bounded time, and a watch started again from its last revision
//! misses no event.

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt as _;
use skiff_store::etcd::{EtcdConfig, EtcdStore};
use skiff_store::{Error, Store};
use skiff_testkit::EtcdCluster;

/// Retries `f` while the store is unavailable (a request in flight to the
/// killed member), for at most 30 s.
async fn settled<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) if Instant::now() < deadline && matches!(e, Error::Unavailable { .. }) => {
                // A retry interval, not a wait standing in for a condition.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

#[tokio::test]
async fn a_member_killed_leaves_the_store_working() {
    let mut cluster = EtcdCluster::start(3).await.expect("start a 3-member etcd");
    let store = EtcdStore::connect(EtcdConfig::new(cluster.endpoints().to_vec()))
        .await
        .expect("connect");
    let first = store
        .create("/registry/t/a", Bytes::from_static(b"1"))
        .await
        .expect("create");
    // The first endpoint is the one the client starts with.
    cluster.kill(0);
    let second = settled("create after a member died", || {
        store.create("/registry/t/b", Bytes::from_static(b"2"))
    })
    .await;
    assert!(second.mod_revision > first.mod_revision);
    let read = settled("get", || store.get("/registry/t/b")).await;
    assert_eq!(read.value, Bytes::from_static(b"2"));
    // A watch from before the kill sees both writes after it.
    let mut watch = settled("watch", || store.watch("/registry/t/", first.mod_revision)).await;
    let third = settled("update", || {
        store.update(
            "/registry/t/a",
            Bytes::from_static(b"3"),
            first.mod_revision,
        )
    })
    .await;
    let mut seen = Vec::new();
    while seen.last() != Some(&third.mod_revision) {
        let event = tokio::time::timeout(Duration::from_secs(30), watch.next())
            .await
            .expect("a watch event within 30 s")
            .expect("the watch goes on")
            .expect("an event");
        seen.push(event.revision);
    }
    assert_eq!(seen, vec![second.mod_revision, third.mod_revision]);
}
