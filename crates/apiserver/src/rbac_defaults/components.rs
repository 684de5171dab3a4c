//! The ClusterRoles of the system components in upstream policy.go (1.33)
//! and their ClusterRoleBindings: the kubelet (`system:node`), kube-proxy
//! (`system:node-proxier`), the scheduler, the controller manager's own
//! identity, kube-dns, the CSR approver roles, and the roles an admin
//! binds to add-ons (`system:heapster`, `system:node-problem-detector`,
//! `system:persistent-volume-provisioner`, `system:kubelet-api-admin`, …).
//!
//! Rules behind feature gates on by default in 1.33 are in
//! (`KubeletFineGrainedAuthz`: `nodes/pods`, `nodes/healthz`,
//! `nodes/configz` for `system:kubelet-api-admin`;
//! `MultiCIDRServiceAllocator`: `servicecidrs` for `system:node-proxier`).
//! Left out, as off by default in 1.33: `DynamicResourceAllocation`
//! (`resource.k8s.io` rules of `system:node` and `system:kube-scheduler`),
//! `ClusterTrustBundle` (`clustertrustbundles` for `system:node`, the
//! `system:cluster-trust-bundle-discovery` role and its binding) and
//! `KubeletServiceAccountTokenForCredentialProviders` (`serviceaccounts`
//! reads for `system:node`).
//!
//! `system:node` keeps upstream's binding with no subjects: nodes are
//! authorized by the Node authorizer, and the binding is left for
//! reconciliation to keep.

use serde_json::Value;

use super::{
    binding, events_rule, group, named, role, rule, service_account, url_rule, user, READ,
    READ_UPDATE, READ_WRITE,
};

const CERTS: &str = "certificates.k8s.io";
const STORAGE: &str = "storage.k8s.io";
const COORDINATION: &str = "coordination.k8s.io";

/// Upstream's `NodeRules`: what a kubelet may do (further narrowed by the
/// Node authorizer and the NodeRestriction admission plugin).
pub(super) fn node_rules() -> Vec<Value> {
    vec![
        rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
        rule(
            &["create"],
            &["authorization.k8s.io"],
            &["subjectaccessreviews", "localsubjectaccessreviews"],
        ),
        rule(READ, &[""], &["services"]),
        rule(&["create", "get", "list", "watch"], &[""], &["nodes"]),
        rule(&["update", "patch"], &[""], &["nodes/status"]),
        rule(&["update", "patch"], &[""], &["nodes"]),
        rule(&["create", "update", "patch"], &[""], &["events"]),
        rule(READ, &[""], &["pods"]),
        rule(&["create", "delete"], &[""], &["pods"]),
        rule(&["update", "patch"], &[""], &["pods/status"]),
        rule(&["create"], &[""], &["pods/eviction"]),
        rule(READ, &[""], &["secrets", "configmaps"]),
        rule(
            &["get"],
            &[""],
            &["persistentvolumeclaims", "persistentvolumes"],
        ),
        rule(&["get"], &[""], &["endpoints"]),
        rule(
            &["create", "get", "list", "watch"],
            &[CERTS],
            &["certificatesigningrequests"],
        ),
        rule(
            &["get", "create", "update", "patch", "delete"],
            &[COORDINATION],
            &["leases"],
        ),
        rule(&["get"], &[STORAGE], &["volumeattachments"]),
        rule(&["create"], &[""], &["serviceaccounts/token"]),
        rule(
            &["get", "update", "patch"],
            &[""],
            &["persistentvolumeclaims/status"],
        ),
        rule(READ, &[STORAGE], &["csidrivers"]),
        rule(
            &["get", "create", "update", "patch", "delete"],
            &[STORAGE],
            &["csinodes"],
        ),
        rule(READ, &["node.k8s.io"], &["runtimeclasses"]),
    ]
}

