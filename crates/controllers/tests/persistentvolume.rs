//! The persistent volume controller against a real in-process API server
//! (no node agent: the tests play its part where the contract needs it):
//! an Immediate claim is provisioned on a Ready node with a volume dir
//! and bound; a WaitForFirstConsumer claim waits with upstream's event
//! until a node is selected, then lands there; a node without a dir fails
//! provisioning until the agent sets it; an Available volume is bound
//! statically; reclaim Delete deletes the volume (kept by the cleanup
//! finalizer until removed) and Retain keeps it Released.

use std::future::Future;
use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::{Event, Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use skiff_controllers::testing::{claim, local_path_class, ready_node, volume};
use skiff_controllers::PersistentVolumeController;
use skiff_testkit::apiserver::{Options, TestApiServer};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Upper bound for any wait.
const WAIT: Duration = Duration::from_secs(30);
const DIR: &str = "/var/lib/skiff/storage";

struct Running {
    stop: CancellationToken,
    task: JoinHandle<skiff_controllers::persistentvolume::Result<()>>,
}

impl Running {
    fn start(client: Client) -> Running {
        let controller = PersistentVolumeController::new()
            .with_retry(Duration::from_millis(100), Duration::from_secs(1));
        let stop = CancellationToken::new();
        let task = tokio::spawn(controller.run(client, stop.clone()));
        Running { stop, task }
    }

    async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("controller stops in time")
            .expect("controller task")
            .expect("controller result");
    }
}

struct Cluster {
    _server: TestApiServer,
    client: Client,
}

impl Cluster {
    async fn start() -> Cluster {
        let server = TestApiServer::start(|c| c, Options::default()).await;
        let client = server.client().await;
        Cluster {
            _server: server,
            client,
        }
    }

    fn claims(&self) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), "default")
    }

    fn volumes(&self) -> Api<PersistentVolume> {
        Api::all(self.client.clone())
    }

    /// Creates a node with its status (conditions), as an agent would.
    async fn node(&self, node: Node) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let name = node.metadata.name.clone().expect("node name");
        let mut created = nodes
            .create(&PostParams::default(), &node)
            .await
            .expect("create node");
        created.status = node.status;
        nodes
            .replace_status(&name, &PostParams::default(), &created)
            .await
            .expect("node status");
    }

    async fn class(&self, class: StorageClass) {
        Api::<StorageClass>::all(self.client.clone())
            .create(&PostParams::default(), &class)
            .await
            .expect("create class");
    }

    async fn claim(&self, claim: PersistentVolumeClaim) -> PersistentVolumeClaim {
        self.claims()
            .create(&PostParams::default(), &claim)
            .await
            .expect("create claim")
    }

    /// Waits (watching) until claim `name` satisfies `cond`.
    async fn claim_where(
        &self,
        name: &str,
        what: &str,
        cond: impl Fn(&PersistentVolumeClaim) -> bool,
    ) -> PersistentVolumeClaim {
        within(
            &format!("claim {name} {what}"),
            await_condition(
                self.claims(),
                name,
                move |c: Option<&PersistentVolumeClaim>| c.is_some_and(&cond),
            ),
        )
        .await
        .expect("watch claim")
        .expect("claim exists")
    }

    async fn bound_claim(&self, name: &str) -> PersistentVolumeClaim {
        self.claim_where(name, "Bound", |c| phase_of(c) == Some("Bound"))
            .await
    }

    /// Waits (watching) until volume `name` satisfies `cond`.
    async fn volume_where(
        &self,
        name: &str,
        what: &str,
        cond: impl Fn(&PersistentVolume) -> bool,
    ) -> PersistentVolume {
        within(
            &format!("volume {name} {what}"),
            await_condition(self.volumes(), name, move |v: Option<&PersistentVolume>| {
                v.is_some_and(&cond)
            }),
        )
        .await
        .expect("watch volume")
        .expect("volume exists")
    }

    /// Waits (watching) for the first event about `object` with `reason`.
    async fn event(&self, object: &str, reason: &str) -> Event {
        let events: Api<Event> = Api::namespaced(self.client.clone(), "default");
        let config = watcher::Config::default()
            .fields(&format!("involvedObject.name={object},reason={reason}"));
        let mut stream = std::pin::pin!(watcher(events, config).applied_objects());
        within(&format!("a {reason} event about {object}"), async {
            stream
                .try_next()
                .await
                .expect("watch events")
                .expect("event stream open")
        })
        .await
    }
}

