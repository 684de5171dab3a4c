//! The namespaced Roles and RoleBindings of upstream namespace_policy.go
//! (1.33): in `kube-system`, reading the `extension-apiserver-
//! authentication` ConfigMap, the leader-election locks of the controller
//! manager and the scheduler (ConfigMaps, Leases and LeaseCandidates), and
//! the bootstrap-signer, cloud-provider and token-cleaner controllers'
//! rights there; in `kube-public`, the bootstrap signer's right to sign
//! the `cluster-info` ConfigMap.

use serde_json::Value;

use super::{events_rule, named, ns_binding, ns_role, rule, service_account, user};

const SYSTEM: &str = "kube-system";
const PUBLIC: &str = "kube-public";
const SIGNER: &str = "system:controller:bootstrap-signer";
const KCM: &str = "system:kube-controller-manager";
const SCHEDULER: &str = "system:kube-scheduler";

/// The rules of a component's leader-election lock named `lock`.
fn leader_locking(lock: &str) -> Vec<Value> {
    let leases = ["get", "watch", "list", "create", "update"];
    vec![
        rule(&["watch"], &[""], &["configmaps"]),
        named(&["get", "update"], &[""], &["configmaps"], &[lock]),
        rule(&leases, &["coordination.k8s.io"], &["leases"]),
        rule(&leases, &["coordination.k8s.io"], &["leasecandidates"]),
    ]
}

pub(super) fn roles() -> Vec<Value> {
    vec![
        ns_role(
            SYSTEM,
            "extension-apiserver-authentication-reader",
            vec![named(
                &["get", "list", "watch"],
                &[""],
                &["configmaps"],
                &["extension-apiserver-authentication"],
            )],
        ),
        ns_role(
            SYSTEM,
            SIGNER,
            vec![rule(&["get", "list", "watch"], &[""], &["secrets"])],
        ),
        // Deprecated upstream since 1.10, still bootstrapped.
        ns_role(
            SYSTEM,
            "system:controller:cloud-provider",
            vec![rule(
                &["create", "get", "list", "watch"],
                &[""],
                &["configmaps"],
            )],
        ),
        ns_role(
            SYSTEM,
            "system:controller:token-cleaner",
            vec![
                rule(&["get", "list", "watch", "delete"], &[""], &["secrets"]),
                events_rule(),
            ],
        ),
        ns_role(
            SYSTEM,
            "system::leader-locking-kube-controller-manager",
            leader_locking("kube-controller-manager"),
        ),
        ns_role(
            SYSTEM,
            "system::leader-locking-kube-scheduler",
            leader_locking("kube-scheduler"),
        ),
        ns_role(
            PUBLIC,
            SIGNER,
            vec![
                rule(&["get", "list", "watch"], &[""], &["configmaps"]),
                named(&["update"], &[""], &["configmaps"], &["cluster-info"]),
                events_rule(),
            ],
        ),
    ]
}

pub(super) fn bindings() -> Vec<Value> {
    vec![
        ns_binding(
            SYSTEM,
            "system::extension-apiserver-authentication-reader",
            "extension-apiserver-authentication-reader",
            vec![user(KCM), user(SCHEDULER)],
        ),
        ns_binding(
            SYSTEM,
            "system::leader-locking-kube-controller-manager",
            "system::leader-locking-kube-controller-manager",
            vec![
                user(KCM),
                service_account(SYSTEM, "kube-controller-manager"),
                service_account(SYSTEM, "leader-election-controller"),
            ],
        ),
        ns_binding(
            SYSTEM,
            "system::leader-locking-kube-scheduler",
            "system::leader-locking-kube-scheduler",
            vec![user(SCHEDULER), service_account(SYSTEM, "kube-scheduler")],
        ),
        ns_binding(
            SYSTEM,
            SIGNER,
            SIGNER,
            vec![service_account(SYSTEM, "bootstrap-signer")],
        ),
        ns_binding(
            SYSTEM,
            "system:controller:cloud-provider",
            "system:controller:cloud-provider",
            vec![service_account(SYSTEM, "cloud-provider")],
        ),
        ns_binding(
            SYSTEM,
            "system:controller:token-cleaner",
            "system:controller:token-cleaner",
            vec![service_account(SYSTEM, "token-cleaner")],
        ),
        ns_binding(
            PUBLIC,
            SIGNER,
            SIGNER,
            vec![service_account(SYSTEM, "bootstrap-signer")],
        ),
    ]
}
