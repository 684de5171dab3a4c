//! The DaemonSet controller against a real in-process API server, the
//! test making the Nodes and acting as their kubelets: one pod per node
//! over 50 nodes, a tainted node skipped unless tolerated, new nodes get
//! their pod and removed ones lose it, and a rolling update replaces the
//! pods within maxUnavailable, with the history in ControllerRevisions.

mod support;

use support::{eventually, namespace};

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::json;

/// A Ready node, optionally tainted.
async fn node(nodes: &Api<Node>, name: &str, taints: serde_json::Value) {
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"taints": taints},
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
}

fn daemon(name: &str, image: &str, tolerations: serde_json::Value) -> DaemonSet {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": image}], "tolerations": tolerations},
            },
        },
    }))
    .unwrap()
}

/// The node a pod is pinned to by its required matchFields term.
fn pinned_node(p: &Pod) -> String {
    let terms = &p
        .spec
        .as_ref()
        .unwrap()
        .affinity
        .as_ref()
        .unwrap()
        .node_affinity
        .as_ref()
        .unwrap()
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .unwrap()
        .node_selector_terms;
    assert_eq!(terms.len(), 1);
    let field = &terms[0].match_fields.as_ref().unwrap()[0];
    assert_eq!(field.key, "metadata.name");
    assert_eq!(field.operator, "In");
    field.values.as_ref().unwrap()[0].clone()
}

/// The node each live pod of the set is pinned to.
async fn pinned(pods: &Api<Pod>, app: &str) -> Vec<String> {
    let list = pods
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap();
    list.items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(pinned_node)
        .collect()
}

