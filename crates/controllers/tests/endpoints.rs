//! The Endpoints and EndpointSlice controllers against a real in-process
//! API server, the test acting as the kubelet (patching pods' IPs and
//! `Ready` condition): endpoints follow readiness, deleted pods leave,
//! terminating pods stay in slices marked terminating, named target
//! ports resolve, headless Services list hostnames, 250 pods make three
//! slices of at most 100, and Services without a selector (the API
//! server's `kubernetes` Service among them) are left alone. Both
//! controllers wait for the same informers at start, so every waiter on
//! an informer's first list must be woken.

mod support;

use support::namespace;

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};
use skiff_controllers::{Config, ControllerManager};
use skiff_testkit::apiserver::{Options, TestApiServer};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);
const NODE: &str = "node-1";

async fn start() -> (TestApiServer, Client, CancellationToken) {
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let client = server.client().await;
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": NODE, "labels": {"topology.kubernetes.io/zone": "zone-a"}},
    }))
    .unwrap();
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let config = Config {
        leader_election: None,
        controllers: vec!["endpoint".into(), "endpointslice".into()],
        ..Config::default()
    };
    tokio::spawn(ControllerManager::new(config).run(client.clone(), stop.clone()));
    (server, client, stop)
}

/// Polls `check` until it gives a value, failing after [`WAIT`] with
/// what it last saw.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match check().await {
            Ok(v) => return v,
            Err(seen) => assert!(
                tokio::time::Instant::now() < deadline,
                "never {what}; last saw {seen}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn create_service(client: &Client, ns: &str, body: Value) -> Service {
    let svc: Service = serde_json::from_value(body).unwrap();
    Api::<Service>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &svc)
        .await
        .unwrap()
}

fn web_service(name: &str) -> Value {
    json!({
        "metadata": {"name": name, "labels": {"tier": "front"}},
        "spec": {
            "selector": {"app": name},
            "ports": [{"name": "http", "port": 80, "targetPort": "http"}],
        },
    })
}

/// A pod of `app` on the node serving `http` on `port`.
async fn create_pod(client: &Client, ns: &str, name: &str, app: &str, port: i32, hold: bool) {
    let mut pod = json!({
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {
            "nodeName": NODE,
            "containers": [{
                "name": "c",
                "image": "busybox",
                "ports": [{"name": "http", "containerPort": port}],
            }],
        },
    });
    if hold {
        pod["metadata"]["finalizers"] = json!(["test.skiff.dev/hold"]);
    }
    let pod: Pod = serde_json::from_value(pod).unwrap();
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
}

/// What the kubelet reports: running at `ip`, ready or not.
async fn report(client: &Client, ns: &str, name: &str, ip: &str, ready: bool) {
    let status = json!({"status": {
        "phase": "Running",
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "conditions": [{
            "type": "Ready",
            "status": if ready { "True" } else { "False" },
            "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string(),
        }],
    }});
    Api::<Pod>::namespaced(client.clone(), ns)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

fn ips(addresses: &Value) -> Vec<String> {
    let mut ips: Vec<String> = addresses
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["ip"].as_str().map(String::from))
        .collect();
    ips.sort();
    ips
}

/// The Endpoints `name` as JSON, once `cond` holds.
async fn endpoints_where(
    client: &Client,
    ns: &str,
    name: &str,
    what: &str,
    cond: impl Fn(&Value) -> bool,
) -> Value {
    let api: Api<Endpoints> = Api::namespaced(client.clone(), ns);
    eventually(what, || async {
        let Some(ep) = api.get_opt(name).await.unwrap() else {
            return Err("no endpoints".into());
        };
        let ep = serde_json::to_value(ep).unwrap();
        if cond(&ep) {
            Ok(ep)
        } else {
            Err(ep.to_string())
        }
    })
    .await
}

/// The Service's managed slices as JSON, once `cond` holds.
async fn slices_where(
    client: &Client,
    ns: &str,
    service: &str,
    what: &str,
    cond: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().labels(&format!("kubernetes.io/service-name={service}"));
    eventually(what, || async {
        let list = api.list(&lp).await.unwrap();
        let slices: Vec<Value> = list
            .items
            .into_iter()
            .map(|s| serde_json::to_value(s).unwrap())
            .collect();
        if cond(&slices) {
            Ok(slices)
        } else {
            Err(serde_json::to_string(&slices).unwrap())
        }
    })
    .await
}

