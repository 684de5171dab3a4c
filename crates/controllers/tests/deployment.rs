//! The Deployment controller with the ReplicaSet controller against a real
//! in-process API server, a stand-in kubelet reporting every pod Ready
//! (unless labelled `ready: never`): a Deployment gets its ReplicaSet and
//! pods; a rolling update, watched pod by pod, never exceeds replicas +
//! maxSurge pods nor drops below replicas − maxUnavailable ready; the
//! revision annotations let an undo revive the old ReplicaSet; pause and
//! resume; Recreate never runs old and new pods together; a rollout that
//! cannot become ready exceeds its progress deadline.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use kube::runtime::{watcher, WatchStreamExt as _};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use skiff_controllers::{Config, ControllerManager};
use skiff_testkit::apiserver::{Options, TestApiServer};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(60);

/// A server, the two controllers and a stand-in kubelet for `namespace`.
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
        controllers: vec!["deployment".into(), "replicaset".into()],
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
    tokio::spawn(kubelet(
        Api::namespaced(client.clone(), namespace),
        stop.clone(),
    ));
    (server, client, stop.drop_guard())
}

/// Reports each new pod Running and Ready (a few milliseconds later, as a
/// node would), except those labelled `ready: never`.
async fn kubelet(pods: Api<Pod>, stop: CancellationToken) {
    let mut events = watcher(pods.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    loop {
        let pod = tokio::select! {
            _ = stop.cancelled() => return,
            next = events.next() => match next {
                Some(Ok(pod)) => pod,
                Some(Err(_)) => continue,
                None => return,
            },
        };
        let never = pod.labels().get("ready").map(String::as_str) == Some("never");
        let reported = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready"));
        if reported || pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let ready = if never { "False" } else { "True" };
        let _ = pods
            .patch_status(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {
                    "phase": "Running",
                    "conditions": [{"type": "Ready", "status": ready,
                        "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()}],
                }})),
            )
            .await;
    }
}

fn deployment(name: &str, replicas: i32, image: &str, strategy: serde_json::Value) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": strategy,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": image}]},
            },
        },
    }))
    .unwrap()
}

async fn wait_deployment(
    api: &Api<Deployment>,
    name: &str,
    what: &str,
    cond: impl Fn(&Deployment) -> bool + Send + 'static,
) -> Deployment {
    let found = tokio::time::timeout(
        WAIT,
        await_condition(api.clone(), name, move |d: Option<&Deployment>| {
            d.is_some_and(&cond)
        }),
    )
    .await;
    match found {
        Ok(Ok(Some(d))) => d,
        _ => panic!(
            "deployment {name} never {what}: {:?}",
            api.get(name).await.map(|d| d.status)
        ),
    }
}

fn condition(d: &Deployment, type_: &str) -> Option<(String, String)> {
    d.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

fn rolled_out(d: &Deployment, replicas: i32) -> bool {
    let s = d.status.clone().unwrap_or_default();
    s.observed_generation == d.metadata.generation
        && s.updated_replicas == Some(replicas)
        && s.replicas == Some(replicas)
        && s.available_replicas == Some(replicas)
}

async fn image_of_sets(api: &Api<ReplicaSet>) -> Vec<(String, String, i32, String)> {
    let mut sets: Vec<_> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|rs| {
            let image = rs
                .spec
                .as_ref()
                .unwrap()
                .template
                .as_ref()
                .unwrap()
                .spec
                .as_ref()
                .unwrap()
                .containers[0]
                .image
                .clone()
                .unwrap_or_default();
            let revision = rs
                .annotations()
                .get("deployment.kubernetes.io/revision")
                .cloned()
                .unwrap_or_default();
            (
                rs.name_any(),
                image,
                rs.spec.unwrap().replicas.unwrap_or(1),
                revision,
            )
        })
        .collect();
    sets.sort_by(|a, b| a.3.cmp(&b.3));
    sets
}

