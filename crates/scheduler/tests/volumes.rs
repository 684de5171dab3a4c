//! Pods with PersistentVolumeClaims: the scheduler and the PV controller
//! together against the real API server and store (Node objects only, no
//! node agent). An Immediate claim is provisioned and bound first and the
//! pod follows its volume; a WaitForFirstConsumer claim waits with
//! upstream's event until a pod uses it, then is provisioned on the pod's
//! node (the scheduler's selected-node annotation) and bound before the
//! pod is; a static volume is pre-bound by the scheduler; an unbound
//! Immediate claim of a class without provisioner keeps the pod Pending
//! with upstream's message until a volume appears.

mod support;

use std::future::Future;
use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::{
    Event, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, Volume,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::PostParams;
use kube::runtime::wait::await_condition;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use skiff_client::testing::pod;
use skiff_controllers::testing::{claim, class, local_path_class, ready_node, volume};
use skiff_controllers::PersistentVolumeController;
use support::{node_of, pod_scheduled, test_config, RunningScheduler, TestServer, WAIT};
use tokio_util::sync::CancellationToken;

const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// The scheduler (20 s bind timeout) and the PV controller, stopped when
/// dropped.
struct Control {
    _scheduler: RunningScheduler,
    volumes: CancellationToken,
}

impl Drop for Control {
    fn drop(&mut self) {
        self.volumes.cancel();
    }
}

fn start(client: &Client) -> Control {
    let mut config = test_config("s1");
    config.bind_timeout = Duration::from_secs(20);
    let scheduler = RunningScheduler::start(client.clone(), config);
    let volumes = CancellationToken::new();
    let controller = PersistentVolumeController::new()
        .with_retry(Duration::from_millis(100), Duration::from_secs(1));
    tokio::spawn(controller.run(client.clone(), volumes.clone()));
    Control {
        _scheduler: scheduler,
        volumes,
    }
}

fn claims(server: &TestServer) -> Api<PersistentVolumeClaim> {
    Api::namespaced(server.client.clone(), "default")
}

fn volumes(server: &TestServer) -> Api<PersistentVolume> {
    Api::all(server.client.clone())
}

async fn create_class(server: &TestServer, class: StorageClass) {
    Api::<StorageClass>::all(server.client.clone())
        .create(&PostParams::default(), &class)
        .await
        .expect("create class");
}

async fn create_claim(server: &TestServer, name: &str, class: &str) -> PersistentVolumeClaim {
    let c = claim(name).uid("").class(class).request("1Gi").build();
    claims(server)
        .create(&PostParams::default(), &c)
        .await
        .expect("create claim")
}

/// Pod `name` mounting claim `claim_name`.
fn pod_using(name: &str, claim_name: &str) -> Pod {
    let mut p = pod(name).build();
    p.spec.as_mut().expect("spec").volumes = Some(vec![Volume {
        name: "data".into(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim_name.into(),
            read_only: None,
        }),
        ..Default::default()
    }]);
    p
}

/// Waits (watching) until pod `name` is bound; returns its node.
async fn bound_pod(server: &TestServer, name: &str) -> String {
    let pod = within(
        &format!("pod {name} bound"),
        await_condition(server.pods(), name, |p: Option<&Pod>| {
            p.and_then(node_of).is_some()
        }),
    )
    .await
    .expect("watch pod")
    .expect("pod exists");
    node_of(&pod).expect("node")
}

/// Waits (watching) until claim `name` satisfies `cond`.
async fn claim_where(
    server: &TestServer,
    name: &str,
    what: &str,
    cond: impl Fn(&PersistentVolumeClaim) -> bool,
) -> PersistentVolumeClaim {
    within(
        &format!("claim {name} {what}"),
        await_condition(
            claims(server),
            name,
            move |c: Option<&PersistentVolumeClaim>| c.is_some_and(&cond),
        ),
    )
    .await
    .expect("watch claim")
    .expect("claim exists")
}

fn claim_phase(c: &PersistentVolumeClaim) -> Option<&str> {
    c.status.as_ref()?.phase.as_deref()
}

fn selected_node(c: &PersistentVolumeClaim) -> Option<&str> {
    c.metadata
        .annotations
        .as_ref()?
        .get(SELECTED_NODE)
        .map(String::as_str)
}

fn volume_of(c: &PersistentVolumeClaim) -> String {
    c.spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .unwrap_or_default()
}