async fn pods_on(pods: &Api<Pod>, app: &str, want: usize) -> Vec<String> {
    eventually(&format!("{app} has {want} pods"), || async {
        let nodes = pinned(pods, app).await;
        (nodes.len() == want).then_some(nodes)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pod_per_eligible_node_over_fifty_nodes() {
    let (_server, client, stop) = support::start(&["daemonset"]).await;
    namespace(&client, "fifty").await;
    let nodes: Api<Node> = Api::all(client.clone());
    for i in 0..49 {
        node(&nodes, &format!("n{i}"), json!([])).await;
    }
    node(
        &nodes,
        "tainted",
        json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
    )
    .await;
    let sets: Api<DaemonSet> = Api::namespaced(client.clone(), "fifty");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "fifty");
    sets.create(
        &PostParams::default(),
        &daemon("plain", "agent:1", json!([])),
    )
    .await
    .unwrap();
    sets.create(
        &PostParams::default(),
        &daemon(
            "tolerant",
            "agent:1",
            json!([{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]),
        ),
    )
    .await
    .unwrap();

    let plain = pods_on(&pods, "plain", 49).await;
    let distinct: BTreeSet<_> = plain.iter().collect();
    assert_eq!(distinct.len(), 49, "one pod per node");
    assert!(!plain.contains(&"tainted".to_string()));
    let tolerant = pods_on(&pods, "tolerant", 50).await;
    assert!(tolerant.contains(&"tainted".to_string()));

    // The pods carry the daemon tolerations and the revision labels.
    let list = pods
        .list(&ListParams::default().labels("app=plain"))
        .await
        .unwrap();
    let pod = &list.items[0];
    let tolerations = pod.spec.as_ref().unwrap().tolerations.clone().unwrap();
    let keys: BTreeSet<_> = tolerations.iter().filter_map(|t| t.key.clone()).collect();
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/unschedulable",
    ] {
        assert!(keys.contains(key), "{key} missing: {keys:?}");
    }
    let labels = pod.metadata.labels.as_ref().unwrap();
    assert!(labels.contains_key("controller-revision-hash"));
    assert_eq!(labels["pod-template-generation"], "1");

    let status = eventually("the status counts 49 nodes", || async {
        let s = sets.get("plain").await.unwrap().status?;
        (s.current_number_scheduled == 49 && s.observed_generation == Some(1)).then_some(s)
    })
    .await;
    assert_eq!(status.desired_number_scheduled, 49);
    assert_eq!(status.number_misscheduled, 0);
    assert_eq!(status.updated_number_scheduled, Some(49));
    assert_eq!(status.number_ready, 0);
    assert_eq!(status.number_unavailable, Some(49));

    // A new node gets its pod; a removed one loses it.
    node(&nodes, "late", json!([])).await;
    let plain = pods_on(&pods, "plain", 50).await;
    assert!(plain.contains(&"late".to_string()));
    nodes.delete("n7", &DeleteParams::default()).await.unwrap();
    let plain = pods_on(&pods, "plain", 49).await;
    assert!(!plain.contains(&"n7".to_string()));

    // A node that stops matching loses its pod: taint n3 NoExecute.
    nodes
        .patch(
            "n3",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": [{"key": "evict", "effect": "NoExecute"}]}})),
        )
        .await
        .unwrap();
    let plain = pods_on(&pods, "plain", 48).await;
    assert!(!plain.contains(&"n3".to_string()));

    // A failed pod is reported, deleted and replaced.
    let list = pods
        .list(&ListParams::default().labels("app=plain"))
        .await
        .unwrap();
    let victim = list
        .items
        .iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())
        .unwrap();
    let victim_name = victim.metadata.name.clone().unwrap();
    let victim_node = pinned_node(victim);
    pods.patch_status(
        &victim_name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Failed"}})),
    )
    .await
    .unwrap();
    eventually("the failed pod is replaced", || async {
        let list = pods
            .list(&ListParams::default().labels("app=plain"))
            .await
            .unwrap();
        let replaced = list.items.iter().any(|p| {
            p.metadata.name.as_deref() != Some(victim_name.as_str())
                && pinned_node(p) == victim_node
        });
        let gone = list
            .items
            .iter()
            .all(|p| p.metadata.name.as_deref() != Some(victim_name.as_str()));
        (replaced && gone).then_some(())
    })
    .await;

    let events: Api<Event> = Api::namespaced(client.clone(), "fifty");
    let failed_message = format!(
        "Found failed daemon pod fifty/{victim_name} on node {victim_node}, will try to kill it"
    );
    eventually("the failed pod's event is written", || async {
        let list = events.list(&ListParams::default()).await.unwrap();
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("FailedDaemonPod")
                    && e.type_.as_deref() == Some("Warning")
                    && e.message.as_deref() == Some(failed_message.as_str())
            })
            .then_some(())
    })
    .await;
    eventually("the events are written", || async {
        let list = events.list(&ListParams::default()).await.unwrap();
        let created = list.items.iter().any(|e| {
            e.reason.as_deref() == Some("SuccessfulCreate")
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.starts_with("Created pod: plain-"))
                && e.source.as_ref().and_then(|s| s.component.as_deref())
                    == Some("daemonset-controller")
        });
        let deleted = list.items.iter().any(|e| {
            e.reason.as_deref() == Some("SuccessfulDelete")
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.starts_with("Deleted pod: plain-"))
        });
        (created && deleted).then_some(())
    })
    .await;
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_replaces_pods_within_max_unavailable() {
    let (server, client, stop) = support::start(&["daemonset"]).await;
    namespace(&client, "rolling").await;
    let nodes: Api<Node> = Api::all(client.clone());
    for i in 0..4 {
        node(&nodes, &format!("n{i}"), json!([])).await;
    }
    let sets: Api<DaemonSet> = Api::namespaced(client.clone(), "rolling");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "rolling");
    // The kubelets: every pod is made Running and Ready; the
    // most pods of the set ever not Ready at once is recorded.
    let worst = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    {
        let (pods, stop, worst) = (pods.clone(), stop.clone(), worst.clone());
        tokio::spawn(async move {
            let mut settled = false;
            while !stop.is_cancelled() {
                if let Ok(list) = pods.list(&ListParams::default()).await {
                    let live: Vec<_> = list
                        .items
                        .iter()
                        .filter(|p| p.metadata.deletion_timestamp.is_none())
                        .collect();
                    let up = live.iter().filter(|p| ready(p)).count();
                    if up == 4 {
                        settled = true;
                    }
                    if settled {
                        worst.fetch_max(
                            4usize.saturating_sub(up),
                            std::sync::atomic::Ordering::SeqCst,
                        );
                    }
                    for pod in live.iter().filter(|p| !ready(p)) {
                        let name = pod.metadata.name.clone().unwrap();
                        let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
                        let _ = pods
                            .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
                            .await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
    }
    sets.create(
        &PostParams::default(),
        &daemon("agent", "agent:1", json!([])),
    )
    .await
    .unwrap();
    eventually("four pods are available", || async {
        let s = sets.get("agent").await.unwrap().status?;
        (s.number_available == Some(4) && s.number_ready == 4).then_some(())
    })
    .await;
    sets.patch(
        "agent",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "agent:2"}]}}}})),
    )
    .await
    .unwrap();
    let status = eventually("the update is rolled out", || async {
        let s = sets.get("agent").await.unwrap().status?;
        (s.observed_generation == Some(2)
            && s.updated_number_scheduled == Some(4)
            && s.number_available == Some(4))
        .then_some(s)
    })
    .await;
    assert_eq!(status.desired_number_scheduled, 4);
    let list = pods.list(&ListParams::default()).await.unwrap();
    let live: Vec<_> = list
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    assert_eq!(live.len(), 4);
    for pod in &live {
        assert_eq!(
            pod.spec.as_ref().unwrap().containers[0].image.as_deref(),
            Some("agent:2")
        );
        assert_eq!(
            pod.metadata.labels.as_ref().unwrap()["pod-template-generation"],
            "2"
        );
    }
    assert!(
        worst.load(std::sync::atomic::Ordering::SeqCst) <= 1,
        "more than maxUnavailable pods were down at once"
    );

    // Two revisions, numbered, the current one labelled with the pods' hash.
    let revisions: Api<ControllerRevision> = Api::namespaced(client.clone(), "rolling");
    let list = revisions.list(&ListParams::default()).await.unwrap();
    let mut numbers: Vec<i64> = list.items.iter().map(|r| r.revision).collect();
    numbers.sort_unstable();
    assert_eq!(numbers, [1, 2]);
    let current = list.items.iter().find(|r| r.revision == 2).unwrap();
    let hash = &current.metadata.labels.as_ref().unwrap()["controller-revision-hash"];
    assert_eq!(
        current.metadata.name.as_deref(),
        Some(format!("agent-{hash}").as_str())
    );
    assert_eq!(
        live[0].metadata.labels.as_ref().unwrap()["controller-revision-hash"],
        *hash
    );
    let data = &current.data.as_ref().unwrap().0;
    assert_eq!(data["spec"]["template"]["$patch"], "replace");
    assert_eq!(
        data["spec"]["template"]["spec"]["containers"][0]["image"],
        "agent:2"
    );

    // kubectl reads the status and the history, and undoes through it.
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
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    };
    let (ok, out) = tokio::task::block_in_place(|| {
        kubectl(&["rollout", "status", "daemonset/agent", "--timeout=30s"])
    });
    assert!(ok && out.contains("successfully rolled out"), "{out}");
    let (ok, out) =
        tokio::task::block_in_place(|| kubectl(&["rollout", "history", "daemonset/agent"]));
    assert!(ok && out.contains('1') && out.contains('2'), "{out}");
    let (ok, out) =
        tokio::task::block_in_place(|| kubectl(&["rollout", "undo", "daemonset/agent"]));
    assert!(ok, "{out}");
    eventually("the undo is rolled out", || async {
        let s = sets.get("agent").await.unwrap().status?;
        let list = pods.list(&ListParams::default()).await.ok()?;
        let old = list.items.iter().filter(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some("agent:1")
        });
        (s.observed_generation == Some(3)
            && s.updated_number_scheduled == Some(4)
            && s.number_available == Some(4)
            && old.count() == 4)
            .then_some(())
    })
    .await;
    let list = revisions.list(&ListParams::default()).await.unwrap();
    let mut numbers: Vec<i64> = list.items.iter().map(|r| r.revision).collect();
    numbers.sort_unstable();
    assert_eq!(numbers, [2, 3], "revision 1's template is renumbered 3");
    stop.cancel();
}

fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
