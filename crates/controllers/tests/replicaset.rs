//! The ReplicaSet controller against a real in-process API server (no
//! kubelet: the test reports pods Ready itself): pods created to match
//! replicas and owned through a controller reference, never more than
//! asked for, the least settled deleted first on scale-down, orphans
//! adopted and strays released, status counts, the ReplicaFailure
//! condition when a quota refuses creates, and ReplicationControllers
//! through the same logic.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod, ReplicationController, ResourceQuota};
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use kube::runtime::{watcher, WatchStreamExt as _};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use skiff_controllers::{Config, ControllerManager};
use skiff_testkit::apiserver::{Options, TestApiServer};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(60);

/// An API server and controller manager of the test's own (cheap in
/// process), stopped when the returned guard drops.
async fn start(namespace: &str) -> (TestApiServer, Client, tokio_util::sync::DropGuard) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let client = server.client().await;
    let stop = CancellationToken::new();
    let config = Config {
        leader_election: None,
        controllers: vec![
            "replicaset".into(),
            "replicationcontroller".into(),
            "resourcequota".into(),
        ],
        ..Config::default()
    };
    tokio::spawn(ControllerManager::new(config).run(client.clone(), stop.clone()));
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    (server, client, stop.drop_guard())
}

fn replicaset(name: &str, replicas: i32) -> ReplicaSet {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }))
    .unwrap()
}

async fn pods_of(api: &Api<Pod>, app: &str) -> Vec<Pod> {
    api.list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items
}

async fn wait_pods(
    api: &Api<Pod>,
    app: &str,
    what: &str,
    cond: impl Fn(&[Pod]) -> bool,
) -> Vec<Pod> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let pods = pods_of(api, app).await;
        if cond(&pods) {
            return pods;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "pods of {app} never {what}: {} now",
            pods.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_rs(
    api: &Api<ReplicaSet>,
    name: &str,
    what: &str,
    cond: impl Fn(&ReplicaSet) -> bool + Send + 'static,
) {
    let found = tokio::time::timeout(
        WAIT,
        await_condition(api.clone(), name, move |rs: Option<&ReplicaSet>| {
            rs.is_some_and(&cond)
        }),
    )
    .await;
    assert!(
        found.is_ok(),
        "replicaset {name} never {what}: {:?}",
        api.get(name).await.map(|r| r.status)
    );
}

async fn set_ready(api: &Api<Pod>, name: &str) {
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        }})),
    )
    .await
    .unwrap();
}

fn status(rs: &ReplicaSet) -> (i32, i32, i32, i32) {
    let s = rs.status.clone().unwrap_or_default();
    (
        s.replicas,
        s.fully_labeled_replicas.unwrap_or(0),
        s.ready_replicas.unwrap_or(0),
        s.available_replicas.unwrap_or(0),
    )
}

#[tokio::test]
async fn replicas_are_created_owned_counted_and_scaled_down_least_settled_first() {
    let (_server, client, _stop) = start("rs-basic").await;
    let rs_api: Api<ReplicaSet> = Api::namespaced(client.clone(), "rs-basic");
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), "rs-basic");
    let rs = rs_api
        .create(&PostParams::default(), &replicaset("web", 3))
        .await
        .unwrap();
    let pods = wait_pods(&pod_api, "web", "reached 3", |p| p.len() == 3).await;
    for pod in &pods {
        let owner = &pod.owner_references()[0];
        assert_eq!(owner.kind, "ReplicaSet");
        assert_eq!(owner.uid, rs.uid().unwrap());
        assert_eq!(owner.controller, Some(true));
        assert_eq!(owner.block_owner_deletion, Some(true));
        assert!(pod.name_any().starts_with("web-"), "{}", pod.name_any());
    }
    // Two report Ready: the status follows.
    set_ready(&pod_api, &pods[0].name_any()).await;
    set_ready(&pod_api, &pods[1].name_any()).await;
    wait_rs(&rs_api, "web", "counted 2 ready", |rs| {
        status(rs) == (3, 3, 2, 2)
            && rs.status.as_ref().and_then(|s| s.observed_generation) == rs.metadata.generation
    })
    .await;
    let events: Api<Event> = Api::namespaced(client.clone(), "rs-basic");
    let created = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("SuccessfulCreate"))
        .count();
    assert!(created >= 1, "no SuccessfulCreate event");

    // Scale to 1: the pod that is not ready goes first, then one ready one.
    rs_api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    let left = wait_pods(&pod_api, "web", "scaled down to 1", |p| {
        p.iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .count()
            == 1
    })
    .await;
    let survivor = left
        .iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())
        .unwrap();
    assert!(
        survivor.name_any() == pods[0].name_any() || survivor.name_any() == pods[1].name_any(),
        "a ready pod survives, not {}",
        survivor.name_any()
    );
    wait_rs(&rs_api, "web", "counted 1", |rs| status(rs).0 == 1).await;
}