#[tokio::test]
async fn a_rolling_update_keeps_its_bounds_and_can_be_undone() {
    let (_server, client, _stop) = start("roll").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "roll");
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "roll");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "roll");
    let strategy =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2, "maxUnavailable": 1}});
    deployments
        .create(
            &PostParams::default(),
            &deployment("web", 6, "busybox:1", strategy),
        )
        .await
        .unwrap();
    let d = wait_deployment(&deployments, "web", "rolled out", |d| rolled_out(d, 6)).await;
    assert_eq!(
        condition(&d, "Available"),
        Some(("True".into(), "MinimumReplicasAvailable".into()))
    );
    assert_eq!(
        condition(&d, "Progressing"),
        Some(("True".into(), "NewReplicaSetAvailable".into()))
    );
    assert_eq!(
        d.annotations()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("1")
    );
    let first = sets.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(first.len(), 1);
    let rs = &first[0];
    let hash = rs
        .labels()
        .get("pod-template-hash")
        .cloned()
        .expect("hash label");
    assert_eq!(rs.name_any(), format!("web-{hash}"));
    assert_eq!(
        rs.annotations()
            .get("deployment.kubernetes.io/desired-replicas")
            .map(String::as_str),
        Some("6")
    );
    assert_eq!(
        rs.annotations()
            .get("deployment.kubernetes.io/max-replicas")
            .map(String::as_str),
        Some("8")
    );

    // Watch every pod through the roll: never more than 6 + 2 pods, never
    // fewer than 6 - 1 ready ones.
    let seen: Arc<Mutex<std::collections::BTreeMap<String, (bool, bool)>>> = Arc::default();
    let violations: Arc<Mutex<Vec<String>>> = Arc::default();
    let (seen2, violations2) = (seen.clone(), violations.clone());
    let mut stream = watcher(pods.clone(), watcher::Config::default()).boxed();
    let watching = tokio::spawn(async move {
        let mut listed = false;
        while let Some(Ok(event)) = stream.next().await {
            let mut seen = seen2.lock().unwrap();
            match event {
                watcher::Event::Apply(p) | watcher::Event::InitApply(p) => {
                    let ready = p
                        .status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| {
                            c.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                        });
                    let alive = p.metadata.deletion_timestamp.is_none();
                    seen.insert(p.name_any(), (alive, ready && alive));
                }
                watcher::Event::Delete(p) => {
                    seen.remove(&p.name_any());
                }
                watcher::Event::InitDone => listed = true,
                watcher::Event::Init => {}
            }
            if listed {
                let total = seen.values().filter(|(alive, _)| *alive).count();
                let ready = seen.values().filter(|(_, ready)| *ready).count();
                if total > 8 || ready < 5 {
                    violations2
                        .lock()
                        .unwrap()
                        .push(format!("{total} pods, {ready} ready"));
                }
            }
        }
    });
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}}})),
        )
        .await
        .unwrap();
    let d = wait_deployment(&deployments, "web", "rolled to busybox:2", |d| {
        rolled_out(d, 6)
            && d.annotations()
                .get("deployment.kubernetes.io/revision")
                .map(String::as_str)
                == Some("2")
    })
    .await;
    assert_eq!(
        condition(&d, "Progressing").unwrap().1,
        "NewReplicaSetAvailable"
    );
    watching.abort();
    let violations = violations.lock().unwrap().clone();
    assert!(
        violations.is_empty(),
        "bounds broken during the roll: {violations:?}"
    );
    let after = image_of_sets(&sets).await;
    assert_eq!(after.len(), 2, "{after:?}");
    assert_eq!(
        (after[0].1.as_str(), after[0].2, after[0].3.as_str()),
        ("busybox:1", 0, "1")
    );
    assert_eq!(
        (after[1].1.as_str(), after[1].2, after[1].3.as_str()),
        ("busybox:2", 6, "2")
    );

    // An undo (kubectl puts the old template back): the old ReplicaSet is
    // revived as revision 3, remembering it was revision 1.
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}})),
        )
        .await
        .unwrap();
    wait_deployment(&deployments, "web", "rolled back", |d| {
        rolled_out(d, 6)
            && d.annotations()
                .get("deployment.kubernetes.io/revision")
                .map(String::as_str)
                == Some("3")
    })
    .await;
    let revived = sets.get(&first[0].name_any()).await.unwrap();
    assert_eq!(
        revived
            .annotations()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("3")
    );
    assert_eq!(
        revived
            .annotations()
            .get("deployment.kubernetes.io/revision-history")
            .map(String::as_str),
        Some("1")
    );
    assert_eq!(
        sets.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );
}

