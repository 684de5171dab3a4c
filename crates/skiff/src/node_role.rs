//! The server's own node gets its `node-role.kubernetes.io/control-plane`
//! label from the server, as an admin, once it has registered: a node may
//! not set `kubernetes.io` labels on itself (NodeRestriction), so the
//! agent registers without it, as kubeadm labels its control-plane nodes
//! after the kubelet registers.

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::await_condition;
use tokio_util::sync::CancellationToken;

/// The label `kubectl get nodes` shows as the node's role.
pub const CONTROL_PLANE_LABEL: &str = "node-role.kubernetes.io/control-plane";

/// Waits for node `name` to exist, then labels it; gives up at
/// `shutdown`. Failures are logged.
pub async fn label_control_plane(admin: kube::Client, name: String, shutdown: CancellationToken) {
    let nodes: Api<Node> = Api::all(admin);
    let exists = await_condition(nodes.clone(), &name, |n: Option<&Node>| n.is_some());
    tokio::select! {
        _ = shutdown.cancelled() => return,
        result = exists => if let Err(e) = result {
            tracing::warn!(node = %name, error = %e, "cannot wait for the node to label it control-plane");
            return;
        },
    }
    let patch = serde_json::json!({"metadata": {"labels": {CONTROL_PLANE_LABEL: ""}}});
    if let Err(e) = nodes
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        tracing::warn!(node = %name, error = %e, "cannot label the node control-plane");
    }
}
