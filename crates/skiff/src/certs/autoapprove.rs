//! The ClusterRoleBindings `skiff server` makes at start so nodes get
//! their client certificates approved, as `kubeadm init` makes them:
//! `kubeadm:kubelet-bootstrap` (a joining node's bootstrap token may ask
//! for a certificate at all: `system:node-bootstrapper`),
//! `kubeadm:node-autoapprove-certificate-rotation` (the group
//! `system:nodes` may have a node renew its own client certificate,
//! `system:certificates.k8s.io:certificatesigningrequests:selfnodeclient`)
//! and `kubeadm:node-autoapprove-bootstrap` (the group
//! `system:bootstrappers` may ask for a new node's,
//! `...:nodeclient`). The csrapproving controller approves after a
//! SubjectAccessReview that these bindings answer.
//!
//! This module owns only those three objects: created when absent, never
//! overwritten (an operator may delete one to stop auto-approval until
//! the next start).

use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};

/// The bindings: name, ClusterRole, group.
pub const BINDINGS: &[(&str, &str, &str)] = &[
    (
        "kubeadm:kubelet-bootstrap",
        "system:node-bootstrapper",
        "system:bootstrappers",
    ),
    (
        "kubeadm:node-autoapprove-certificate-rotation",
        "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
        "system:nodes",
    ),
    (
        "kubeadm:node-autoapprove-bootstrap",
        "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
        "system:bootstrappers",
    ),
];

fn binding(name: &str, role: &str, group: &str) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: role.into(),
        },
        subjects: Some(vec![Subject {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Group".into(),
            name: group.into(),
            namespace: None,
        }]),
    }
}

/// Creates the bindings that are absent, logging what it could not.
pub async fn ensure_logged(client: kube::Client) {
    let api: Api<ClusterRoleBinding> = Api::all(client);
    let params = PostParams {
        field_manager: Some("skiff-server".into()),
        ..PostParams::default()
    };
    for (name, role, group) in BINDINGS {
        match api.create(&params, &binding(name, role, group)).await {
            Ok(_) => tracing::info!(name, "created the ClusterRoleBinding"),
            Err(kube::Error::Api(s)) if s.reason == "AlreadyExists" => {}
            Err(e) => tracing::warn!(name, error = %e, "cannot create the ClusterRoleBinding"),
        }
    }
}
