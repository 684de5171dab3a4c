//! Skiff's own additions to the bootstrap policy: what its node agent
//! needs beyond upstream's kubelet (`system:node` and the Node
//! authorizer), because it also runs what upstream runs as pods with their
//! own identities: the service proxy (kube-proxy's
//! `system:node-proxier`), the cluster DNS server, which publishes the
//! node's endpoint of the `kube-dns` Service as an EndpointSlice in
//! kube-system, and the node half of the local-path volumes, which
//! removes a deleted volume's directory and then its finalizer.
//!
//! All are bound to the group `system:nodes`. They are broader than one
//! node needs (any node may write any EndpointSlice in kube-system and
//! patch any PersistentVolume); NodeRestriction does not narrow them.
//!
//! `system:aggregated-metrics-reader` is metrics-server's ClusterRole
//! (reading metrics.k8s.io, gathered into `view`, `edit` and `admin`),
//! since this API server serves that group itself.
//!
//! And Skiff's controllers write with merge patches (guarded by the
//! resourceVersion they read) where upstream's call update: each
//! controller's ServiceAccount also gets `system:skiff:controller:<name>`,
//! which grants `patch` wherever its upstream role grants `update`, so
//! the upstream roles stay as upstream defines them.

use serde_json::Value;

use super::{binding, group, ns_binding, ns_role, role, rule, service_account, READ};

/// The ClusterRole and its binding for every node.
const NODE_EXTRAS: &str = "system:skiff:node";
/// The Role (in kube-system) for publishing the DNS endpoints.
const NODE_DNS: &str = "system:skiff:node-dns";
const NODES: &str = "system:nodes";

const CONTROLLER_PATCH_PREFIX: &str = "system:skiff:controller:";

/// `patch` wherever a rule grants `update` without it.
fn patch_where_update(rules: &[Value]) -> Vec<Value> {
    rules
        .iter()
        .filter(|r| {
            let verbs = r["verbs"].as_array();
            let has = |v: &str| verbs.is_some_and(|vs| vs.iter().any(|x| x == v));
            has("update") && !has("patch")
        })
        .map(|r| {
            let mut r = r.clone();
            r["verbs"] = serde_json::json!(["patch"]);
            r
        })
        .collect()
}

/// The controllers that need a patch role: `(name, rules)`.
fn controller_patches() -> Vec<(&'static str, Vec<Value>)> {
    super::controllers::controllers()
        .into_iter()
        .map(|(name, rules)| (name, patch_where_update(&rules)))
        .filter(|(_, rules)| !rules.is_empty())
        .collect()
}

pub(super) fn roles() -> Vec<Value> {
    let mut roles: Vec<Value> = controller_patches()
        .into_iter()
        .map(|(name, rules)| role(&format!("{CONTROLLER_PATCH_PREFIX}{name}"), &[], rules))
        .collect();
    roles.push(role(
        NODE_EXTRAS,
        &[],
        vec![
            rule(READ, &["discovery.k8s.io"], &["endpointslices"]),
            rule(READ, &[""], &["endpoints"]),
            rule(
                &["get", "list", "watch", "patch", "update"],
                &[""],
                &["persistentvolumes"],
            ),
        ],
    ));
    // metrics-server's own, for the metrics.k8s.io this API server
    // serves (`crate::metrics_api`): `view`, `edit` and `admin` gather it.
    roles.push(role(
        "system:aggregated-metrics-reader",
        &[
            ("rbac.authorization.k8s.io/aggregate-to-admin", "true"),
            ("rbac.authorization.k8s.io/aggregate-to-edit", "true"),
            ("rbac.authorization.k8s.io/aggregate-to-view", "true"),
        ],
        vec![rule(READ, &["metrics.k8s.io"], &["nodes", "pods"])],
    ));
    roles
}

pub(super) fn bindings() -> Vec<Value> {
    let mut bindings: Vec<Value> = controller_patches()
        .into_iter()
        .map(|(name, _)| {
            binding(
                &format!("{CONTROLLER_PATCH_PREFIX}{name}"),
                vec![service_account("kube-system", name)],
            )
        })
        .collect();
    bindings.push(binding(NODE_EXTRAS, vec![group(NODES)]));
    bindings
}

pub(super) fn namespaced_roles() -> Vec<Value> {
    vec![ns_role(
        "kube-system",
        NODE_DNS,
        vec![rule(
            &["create", "delete", "get", "patch", "update"],
            &["discovery.k8s.io"],
            &["endpointslices"],
        )],
    )]
}

pub(super) fn namespaced_bindings() -> Vec<Value> {
    vec![ns_binding(
        "kube-system",
        NODE_DNS,
        NODE_DNS,
        vec![group(NODES)],
    )]
}