fn pinned_to(v: &PersistentVolume) -> Option<String> {
    v.spec
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required
        .as_ref()?
        .node_selector_terms
        .first()?
        .match_expressions
        .as_ref()?
        .first()?
        .values
        .as_ref()?
        .first()
        .cloned()
}

/// Waits (watching) for the first event about `object` with `reason`.
async fn event(server: &TestServer, object: &str, reason: &str) -> Event {
    let config =
        watcher::Config::default().fields(&format!("involvedObject.name={object},reason={reason}"));
    let mut stream = std::pin::pin!(watcher(server.events(), config).applied_objects());
    within(&format!("a {reason} event about {object}"), async {
        stream
            .try_next()
            .await
            .expect("watch events")
            .expect("event stream open")
    })
    .await
}

/// Waits (watching) for a `reason` event about `object` saying `message`.
async fn event_with(server: &TestServer, object: &str, reason: &str, message: &str) -> Event {
    let config =
        watcher::Config::default().fields(&format!("involvedObject.name={object},reason={reason}"));
    let mut stream = std::pin::pin!(watcher(server.events(), config).applied_objects());
    within(
        &format!("a {reason} event about {object}: {message}"),
        async {
            loop {
                let event = stream
                    .try_next()
                    .await
                    .expect("watch events")
                    .expect("event stream open");
                if event.message.as_deref() == Some(message) {
                    return event;
                }
            }
        },
    )
    .await
}

