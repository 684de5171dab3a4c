//! The StatefulSet controller against a real in-process API server, the
//! test acting as the kubelet (marking pods Running and Ready): pods come
//! one at a time under OrderedReady, a deleted pod comes back under its
//! name with its claim kept, scaling down removes the highest ordinal,
//! and a rolling update with a partition stops at it, with the history
//! in ControllerRevisions that `kubectl rollout` reads.

mod support;

use support::eventually;

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{Event, Namespace, PersistentVolumeClaim, Pod};
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::{Api, Client};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(60);

async fn namespace(client: &Client, name: &str) {
    let ns = serde_json::from_value::<Namespace>(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// Marks a pod Running and Ready, as its kubelet would.
async fn make_ready(pods: &Api<Pod>, name: &str) {
    let status = json!({"status": {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string()}],
    }});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A kubelet for a whole namespace: every pod not ready is made so.
fn kubelet(pods: Api<Pod>, stop: CancellationToken) {
    tokio::spawn(async move {
        while !stop.is_cancelled() {
            if let Ok(list) = pods.list(&ListParams::default()).await {
                for pod in list {
                    if !is_ready(&pod) && pod.metadata.deletion_timestamp.is_none() {
                        let name = pod.metadata.name.clone().unwrap();
                        let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
                        let _ = pods
                            .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
                            .await;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}

fn web(replicas: i32, image: &str, partition: i32) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "serviceName": "nginx",
            "selector": {"matchLabels": {"app": "web"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": image}]},
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "www"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            }],
        },
    }))
    .unwrap()
}

async fn get_pod(pods: &Api<Pod>, name: &str) -> Option<Pod> {
    pods.get_opt(name).await.unwrap()
}

fn label<'a>(pod: &'a Pod, key: &str) -> &'a str {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_pods_keep_their_names_and_claims() {
    let (_server, client, stop) = support::start(&["statefulset"]).await;
    namespace(&client, "ordered").await;
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "ordered");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ordered");
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "ordered");
    sets.create(&PostParams::default(), &web(3, "nginx:1", 0))
        .await
        .unwrap();

    // web-0 first, with its identity and claim; web-1 only once it is Ready.
    let web0 = eventually("web-0 exists", || get_pod(&pods, "web-0")).await;
    assert_eq!(label(&web0, "statefulset.kubernetes.io/pod-name"), "web-0");
    assert_eq!(label(&web0, "apps.kubernetes.io/pod-index"), "0");
    assert!(label(&web0, "controller-revision-hash").starts_with("web-"));
    let spec = web0.spec.as_ref().unwrap();
    assert_eq!(spec.hostname.as_deref(), Some("web-0"));
    assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
    let volume = spec
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .find(|v| v.name == "www")
        .unwrap();
    assert_eq!(
        volume.persistent_volume_claim.as_ref().unwrap().claim_name,
        "www-web-0"
    );
    let claim = claims.get("www-web-0").await.unwrap();
    assert_eq!(claim.metadata.labels.as_ref().unwrap()["app"], "web");
    // Once the controller has counted web-0 (not ready), it still waits.
    eventually("the status counts web-0", || async {
        let s = sets.get("web").await.unwrap().status?;
        (s.replicas == 1).then_some(())
    })
    .await;
    assert!(
        get_pod(&pods, "web-1").await.is_none(),
        "web-1 made before web-0 is ready"
    );
    make_ready(&pods, "web-0").await;
    eventually("web-1 exists", || get_pod(&pods, "web-1")).await;
    assert!(
        get_pod(&pods, "web-2").await.is_none(),
        "web-2 before web-1 is ready"
    );
    make_ready(&pods, "web-1").await;
    eventually("web-2 exists", || get_pod(&pods, "web-2")).await;
    make_ready(&pods, "web-2").await;
    let status = eventually("the status counts three ready", || async {
        let s = sets.get("web").await.unwrap().status?;
        (s.ready_replicas == Some(3) && s.available_replicas == Some(3)).then_some(s)
    })
    .await;
    assert_eq!(status.replicas, 3);
    assert_eq!(status.current_replicas, Some(3));
    assert_eq!(status.updated_replicas, Some(3));
    assert_eq!(status.current_revision, status.update_revision);
    assert_eq!(status.observed_generation, Some(1));

    // Upstream's event wording.
    let events: Api<Event> = Api::namespaced(client.clone(), "ordered");
    let messages = eventually("the create events are written", || async {
        let list = events.list(&ListParams::default()).await.unwrap();
        let messages: Vec<String> = list
            .items
            .iter()
            .filter_map(|e| e.message.clone())
            .collect();
        messages
            .iter()
            .any(|m| m == "create Pod web-2 in StatefulSet web successful")
            .then_some(messages)
    })
    .await;
    assert!(
        messages
            .contains(&"create Claim www-web-0 Pod web-0 in StatefulSet web success".to_string()),
        "{messages:?}"
    );
    let created = events.list(&ListParams::default()).await.unwrap();
    let e = created
        .items
        .iter()
        .find(|e| e.message.as_deref() == Some("create Pod web-0 in StatefulSet web successful"))
        .unwrap();
    assert_eq!(e.reason.as_deref(), Some("SuccessfulCreate"));
    assert_eq!(e.involved_object.kind.as_deref(), Some("StatefulSet"));
    assert_eq!(
        e.source.as_ref().unwrap().component.as_deref(),
        Some("statefulset-controller")
    );

    // A deleted pod comes back under its name, with the same claim.
    let old_uid = web0.metadata.uid.clone();
    let claim_uid = claim.metadata.uid.clone();
    pods.delete("web-0", &DeleteParams::default())
        .await
        .unwrap();
    let again = eventually("web-0 is made again", || async {
        get_pod(&pods, "web-0")
            .await
            .filter(|p| p.metadata.uid != old_uid)
    })
    .await;
    let volume = again
        .spec
        .as_ref()
        .unwrap()
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .find(|v| v.name == "www")
        .cloned()
        .unwrap();
    assert_eq!(
        volume.persistent_volume_claim.unwrap().claim_name,
        "www-web-0"
    );
    assert_eq!(
        claims.get("www-web-0").await.unwrap().metadata.uid,
        claim_uid
    );
    make_ready(&pods, "web-0").await;

    // Scaling down removes the highest ordinal first (the watch shows the
    // deletions in order); claims are retained.
    let from = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut watch = pods
        .watch(&WatchParams::default(), &from)
        .await
        .unwrap()
        .boxed();
    sets.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    let mut deleted = Vec::new();
    tokio::time::timeout(WAIT, async {
        while deleted.len() < 2 {
            if let Some(Ok(WatchEvent::Deleted(p))) = watch.next().await {
                deleted.push(p.metadata.name.unwrap());
            }
        }
    })
    .await
    .expect("web-2 and web-1 deleted");
    assert_eq!(deleted, ["web-2", "web-1"]);
    assert!(get_pod(&pods, "web-0").await.is_some());
    assert!(
        claims.get_opt("www-web-2").await.unwrap().is_some(),
        "the claim is retained"
    );
    eventually("the status counts one", || async {
        let s = sets.get("web").await.unwrap().status?;
        (s.replicas == 1 && s.ready_replicas == Some(1)).then_some(())
    })
    .await;
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_stops_at_the_partition_and_kubectl_reads_the_history() {
    let (server, client, stop) = support::start(&["statefulset"]).await;
    namespace(&client, "rolling").await;
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "rolling");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "rolling");
    kubelet(pods.clone(), stop.clone());
    sets.create(&PostParams::default(), &web(3, "nginx:1", 1))
        .await
        .unwrap();
    let first = eventually("three pods are ready", || async {
        let s = sets.get("web").await.unwrap().status?;
        (s.ready_replicas == Some(3)).then_some(s)
    })
    .await;
    let rev1 = first.update_revision.clone().unwrap();

    sets.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:2"}]}}}})),
    )
    .await
    .unwrap();
    let status = eventually("web-2 and web-1 are updated", || async {
        let s = sets.get("web").await.unwrap().status?;
        (s.updated_replicas == Some(2)
            && s.ready_replicas == Some(3)
            && s.current_replicas == Some(1))
        .then_some(s)
    })
    .await;
    let rev2 = status.update_revision.clone().unwrap();
    assert_ne!(rev1, rev2);
    assert_eq!(
        status.current_revision.as_deref(),
        Some(rev1.as_str()),
        "not complete below the partition"
    );
    let revision_of = |p: Pod| label(&p, "controller-revision-hash").to_string();
    assert_eq!(revision_of(pods.get("web-0").await.unwrap()), rev1);
    assert_eq!(revision_of(pods.get("web-1").await.unwrap()), rev2);
    assert_eq!(revision_of(pods.get("web-2").await.unwrap()), rev2);
    let image = |p: &Pod| {
        p.spec.as_ref().unwrap().containers[0]
            .image
            .clone()
            .unwrap()
    };
    assert_eq!(image(&pods.get("web-0").await.unwrap()), "nginx:1");
    assert_eq!(image(&pods.get("web-2").await.unwrap()), "nginx:2");

    // The history: two revisions, numbered, labelled, with the template patch.
    let revisions: Api<ControllerRevision> = Api::namespaced(client.clone(), "rolling");
    let list = revisions.list(&ListParams::default()).await.unwrap();
    let by_name: BTreeMap<String, ControllerRevision> = list
        .items
        .into_iter()
        .map(|r| (r.metadata.name.clone().unwrap(), r))
        .collect();
    assert_eq!(by_name.len(), 2);
    assert_eq!(by_name[&rev1].revision, 1);
    assert_eq!(by_name[&rev2].revision, 2);
    let r2 = &by_name[&rev2];
    let labels = r2.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["app"], "web");
    assert_eq!(
        format!("web-{}", labels["controller.kubernetes.io/hash"]),
        rev2
    );
    let data = &r2.data.as_ref().unwrap().0;
    assert_eq!(data["spec"]["template"]["$patch"], "replace");
    assert_eq!(
        data["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:2"
    );
    assert_eq!(
        r2.metadata.owner_references.as_ref().unwrap()[0].kind,
        "StatefulSet"
    );

    // kubectl reads that history.
    let kubectl = |args: &[&str]| {
        let out = std::process::Command::new("/usr/lib/google-cloud-sdk/bin/kubectl.1.33")
            .arg("--kubeconfig")
            .arg(&server.kubeconfig)
            .arg("--cache-dir")
            .arg(server.dir.path().join("kubectl-cache"))
            .args(["--request-timeout=30s", "-n", "rolling"])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (ok, out) =
        tokio::task::block_in_place(|| kubectl(&["rollout", "history", "statefulset/web"]));
    assert!(ok, "{out}");
    assert!(out.contains('1') && out.contains('2'), "{out}");

    // Partition 0 finishes the update.
    sets.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}})),
    )
    .await
    .unwrap();
    eventually("the update completes", || async {
        let s = sets.get("web").await.unwrap().status?;
        (s.current_revision.as_deref() == Some(rev2.as_str())
            && s.updated_replicas == Some(3)
            && s.current_replicas == Some(3)
            && s.ready_replicas == Some(3))
        .then_some(())
    })
    .await;
    let (ok, out) = tokio::task::block_in_place(|| {
        kubectl(&["rollout", "status", "statefulset/web", "--timeout=30s"])
    });
    assert!(ok && out.contains("roll"), "{out}");

    // Undo goes back to revision 1's template, renumbered 3.
    let (ok, out) =
        tokio::task::block_in_place(|| kubectl(&["rollout", "undo", "statefulset/web"]));
    assert!(ok, "{out}");
    eventually("the undo is rolled out", || async {
        let s = sets.get("web").await.unwrap().status?;
        let web0 = pods.get("web-0").await.ok()?;
        (s.update_revision.as_deref() == Some(rev1.as_str())
            && s.current_revision.as_deref() == Some(rev1.as_str())
            && s.ready_replicas == Some(3)
            && image(&web0) == "nginx:1")
            .then_some(())
    })
    .await;
    assert_eq!(revisions.get(&rev1).await.unwrap().revision, 3);
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_are_owned_as_the_retention_policy_says() {
    let (_server, client, stop) = support::start(&["statefulset"]).await;
    namespace(&client, "retention").await;
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "retention");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "retention");
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "retention");
    kubelet(pods.clone(), stop.clone());
    let mut set = web(2, "nginx:1", 0);
    let spec = set.spec.as_mut().unwrap();
    spec.pod_management_policy = Some("Parallel".into());
    spec.persistent_volume_claim_retention_policy = Some(
        serde_json::from_value(json!({"whenDeleted": "Delete", "whenScaled": "Delete"})).unwrap(),
    );
    let set = sets.create(&PostParams::default(), &set).await.unwrap();
    let owners = |c: &PersistentVolumeClaim| -> Vec<(String, String)> {
        c.metadata
            .owner_references
            .iter()
            .flatten()
            .map(|r| (r.kind.clone(), r.uid.clone()))
            .collect()
    };
    let set_uid = set.metadata.uid.clone().unwrap();
    for claim in ["www-web-0", "www-web-1"] {
        eventually("the claims are owned by the set", || async {
            let c = claims.get_opt(claim).await.unwrap()?;
            (owners(&c) == [("StatefulSet".to_string(), set_uid.clone())]).then_some(())
        })
        .await;
    }
    eventually("both pods are ready", || async {
        let s = sets.get("web").await.unwrap().status?;
        (s.ready_replicas == Some(2)).then_some(())
    })
    .await;
    let web1 = pods.get("web-1").await.unwrap();
    sets.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    let web1_uid = web1.metadata.uid.clone().unwrap();
    eventually("the scaled-down claim is owned by its pod", || async {
        let c = claims.get_opt("www-web-1").await.unwrap()?;
        (owners(&c) == [("Pod".to_string(), web1_uid.clone())]).then_some(())
    })
    .await;
    eventually("web-1 is gone", || async {
        get_pod(&pods, "web-1").await.is_none().then_some(())
    })
    .await;
    stop.cancel();
}
