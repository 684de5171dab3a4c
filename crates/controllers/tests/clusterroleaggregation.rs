//! The ClusterRole aggregation controller against a real in-process API
//! server: an aggregated role gets the rules of the roles its selector
//! matches, follows a new matching role and a removed one, and the
//! bootstrap `view` role picks up a role labelled `aggregate-to-view`.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::wait::await_condition;
use kube::Api;
use skiff_controllers::ClusterRoleAggregation;
use skiff_testkit::apiserver::{Options, TestApiServer};
use tokio_util::sync::CancellationToken;

/// Upper bound for any wait.
const WAIT: Duration = Duration::from_secs(30);

async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

fn role(json: serde_json::Value) -> ClusterRole {
    serde_json::from_value(json).expect("a ClusterRole")
}

fn has_resource(role: Option<&ClusterRole>, resource: &str) -> bool {
    role.and_then(|r| r.rules.as_ref()).is_some_and(|rules| {
        rules
            .iter()
            .any(|r| r.resources.iter().flatten().any(|x| x == resource))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregated_roles_follow_their_selected_roles() {
    let server = TestApiServer::start(|c| c, Options::default()).await;
    let client = server.client().await;
    let stop = CancellationToken::new();
    let task = tokio::spawn(ClusterRoleAggregation::new().run(client.clone(), stop.clone()));
    let api: Api<ClusterRole> = Api::all(client);
    let pp = PostParams::default();
    api.create(
        &pp,
        &role(serde_json::json!({"metadata": {"name": "team"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"team": "blue"}}]}})),
    )
    .await
    .expect("create team");
    api.create(
        &pp,
        &role(
            serde_json::json!({"metadata": {"name": "widgets", "labels": {"team": "blue"}},
        "rules": [{"verbs": ["get"], "apiGroups": ["example.com"], "resources": ["widgets"]}]}),
        ),
    )
    .await
    .expect("create widgets");
    within(
        "team to get the widgets rule",
        await_condition(api.clone(), "team", |r: Option<&ClusterRole>| {
            has_resource(r, "widgets")
        }),
    )
    .await
    .expect("watch");
    api.create(
        &pp,
        &role(serde_json::json!({"metadata": {"name": "gadgets",
        "labels": {"team": "blue", "rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"verbs": ["list"], "apiGroups": ["example.com"], "resources": ["gadgets"]}]})),
    )
    .await
    .expect("create gadgets");
    within(
        "team and view to get the gadgets rule",
        await_condition(api.clone(), "view", |r: Option<&ClusterRole>| {
            has_resource(r, "gadgets") && has_resource(r, "pods")
        }),
    )
    .await
    .expect("watch");
    api.delete("widgets", &DeleteParams::default())
        .await
        .expect("delete widgets");
    within(
        "team to lose the widgets rule",
        await_condition(api.clone(), "team", |r: Option<&ClusterRole>| {
            !has_resource(r, "widgets") && has_resource(r, "gadgets")
        }),
    )
    .await
    .expect("watch");
    // The edit and admin roles aggregate view in turn.
    within(
        "admin to get the gadgets rule",
        await_condition(api.clone(), "admin", |r: Option<&ClusterRole>| {
            has_resource(r, "gadgets")
        }),
    )
    .await
    .expect("watch");
    stop.cancel();
    within("the controller to stop", task).await.expect("task");
}
