//! The garbage collector against a real in-process API server: a
//! ConfigMap owned by another goes when its owner is deleted
//! (Background); Foreground deletion keeps the owner until its blocking
//! dependents are gone; Orphan deletion keeps the dependents with the
//! reference removed; a reference whose uid is not the live owner's
//! counts as absent, as does one to an object of another namespace
//! (with upstream's OwnerRefInvalidNamespace warning); a custom resource (its CRD created by the test, so
//! found by rediscovery) owns a ConfigMap.

mod support;

use support::{namespace, until};

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Event};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ObjectMeta, PostParams, PropagationPolicy,
};
use kube::core::GroupVersionKind;
use kube::Api;
use serde_json::json;
use skiff_controllers::{Config, ControllerManager};
use skiff_testkit::apiserver::{Options, TestApiServer};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

fn config() -> Config {
    Config {
        leader_election: None,
        controllers: vec!["garbagecollector".into()],
        gc_rediscovery: Duration::from_millis(500),
        ..Config::default()
    }
}

fn reference(api_version: &str, kind: &str, name: &str, uid: &str, block: bool) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        block_owner_deletion: block.then_some(true),
        controller: None,
    }
}

async fn configmap(api: &Api<ConfigMap>, name: &str, owners: Vec<OwnerReference>) -> ConfigMap {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            owner_references: (!owners.is_empty()).then_some(owners),
            ..Default::default()
        },
        ..Default::default()
    };
    api.create(&PostParams::default(), &cm).await.unwrap()
}

fn uid(cm: &ConfigMap) -> String {
    cm.metadata.uid.clone().unwrap()
}

async fn gone(api: &Api<ConfigMap>, name: &str) -> bool {
    api.get_opt(name).await.unwrap().is_none()
}