/// A role letting the CSR approver approve for one signer.
fn approver(name: &str, signer: &str) -> Value {
    role(
        name,
        &[],
        vec![named(&["approve"], &[CERTS], &["signers"], &[signer])],
    )
}

fn kube_controller_manager() -> Value {
    role(
        "system:kube-controller-manager",
        &[],
        vec![
            events_rule(),
            // Leader election.
            rule(&["create"], &[COORDINATION], &["leases"]),
            named(
                &["get", "update"],
                &[COORDINATION],
                &["leases"],
                &["kube-controller-manager"],
            ),
            rule(&["create"], &[""], &["secrets", "serviceaccounts"]),
            rule(&["delete"], &[""], &["secrets"]),
            rule(
                &["get"],
                &[""],
                &["namespaces", "secrets", "serviceaccounts", "configmaps"],
            ),
            rule(&["update"], &[""], &["secrets", "serviceaccounts"]),
            rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
            rule(
                &["create"],
                &["authorization.k8s.io"],
                &["subjectaccessreviews"],
            ),
            // Every shared informer.
            rule(&["list", "watch"], &["*"], &["*"]),
            rule(&["create"], &[""], &["serviceaccounts/token"]),
        ],
    )
}

fn kube_scheduler() -> Value {
    role(
        "system:kube-scheduler",
        &[],
        vec![
            events_rule(),
            // Leader election.
            rule(&["create"], &[COORDINATION], &["leases"]),
            named(
                &["get", "update", "list", "watch"],
                &[COORDINATION],
                &["leases"],
                &["kube-scheduler"],
            ),
            rule(READ_WRITE, &[COORDINATION], &["leasecandidates"]),
            rule(READ, &[""], &["nodes"]),
            rule(&["get", "list", "watch", "delete"], &[""], &["pods"]),
            rule(&["create"], &[""], &["pods/binding", "bindings"]),
            rule(&["patch", "update"], &[""], &["pods/status"]),
            rule(READ, &[""], &["services", "replicationcontrollers"]),
            rule(READ, &["apps", "extensions"], &["replicasets"]),
            rule(READ, &["apps"], &["statefulsets"]),
            rule(READ, &["policy"], &["poddisruptionbudgets"]),
            rule(
                READ,
                &[""],
                &["persistentvolumeclaims", "persistentvolumes"],
            ),
            rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
            rule(
                &["create"],
                &["authorization.k8s.io"],
                &["subjectaccessreviews"],
            ),
            rule(READ, &[STORAGE], &["csinodes"]),
            rule(READ, &[STORAGE], &["volumeattachments"]),
            rule(READ, &[""], &["namespaces"]),
            rule(READ, &[STORAGE], &["csidrivers"]),
            rule(READ, &[STORAGE], &["csistoragecapacities"]),
        ],
    )
}

