//! The namespace controller against a real in-process API server (no
//! kubelet: the test deletes bound pods as the kubelet would): deleting a
//! namespace deletes its content through the API — an unbound pod and a
//! plain ConfigMap at once, a bound pod only marked (graceful), an object
//! with a finalizer kept — the namespace's conditions say what remains,
//! and once the last object goes the namespace is finalized and gone.

mod support;

use support::until;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, NamespaceCondition, Pod};
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::json;
use skiff_controllers::{Config, ControllerManager};
use skiff_testkit::apiserver::{Options, TestApiServer};
use tokio_util::sync::CancellationToken;

fn condition(ns: &Namespace, type_: &str) -> Option<NamespaceCondition> {
    ns.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_namespace_deletes_its_content_then_the_namespace() {
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let client = server.client().await;
    let stop = CancellationToken::new();
    let config = Config {
        leader_election: None,
        controllers: vec!["namespace".into()],
        ..Config::default()
    };
    tokio::spawn(ControllerManager::new(config).run(client.clone(), stop.clone()));

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some("doomed".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "doomed");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "doomed");
    for (name, finalizers) in [
        ("plain", None),
        ("held", Some(vec!["test.skiff.dev/hold".to_string()])),
    ] {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                finalizers,
                ..Default::default()
            },
            ..Default::default()
        };
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    for (name, node) in [("unbound", None), ("bound", Some("node-1"))] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }

    namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    until("the unbound pod and the plain ConfigMap go", || async {
        pods.get_opt("unbound").await.unwrap().is_none()
            && cms.get_opt("plain").await.unwrap().is_none()
    })
    .await;
    let bound = pods.get("bound").await.unwrap();
    assert!(
        bound.metadata.deletion_timestamp.is_some(),
        "deleted gracefully"
    );
    until("the conditions say what remains", || async {
        let ns = namespaces.get("doomed").await.unwrap();
        let (Some(remaining), Some(finalizers)) = (
            condition(&ns, "NamespaceContentRemaining"),
            condition(&ns, "NamespaceFinalizersRemaining"),
        ) else {
            return false;
        };
        remaining.status == "True"
            && remaining.reason.as_deref() == Some("SomeResourcesRemain")
            && remaining.message.as_deref()
                == Some("Some resources are remaining: configmaps. has 1 resource instances, pods. has 1 resource instances")
            && finalizers.status == "True"
            && finalizers.reason.as_deref() == Some("SomeFinalizersRemain")
            && finalizers.message.as_deref()
                == Some("Some content in the namespace has finalizers remaining: test.skiff.dev/hold in 1 resource instances")
    })
    .await;
    let ns = namespaces.get("doomed").await.unwrap();
    assert_eq!(
        ns.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Terminating")
    );
    let discovery = condition(&ns, "NamespaceDeletionDiscoveryFailure").unwrap();
    assert_eq!(
        (discovery.status.as_str(), discovery.reason.as_deref()),
        ("False", Some("ResourcesDiscovered"))
    );

    // The kubelet deletes the pod once its containers stopped; the
    // finalizer's owner lets go of the ConfigMap.
    pods.delete("bound", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    until("the namespace goes", || async {
        namespaces.get_opt("doomed").await.unwrap().is_none()
    })
    .await;
    stop.cancel();
}
