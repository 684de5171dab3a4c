//! Pod GC against a real in-process API server: terminated pods beyond a
//! (small) threshold go oldest first; pods bound to a node that was
//! deleted go after the quarantine; a terminating pod never scheduled is
//! marked Failed and force-deleted.

mod support;

use support::{namespace, until};

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use skiff_controllers::{Config, ControllerManager};
use skiff_testkit::apiserver::{Options, TestApiServer};
use tokio_util::sync::CancellationToken;

async fn pod(api: &Api<Pod>, name: &str, node: Option<&str>, finalizer: bool) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "finalizers": if finalizer { json!(["test.skiff.dev/hold"]) } else { json!(null) },
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "busybox"}],
        },
    }))
    .unwrap();
    api.create(&PostParams::default(), &pod).await.unwrap();
}

async fn phase(api: &Api<Pod>, name: &str, phase: &str) {
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": phase}})),
    )
    .await
    .unwrap();
}

async fn exists(api: &Api<Pod>, name: &str) -> bool {
    api.get_opt(name).await.unwrap().is_some()
}

async fn node(client: &Client, name: &str) {
    let node = Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_orphaned_and_unscheduled_terminating_pods() {
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let client = server.client().await;
    let stop = CancellationToken::new();
    let config = Config {
        leader_election: None,
        controllers: vec!["podgc".into()],
        terminated_pod_gc_threshold: 2,
        pod_gc_period: Duration::from_millis(200),
        pod_gc_quarantine: Duration::from_secs(1),
        ..Config::default()
    };

    // Four terminated pods (and a running one) before the controller
    // starts: the two oldest go.
    namespace(&client, "done").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "done");
    for name in ["p1", "p2", "p3", "p4"] {
        pod(&pods, name, None, false).await;
        phase(&pods, name, "Succeeded").await;
    }
    pod(&pods, "running", None, false).await;
    tokio::spawn(ControllerManager::new(config).run(client.clone(), stop.clone()));
    until("the two oldest terminated pods go", || async {
        !exists(&pods, "p1").await && !exists(&pods, "p2").await
    })
    .await;
    for name in ["p3", "p4", "running"] {
        assert!(exists(&pods, name).await, "{name} is kept");
    }
    for name in ["p3", "p4"] {
        pods.delete(name, &DeleteParams::default()).await.unwrap();
    }

    // A pod on a node that is deleted goes; one on a live node stays.
    namespace(&client, "nodes").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "nodes");
    node(&client, "doomed").await;
    node(&client, "alive").await;
    pod(&pods, "on-doomed", Some("doomed"), false).await;
    pod(&pods, "on-alive", Some("alive"), false).await;
    Api::<Node>::all(client.clone())
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    until("the pod of the deleted node goes", || async {
        !exists(&pods, "on-doomed").await
    })
    .await;
    assert!(exists(&pods, "on-alive").await);

    // Terminating without a node (held by a finalizer): marked Failed
    // and force-deleted (the finalizer still holds it).
    namespace(&client, "unscheduled").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "unscheduled");
    pod(&pods, "held", None, true).await;
    pods.delete("held", &DeleteParams::default()).await.unwrap();
    until(
        "the unscheduled terminating pod is marked Failed",
        || async {
            pods.get("held")
                .await
                .unwrap()
                .status
                .and_then(|s| s.phase)
                .as_deref()
                == Some("Failed")
        },
    )
    .await;
    pods.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    until("gone once its finalizer is", || async {
        !exists(&pods, "held").await
    })
    .await;
    stop.cancel();
}