pub(super) fn roles() -> Vec<Value> {
    vec![
        role(
            "system:heapster",
            &[],
            vec![
                rule(READ, &[""], &["events", "pods", "nodes", "namespaces"]),
                rule(READ, &["extensions"], &["deployments"]),
            ],
        ),
        role("system:node", &[], node_rules()),
        role(
            "system:node-problem-detector",
            &[],
            vec![
                rule(&["get"], &[""], &["nodes"]),
                rule(&["patch"], &[""], &["nodes/status"]),
                events_rule(),
            ],
        ),
        role(
            "system:node-bootstrapper",
            &[],
            vec![rule(
                &["create", "get", "list", "watch"],
                &[CERTS],
                &["certificatesigningrequests"],
            )],
        ),
        role(
            "system:auth-delegator",
            &[],
            vec![
                rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                ),
            ],
        ),
        role(
            "system:kube-aggregator",
            &[],
            vec![rule(READ, &[""], &["services", "endpoints"])],
        ),
        kube_controller_manager(),
        role(
            "system:kube-dns",
            &[],
            vec![rule(&["list", "watch"], &[""], &["endpoints", "services"])],
        ),
        role(
            "system:persistent-volume-provisioner",
            &[],
            vec![
                rule(
                    &["get", "list", "watch", "create", "delete"],
                    &[""],
                    &["persistentvolumes"],
                ),
                rule(
                    &["get", "list", "watch", "update"],
                    &[""],
                    &["persistentvolumeclaims"],
                ),
                rule(READ, &[STORAGE], &["storageclasses"]),
                rule(&["watch"], &[""], &["events"]),
                events_rule(),
            ],
        ),
        role(
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            &[],
            vec![rule(
                &["create"],
                &[CERTS],
                &["certificatesigningrequests/nodeclient"],
            )],
        ),
        role(
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            &[],
            vec![rule(
                &["create"],
                &[CERTS],
                &["certificatesigningrequests/selfnodeclient"],
            )],
        ),
        role(
            "system:volume-scheduler",
            &[],
            vec![
                rule(READ_UPDATE, &[""], &["persistentvolumes"]),
                rule(READ, &[STORAGE], &["storageclasses"]),
                rule(READ_UPDATE, &[""], &["persistentvolumeclaims"]),
            ],
        ),
        approver(
            "system:certificates.k8s.io:legacy-unknown-approver",
            "kubernetes.io/legacy-unknown",
        ),
        approver(
            "system:certificates.k8s.io:kubelet-serving-approver",
            "kubernetes.io/kubelet-serving",
        ),
        approver(
            "system:certificates.k8s.io:kube-apiserver-client-approver",
            "kubernetes.io/kube-apiserver-client",
        ),
        approver(
            "system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
            "kubernetes.io/kube-apiserver-client-kubelet",
        ),
        // The slash-ended URLs serve clients generated from older OpenAPI.
        role(
            "system:service-account-issuer-discovery",
            &[],
            vec![url_rule(
                &["get"],
                &[
                    "/.well-known/openid-configuration",
                    "/.well-known/openid-configuration/",
                    "/openid/v1/jwks",
                    "/openid/v1/jwks/",
                ],
            )],
        ),
        role(
            "system:kubelet-api-admin",
            &[],
            vec![
                rule(READ, &[""], &["nodes"]),
                rule(&["proxy"], &[""], &["nodes"]),
                rule(
                    &["*"],
                    &[""],
                    &["nodes/proxy", "nodes/metrics", "nodes/stats", "nodes/log"],
                ),
                // KubeletFineGrainedAuthz (beta, on in 1.33).
                rule(
                    &["*"],
                    &[""],
                    &["nodes/pods", "nodes/healthz", "nodes/configz"],
                ),
            ],
        ),
        role(
            "system:node-proxier",
            &[],
            vec![
                rule(&["list", "watch"], &[""], &["services", "endpoints"]),
                rule(READ, &[""], &["nodes"]),
                events_rule(),
                // MultiCIDRServiceAllocator (GA in 1.33).
                rule(
                    &["list", "watch"],
                    &["networking.k8s.io"],
                    &["servicecidrs"],
                ),
                rule(
                    &["list", "watch"],
                    &["discovery.k8s.io"],
                    &["endpointslices"],
                ),
            ],
        ),
        kube_scheduler(),
    ]
}

pub(super) fn bindings() -> Vec<Value> {
    vec![
        binding("system:node-proxier", vec![user("system:kube-proxy")]),
        binding(
            "system:kube-controller-manager",
            vec![user("system:kube-controller-manager")],
        ),
        binding(
            "system:kube-dns",
            vec![service_account("kube-system", "kube-dns")],
        ),
        binding("system:kube-scheduler", vec![user("system:kube-scheduler")]),
        binding(
            "system:volume-scheduler",
            vec![user("system:kube-scheduler")],
        ),
        // Deprecated since the Node authorizer (1.7): kept with no
        // subjects, as upstream keeps it.
        binding("system:node", Vec::new()),
        binding(
            "system:service-account-issuer-discovery",
            vec![group("system:serviceaccounts")],
        ),
    ]
}