fn with_policy(policy: PropagationPolicy) -> DeleteParams {
    DeleteParams {
        propagation_policy: Some(policy),
        ..DeleteParams::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_foreground_and_orphan_deletion() {
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let client = server.client().await;
    let stop = CancellationToken::new();
    tokio::spawn(ControllerManager::new(config()).run(client.clone(), stop.clone()));

    // Background: the dependent goes after its owner; one with another
    // solid owner stays, the dangling reference removed.
    namespace(&client, "bg").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "bg");
    let owner = configmap(&cms, "owner", vec![]).await;
    let other = configmap(&cms, "other", vec![]).await;
    configmap(
        &cms,
        "dep",
        vec![reference("v1", "ConfigMap", "owner", &uid(&owner), false)],
    )
    .await;
    configmap(
        &cms,
        "shared",
        vec![
            reference("v1", "ConfigMap", "owner", &uid(&owner), false),
            reference("v1", "ConfigMap", "other", &uid(&other), false),
        ],
    )
    .await;
    cms.delete("owner", &with_policy(PropagationPolicy::Background))
        .await
        .unwrap();
    until("the dependent is collected", || gone(&cms, "dep")).await;
    until(
        "the shared dependent loses the dangling reference",
        || async {
            let cm = cms.get("shared").await.unwrap();
            let owners = cm.metadata.owner_references.unwrap_or_default();
            owners.len() == 1 && owners[0].name == "other"
        },
    )
    .await;

    // A reference naming a live object but another uid counts as absent.
    configmap(
        &cms,
        "stale",
        vec![reference("v1", "ConfigMap", "other", "not-the-uid", false)],
    )
    .await;
    until("a dependent of a uid that is not the owner's goes", || {
        gone(&cms, "stale")
    })
    .await;
    assert!(!gone(&cms, "other").await);

    // An owner's uid in another namespace does not count: a namespaced
    // owner is looked for in its dependent's namespace. The dependent
    // goes, with upstream's warning.
    namespace(&client, "elsewhere").await;
    let elsewhere: Api<ConfigMap> = Api::namespaced(client.clone(), "elsewhere");
    let foreign = configmap(&elsewhere, "foreign", vec![]).await;
    configmap(
        &cms,
        "misplaced",
        vec![reference(
            "v1",
            "ConfigMap",
            "foreign",
            &uid(&foreign),
            false,
        )],
    )
    .await;
    until("a dependent of an owner in another namespace goes", || {
        gone(&cms, "misplaced")
    })
    .await;
    let events: Api<Event> = Api::namespaced(client.clone(), "bg");
    until("the OwnerRefInvalidNamespace warning is recorded", || async {
        events
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("OwnerRefInvalidNamespace")
                    && e.type_.as_deref() == Some("Warning")
                    && e.involved_object.name.as_deref() == Some("misplaced")
                    && e.message.as_deref()
                        == Some(&*format!(
                            "ownerRef [v1/ConfigMap, namespace: bg, name: foreign, uid: {}] does not exist in namespace \"bg\"",
                            uid(&foreign)
                        ))
            })
    })
    .await;
    assert!(!gone(&elsewhere, "foreign").await);

    // Foreground: the owner stays (with its finalizer) until its
    // blocking dependent is gone; then it goes too.
    namespace(&client, "fg").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "fg");
    let owner = configmap(&cms, "owner", vec![]).await;
    // The dependent's own finalizer holds it, so the order is visible.
    let dep = ConfigMap {
        metadata: ObjectMeta {
            name: Some("dep".into()),
            owner_references: Some(vec![reference(
                "v1",
                "ConfigMap",
                "owner",
                &uid(&owner),
                true,
            )]),
            finalizers: Some(vec!["test.skiff.dev/hold".into()]),
            ..Default::default()
        },
        ..Default::default()
    };
    cms.create(&PostParams::default(), &dep).await.unwrap();
    cms.delete("owner", &with_policy(PropagationPolicy::Foreground))
        .await
        .unwrap();
    until("the dependent is being deleted", || async {
        cms.get("dep")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    })
    .await;
    let held = cms.get("owner").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(
        held.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_string()])
    );
    cms.patch(
        "dep",
        &Default::default(),
        &kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    until("the dependent goes", || gone(&cms, "dep")).await;
    until("then the owner", || gone(&cms, "owner")).await;

    // Orphan: the dependent stays, the reference removed; the owner goes.
    namespace(&client, "orphan").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "orphan");
    let owner = configmap(&cms, "owner", vec![]).await;
    configmap(
        &cms,
        "dep",
        vec![reference("v1", "ConfigMap", "owner", &uid(&owner), true)],
    )
    .await;
    cms.delete("owner", &with_policy(PropagationPolicy::Orphan))
        .await
        .unwrap();
    until("the owner goes", || gone(&cms, "owner")).await;
    let dep = cms.get("dep").await.unwrap();
    assert_eq!(
        dep.metadata.owner_references, None,
        "the reference is removed"
    );
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_owns_a_configmap() {
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let client = server.client().await;
    let stop = CancellationToken::new();
    tokio::spawn(ControllerManager::new(config()).run(client.clone(), stop.clone()));
    namespace(&client, "cr").await;

    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "widgets.gc.skiff.dev"},
        "spec": {
            "group": "gc.skiff.dev",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("gc.skiff.dev", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "cr", &resource);
    let mut widget = DynamicObject::new("w", &resource);
    widget.data = json!({"spec": {}});
    // The CRD is served once Established: retry the create until then.
    let deadline = tokio::time::Instant::now() + WAIT;
    let widget = loop {
        match widgets.create(&PostParams::default(), &widget).await {
            Ok(w) => break w,
            Err(e) => assert!(
                tokio::time::Instant::now() < deadline,
                "the CRD is never served: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "cr");
    configmap(
        &cms,
        "dep",
        vec![reference(
            "gc.skiff.dev/v1",
            "Widget",
            "w",
            widget.metadata.uid.as_deref().unwrap(),
            false,
        )],
    )
    .await;
    // A dependent of a widget that does not exist goes: the kind
    // resolves; the live widget's dependent stays.
    configmap(
        &cms,
        "dangling",
        vec![reference(
            "gc.skiff.dev/v1",
            "Widget",
            "missing",
            "missing-uid",
            false,
        )],
    )
    .await;
    until("the dangling dependent is collected", || {
        gone(&cms, "dangling")
    })
    .await;
    assert!(!gone(&cms, "dep").await, "kept while the widget lives");
    widgets.delete("w", &DeleteParams::default()).await.unwrap();
    until("the widget's ConfigMap is collected", || gone(&cms, "dep")).await;
    stop.cancel();
}