/// The endpoint of `pod` across `slices`.
fn endpoint_of<'a>(slices: &'a [Value], pod: &str) -> Option<&'a Value> {
    slices
        .iter()
        .flat_map(|s| s["endpoints"].as_array().into_iter().flatten())
        .find(|e| e["targetRef"]["name"] == pod)
}

fn conditions(slices: &[Value], pod: &str) -> Option<(bool, bool, bool)> {
    let c = &endpoint_of(slices, pod)?["conditions"];
    Some((
        c["ready"].as_bool()?,
        c["serving"].as_bool()?,
        c["terminating"].as_bool()?,
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_and_slices_follow_pod_readiness_deletion_and_termination() {
    let (_server, client, stop) = start().await;
    let ns = "follow";
    namespace(&client, ns).await;
    let svc = create_service(&client, ns, web_service("web")).await;
    create_pod(&client, ns, "a", "web", 8080, false).await;
    create_pod(&client, ns, "b", "web", 8080, false).await;
    create_pod(&client, ns, "c", "web", 8080, true).await;
    // A pod of another app is no endpoint of this Service.
    create_pod(&client, ns, "other", "db", 5432, false).await;
    report(&client, ns, "other", "10.244.0.9", true).await;
    report(&client, ns, "a", "10.244.0.1", true).await;
    report(&client, ns, "b", "10.244.0.2", false).await;
    report(&client, ns, "c", "10.244.0.3", true).await;

    // Ready pods in addresses, not ready ones in notReadyAddresses, the
    // named target port resolved to the container's.
    let ep = endpoints_where(&client, ns, "web", "listed the pods", |ep| {
        ips(&ep["subsets"][0]["addresses"]) == ["10.244.0.1", "10.244.0.3"]
            && ips(&ep["subsets"][0]["notReadyAddresses"]) == ["10.244.0.2"]
    })
    .await;
    let subset = &ep["subsets"][0];
    assert_eq!(
        subset["ports"],
        json!([{"name": "http", "port": 8080, "protocol": "TCP"}])
    );
    let a = subset["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["ip"] == "10.244.0.1")
        .unwrap();
    assert_eq!(a["nodeName"], NODE);
    assert_eq!(a["targetRef"]["kind"], "Pod");
    assert_eq!(a["targetRef"]["name"], "a");
    assert_eq!(ep["metadata"]["labels"], json!({"tier": "front"}));
    assert!(
        ep["metadata"]["annotations"]["endpoints.kubernetes.io/last-change-trigger-time"]
            .is_string()
    );

    let slices = slices_where(&client, ns, "web", "listed the pods", |s| {
        conditions(s, "a") == Some((true, true, false))
            && conditions(s, "b") == Some((false, false, false))
            && conditions(s, "c") == Some((true, true, false))
    })
    .await;
    assert_eq!(slices.len(), 1);
    let slice = &slices[0];
    let slice_name = slice["metadata"]["name"].as_str().unwrap().to_string();
    assert!(slice_name.starts_with("web-"), "{slice_name}");
    assert_eq!(slice["metadata"]["generateName"], "web-");
    assert_eq!(slice["addressType"], "IPv4");
    assert_eq!(
        slice["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
        "endpointslice-controller.k8s.io"
    );
    assert_eq!(slice["metadata"]["labels"]["tier"], "front");
    assert_eq!(
        slice["metadata"]["ownerReferences"],
        json!([{
            "apiVersion": "v1",
            "kind": "Service",
            "name": "web",
            "uid": svc.metadata.uid.clone().unwrap(),
            "controller": true,
            "blockOwnerDeletion": true,
        }])
    );
    assert_eq!(
        slice["ports"],
        json!([{"name": "http", "port": 8080, "protocol": "TCP"}])
    );
    let a = endpoint_of(&slices, "a").unwrap();
    assert_eq!(a["addresses"], json!(["10.244.0.1"]));
    assert_eq!(a["nodeName"], NODE);
    assert_eq!(a["zone"], "zone-a");
    assert!(endpoint_of(&slices, "other").is_none());

    // b turns ready.
    report(&client, ns, "b", "10.244.0.2", true).await;
    endpoints_where(&client, ns, "web", "took b in", |ep| {
        ips(&ep["subsets"][0]["addresses"]).len() == 3
            && ep["subsets"][0]["notReadyAddresses"].is_null()
    })
    .await;
    slices_where(&client, ns, "web", "marked b ready", |s| {
        conditions(s, "b") == Some((true, true, false))
    })
    .await;

    // a is deleted: it leaves both.
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.delete("a", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    endpoints_where(&client, ns, "web", "let a go", |ep| {
        ips(&ep["subsets"][0]["addresses"]) == ["10.244.0.2", "10.244.0.3"]
    })
    .await;
    let slices = slices_where(&client, ns, "web", "let a go", |s| {
        endpoint_of(s, "a").is_none() && endpoint_of(s, "b").is_some()
    })
    .await;
    // Updated in place, not replaced.
    assert_eq!(slices.len(), 1);
    assert_eq!(slices[0]["metadata"]["name"], slice_name.as_str());

    // c is terminating (held by a finalizer): gone from the Endpoints,
    // still in the slice, not ready but serving.
    pods.delete("c", &DeleteParams::default()).await.unwrap();
    endpoints_where(&client, ns, "web", "let c go", |ep| {
        ips(&ep["subsets"][0]["addresses"]) == ["10.244.0.2"]
    })
    .await;
    slices_where(&client, ns, "web", "marked c terminating", |s| {
        conditions(s, "c") == Some((false, true, true))
    })
    .await;
    let release = json!({"metadata": {"finalizers": null}});
    pods.patch("c", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
    // As the kubelet does once the containers are gone.
    pods.delete("c", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    slices_where(&client, ns, "web", "let c go", |s| {
        endpoint_of(s, "c").is_none()
    })
    .await;

    // The Service goes: so do its Endpoints (the controller deletes them;
    // its slices are left to the garbage collector through their owner).
    Api::<Service>::namespaced(client.clone(), ns)
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), ns);
    eventually("deleted the endpoints", || async {
        match endpoints.get_opt("web").await.unwrap() {
            None => Ok(()),
            Some(ep) => Err(serde_json::to_string(&ep).unwrap()),
        }
    })
    .await;
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_services_list_pods_with_their_hostnames() {
    let (_server, client, stop) = start().await;
    let ns = "headless";
    namespace(&client, ns).await;
    create_service(
        &client,
        ns,
        json!({
            "metadata": {"name": "db"},
            "spec": {"clusterIP": "None", "selector": {"app": "db"}},
        }),
    )
    .await;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "db-0", "labels": {"app": "db"}},
        "spec": {
            "nodeName": NODE,
            "hostname": "db-0",
            "subdomain": "db",
            "containers": [{"name": "c", "image": "busybox"}],
        },
    }))
    .unwrap();
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    report(&client, ns, "db-0", "10.244.1.1", true).await;
    let ep = endpoints_where(&client, ns, "db", "listed db-0", |ep| {
        ips(&ep["subsets"][0]["addresses"]) == ["10.244.1.1"]
    })
    .await;
    assert_eq!(ep["subsets"][0]["addresses"][0]["hostname"], "db-0");
    assert!(ep["subsets"][0]["ports"].is_null());
    assert_eq!(
        ep["metadata"]["labels"]["service.kubernetes.io/headless"],
        ""
    );
    let slices = slices_where(&client, ns, "db", "listed db-0", |s| {
        conditions(s, "db-0") == Some((true, true, false))
    })
    .await;
    assert_eq!(slices.len(), 1);
    assert_eq!(slices[0]["addressType"], "IPv4");
    assert_eq!(endpoint_of(&slices, "db-0").unwrap()["hostname"], "db-0");
    assert_eq!(
        slices[0]["metadata"]["labels"]["service.kubernetes.io/headless"],
        ""
    );
    assert!(slices[0]["ports"].is_null());
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_fifty_pods_make_three_slices_of_at_most_a_hundred() {
    let (_server, client, stop) = start().await;
    let ns = "many";
    namespace(&client, ns).await;
    create_service(&client, ns, web_service("big")).await;
    for i in 0..250 {
        let name = format!("big-{i:03}");
        create_pod(&client, ns, &name, "big", 8080, false).await;
        report(
            &client,
            ns,
            &name,
            &format!("10.244.{}.{}", 2 + i / 200, i % 200),
            true,
        )
        .await;
    }
    let slices = slices_where(&client, ns, "big", "held 250 endpoints", |s| {
        let n: usize = s
            .iter()
            .map(|x| x["endpoints"].as_array().map_or(0, Vec::len))
            .sum();
        n == 250
    })
    .await;
    assert_eq!(
        slices.len(),
        3,
        "{:?}",
        slices
            .iter()
            .map(|s| &s["metadata"]["name"])
            .collect::<Vec<_>>()
    );
    for s in &slices {
        assert!(s["endpoints"].as_array().unwrap().len() <= 100);
    }
    endpoints_where(&client, ns, "big", "held 250 addresses", |ep| {
        ips(&ep["subsets"][0]["addresses"]).len() == 250
    })
    .await;
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_without_a_selector_are_left_alone() {
    let (_server, client, stop) = start().await;
    let ns = "manual";
    namespace(&client, ns).await;
    create_service(
        &client,
        ns,
        json!({
            "metadata": {"name": "external"},
            "spec": {"ports": [{"port": 80}]},
        }),
    )
    .await;
    let mine: Endpoints = serde_json::from_value(json!({
        "metadata": {"name": "external"},
        "subsets": [{"addresses": [{"ip": "192.0.2.10"}], "ports": [{"port": 80}]}],
    }))
    .unwrap();
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), ns);
    endpoints
        .create(&PostParams::default(), &mine)
        .await
        .unwrap();
    // A selecting Service in the same namespace, to know the controllers
    // have been through.
    create_service(&client, ns, web_service("web")).await;
    create_pod(&client, ns, "a", "web", 8080, false).await;
    report(&client, ns, "a", "10.244.3.1", true).await;
    endpoints_where(&client, ns, "web", "listed a", |ep| {
        ips(&ep["subsets"][0]["addresses"]) == ["10.244.3.1"]
    })
    .await;
    slices_where(&client, ns, "web", "listed a", |s| {
        endpoint_of(s, "a").is_some()
    })
    .await;

    let kept = serde_json::to_value(endpoints.get("external").await.unwrap()).unwrap();
    assert_eq!(ips(&kept["subsets"][0]["addresses"]), ["192.0.2.10"]);
    assert!(kept["metadata"]["labels"].is_null());
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().labels("kubernetes.io/service-name=external");
    assert!(slices.list(&lp).await.unwrap().items.is_empty());

    // The API server's own Service keeps pointing at the API server, and
    // no controller-managed slice appears for it.
    let default_eps: Api<Endpoints> = Api::namespaced(client.clone(), "default");
    let k = serde_json::to_value(default_eps.get("kubernetes").await.unwrap()).unwrap();
    assert_eq!(k["subsets"][0]["addresses"].as_array().unwrap().len(), 1);
    let default_slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let managed = ListParams::default().labels(
        "kubernetes.io/service-name=kubernetes,endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io",
    );
    assert!(default_slices
        .list(&managed)
        .await
        .unwrap()
        .items
        .is_empty());
    stop.cancel();
}

/// Several tasks waiting at once for one informer's first list all go on
/// (the two controllers here wait for the Service and Pod informers
/// together; kube-runtime's store readiness wakes only one waiter).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_waiter_on_an_informers_first_list_is_woken() {
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let client = server.client().await;
    let stop = CancellationToken::new();
    let informers = skiff_client::informer::Informers::new(client, stop.clone());
    let waiters: Vec<_> = (0..8)
        .map(|_| {
            let services = informers.get::<Service>();
            tokio::spawn(async move { services.ready().await })
        })
        .collect();
    let all = tokio::time::timeout(WAIT, futures::future::join_all(waiters)).await;
    assert!(all.is_ok(), "some waiters were never woken");
    stop.cancel();
}
