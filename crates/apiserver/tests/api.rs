//! In-process integration: the real API server and store, driven by
//! kube-rs (typed API, a reflector, raw requests). No nodes.

mod support;

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::{Api, Client};
use serde_json::json;
use support::TestServer;

async fn client(server: &TestServer) -> Client {
    let kubeconfig = Kubeconfig::read_from(&server.kubeconfig).expect("read kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kube config");
    Client::try_from(config).expect("kube client")
}

fn pod(name: &str, labels: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }))
    .unwrap()
}

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Waits (bounded) for `check` to hold.
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tick.tick().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_follows_pods() {
    let server = TestServer::start().await;
    let client = client(&server).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let (reader, writer) = reflector::store::<Pod>();
    let stream = reflector(writer, watcher(pods.clone(), watcher::Config::default()))
        .applied_objects()
        .boxed();
    let driver = tokio::spawn(stream.for_each(|_| async {}));
    for name in ["a", "b", "c"] {
        pods.create(&PostParams::default(), &pod(name, json!({"app": "x"})))
            .await
            .unwrap();
    }
    eventually("3 pods in the reflector", || reader.state().len() == 3).await;
    pods.delete("b", &DeleteParams::default()).await.unwrap();
    eventually("2 pods in the reflector", || reader.state().len() == 2).await;
    let mut names: Vec<_> = reader
        .state()
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, vec!["a", "c"]);
    driver.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_defaults_validation_and_selectors() {
    let server = TestServer::start().await;
    let pods: Api<Pod> = Api::namespaced(client(&server).await, "default");
    let created = pods
        .create(&PostParams::default(), &pod("web", json!({"app": "a"})))
        .await
        .unwrap();
    let spec = created.spec.as_ref().unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(spec.termination_grace_period_seconds, Some(30));
    assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
    assert_eq!(
        spec.containers[0].image_pull_policy.as_deref(),
        Some("Always")
    );
    assert_eq!(spec.tolerations.as_ref().unwrap().len(), 2);
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"));

    pods.create(&PostParams::default(), &pod("api", json!({"app": "b"})))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("db", json!({"app": "c"})))
        .await
        .unwrap();
    let names = |list: kube::core::ObjectList<Pod>| {
        list.items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect::<Vec<_>>()
    };
    let selected = pods
        .list(&ListParams::default().labels("app in (a,b)"))
        .await
        .unwrap();
    assert_eq!(names(selected), vec!["api", "web"]);
    let selected = pods
        .list(&ListParams::default().labels("app!=a"))
        .await
        .unwrap();
    assert_eq!(names(selected), vec!["api", "db"]);
    let selected = pods
        .list(&ListParams::default().fields("metadata.name=db,status.phase=Pending"))
        .await
        .unwrap();
    assert_eq!(names(selected), vec!["db"]);
    let e = api_error(
        pods.list(&ListParams::default().fields("spec.bogus=1"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (400, "field label not supported: spec.bogus")
    );

    // Paging: limit + continue.
    let page = pods.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(page.items.len(), 2);
    let token = page.metadata.continue_.clone().unwrap();
    let rest = pods
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(names(rest), vec!["web"]);

    // 422 with causes.
    let mut bad = pod("dup", json!({}));
    let c = bad.spec.as_ref().unwrap().containers[0].clone();
    bad.spec.as_mut().unwrap().containers.push(c);
    let e = api_error(pods.create(&PostParams::default(), &bad).await.unwrap_err());
    assert_eq!(e.code, 422);
    assert_eq!(e.reason, "Invalid");
    assert!(
        e.message
            .contains("spec.containers[1].name: Duplicate value: \"c\""),
        "{}",
        e.message
    );

    // Conflict on a stale resourceVersion.
    let mut stale = pods.get("web").await.unwrap();
    let mut fresh = stale.clone();
    fresh.spec.as_mut().unwrap().containers[0].image = Some("busybox:2".into());
    pods.replace("web", &PostParams::default(), &fresh)
        .await
        .unwrap();
    stale.spec.as_mut().unwrap().containers[0].image = Some("busybox:3".into());
    let e = api_error(
        pods.replace("web", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 409);
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on pods \"web\": the object has been modified; please apply your changes to the latest version and try again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_deletion_binding_and_status() {
    let server = TestServer::start().await;
    let client = client(&server).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("bound", json!({})))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("loose", json!({})))
        .await
        .unwrap();

    // The Binding's annotations are merged onto the pod (upstream's
    // setPodNodeAndMetadata).
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "bound", "annotations": {"skiff.dev/scheduling-wait": "{}"}},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}});
    let _: serde_json::Value = pods
        .create_subresource("binding", "bound", &PostParams::default(), &binding)
        .await
        .unwrap();
    let bound = pods.get("bound").await.unwrap();
    assert_eq!(
        bound
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("skiff.dev/scheduling-wait"))
            .map(String::as_str),
        Some("{}")
    );
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("n1"));
    let e = api_error(
        pods.create_subresource::<_, serde_json::Value>(
            "binding",
            "bound",
            &PostParams::default(),
            &binding,
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 409);
    assert!(
        e.message.contains("is already assigned to node \"n1\""),
        "{}",
        e.message
    );

    // An unbound pod goes at once; a bound one is only marked.
    pods.delete("loose", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(api_error(pods.get("loose").await.unwrap_err()).code, 404);
    pods.delete("bound", &DeleteParams::default())
        .await
        .unwrap();
    let marked = pods.get("bound").await.unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(marked.metadata.deletion_grace_period_seconds, Some(30));
    // The node confirms with grace 0.
    pods.delete(
        "bound",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(api_error(pods.get("bound").await.unwrap_err()).code, 404);

    // Status and generation on a Deployment.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    })).unwrap();
    let d = deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    let mut with_status = d.clone();
    with_status.status = Some(serde_json::from_value(json!({"replicas": 5})).unwrap());
    with_status.spec.as_mut().unwrap().replicas = Some(9);
    let after = deployments
        .replace_status("d", &PostParams::default(), &with_status)
        .await
        .unwrap();
    assert_eq!(after.status.as_ref().unwrap().replicas, Some(5));
    assert_eq!(
        after.spec.as_ref().unwrap().replicas,
        Some(1),
        "a status update ignores spec"
    );
    assert_eq!(after.metadata.generation, Some(1));
    let mut scaled = after.clone();
    scaled.spec.as_mut().unwrap().replicas = Some(3);
    scaled.status = None;
    let scaled = deployments
        .replace("d", &PostParams::default(), &scaled)
        .await
        .unwrap();
    assert_eq!(scaled.metadata.generation, Some(2));
    assert_eq!(
        scaled.status.unwrap().replicas,
        Some(5),
        "a main update keeps status"
    );
    let mut relabeled = deployments.get("d").await.unwrap();
    relabeled.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
    let relabeled = deployments
        .replace("d", &PostParams::default(), &relabeled)
        .await
        .unwrap();
    assert_eq!(
        relabeled.metadata.generation,
        Some(2),
        "metadata changes keep generation"
    );

    // A patch of the scale subresource fails like any other patch.
    let failing = kube::api::Patch::Json::<()>(
        serde_json::from_value(json!([{"op": "test", "path": "/spec/replicas", "value": 99}]))
            .unwrap(),
    );
    let e = api_error(
        deployments
            .patch_scale("d", &kube::api::PatchParams::default(), &failing)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422, "{}", e.message);
    assert_eq!(
        deployments.get("d").await.unwrap().spec.unwrap().replicas,
        Some(3)
    );

    // Namespaces: missing → 404; deleting one marks it Terminating (no
    // new content) and keeps it, with its content, until the namespace
    // controller (played here: there are no controllers in these tests)
    // has deleted the content and removed `kubernetes` from
    // spec.finalizers through `finalize`.
    let in_missing: Api<Pod> = Api::namespaced(client.clone(), "nowhere");
    let e = api_error(
        in_missing
            .create(&PostParams::default(), &pod("p", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (404, "namespaces \"nowhere\" not found")
    );
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap(),
        )
        .await
        .unwrap();
    let team: Api<Pod> = Api::namespaced(client.clone(), "team");
    team.create(&PostParams::default(), &pod("p", json!({})))
        .await
        .unwrap();
    let marked = namespaces
        .delete("team", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("the namespace is answered, not a Status");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert_eq!(
        marked.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Terminating")
    );
    let e = api_error(
        team.create(&PostParams::default(), &pod("q", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 403, "{}", e.message);
    // Still there, content too; a second DELETE changes nothing.
    team.get("p").await.unwrap();
    namespaces
        .delete("team", &DeleteParams::default())
        .await
        .unwrap();
    let ns = namespaces.get("team").await.unwrap();
    assert_eq!(
        ns.spec.as_ref().and_then(|s| s.finalizers.clone()),
        Some(vec!["kubernetes".to_string()])
    );
    // An update of the namespace itself does not change spec.finalizers
    // or the phase.
    let mut edited = ns.clone();
    edited.spec.as_mut().unwrap().finalizers = Some(vec![]);
    edited.status.as_mut().unwrap().phase = Some("Active".into());
    let edited = namespaces
        .replace("team", &PostParams::default(), &edited)
        .await
        .unwrap();
    assert_eq!(
        edited.spec.as_ref().and_then(|s| s.finalizers.clone()),
        Some(vec!["kubernetes".to_string()])
    );
    assert_eq!(
        edited.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Terminating")
    );
    // finalize checks the names it is given, as upstream's
    // ValidateNamespaceFinalizeUpdate, and a refused one changes nothing.
    for (bad, why) in [
        (
            "plain",
            "name is neither a standard finalizer name nor is it fully qualified",
        ),
        ("", "name part must be non-empty"),
        ("a/b/c", "a qualified name must consist of"),
    ] {
        let mut refused = edited.clone();
        refused.spec.as_mut().unwrap().finalizers = Some(vec![bad.to_string()]);
        let e = api_error(
            namespaces
                .replace_subresource("finalize", "team", &PostParams::default(), &refused)
                .await
                .unwrap_err(),
        );
        assert_eq!(e.code, 422, "{bad}: {}", e.message);
        assert!(
            e.message.contains("spec.finalizers[0]") && e.message.contains(why),
            "{bad}: {}",
            e.message
        );
    }
    let kept = namespaces.get("team").await.unwrap();
    assert_eq!(
        kept.spec.as_ref().and_then(|s| s.finalizers.clone()),
        Some(vec!["kubernetes".to_string()])
    );
    // So does create.
    let plain: Namespace = serde_json::from_value(
        json!({"metadata": {"name": "plain"}, "spec": {"finalizers": ["plain"]}}),
    )
    .unwrap();
    let e = api_error(
        namespaces
            .create(&PostParams::default(), &plain)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422, "{}", e.message);
    // The namespace controller's part: the content, then finalize.
    team.delete("p", &DeleteParams::default()).await.unwrap();
    let mut finalized = edited;
    finalized.spec.as_mut().unwrap().finalizers = Some(vec![]);
    namespaces
        .replace_subresource("finalize", "team", &PostParams::default(), &finalized)
        .await
        .unwrap();
    assert_eq!(
        api_error(namespaces.get("team").await.unwrap_err()).code,
        404
    );
    assert_eq!(api_error(team.get("p").await.unwrap_err()).code, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_rejected_and_changes_nothing() {
    let server = TestServer::start().await;
    let client = client(&server).await;
    let raw = |method: &str, path: &str, body: Vec<u8>| {
        http::Request::builder()
            .method(method)
            .uri(path)
            .header("Content-Type", "application/json")
            .body(body)
            .unwrap()
    };
    let status = |r: Result<String, kube::Error>| api_error(r.unwrap_err());

    let path = "/api/v1/namespaces/default/configmaps";
    let e = status(
        client
            .request_text(raw("POST", path, b"{not json".to_vec()))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    assert!(
        e.message.starts_with("json: cannot decode request body"),
        "{}",
        e.message
    );

    let wrong_kind = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}});
    let e = status(
        client
            .request_text(raw("POST", path, serde_json::to_vec(&wrong_kind).unwrap()))
            .await,
    );
    assert_eq!(e.code, 400);
    assert!(
        e.message
            .contains("does not match the expected kind (ConfigMap)"),
        "{}",
        e.message
    );

    let huge = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "huge"},
        "data": {"x": "y".repeat(3 * 1024 * 1024 + 10)}});
    let e = status(
        client
            .request_text(raw("POST", path, serde_json::to_vec(&huge).unwrap()))
            .await,
    );
    assert_eq!(e.code, 413);

    let list: serde_json::Value =
        serde_json::from_str(&client.request_text(raw("GET", path, vec![])).await.unwrap())
            .unwrap();
    assert_eq!(
        list["items"].as_array().unwrap().len(),
        0,
        "nothing was written"
    );

    // Bookmarks carry the newest revision the stream has handled.
    let cm = client
        .request_text(raw(
            "POST",
            path,
            serde_json::to_vec(
                &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}),
            )
            .unwrap(),
        ))
        .await
        .unwrap();
    let cm_rv: i64 = serde_json::from_str::<serde_json::Value>(&cm).unwrap()["metadata"]
        ["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "default");
    let mut events = cms
        .watch(&kube::api::WatchParams::default(), &cm_rv.to_string())
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(Duration::from_secs(30), events.next())
        .await
        .expect("a bookmark")
    {
        Some(Ok(kube::core::WatchEvent::Bookmark(b))) => {
            assert!(b.metadata.resource_version.parse::<i64>().unwrap() >= cm_rv)
        }
        other => panic!("expected a bookmark, got {other:?}"),
    }
    // Streaming lists: initial events, then the initial-events-end bookmark.
    let mut events = cms
        .watch(&kube::api::WatchParams::streaming_lists(), "")
        .await
        .unwrap()
        .boxed();
    match events.next().await {
        Some(Ok(kube::core::WatchEvent::Added(c))) => {
            assert_eq!(c.metadata.name.as_deref(), Some("b"))
        }
        other => panic!("expected ADDED, got {other:?}"),
    }
    match events.next().await {
        Some(Ok(kube::core::WatchEvent::Bookmark(b))) => {
            assert_eq!(
                b.metadata
                    .annotations
                    .get("k8s.io/initial-events-end")
                    .map(String::as_str),
                Some("true")
            )
        }
        other => panic!("expected the initial-events-end bookmark, got {other:?}"),
    }

    // A watch from a resourceVersion older than the cache's window: 410.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut events = pods
        .watch(&kube::api::WatchParams::default(), "1")
        .await
        .unwrap()
        .boxed();
    match events.next().await {
        Some(Ok(kube::core::WatchEvent::Error(e))) => {
            assert_eq!((e.code, e.reason.as_str()), (410, "Expired"))
        }
        Some(Err(kube::Error::Api(e))) => assert_eq!(e.code, 410),
        other => panic!("expected 410 Gone, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preconditions_deletecollection_terminating_and_timeouts() {
    let server = TestServer::start().await;
    let client = client(&server).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let web = pods
        .create(&PostParams::default(), &pod("web", json!({"app": "web"})))
        .await
        .unwrap();

    // uid and resourceVersion preconditions.
    let wrong_uid = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("nope".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let e = api_error(pods.delete("web", &wrong_uid).await.unwrap_err());
    assert_eq!(e.code, 409);
    assert!(
        e.message
            .contains("Precondition failed: UID in precondition: nope"),
        "{}",
        e.message
    );
    let wrong_rv = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: None,
            resource_version: Some("1".into()),
        }),
        ..Default::default()
    };
    let e = api_error(pods.delete("web", &wrong_rv).await.unwrap_err());
    assert!(
        e.message
            .contains("Precondition failed: ResourceVersion in precondition: 1"),
        "{}",
        e.message
    );
    let right = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: web.metadata.uid.clone(),
            resource_version: web.metadata.resource_version.clone(),
        }),
        ..Default::default()
    };
    pods.delete("web", &right).await.unwrap();

    // deletecollection with a label selector.
    for (name, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        pods.create(&PostParams::default(), &pod(name, json!({"app": app})))
            .await
            .unwrap();
    }
    pods.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("app=x"),
    )
    .await
    .unwrap();
    let left: Vec<_> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| p.metadata.name.unwrap())
        .collect();
    assert_eq!(left, vec!["c"]);

    // A terminating namespace takes no new content.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns: Namespace = namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "closing"}})).unwrap(),
        )
        .await
        .unwrap();
    ns.status = Some(serde_json::from_value(json!({"phase": "Terminating"})).unwrap());
    namespaces
        .replace_status("closing", &PostParams::default(), &ns)
        .await
        .unwrap();
    // The plugin reads namespaces from the watch cache (as upstream's
    // reads its informer), which may not have applied the status update
    // just acknowledged: wait until the cache shows it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let seen = namespaces
            .list(&ListParams::default().at("0"))
            .await
            .unwrap();
        let phase = seen
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some("closing"))
            .and_then(|n| n.status.as_ref()?.phase.clone());
        if phase.as_deref() == Some("Terminating") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cache never showed the namespace terminating"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let closing: Api<Pod> = Api::namespaced(client.clone(), "closing");
    let e = api_error(
        closing
            .create(&PostParams::default(), &pod("p", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 403);
    assert!(
        e.message.contains(
            "unable to create new content in namespace closing because it is being terminated"
        ),
        "{}",
        e.message
    );

    // resourceVersion semantics: N is "not older than" (from the cache),
    // Exact is that snapshot, and a bad match is refused.
    let list_rv = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let later = pods
        .create(&PostParams::default(), &pod("later", json!({})))
        .await
        .unwrap();
    // Not older than the version that created "later": the cache waits
    // until it has it (at the earlier version it may or may not, yet).
    let later_rv = later.metadata.resource_version.clone().unwrap();
    let not_older = pods
        .list(
            &ListParams::default()
                .at(&later_rv)
                .matching(kube::api::VersionMatch::NotOlderThan),
        )
        .await
        .unwrap();
    assert!(not_older
        .items
        .iter()
        .any(|p| p.metadata.name.as_deref() == Some("later")));
    let exact = pods
        .list(
            &ListParams::default()
                .at(&list_rv)
                .matching(kube::api::VersionMatch::Exact),
        )
        .await
        .unwrap();
    assert!(
        exact
            .items
            .iter()
            .all(|p| p.metadata.name.as_deref() != Some("later")),
        "the snapshot at {list_rv}"
    );
    assert_eq!(
        exact.metadata.resource_version.as_deref(),
        Some(list_rv.as_str())
    );
    let raw = http::Request::builder()
        .uri("/api/v1/namespaces/default/pods?resourceVersion=1&resourceVersionMatch=Sometimes")
        .body(Vec::new())
        .unwrap();
    assert_eq!(
        api_error(client.request_text(raw).await.unwrap_err()).code,
        400
    );
    pods.delete("later", &DeleteParams::default())
        .await
        .unwrap();
    assert!(later.metadata.resource_version.is_some());
    // A watch from "0" starts at whatever the cache holds, which may not
    // have applied the delete yet: wait until it has.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let any = pods.list(&ListParams::default().at("0")).await.unwrap();
        if any
            .iter()
            .all(|p| p.metadata.name.as_deref() != Some("later"))
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cache kept the deleted pod"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // timeoutSeconds ends a quiet watch.
    let started = std::time::Instant::now();
    let events: Vec<_> = pods
        .watch(
            &kube::api::WatchParams::default()
                .timeout(1)
                .disable_bookmarks(),
            "0",
        )
        .await
        .unwrap()
        .collect()
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the watch outlived its timeout"
    );
    assert_eq!(
        events.len(),
        1,
        "only the existing pod, as a synthetic ADDED: {events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalizers_foreground_dry_run_and_bad_patches() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Patch, PatchParams};
    let server = TestServer::start().await;
    let client = client(&server).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm = |name: &str, finalizers: serde_json::Value| -> ConfigMap {
        serde_json::from_value(
            json!({"metadata": {"name": name, "finalizers": finalizers}, "data": {"a": "1"}}),
        )
        .unwrap()
    };

    // Deletion waits for finalizers.
    cms.create(
        &PostParams::default(),
        &cm("held", json!(["example.com/hold"])),
    )
    .await
    .unwrap();
    cms.delete("held", &DeleteParams::default()).await.unwrap();
    let held = cms.get("held").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    let clear = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    cms.patch("held", &PatchParams::default(), &clear)
        .await
        .unwrap();
    assert_eq!(api_error(cms.get("held").await.unwrap_err()).code, 404);

    // Foreground deletion adds foregroundDeletion (the garbage collector
    // that acts on it comes with the controllers).
    cms.create(&PostParams::default(), &cm("fg", json!([])))
        .await
        .unwrap();
    cms.delete("fg", &DeleteParams::foreground()).await.unwrap();
    let fg = cms.get("fg").await.unwrap();
    assert_eq!(
        fg.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_string()])
    );

    // dryRun=All runs everything and stores nothing.
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let created = cms.create(&dry, &cm("dry", json!([]))).await.unwrap();
    assert_eq!(created.metadata.name.as_deref(), Some("dry"));
    assert_eq!(api_error(cms.get("dry").await.unwrap_err()).code, 404);
    cms.create(&PostParams::default(), &cm("real", json!([])))
        .await
        .unwrap();
    let dry_patch = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    let patched = cms
        .patch(
            "real",
            &dry_patch,
            &Patch::Merge(json!({"data": {"a": "2"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["a"], "2");
    assert_eq!(cms.get("real").await.unwrap().data.unwrap()["a"], "1");
    cms.delete(
        "real",
        &DeleteParams {
            dry_run: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(cms.get("real").await.is_ok());
    let e = api_error(
        cms.create(&dry, &cm("Bad_Name", json!([])))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422, "dry run still validates");

    // Bad patches: 422/400 and nothing changes.
    let before = cms.get("real").await.unwrap().metadata.resource_version;
    let test_fails = Patch::Json::<()>(
        serde_json::from_value(json!([{"op": "test", "path": "/data/a", "value": "nope"}]))
            .unwrap(),
    );
    assert_eq!(
        api_error(
            cms.patch("real", &PatchParams::default(), &test_fails)
                .await
                .unwrap_err()
        )
        .code,
        422
    );
    let bad_pointer = Patch::Json::<()>(
        serde_json::from_value(json!([{"op": "replace", "path": "/no/such/field", "value": 1}]))
            .unwrap(),
    );
    assert_eq!(
        api_error(
            cms.patch("real", &PatchParams::default(), &bad_pointer)
                .await
                .unwrap_err()
        )
        .code,
        422
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("web", json!({})))
        .await
        .unwrap();
    let wrong_key = Patch::Strategic(json!({"spec": {"containers": [{"image": "no-name"}]}}));
    let e = api_error(
        pods.patch("web", &PatchParams::default(), &wrong_key)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 400, "{}", e.message);
    assert!(
        e.message
            .contains("does not contain declared merge key: name"),
        "{}",
        e.message
    );
    assert_eq!(
        cms.get("real").await.unwrap().metadata.resource_version,
        before
    );

    // Strict and Warn field validation on patch and create.
    let strict = PatchParams {
        field_validation: Some(kube::api::ValidationDirective::Strict),
        ..Default::default()
    };
    let e = api_error(
        cms.patch("real", &strict, &Patch::Merge(json!({"bogus": 1})))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 400);
    assert!(
        e.message
            .contains("strict decoding error: unknown field \"bogus\""),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn a_protobuf_body_that_is_not_protobuf_is_a_400_and_writes_nothing() {
    let server = TestServer::start().await;
    let client = client(&server).await;
    let req = http::Request::post("/api/v1/namespaces")
        .header("content-type", "application/vnd.kubernetes.protobuf")
        .body(br#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}"#.to_vec())
        .unwrap();
    let status = api_error(client.request_text(req).await.unwrap_err());
    assert_eq!(status.code, 400, "{status:?}");
    assert_eq!(status.reason, "BadRequest", "{status:?}");
    assert!(
        status.message.contains("expected prefix [107 56 115 0]"),
        "{status:?}"
    );
    let namespaces: Api<Namespace> = Api::all(client);
    assert!(namespaces.get_opt("x").await.unwrap().is_none());
}

#[tokio::test]
async fn a_cbor_body_is_a_415_naming_the_accepted_types() {
    let server = TestServer::start().await;
    let client = client(&server).await;
    let req = http::Request::post("/api/v1/namespaces")
        .header("content-type", "application/cbor")
        .body(vec![0xa0])
        .unwrap();
    let status = api_error(client.request_text(req).await.unwrap_err());
    assert_eq!(status.code, 415, "{status:?}");
    assert!(
        status.message.ends_with(
            "accepted media types include: application/json, application/vnd.kubernetes.protobuf"
        ),
        "{status:?}"
    );
}

/// Node-agent watches (`spec.nodeName=N`, indexed in the watch cache) see
/// exactly their node's pods: created there, bound there (entering, as
/// ADDED), deleted; nothing of other nodes or of unbound pods.
#[tokio::test]
async fn node_watches_see_only_their_own_pods() {
    use kube::core::WatchEvent;
    let server = TestServer::start().await;
    let client = client(&server).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let all: Api<Pod> = Api::all(client);
    let params = kube::api::WatchParams::default()
        .fields("spec.nodeName=n1")
        .timeout(10);
    let mut stream = all.watch(&params, "0").await.unwrap().boxed();
    let on = |name: &str, node: Option<&str>| {
        let mut p = pod(name, json!({}));
        p.spec.as_mut().unwrap().node_name = node.map(String::from);
        p
    };
    let pp = PostParams::default();
    pods.create(&pp, &on("a", Some("n2"))).await.unwrap();
    pods.create(&pp, &on("b", None)).await.unwrap();
    pods.create(&pp, &on("c", Some("n1"))).await.unwrap();
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "b"},
        "target": {"kind": "Node", "name": "n1"}});
    let req = http::Request::post("/api/v1/namespaces/default/pods/b/binding")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&binding).unwrap())
        .unwrap();
    pods.clone().into_client().request_text(req).await.unwrap();
    pods.delete("c", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let ev = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("an event within 10 s")
            .expect("stream open")
            .unwrap();
        let (what, p) = match ev {
            WatchEvent::Added(p) => ("ADDED", p),
            WatchEvent::Modified(p) => ("MODIFIED", p),
            WatchEvent::Deleted(p) => ("DELETED", p),
            other => panic!("unexpected {other:?}"),
        };
        seen.push((what, p.metadata.name.unwrap()));
    }
    let seen: Vec<(&str, &str)> = seen.iter().map(|(w, n)| (*w, n.as_str())).collect();
    assert_eq!(seen, vec![("ADDED", "c"), ("ADDED", "b"), ("DELETED", "c")]);
}

/// A pod leaving a watch's selector is a DELETED event with `type` before
/// `object`, as upstream writes it: kube-rs decodes objects that keep raw
/// parts (the scheduler's `Trimmed` pods) only in that order. Before, the
/// line had `object` first, and the scheduler's watch, which selects pods
/// that are not Succeeded or Failed, failed on every pod that finished.
#[tokio::test]
async fn a_pod_leaving_a_selector_is_deleted_and_decodes_raw() {
    use kube::api::{Patch, PatchParams};
    use kube::core::WatchEvent;
    use skiff_client::trimmed::Trimmed;
    let server = TestServer::start().await;
    let client = client(&server).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let trimmed: Api<Trimmed<Pod>> = Api::all(client);
    let params = kube::api::WatchParams::default()
        .fields("status.phase!=Succeeded,status.phase!=Failed")
        .timeout(10);
    let mut stream = trimmed.watch(&params, "0").await.unwrap().boxed();
    pods.create(&PostParams::default(), &pod("done", json!({})))
        .await
        .unwrap();
    pods.patch_status(
        "done",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let ev = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("an event within 10 s")
            .expect("stream open")
            .expect("a line that decodes as WatchEvent<Trimmed<Pod>>");
        let (what, p) = match ev {
            WatchEvent::Added(p) => ("ADDED", p),
            WatchEvent::Modified(p) => ("MODIFIED", p),
            WatchEvent::Deleted(p) => ("DELETED", p),
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(p.broken(), None, "{what} decoded whole");
        let p = p.into_inner();
        let phase = p.status.and_then(|s| s.phase).unwrap_or_default();
        seen.push((what, p.metadata.name.unwrap_or_default(), phase));
    }
    let seen: Vec<(&str, &str, &str)> = seen
        .iter()
        .map(|(w, n, p)| (*w, n.as_str(), p.as_str()))
        .collect();
    // The object leaving is reported in its last state that matched.
    assert_eq!(
        seen,
        vec![("ADDED", "done", "Pending"), ("DELETED", "done", "Pending")]
    );
}

/// A UID in an update's or patch's body is a precondition, as the
/// kubelet's status patches rely on: a pod recreated under the same name
/// is not the pod the patch was for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_uid_that_differs_is_a_conflict() {
    let server = TestServer::start().await;
    let client = client(&server).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let created = pods
        .create(&PostParams::default(), &pod("same-name", json!({})))
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let patch = |uid: &str| json!({"metadata": {"uid": uid}, "status": {"phase": "Running"}});
    pods.patch_status(
        "same-name",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(patch(&uid)),
    )
    .await
    .unwrap();
    let e = api_error(
        pods.patch_status(
            "same-name",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(patch("00000000-0000-0000-0000-000000000000")),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 409);
    assert_eq!(
        e.message,
        format!("Operation cannot be fulfilled on pods \"same-name\": Precondition failed: UID in precondition: 00000000-0000-0000-0000-000000000000, UID in object meta: {uid}")
    );
    assert_eq!(
        pods.get("same-name").await.unwrap().metadata.uid.as_deref(),
        Some(uid.as_str())
    );
}

/// Events are kept unparsed until read: ones written with nobody watching
/// still list (with field selectors), replay to a watch from an older
/// resourceVersion, and reach a live watch with a selector.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_written_unread_list_and_watch_like_any_resource() {
    use k8s_openapi::api::core::v1::Event;
    let server = TestServer::start().await;
    let client = client(&server).await;
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let event = |name: &str, reason: &str| -> Event {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web"},
            "reason": reason, "message": format!("{reason} it"), "type": "Normal",
            "source": {"component": "kubelet"},
        }))
        .unwrap()
    };
    let pp = PostParams::default();
    let first = events.create(&pp, &event("a", "Pulled")).await.unwrap();
    events.create(&pp, &event("b", "Started")).await.unwrap();
    let selected = events
        .list(&ListParams::default().fields("reason=Started,involvedObject.name=web"))
        .await
        .unwrap();
    let names: Vec<_> = selected
        .iter()
        .filter_map(|e| e.metadata.name.clone())
        .collect();
    assert_eq!(names, ["b"]);
    assert!(selected.items[0].metadata.resource_version.is_some());
    // From the first event's revision: the second, from history.
    let from = first.metadata.resource_version.clone().unwrap();
    let mut replay = events
        .watch(&kube::api::WatchParams::default(), &from)
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(Duration::from_secs(30), replay.next()).await {
        Ok(Some(Ok(kube::core::WatchEvent::Added(e)))) => {
            assert_eq!(e.metadata.name.as_deref(), Some("b"))
        }
        other => panic!("expected the second event replayed, got {other:?}"),
    }
    // Live, with a selector: only the matching one arrives.
    let mut live = events
        .watch(
            &kube::api::WatchParams::default().fields("reason=Killing"),
            &selected.metadata.resource_version.clone().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    events.create(&pp, &event("c", "Created")).await.unwrap();
    events.create(&pp, &event("d", "Killing")).await.unwrap();
    match tokio::time::timeout(Duration::from_secs(30), live.next()).await {
        Ok(Some(Ok(kube::core::WatchEvent::Added(e)))) => {
            assert_eq!(e.metadata.name.as_deref(), Some("d"));
            assert_eq!(e.reason.as_deref(), Some("Killing"));
        }
        other => panic!("expected the Killing event, got {other:?}"),
    }
}