#[tokio::test]
async fn pause_resume_and_scale() {
    let (_server, client, _stop) = start("pause").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "pause");
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "pause");
    deployments
        .create(
            &PostParams::default(),
            &deployment("app", 2, "busybox:1", json!({"type": "RollingUpdate"})),
        )
        .await
        .unwrap();
    wait_deployment(&deployments, "app", "rolled out", |d| rolled_out(d, 2)).await;
    deployments
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": true}})),
        )
        .await
        .unwrap();
    wait_deployment(&deployments, "app", "paused", |d| {
        condition(d, "Progressing") == Some(("Unknown".into(), "DeploymentPaused".into()))
    })
    .await;
    // While paused a template change makes no ReplicaSet, but a scale
    // still applies.
    deployments
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4, "template": {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}}})),
        )
        .await
        .unwrap();
    wait_deployment(&deployments, "app", "scaled while paused", |d| {
        d.status.as_ref().and_then(|s| s.available_replicas) == Some(4)
    })
    .await;
    assert_eq!(
        sets.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    deployments
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": false}})),
        )
        .await
        .unwrap();
    wait_deployment(&deployments, "app", "resumed and rolled", |d| {
        rolled_out(d, 4)
            && d.annotations()
                .get("deployment.kubernetes.io/revision")
                .map(String::as_str)
                == Some("2")
    })
    .await;
}

#[tokio::test]
async fn recreate_stops_the_old_pods_before_starting_new_ones() {
    let (_server, client, _stop) = start("recreate").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "recreate");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "recreate");
    deployments
        .create(
            &PostParams::default(),
            &deployment("db", 3, "busybox:1", json!({"type": "Recreate"})),
        )
        .await
        .unwrap();
    wait_deployment(&deployments, "db", "rolled out", |d| rolled_out(d, 3)).await;
    let mixed: Arc<Mutex<bool>> = Arc::default();
    let mixed2 = mixed.clone();
    let hashes: Arc<Mutex<std::collections::BTreeMap<String, String>>> = Arc::default();
    let mut stream = watcher(pods.clone(), watcher::Config::default()).boxed();
    let watching = tokio::spawn(async move {
        while let Some(Ok(event)) = stream.next().await {
            let mut hashes = hashes.lock().unwrap();
            match event {
                watcher::Event::Apply(p) | watcher::Event::InitApply(p) => {
                    hashes.insert(
                        p.name_any(),
                        p.labels()
                            .get("pod-template-hash")
                            .cloned()
                            .unwrap_or_default(),
                    );
                }
                watcher::Event::Delete(p) => {
                    hashes.remove(&p.name_any());
                }
                _ => {}
            }
            let distinct: std::collections::BTreeSet<&String> = hashes.values().collect();
            if distinct.len() > 1 {
                *mixed2.lock().unwrap() = true;
            }
        }
    });
    deployments
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}}})),
        )
        .await
        .unwrap();
    wait_deployment(&deployments, "db", "recreated", |d| {
        rolled_out(d, 3)
            && d.annotations()
                .get("deployment.kubernetes.io/revision")
                .map(String::as_str)
                == Some("2")
    })
    .await;
    watching.abort();
    assert!(!*mixed.lock().unwrap(), "old and new pods existed together");
}

#[tokio::test]
async fn a_rollout_that_never_becomes_ready_exceeds_its_deadline() {
    let (_server, client, _stop) = start("stuck").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "stuck");
    let mut d = deployment("stuck", 2, "busybox:1", json!({"type": "RollingUpdate"}));
    d.spec.as_mut().unwrap().progress_deadline_seconds = Some(2);
    d.spec
        .as_mut()
        .unwrap()
        .template
        .metadata
        .as_mut()
        .unwrap()
        .labels
        .as_mut()
        .unwrap()
        .insert("ready".into(), "never".into());
    deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let d = wait_deployment(&deployments, "stuck", "timed out", |d| {
        condition(d, "Progressing") == Some(("False".into(), "ProgressDeadlineExceeded".into()))
    })
    .await;
    assert_eq!(
        condition(&d, "Available"),
        Some(("False".into(), "MinimumReplicasUnavailable".into()))
    );
    let message = d
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Progressing")
        .unwrap()
        .message;
    assert!(message.is_some_and(|m| m.contains("has timed out progressing")));
}
