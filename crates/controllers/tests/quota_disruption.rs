//! The resource quota and disruption controllers against a real
//! in-process API server: quota usage follows creates and deletes (the
//! admission plugin charges, the controller gives back), and a budget's
//! status follows its pods' readiness, with the eviction subresource
//! taking the one allowed disruption and then answering 429. Both run
//! alone (`run`, informers of their own) and in the controller manager
//! (its shared informers), where the resync period is an hour so that
//! what follows, follows from the informers.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{
    ConfigMap, Event, Namespace, Pod, ResourceQuota, Secret, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{DeleteParams, EvictParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use kube::{Api, Client};
use serde_json::json;
use skiff_controllers::{Config, ControllerManager, DisruptionController, ResourceQuotaController};
use skiff_testkit::apiserver::{Options, TestApiServer};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

async fn start() -> (TestApiServer, Client, CancellationToken) {
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let client = server.client().await;
    let stop = CancellationToken::new();
    tokio::spawn(
        ResourceQuotaController::new()
            .with_resync(Duration::from_secs(1))
            .run(client.clone(), stop.clone()),
    );
    tokio::spawn(
        DisruptionController::new()
            .with_resync(Duration::from_secs(1))
            .run(client.clone(), stop.clone()),
    );
    (server, client, stop)
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "a"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }))
    .unwrap()
}

async fn quota_where(
    api: &Api<ResourceQuota>,
    what: &str,
    cond: impl Fn(&serde_json::Value) -> bool,
) {
    let found = tokio::time::timeout(
        WAIT,
        await_condition(api.clone(), "q", move |q: Option<&ResourceQuota>| {
            q.is_some_and(|q| cond(&serde_json::to_value(q).unwrap()))
        }),
    )
    .await;
    assert!(
        found.is_ok(),
        "quota never {what}: {:?}",
        api.get("q").await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_usage_follows_creates_and_deletes() {
    let (_server, client, stop) = start().await;
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), "default");
    let q: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "q"},
        "spec": {"hard": {"pods": "3", "configmaps": "5", "count/configmaps": "5"}},
    }))
    .unwrap();
    quotas.create(&PostParams::default(), &q).await.unwrap();
    quota_where(&quotas, "synced", |q| {
        q["status"]["hard"]["pods"] == "3" && q["status"]["used"]["pods"] == "0"
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for name in ["a", "b"] {
        pods.create(&PostParams::default(), &pod(name))
            .await
            .unwrap();
    }
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "cm"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    quota_where(&quotas, "counted two pods", |q| {
        q["status"]["used"]["pods"] == "2" && q["status"]["used"]["count/configmaps"] == "1"
    })
    .await;
    pods.delete("a", &DeleteParams::default()).await.unwrap();
    cms.delete("cm", &DeleteParams::default()).await.unwrap();
    quota_where(&quotas, "gave back", |q| {
        q["status"]["used"]["pods"] == "1" && q["status"]["used"]["configmaps"] == "0"
    })
    .await;
    stop.cancel();
}

/// A pod that ends (phase Succeeded) stops counting, and only the
/// controller sees it (the write path recounts on creates and deletes):
/// without the periodic resync, through the pod informer alone, with one
/// quota and with 18.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_is_given_back_through_the_pod_watches_alone() {
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let client = server.client().await;
    let stop = CancellationToken::new();
    tokio::spawn(
        ResourceQuotaController::new()
            .with_resync(Duration::from_secs(3600))
            .run(client.clone(), stop.clone()),
    );
    let quota = |hard: &str| -> ResourceQuota {
        serde_json::from_value(json!({
            "metadata": {"name": "q"},
            "spec": {"hard": {"pods": hard}},
        }))
        .unwrap()
    };
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), "default");
    quotas
        .create(&PostParams::default(), &quota("5"))
        .await
        .unwrap();
    quota_where(&quotas, "synced", |q| q["status"]["used"]["pods"] == "0").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for name in ["a", "b"] {
        pods.create(&PostParams::default(), &pod(name))
            .await
            .unwrap();
    }
    quota_where(&quotas, "charged", |q| q["status"]["used"]["pods"] == "2").await;
    let succeeded = json!({"status": {"phase": "Succeeded"}});
    let merge = kube::api::Patch::Merge(&succeeded);
    let pp = kube::api::PatchParams::default();
    pods.patch_status("a", &pp, &merge).await.unwrap();
    quota_where(&quotas, "gave back through the pod informer", |q| {
        q["status"]["used"]["pods"] == "1"
    })
    .await;

    // 17 more namespaces with a quota: a pod's change still reaches the
    // quota of its own namespace.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    for i in 0..17 {
        let name = format!("q{i}");
        let ns = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        Api::<ResourceQuota>::namespaced(client.clone(), &name)
            .create(&PostParams::default(), &quota("1"))
            .await
            .unwrap();
    }
    let last: Api<ResourceQuota> = Api::namespaced(client.clone(), "q16");
    quota_where(&last, "synced", |q| q["status"]["used"]["pods"] == "0").await;
    pods.patch_status("b", &pp, &merge).await.unwrap();
    quota_where(&quotas, "gave back among 18 quotas", |q| {
        q["status"]["used"]["pods"] == "0"
    })
    .await;
    stop.cancel();
}

