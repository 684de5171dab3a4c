//! The controller manager against a real in-process API server: it takes
//! the Lease `kube-system/kube-controller-manager` (a second manager
//! waits), every namespace gets the `default` ServiceAccount and the
//! `kube-root-ca.crt` ConfigMap, and both come back when deleted or
//! edited.

mod support;

use support::namespace;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::wait::await_condition;
use kube::Api;
use serde_json::json;
use skiff_controllers::{Config, ControllerManager};
use skiff_testkit::apiserver::{Options, TestApiServer};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);
const CA: &str = "-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n";

fn config(identity: &str) -> Config {
    let mut config = Config {
        identity: identity.into(),
        root_ca: Some(CA.into()),
        controllers: vec!["serviceaccount".into(), "root-ca-cert-publisher".into()],
        ..Config::default()
    };
    if let Some(le) = config.leader_election.as_mut() {
        le.lease_duration = Duration::from_secs(3);
        le.renew_deadline = Duration::from_secs(2);
        le.retry_period = Duration::from_millis(500);
    }
    config
}

async fn wait_for<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    cond: impl Fn(Option<&K>) -> bool + Send + 'static,
) where
    K: kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let found = tokio::time::timeout(WAIT, await_condition(api.clone(), name, cond)).await;
    assert!(found.is_ok(), "{name} never {what}");
}

#[tokio::test]
async fn one_leader_gives_every_namespace_its_account_and_root_ca() {
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let client = server.client().await;
    let stop = CancellationToken::new();
    tokio::spawn(ControllerManager::new(config("first")).run(client.clone(), stop.clone()));
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    wait_for(
        &leases,
        "kube-controller-manager",
        "held by the first manager",
        |l| {
            l.and_then(|l| l.spec.as_ref())
                .and_then(|s| s.holder_identity.as_deref())
                == Some("first")
        },
    )
    .await;
    // A second candidate waits while the first holds the lease.
    let second_stop = CancellationToken::new();
    tokio::spawn(ControllerManager::new(config("second")).run(client.clone(), second_stop.clone()));

    namespace(&client, "team").await;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "team");
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    wait_for(&accounts, "default", "created", |a| a.is_some()).await;
    wait_for(&configmaps, "kube-root-ca.crt", "published", |c| {
        c.and_then(|c| c.data.as_ref())
            .and_then(|d| d.get("ca.crt"))
            .map(String::as_str)
            == Some(CA)
    })
    .await;
    // Namespaces that existed before the manager started have them too.
    for ns in ["default", "kube-system"] {
        let api: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
        wait_for(&api, "default", "created in an existing namespace", |a| {
            a.is_some()
        })
        .await;
    }

    // Deleted: created again (a new uid).
    let old = accounts.get("default").await.unwrap().metadata.uid;
    accounts
        .delete("default", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&accounts, "default", "created again", move |a| {
        a.is_some_and(|a| a.metadata.uid != old)
    })
    .await;
    // Edited: put right.
    configmaps
        .patch(
            "kube-root-ca.crt",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"ca.crt": "tampered"}})),
        )
        .await
        .unwrap();
    wait_for(&configmaps, "kube-root-ca.crt", "put right", |c| {
        c.and_then(|c| c.data.as_ref())
            .and_then(|d| d.get("ca.crt"))
            .map(String::as_str)
            == Some(CA)
    })
    .await;

    // The first stops and releases the lease: the second takes over and
    // keeps the namespaces right.
    stop.cancel();
    wait_for(
        &leases,
        "kube-controller-manager",
        "taken over by the second manager",
        |l| {
            l.and_then(|l| l.spec.as_ref())
                .and_then(|s| s.holder_identity.as_deref())
                == Some("second")
        },
    )
    .await;
    configmaps
        .delete("kube-root-ca.crt", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        &configmaps,
        "kube-root-ca.crt",
        "published again by the second manager",
        |c| c.is_some(),
    )
    .await;
    second_stop.cancel();
}