async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

fn phase_of(c: &PersistentVolumeClaim) -> Option<&str> {
    c.status.as_ref()?.phase.as_deref()
}

fn volume_phase(v: &PersistentVolume) -> Option<&str> {
    v.status.as_ref()?.phase.as_deref()
}

fn annotation<'a>(meta: &'a kube::api::ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

fn volume_name(c: &PersistentVolumeClaim) -> String {
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

/// A claim to create (the API sets the UID).
fn new_claim(name: &str, class: &str) -> PersistentVolumeClaim {
    claim(name).uid("").class(class).request("2Gi").build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_immediate_claim_is_provisioned_bound_and_its_volume_deleted_with_it() {
    let cluster = Cluster::start().await;
    let running = Running::start(cluster.client.clone());
    cluster
        .node(ready_node("n1").local_path_dir(DIR).build())
        .await;
    cluster
        .node(ready_node("n2").local_path_dir(DIR).not_ready().build())
        .await;
    cluster.class(local_path_class("fast").build()).await;
    let created = cluster.claim(new_claim("data", "fast")).await;
    let uid = created.metadata.uid.clone().expect("uid");

    let bound = cluster.bound_claim("data").await;
    let pv_name = format!("pvc-{uid}");
    assert_eq!(volume_name(&bound), pv_name);
    assert_eq!(
        annotation(&bound.metadata, "pv.kubernetes.io/bind-completed"),
        Some("yes")
    );
    assert_eq!(
        annotation(&bound.metadata, "pv.kubernetes.io/bound-by-controller"),
        Some("yes")
    );
    assert_eq!(
        annotation(&bound.metadata, "volume.kubernetes.io/storage-provisioner"),
        Some("skiff.dev/local-path")
    );
    let status = bound.status.as_ref().expect("status");
    assert_eq!(
        status
            .capacity
            .as_ref()
            .and_then(|c| c.get("storage"))
            .map(|q| q.0.as_str()),
        Some("2Gi")
    );
    assert_eq!(status.access_modes, Some(vec!["ReadWriteOnce".to_string()]));

    let pv = cluster
        .volume_where(&pv_name, "Bound", |v| volume_phase(v) == Some("Bound"))
        .await;
    assert_eq!(pinned_to(&pv).as_deref(), Some("n1"), "the Ready node");
    let spec = pv.spec.as_ref().expect("spec");
    let host_path = spec.host_path.as_ref().expect("hostPath");
    assert_eq!(host_path.path, format!("{DIR}/{pv_name}_default_data"));
    assert_eq!(host_path.type_.as_deref(), Some("DirectoryOrCreate"));
    assert_eq!(spec.storage_class_name.as_deref(), Some("fast"));
    assert_eq!(
        spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Delete")
    );
    let claim_ref = spec.claim_ref.as_ref().expect("claimRef");
    assert_eq!(claim_ref.uid.as_deref(), Some(uid.as_str()));
    assert_eq!(
        pv.metadata.finalizers,
        Some(vec!["skiff.dev/local-path-cleanup".to_string()])
    );
    assert_eq!(
        annotation(&pv.metadata, "pv.kubernetes.io/provisioned-by"),
        Some("skiff.dev/local-path")
    );

    let event = cluster.event("data", "ProvisioningSucceeded").await;
    assert_eq!(
        event.message,
        Some(format!(
            "Successfully provisioned volume {pv_name} using skiff.dev/local-path"
        ))
    );
    assert_eq!(event.type_.as_deref(), Some("Normal"));
    assert_eq!(
        event.source.and_then(|s| s.component).as_deref(),
        Some("persistentvolume-controller")
    );
    assert_eq!(
        event.involved_object.kind.as_deref(),
        Some("PersistentVolumeClaim")
    );
    assert_eq!(event.involved_object.uid.as_deref(), Some(uid.as_str()));

    // The claim goes: reclaim Delete deletes the volume, which its
    // finalizer keeps until the node agent has removed the directory.
    cluster
        .claims()
        .delete("data", &DeleteParams::default())
        .await
        .expect("delete claim");
    let deleting = cluster
        .volume_where(&pv_name, "being deleted", |v| {
            v.metadata.deletion_timestamp.is_some()
        })
        .await;
    assert_eq!(volume_phase(&deleting), Some("Released"));
    // Play the node agent: directory removed, finalizer off.
    cluster
        .volumes()
        .patch(
            &pv_name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("remove finalizer");
    let pv_uid = deleting.metadata.uid.clone().expect("pv uid");
    within(
        "the volume to be gone",
        await_condition(cluster.volumes(), &pv_name, conditions::is_deleted(&pv_uid)),
    )
    .await
    .expect("watch volume");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_for_first_consumer_claim_waits_then_lands_on_the_selected_node() {
    let cluster = Cluster::start().await;
    let running = Running::start(cluster.client.clone());
    cluster
        .node(ready_node("n1").local_path_dir(DIR).build())
        .await;
    cluster
        .node(ready_node("n2").local_path_dir("/srv/volumes").build())
        .await;
    cluster
        .class(
            local_path_class("local-path")
                .wait_for_first_consumer()
                .build(),
        )
        .await;
    let created = cluster.claim(new_claim("data", "local-path")).await;

    let event = cluster.event("data", "WaitForFirstConsumer").await;
    assert_eq!(
        event.message.as_deref(),
        Some("waiting for first consumer to be created before binding")
    );
    assert_eq!(event.type_.as_deref(), Some("Normal"));
    let pending = cluster.claims().get("data").await.expect("claim");
    assert_eq!(phase_of(&pending), Some("Pending"));
    assert_eq!(volume_name(&pending), "");
    let volumes = cluster
        .volumes()
        .list(&Default::default())
        .await
        .expect("list");
    assert!(volumes.items.is_empty(), "nothing provisioned yet");

    // Play the scheduler: a pod using it goes to n2.
    cluster
        .claims()
        .patch(
            "data",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({
                "metadata": {"annotations": {"volume.kubernetes.io/selected-node": "n2"}}
            })),
        )
        .await
        .expect("select node");
    let bound = cluster.bound_claim("data").await;
    let pv_name = format!("pvc-{}", created.metadata.uid.as_deref().expect("uid"));
    assert_eq!(volume_name(&bound), pv_name);
    let pv = cluster.volumes().get(&pv_name).await.expect("volume");
    assert_eq!(pinned_to(&pv).as_deref(), Some("n2"));
    assert_eq!(
        pv.spec.and_then(|s| s.host_path).map(|h| h.path),
        Some(format!("/srv/volumes/{pv_name}_default_data"))
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_a_volume_dir_fails_provisioning_until_the_agent_sets_it() {
    let cluster = Cluster::start().await;
    let running = Running::start(cluster.client.clone());
    cluster.node(ready_node("bare").build()).await;
    cluster
        .class(local_path_class("later").wait_for_first_consumer().build())
        .await;
    cluster.class(local_path_class("now").build()).await;

    // Selected by the scheduler: failed and handed back.
    let mut selected = new_claim("picked", "later");
    selected
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("volume.kubernetes.io/selected-node".into(), "bare".into());
    cluster.claim(selected).await;
    let failed = cluster.event("picked", "ProvisioningFailed").await;
    assert_eq!(
        failed.message.as_deref(),
        Some(
            "Failed to provision volume with StorageClass \"later\": node \"bare\" has no \
             skiff.dev/local-path-dir annotation"
        )
    );
    assert_eq!(failed.type_.as_deref(), Some("Warning"));
    cluster
        .claim_where("picked", "handed back to the scheduler", |c| {
            annotation(&c.metadata, "volume.kubernetes.io/selected-node").is_none()
        })
        .await;

    // Immediate: retried, and provisioned once the agent sets the dir.
    cluster.claim(new_claim("data", "now")).await;
    cluster.event("data", "ProvisioningFailed").await;
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    nodes
        .patch(
            "bare",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({
                "metadata": {"annotations": {"skiff.dev/local-path-dir": DIR}}
            })),
        )
        .await
        .expect("annotate node");
    let bound = cluster.bound_claim("data").await;
    let pv = cluster
        .volumes()
        .get(&volume_name(&bound))
        .await
        .expect("volume");
    assert_eq!(pinned_to(&pv).as_deref(), Some("bare"));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_available_volume_is_bound_and_retain_keeps_it_released() {
    let cluster = Cluster::start().await;
    let running = Running::start(cluster.client.clone());
    cluster.class(local_path_class("now").build()).await;
    cluster
        .node(ready_node("n1").local_path_dir(DIR).build())
        .await;
    let pv = volume("manual")
        .uid("")
        .class("")
        .capacity("5Gi")
        .reclaim("Retain")
        .build();
    cluster
        .volumes()
        .create(&PostParams::default(), &pv)
        .await
        .expect("create volume");
    cluster
        .volume_where("manual", "Available", |v| {
            volume_phase(v) == Some("Available")
        })
        .await;
    let created = cluster.claim(new_claim("data", "")).await;

    let bound = cluster.bound_claim("data").await;
    assert_eq!(volume_name(&bound), "manual");
    let pv = cluster
        .volume_where("manual", "Bound", |v| volume_phase(v) == Some("Bound"))
        .await;
    let claim_ref = pv
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.clone())
        .expect("claimRef");
    assert_eq!(claim_ref.name.as_deref(), Some("data"));
    assert_eq!(claim_ref.uid, created.metadata.uid);
    assert_eq!(
        annotation(&pv.metadata, "pv.kubernetes.io/bound-by-controller"),
        Some("yes")
    );

    cluster
        .claims()
        .delete("data", &DeleteParams::default())
        .await
        .expect("delete claim");
    cluster
        .volume_where("manual", "Released", |v| {
            volume_phase(v) == Some("Released")
        })
        .await;
    // A later claim the controller provisions: once it is bound, the
    // controller has long finished with the released volume.
    cluster.claim(new_claim("barrier", "now")).await;
    cluster.bound_claim("barrier").await;
    let kept = cluster.volumes().get("manual").await.expect("volume kept");
    assert_eq!(volume_phase(&kept), Some("Released"));
    assert!(kept.metadata.deletion_timestamp.is_none());
    assert_eq!(
        kept.spec
            .and_then(|s| s.claim_ref)
            .and_then(|r| r.name)
            .as_deref(),
        Some("data"),
        "a retained volume keeps its claimRef"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_survives_a_restart_of_the_controller() {
    let cluster = Cluster::start().await;
    cluster
        .node(ready_node("n1").local_path_dir(DIR).build())
        .await;
    cluster.class(local_path_class("now").build()).await;
    // Created while no controller runs.
    cluster.claim(new_claim("early", "now")).await;
    let running = Running::start(cluster.client.clone());
    let early = cluster.bound_claim("early").await;
    running.stop().await;

    let running = Running::start(cluster.client.clone());
    cluster.claim(new_claim("late", "now")).await;
    let late = cluster.bound_claim("late").await;
    assert_ne!(volume_name(&early), volume_name(&late));
    // Exactly one volume each: the restart provisioned nothing twice.
    let volumes = cluster
        .volumes()
        .list(&Default::default())
        .await
        .expect("list");
    let mut names: Vec<_> = volumes
        .items
        .iter()
        .filter_map(|v| v.metadata.name.clone())
        .collect();
    names.sort();
    let mut want = vec![volume_name(&early), volume_name(&late)];
    want.sort();
    assert_eq!(names, want);
    let events: Api<Event> = Api::namespaced(cluster.client.clone(), "default");
    let succeeded = events
        .list(&kube::api::ListParams::default().fields("reason=ProvisioningSucceeded"))
        .await
        .expect("events")
        .items;
    assert_eq!(succeeded.len(), 2, "{succeeded:#?}");
    running.stop().await;
}