async fn budget_where(
    api: &Api<PodDisruptionBudget>,
    what: &str,
    cond: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let found = tokio::time::timeout(
        WAIT,
        await_condition(api.clone(), "b", move |p: Option<&PodDisruptionBudget>| {
            p.is_some_and(|p| cond(&serde_json::to_value(p).unwrap()))
        }),
    )
    .await;
    match found {
        Ok(Ok(Some(p))) => serde_json::to_value(p).unwrap(),
        _ => panic!("budget never {what}: {:?}", api.get("b").await),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_follow_pods_and_evictions() {
    let (server, client, stop) = start().await;
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    let b: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "b"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}},
    }))
    .unwrap();
    budgets.create(&PostParams::default(), &b).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for name in ["a", "b"] {
        let mut created = pods
            .create(&PostParams::default(), &pod(name))
            .await
            .unwrap();
        created.status = Some(
            serde_json::from_value(
                json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}),
            )
            .unwrap(),
        );
        pods.replace_status(name, &PostParams::default(), &created)
            .await
            .unwrap();
    }
    let status = budget_where(&budgets, "allowed one disruption", |p| {
        p["status"]["currentHealthy"] == 2 && p["status"]["disruptionsAllowed"] == 1
    })
    .await;
    assert_eq!(status["status"]["desiredHealthy"], 1);
    assert_eq!(status["status"]["expectedPods"], 2);
    assert_eq!(status["status"]["observedGeneration"], 1);
    let cond = &status["status"]["conditions"][0];
    assert_eq!(cond["type"], "DisruptionAllowed");
    assert_eq!(cond["status"], "True");
    assert_eq!(cond["reason"], "SufficientPods");

    pods.evict("a", &EvictParams::default()).await.unwrap();
    let status = budget_where(&budgets, "used its disruption", |p| {
        p["status"]["currentHealthy"] == 1 && p["status"]["disruptionsAllowed"] == 0
    })
    .await;
    assert_eq!(
        status["status"]["conditions"][0]["reason"],
        "InsufficientPods"
    );
    // kube's client retries 429s for minutes: ask with kubectl, once.
    let body = server.dir.path().join("eviction.json");
    std::fs::write(&body, r#"{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"b","namespace":"default"}}"#).unwrap();
    let out = tokio::task::spawn_blocking({
        let kubeconfig = server.kubeconfig.clone();
        let cache = server.dir.path().join("kubectl-cache");
        move || {
            std::process::Command::new("/usr/lib/google-cloud-sdk/bin/kubectl.1.33")
                .arg("--kubeconfig")
                .arg(kubeconfig)
                .arg("--cache-dir")
                .arg(cache)
                .args([
                    "--request-timeout=30s",
                    "create",
                    "--raw",
                    "/api/v1/namespaces/default/pods/b/eviction",
                    "-f",
                ])
                .arg(body)
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("Error from server (TooManyRequests): Cannot evict pod as it would violate the pod's disruption budget."),
        "{err}"
    );
    assert!(pods.get("b").await.is_ok());
    stop.cancel();
}

/// The manager's controllers (shared informers) with a resync period
/// longer than any test: whatever follows, follows from the watches.
async fn start_manager(namespace: &str) -> (TestApiServer, Client, CancellationToken) {
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let client = server.client().await;
    let stop = CancellationToken::new();
    let config = Config {
        leader_election: None,
        controllers: vec!["resourcequota".into(), "disruption".into()],
        resync: Duration::from_secs(3600),
        ..Config::default()
    };
    tokio::spawn(ControllerManager::new(config).run(client.clone(), stop.clone()));
    let ns = serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    (server, client, stop)
}

/// What only the controller sees (the API server recounts a kind on its
/// creates and deletes, not on updates nor on a quota's own create),
/// within the resync period: objects that were there before the quota,
/// of a `count/<resource>.<group>` kind whose informer the quota starts,
/// and a Service whose node ports go away with its type.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_counts_what_the_write_path_does_not() {
    let (_server, client, stop) = start_manager("rq").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "rq");
    for name in ["d1", "d2"] {
        let d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "selector": {"matchLabels": {"app": "d"}},
                "template": {
                    "metadata": {"labels": {"app": "d"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
            },
        }))
        .unwrap();
        deployments
            .create(&PostParams::default(), &d)
            .await
            .unwrap();
    }
    let services: Api<Service> = Api::namespaced(client.clone(), "rq");
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "s"},
        "spec": {"type": "NodePort", "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}]},
    }))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();
    // Counted from a metadata-only informer.
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "s"}, "stringData": {"k": "v"},
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), "rq")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), "rq");
    let q: ResourceQuota = serde_json::from_value(json!({
        "metadata": {"name": "q"},
        "spec": {"hard": {
            "secrets": "3",
            "count/secrets": "3",
            "services.nodeports": "4",
            "count/deployments.apps": "3",
            "count/widgets.example.com": "4",
        }},
    }))
    .unwrap();
    quotas.create(&PostParams::default(), &q).await.unwrap();
    quota_where(&quotas, "counted what was there", |q| {
        q["status"]["used"]["services.nodeports"] == "2"
            && q["status"]["used"]["count/deployments.apps"] == "2"
            && q["status"]["used"]["secrets"] == "1"
            && q["status"]["used"]["count/secrets"] == "1"
            // A kind it cannot count is left as admission charged it.
            && q["status"]["used"]["count/widgets.example.com"] == "0"
    })
    .await;
    let to_cluster_ip = json!({"spec": {"type": "ClusterIP", "ports": [
        {"name": "a", "port": 80, "nodePort": null},
        {"name": "b", "port": 81, "nodePort": null},
    ]}});
    services
        .patch("s", &PatchParams::default(), &Patch::Merge(&to_cluster_ip))
        .await
        .unwrap();
    quota_where(&quotas, "gave the node ports back", |q| {
        q["status"]["used"]["services.nodeports"] == "0"
    })
    .await;
    stop.cancel();
}