/// Waits (watching) until pod `name` has PodScheduled=False/Unschedulable
/// with `message`; checks it is unbound.
async fn pending_with(server: &TestServer, name: &str, message: &str) {
    let want = (
        "False".to_string(),
        Some("Unschedulable".to_string()),
        Some(message.to_string()),
    );
    let pod = within(
        &format!("PodScheduled=False on {name} with {message:?}"),
        await_condition(server.pods(), name, move |p: Option<&Pod>| {
            p.and_then(pod_scheduled).as_ref() == Some(&want)
        }),
    )
    .await
    .expect("watch pod")
    .expect("pod exists");
    assert_eq!(node_of(&pod), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_follows_its_immediately_provisioned_volume() {
    let server = TestServer::start().await;
    let _control = start(&server.client);
    // n1 has no volume dir: the provisioner puts the volume on n2.
    server.create_node(ready_node("n1").build()).await;
    server
        .create_node(
            ready_node("n2")
                .local_path_dir("/var/lib/skiff/storage")
                .build(),
        )
        .await;
    create_class(&server, local_path_class("fast").build()).await;
    create_claim(&server, "data", "fast").await;
    let bound = claim_where(&server, "data", "Bound", |c| {
        claim_phase(c) == Some("Bound")
    })
    .await;
    let pv = volumes(&server)
        .get(&volume_of(&bound))
        .await
        .expect("volume");
    assert_eq!(pinned_to(&pv).as_deref(), Some("n2"));

    for i in 0..3 {
        let name = format!("web{i}");
        server.create_pod(pod_using(&name, "data")).await;
        assert_eq!(bound_pod(&server, &name).await, "n2", "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_for_first_consumer_claim_is_provisioned_where_its_pod_goes() {
    let server = TestServer::start().await;
    let _control = start(&server.client);
    server
        .create_node(
            ready_node("n1")
                .local_path_dir("/var/lib/skiff/storage")
                .build(),
        )
        .await;
    server
        .create_node(ready_node("n2").local_path_dir("/srv/skiff").build())
        .await;
    create_class(
        &server,
        local_path_class("local-path")
            .wait_for_first_consumer()
            .build(),
    )
    .await;
    let created = create_claim(&server, "data", "local-path").await;
    let waiting = event(&server, "data", "WaitForFirstConsumer").await;
    assert_eq!(
        waiting.message.as_deref(),
        Some("waiting for first consumer to be created before binding")
    );
    let pending = claims(&server).get("data").await.expect("claim");
    assert_eq!(claim_phase(&pending), Some("Pending"));
    assert_eq!(selected_node(&pending), None);

    // The pod can only go to n2; its claim follows it there.
    let web = skiff_client::testing::PodBuilder::from(pod_using("web", "data"))
        .node_selector("kubernetes.io/hostname", "n2")
        .build();
    server.create_pod(web).await;
    assert_eq!(bound_pod(&server, "web").await, "n2");
    // Bound before the pod was.
    let claim = claims(&server).get("data").await.expect("claim");
    assert_eq!(claim_phase(&claim), Some("Bound"));
    assert_eq!(selected_node(&claim), Some("n2"));
    let pv_name = format!("pvc-{}", created.metadata.uid.as_deref().expect("uid"));
    assert_eq!(volume_of(&claim), pv_name);
    let pv = volumes(&server).get(&pv_name).await.expect("volume");
    assert_eq!(pinned_to(&pv).as_deref(), Some("n2"));
    assert_eq!(
        pv.spec.and_then(|s| s.host_path).map(|h| h.path),
        Some(format!("/srv/skiff/{pv_name}_default_data"))
    );
    let provisioned = event(&server, "data", "ProvisioningSucceeded").await;
    assert_eq!(
        provisioned.message,
        Some(format!(
            "Successfully provisioned volume {pv_name} using skiff.dev/local-path"
        ))
    );
    let scheduled = event(&server, "web", "Scheduled").await;
    assert_eq!(
        scheduled.message.as_deref(),
        Some("Successfully assigned default/web to n2")
    );

    // A second pod using the bound claim goes where its volume is.
    server.create_pod(pod_using("web2", "data")).await;
    assert_eq!(bound_pod(&server, "web2").await, "n2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_prebinds_a_static_volume_the_pods_node_can_reach() {
    let server = TestServer::start().await;
    let _control = start(&server.client);
    server.create_node(ready_node("n1").build()).await;
    server.create_node(ready_node("n2").build()).await;
    create_class(
        &server,
        class("local", "kubernetes.io/no-provisioner")
            .wait_for_first_consumer()
            .build(),
    )
    .await;
    let disk = volume("disk-n1")
        .uid("")
        .class("local")
        .capacity("10Gi")
        .on_node("n1")
        .build();
    volumes(&server)
        .create(&PostParams::default(), &disk)
        .await
        .expect("create volume");
    create_claim(&server, "data", "local").await;
    server.create_pod(pod_using("web", "data")).await;
    assert_eq!(bound_pod(&server, "web").await, "n1");
    let claim = claims(&server).get("data").await.expect("claim");
    assert_eq!(volume_of(&claim), "disk-n1");
    assert_eq!(claim_phase(&claim), Some("Bound"));
    assert_eq!(selected_node(&claim), None, "nothing to provision");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unbound_immediate_claim_keeps_the_pod_pending_until_a_volume_binds_it() {
    let server = TestServer::start().await;
    let _control = start(&server.client);
    server.create_node(ready_node("n1").build()).await;
    create_class(
        &server,
        class("manual", "kubernetes.io/no-provisioner").build(),
    )
    .await;
    create_claim(&server, "data", "manual").await;
    // The controller's class and claim watches are separate: when the
    // claim comes first it reports the class as not found (as upstream
    // does) and tries again once the class arrives.
    let failed = event_with(
        &server,
        "data",
        "ProvisioningFailed",
        "no volume plugin matched name: kubernetes.io/no-provisioner",
    )
    .await;
    assert_eq!(failed.type_.as_deref(), Some("Warning"));
    server.create_pod(pod_using("web", "data")).await;
    // Upstream's FitError ends PostFilter's sentence with another ".".
    let message = "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. \
        preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling..";
    pending_with(&server, "web", message).await;
    let failed = event(&server, "web", "FailedScheduling").await;
    assert_eq!(failed.message.as_deref(), Some(message));

    // An administrator adds a volume: the controller binds the claim and
    // the claim's update brings the pod back.
    let pv = volume("manual-1")
        .uid("")
        .class("manual")
        .capacity("1Gi")
        .build();
    volumes(&server)
        .create(&PostParams::default(), &pv)
        .await
        .expect("create volume");
    assert_eq!(bound_pod(&server, "web").await, "n1");
    let claim = claims(&server).get("data").await.expect("claim");
    assert_eq!(volume_of(&claim), "manual-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_claim_keeps_the_pod_pending_until_it_exists() {
    let server = TestServer::start().await;
    let _control = start(&server.client);
    server
        .create_node(
            ready_node("n1")
                .local_path_dir("/var/lib/skiff/storage")
                .build(),
        )
        .await;
    create_class(
        &server,
        local_path_class("local-path")
            .wait_for_first_consumer()
            .build(),
    )
    .await;
    server.create_pod(pod_using("web", "later")).await;
    let message = "0/1 nodes are available: persistentvolumeclaim \"later\" not found. \
        preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling..";
    pending_with(&server, "web", message).await;
    create_claim(&server, "later", "local-path").await;
    assert_eq!(bound_pod(&server, "web").await, "n1");
    claim_where(&server, "later", "Bound", |c| {
        claim_phase(c) == Some("Bound")
    })
    .await;
}