#[tokio::test]
async fn a_scale_up_never_creates_more_than_asked() {
    let (_server, client, _stop) = start("rs-burst").await;
    let rs_api: Api<ReplicaSet> = Api::namespaced(client.clone(), "rs-burst");
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), "rs-burst");
    // Every pod ever created in the namespace, from a watch.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(BTreeSet::new()));
    let watch_seen = seen.clone();
    let mut stream = watcher(pod_api.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    let watching = tokio::spawn(async move {
        while let Some(Ok(pod)) = stream.next().await {
            watch_seen.lock().unwrap().insert(pod.name_any());
        }
    });
    rs_api
        .create(&PostParams::default(), &replicaset("many", 1))
        .await
        .unwrap();
    wait_pods(&pod_api, "many", "reached 1", |p| p.len() == 1).await;
    rs_api
        .patch(
            "many",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 60}})),
        )
        .await
        .unwrap();
    wait_rs(&rs_api, "many", "counted 60", |rs| status(rs).0 == 60).await;
    // The status is written after the creates; any extra would be there.
    let pods = pods_of(&pod_api, "many").await;
    assert_eq!(pods.len(), 60);
    let deadline = tokio::time::Instant::now() + WAIT;
    while seen.lock().unwrap().len() < 60 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the watch never saw 60 pods"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        seen.lock().unwrap().len(),
        60,
        "pods created beyond replicas"
    );
    watching.abort();
}

#[tokio::test]
async fn orphans_are_adopted_and_strays_released() {
    let (_server, client, _stop) = start("rs-adopt").await;
    let rs_api: Api<ReplicaSet> = Api::namespaced(client.clone(), "rs-adopt");
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), "rs-adopt");
    let orphan: Pod = serde_json::from_value(json!({
        "metadata": {"name": "orphan", "labels": {"app": "adopter"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }))
    .unwrap();
    pod_api
        .create(&PostParams::default(), &orphan)
        .await
        .unwrap();
    let rs = rs_api
        .create(&PostParams::default(), &replicaset("adopter", 2))
        .await
        .unwrap();
    let pods = wait_pods(&pod_api, "adopter", "reached 2 owned", |p| {
        p.len() == 2 && p.iter().all(|p| !p.owner_references().is_empty())
    })
    .await;
    assert!(
        pods.iter().any(|p| p.name_any() == "orphan"),
        "the orphan was adopted"
    );
    let adopted = pod_api.get("orphan").await.unwrap();
    assert_eq!(adopted.owner_references()[0].uid, rs.uid().unwrap());

    // The orphan's label changes: released, and replaced.
    pod_api
        .patch(
            "orphan",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"app": "elsewhere"}}})),
        )
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let released = pod_api.get("orphan").await.unwrap();
        if released.owner_references().is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stray was never released"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_pods(&pod_api, "adopter", "replaced the stray", |p| {
        p.len() == 2 && p.iter().all(|p| p.name_any() != "orphan")
    })
    .await;
}

#[tokio::test]
async fn a_refused_create_sets_replica_failure() {
    let (_server, client, _stop) = start("rs-quota").await;
    let quota: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "pods"},
        "spec": {"hard": {"pods": "2"}},
    }))
    .unwrap();
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), "rs-quota");
    quotas.create(&PostParams::default(), &quota).await.unwrap();
    // The quota's status must be filled before admission enforces it.
    let found = tokio::time::timeout(
        WAIT,
        await_condition(quotas.clone(), "pods", |q: Option<&ResourceQuota>| {
            q.and_then(|q| q.status.as_ref())
                .and_then(|s| s.hard.as_ref())
                .is_some()
        }),
    )
    .await;
    assert!(found.is_ok(), "quota status never filled");
    let rs_api: Api<ReplicaSet> = Api::namespaced(client.clone(), "rs-quota");
    rs_api
        .create(&PostParams::default(), &replicaset("capped", 3))
        .await
        .unwrap();
    wait_rs(&rs_api, "capped", "reported ReplicaFailure", |rs| {
        rs.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter().any(|c| {
                    c.type_ == "ReplicaFailure"
                        && c.status == "True"
                        && c.reason.as_deref() == Some("FailedCreate")
                        && c.message
                            .as_deref()
                            .is_some_and(|m| m.contains("exceeded quota"))
                })
            })
    })
    .await;
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), "rs-quota");
    assert_eq!(pods_of(&pod_api, "capped").await.len(), 2);
    // Room again: the condition goes once all three exist.
    quotas
        .patch(
            "pods",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"hard": {"pods": "10"}}})),
        )
        .await
        .unwrap();
    wait_rs(&rs_api, "capped", "cleared ReplicaFailure", |rs| {
        status(rs).0 == 3
            && rs
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_none_or(|c| c.iter().all(|c| c.type_ != "ReplicaFailure"))
    })
    .await;
}

#[tokio::test]
async fn replication_controllers_share_the_logic() {
    let (_server, client, _stop) = start("rc").await;
    let rc_api: Api<ReplicationController> = Api::namespaced(client.clone(), "rc");
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), "rc");
    let rc: ReplicationController = serde_json::from_value(json!({
        "metadata": {"name": "legacy"},
        "spec": {
            "replicas": 2,
            "template": {
                "metadata": {"labels": {"app": "legacy"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }))
    .unwrap();
    rc_api.create(&PostParams::default(), &rc).await.unwrap();
    let pods = wait_pods(&pod_api, "legacy", "reached 2", |p| p.len() == 2).await;
    assert!(pods
        .iter()
        .all(|p| p.owner_references()[0].kind == "ReplicationController"));
    let found = tokio::time::timeout(
        WAIT,
        await_condition(
            rc_api.clone(),
            "legacy",
            |rc: Option<&ReplicationController>| {
                rc.and_then(|rc| rc.status.as_ref())
                    .is_some_and(|s| s.replicas == 2)
            },
        ),
    )
    .await;
    assert!(found.is_ok(), "rc status never counted 2");
}