async fn set_ready(pods: &Api<Pod>, name: &str, ready: bool) {
    let status = if ready { "True" } else { "False" };
    let patch = json!({"status": {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": status}],
    }});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// A budget with maxUnavailable takes its expected pods from the scale of
/// the pods' ReplicaSet, and follows each pod's readiness both ways
/// without a resync; a pod without a controller makes it fail safe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_follows_readiness_and_its_controllers_scale() {
    let (_server, client, stop) = start_manager("pdb").await;
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "pdb");
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "rs"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "a"}},
            "template": {
                "metadata": {"labels": {"app": "a"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }))
    .unwrap();
    let rs = sets.create(&PostParams::default(), &rs).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "pdb");
    for name in ["a", "b", "c"] {
        let mut p = pod(name);
        p.metadata.owner_references = Some(vec![serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
            "uid": rs.metadata.uid, "controller": true,
        }))
        .unwrap()]);
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    set_ready(&pods, "a", true).await;
    set_ready(&pods, "b", true).await;
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "pdb");
    let b: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "b"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "a"}}},
    }))
    .unwrap();
    budgets.create(&PostParams::default(), &b).await.unwrap();
    let status = budget_where(&budgets, "counted two healthy of three", |p| {
        p["status"]["currentHealthy"] == 2 && p["status"]["expectedPods"] == 3
    })
    .await;
    assert_eq!(status["status"]["desiredHealthy"], 2);
    assert_eq!(status["status"]["disruptionsAllowed"], 0);
    set_ready(&pods, "c", true).await;
    budget_where(&budgets, "allowed one once all were ready", |p| {
        p["status"]["currentHealthy"] == 3 && p["status"]["disruptionsAllowed"] == 1
    })
    .await;
    set_ready(&pods, "a", false).await;
    budget_where(&budgets, "took it back when a pod was not ready", |p| {
        p["status"]["currentHealthy"] == 2 && p["status"]["disruptionsAllowed"] == 0
    })
    .await;

    set_ready(&pods, "a", true).await;
    budget_where(&budgets, "allowed one again", |p| {
        p["status"]["disruptionsAllowed"] == 1
    })
    .await;
    // A pod relabelled out of the budget's selector reaches it too.
    let relabel = json!({"metadata": {"labels": {"app": "other"}}});
    pods.patch("c", &PatchParams::default(), &Patch::Merge(&relabel))
        .await
        .unwrap();
    budget_where(&budgets, "let the relabelled pod go", |p| {
        p["status"]["currentHealthy"] == 2 && p["status"]["disruptionsAllowed"] == 0
    })
    .await;
    pods.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"labels": {"app": "a"}}})),
    )
    .await
    .unwrap();
    budget_where(&budgets, "took the pod back", |p| {
        p["status"]["currentHealthy"] == 3 && p["status"]["disruptionsAllowed"] == 1
    })
    .await;

    // A pod the budget selects that no controller owns is left out of the
    // expected pods, with a warning (upstream since 1.27).
    pods.create(&PostParams::default(), &pod("orphan"))
        .await
        .unwrap();
    set_ready(&pods, "orphan", true).await;
    budget_where(&budgets, "counted the orphan healthy", |p| {
        p["status"]["currentHealthy"] == 4
    })
    .await;
    let status = budgets.get("b").await.unwrap();
    let status = status.status.unwrap();
    assert_eq!(status.expected_pods, 3);
    assert_eq!(status.disruptions_allowed, 2);
    let events: Api<Event> = Api::namespaced(client.clone(), "pdb");
    let warned = tokio::time::timeout(WAIT, async {
        loop {
            let list = events.list(&Default::default()).await.unwrap();
            if let Some(e) = list
                .items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("UnmanagedPods"))
            {
                return e;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("no UnmanagedPods event");
    assert_eq!(warned.type_.as_deref(), Some("Warning"));
    assert!(warned
        .message
        .unwrap()
        .contains("were found to be unmanaged"));

    // A controller that is not there makes the budget fail safe.
    let mut p = pod("lost");
    p.metadata.owner_references = Some(vec![serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone",
        "uid": "00000000-0000-0000-0000-000000000000", "controller": true,
    }))
    .unwrap()]);
    pods.create(&PostParams::default(), &p).await.unwrap();
    let status = budget_where(&budgets, "failed safe", |p| {
        p["status"]["conditions"][0]["reason"] == "SyncFailed"
    })
    .await;
    assert_eq!(status["status"]["disruptionsAllowed"], 0);
    assert_eq!(
        status["status"]["conditions"][0]["message"],
        "found no controllers for pod \"lost\""
    );
    stop.cancel();
}
