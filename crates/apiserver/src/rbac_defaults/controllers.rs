//! The `system:controller:<name>` ClusterRoles of upstream
//! controller_policy.go (1.33), one per kube-controller-manager controller
//! that runs under its own ServiceAccount, each bound by a
//! ClusterRoleBinding of the same name to the ServiceAccount
//! `kube-system/<name>`.
//!
//! Gated roles on by default in 1.33 are in: `service-cidrs-controller`
//! (`MultiCIDRServiceAllocator`, GA) and `selinux-warning-controller`
//! (`SELinuxChangePolicy`, beta). Left out, as their gates are off by
//! default in 1.33: `resource-claim-controller` and
//! `device-taint-eviction-controller` (`DynamicResourceAllocation`,
//! `DRADeviceTaints`), `volumeattributesclass-protection-controller`
//! (`VolumeAttributesClass`), `kube-apiserver-serving-clustertrustbundle-
//! publisher` (`ClusterTrustBundle`), `storage-version-garbage-collector`
//! (`StorageVersionAPI`) and `storage-version-migrator-controller`
//! (`StorageVersionMigrator`).

use serde_json::Value;

use super::{binding, events_rule, named, role, rule, service_account};

const PREFIX: &str = "system:controller:";
const STORAGE: &str = "storage.k8s.io";
const CERTS: &str = "certificates.k8s.io";
const NETWORKING: &str = "networking.k8s.io";
const GLR: &[&str] = &["get", "list", "watch"];
const EXT_APPS: &[&str] = &["extensions", "apps"];

/// The controllers and their rules, by controller name.
pub(super) fn controllers() -> Vec<(&'static str, Vec<Value>)> {
    vec![
        (
            "attachdetach-controller",
            vec![
                rule(
                    &["list", "watch"],
                    &[""],
                    &["persistentvolumes", "persistentvolumeclaims"],
                ),
                rule(GLR, &[""], &["nodes"]),
                rule(&["patch", "update"], &[""], &["nodes/status"]),
                rule(&["list", "watch"], &[""], &["pods"]),
                events_rule(),
                rule(
                    &["get", "create", "delete", "list", "watch"],
                    &[STORAGE],
                    &["volumeattachments"],
                ),
                rule(GLR, &[STORAGE], &["csidrivers"]),
                rule(GLR, &[STORAGE], &["csinodes"]),
            ],
        ),
        (
            "clusterrole-aggregation-controller",
            vec![rule(
                &["escalate", "get", "list", "watch", "update", "patch"],
                &["rbac.authorization.k8s.io"],
                &["clusterroles"],
            )],
        ),
        (
            "cronjob-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &["batch"],
                    &["cronjobs"],
                ),
                rule(
                    &[
                        "get", "list", "watch", "create", "update", "delete", "patch",
                    ],
                    &["batch"],
                    &["jobs"],
                ),
                rule(&["update"], &["batch"], &["cronjobs/status"]),
                rule(&["update"], &["batch"], &["cronjobs/finalizers"]),
                rule(&["list", "watch", "delete"], &[""], &["pods"]),
                events_rule(),
            ],
        ),
        (
            "daemon-set-controller",
            vec![
                rule(GLR, EXT_APPS, &["daemonsets"]),
                rule(&["update"], EXT_APPS, &["daemonsets/status"]),
                rule(&["update"], EXT_APPS, &["daemonsets/finalizers"]),
                rule(&["list", "watch"], &[""], &["nodes"]),
                rule(
                    &["list", "watch", "create", "delete", "patch"],
                    &[""],
                    &["pods"],
                ),
                rule(&["create"], &[""], &["pods/binding"]),
                rule(
                    &[
                        "get", "list", "watch", "create", "delete", "update", "patch",
                    ],
                    &["apps"],
                    &["controllerrevisions"],
                ),
                events_rule(),
            ],
        ),
        (
            "deployment-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    EXT_APPS,
                    &["deployments"],
                ),
                rule(&["update"], EXT_APPS, &["deployments/status"]),
                rule(&["update"], EXT_APPS, &["deployments/finalizers"]),
                rule(
                    &[
                        "get", "list", "watch", "create", "update", "patch", "delete",
                    ],
                    EXT_APPS,
                    &["replicasets"],
                ),
                rule(&["get", "list", "watch", "update"], &[""], &["pods"]),
                events_rule(),
            ],
        ),
        (
            "disruption-controller",
            vec![
                rule(GLR, EXT_APPS, &["deployments"]),
                rule(GLR, EXT_APPS, &["replicasets"]),
                rule(GLR, &[""], &["replicationcontrollers"]),
                rule(GLR, &["policy"], &["poddisruptionbudgets"]),
                rule(GLR, &["apps"], &["statefulsets"]),
                rule(&["update"], &["policy"], &["poddisruptionbudgets/status"]),
                rule(&["patch", "update"], &[""], &["pods/status"]),
                rule(&["get"], &["*"], &["*/scale"]),
                events_rule(),
            ],
        ),
        (
            "endpoint-controller",
            vec![
                rule(GLR, &[""], &["services", "pods"]),
                rule(
                    &["get", "list", "watch", "create", "update", "delete"],
                    &[""],
                    &["endpoints"],
                ),
                rule(&["create"], &[""], &["endpoints/restricted"]),
                events_rule(),
            ],
        ),
        (
            "endpointslice-controller",
            vec![
                rule(GLR, &[""], &["services", "pods", "nodes"]),
                rule(&["update"], &[""], &["services/finalizers"]),
                rule(
                    &["get", "list", "watch", "create", "update", "delete"],
                    &["discovery.k8s.io"],
                    &["endpointslices"],
                ),
                events_rule(),
            ],
        ),
        (
            "endpointslicemirroring-controller",
            vec![
                rule(GLR, &[""], &["services", "endpoints"]),
                rule(&["update"], &[""], &["services/finalizers"]),
                rule(&["update"], &[""], &["endpoints/finalizers"]),
                rule(
                    &["get", "list", "watch", "create", "update", "delete"],
                    &["discovery.k8s.io"],
                    &["endpointslices"],
                ),
                events_rule(),
            ],
        ),
        (
            "expand-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update", "patch"],
                    &[""],
                    &["persistentvolumes"],
                ),
                rule(
                    &["update", "patch"],
                    &[""],
                    &["persistentvolumeclaims/status"],
                ),
                rule(GLR, &[""], &["persistentvolumeclaims"]),
                events_rule(),
                // The in-tree Portworx volume plugin.
                rule(&["get"], &[""], &["services"]),
            ],
        ),
        (
            "ephemeral-volume-controller",
            vec![
                rule(GLR, &[""], &["pods"]),
                rule(&["update"], &[""], &["pods/finalizers"]),
                rule(
                    &["get", "list", "watch", "create"],
                    &[""],
                    &["persistentvolumeclaims"],
                ),
                events_rule(),
            ],
        ),
        (
            "generic-garbage-collector",
            vec![
                rule(
                    &["get", "list", "watch", "patch", "update", "delete"],
                    &["*"],
                    &["*"],
                ),
                events_rule(),
            ],
        ),
        (
            "horizontal-pod-autoscaler",
            vec![
                rule(GLR, &["autoscaling"], &["horizontalpodautoscalers"]),
                rule(
                    &["update"],
                    &["autoscaling"],
                    &["horizontalpodautoscalers/status"],
                ),
                rule(&["get", "update"], &["*"], &["*/scale"]),
                rule(&["list", "watch"], &[""], &["pods"]),
                rule(&["list", "watch"], &["metrics.k8s.io"], &["pods"]),
                rule(GLR, &["custom.metrics.k8s.io"], &["*"]),
                rule(GLR, &["external.metrics.k8s.io"], &["*"]),
                events_rule(),
            ],
        ),
        (
            "job-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update", "patch"],
                    &["batch"],
                    &["jobs"],
                ),
                rule(&["update"], &["batch"], &["jobs/status"]),
                rule(&["update"], &["batch"], &["jobs/finalizers"]),
                rule(
                    &["list", "watch", "create", "delete", "patch"],
                    &[""],
                    &["pods"],
                ),
                events_rule(),
            ],
        ),
        (
            "namespace-controller",
            vec![
                rule(&["get", "list", "watch", "delete"], &[""], &["namespaces"]),
                rule(
                    &["update"],
                    &[""],
                    &["namespaces/finalize", "namespaces/status"],
                ),
                rule(
                    &["get", "list", "watch", "delete", "deletecollection"],
                    &["*"],
                    &["*"],
                ),
            ],
        ),
        (
            "node-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update", "delete", "patch"],
                    &[""],
                    &["nodes"],
                ),
                rule(&["patch", "update"], &[""], &["nodes/status"]),
                rule(&["patch", "update"], &[""], &["pods/status"]),
                rule(&["list", "watch", "get", "delete"], &[""], &["pods"]),
                events_rule(),
            ],
        ),
        (
            "persistent-volume-binder",
            vec![
                rule(
                    &["get", "list", "watch", "update", "create", "delete"],
                    &[""],
                    &["persistentvolumes"],
                ),
                rule(&["update"], &[""], &["persistentvolumes/status"]),
                rule(
                    &["get", "list", "watch", "update"],
                    &[""],
                    &["persistentvolumeclaims"],
                ),
                rule(&["update"], &[""], &["persistentvolumeclaims/status"]),
                rule(
                    &["list", "watch", "get", "create", "delete"],
                    &[""],
                    &["pods"],
                ),
                rule(GLR, &[STORAGE], &["storageclasses"]),
                rule(&["list", "watch"], &[""], &["nodes"]),
                events_rule(),
                // The recycler watches its pod's events.
                rule(&["watch"], &[""], &["events"]),
                // The in-tree Portworx volume plugin.
                rule(&["get"], &[""], &["services"]),
            ],
        ),
        (
            "pod-garbage-collector",
            vec![
                rule(&["list", "watch", "delete"], &[""], &["pods"]),
                rule(GLR, &[""], &["nodes"]),
                rule(&["patch"], &[""], &["pods/status"]),
            ],
        ),
        (
            "replicaset-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    EXT_APPS,
                    &["replicasets"],
                ),
                rule(&["update"], EXT_APPS, &["replicasets/status"]),
                rule(&["update"], EXT_APPS, &["replicasets/finalizers"]),
                rule(
                    &["list", "watch", "patch", "create", "delete"],
                    &[""],
                    &["pods"],
                ),
                events_rule(),
            ],
        ),
        (
            "replication-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &[""],
                    &["replicationcontrollers"],
                ),
                rule(&["update"], &[""], &["replicationcontrollers/status"]),
                rule(&["update"], &[""], &["replicationcontrollers/finalizers"]),
                rule(
                    &["list", "watch", "patch", "create", "delete"],
                    &[""],
                    &["pods"],
                ),
                events_rule(),
            ],
        ),
        (
            "resourcequota-controller",
            vec![
                rule(&["list", "watch"], &["*"], &["*"]),
                rule(&["update"], &[""], &["resourcequotas/status"]),
                events_rule(),
            ],
        ),
        (
            "route-controller",
            vec![
                rule(&["list", "watch"], &[""], &["nodes"]),
                rule(&["patch"], &[""], &["nodes/status"]),
                events_rule(),
            ],
        ),
        (
            "service-account-controller",
            vec![
                rule(&["create"], &[""], &["serviceaccounts"]),
                events_rule(),
            ],
        ),
        (
            "service-controller",
            vec![
                rule(GLR, &[""], &["services"]),
                rule(&["patch", "update"], &[""], &["services/status"]),
                rule(&["list", "watch"], &[""], &["nodes"]),
                events_rule(),
            ],
        ),
        (
            "service-cidrs-controller",
            vec![
                rule(
                    &["get", "list", "watch", "patch", "update"],
                    &[NETWORKING],
                    &["servicecidrs"],
                ),
                rule(
                    &["patch", "update"],
                    &[NETWORKING],
                    &["servicecidrs/finalizers"],
                ),
                rule(
                    &["patch", "update"],
                    &[NETWORKING],
                    &["servicecidrs/status"],
                ),
                rule(GLR, &[NETWORKING], &["ipaddresses"]),
                events_rule(),
            ],
        ),
        (
            "statefulset-controller",
            vec![
                rule(&["list", "watch"], &[""], &["pods"]),
                rule(GLR, &["apps"], &["statefulsets"]),
                rule(&["update"], &["apps"], &["statefulsets/status"]),
                rule(&["update"], &["apps"], &["statefulsets/finalizers"]),
                rule(
                    &["get", "create", "delete", "update", "patch"],
                    &[""],
                    &["pods"],
                ),
                rule(
                    &[
                        "get", "create", "delete", "update", "patch", "list", "watch",
                    ],
                    &["apps"],
                    &["controllerrevisions"],
                ),
                rule(
                    &["get", "create", "list", "watch"],
                    &[""],
                    &["persistentvolumeclaims"],
                ),
                rule(&["update", "delete"], &[""], &["persistentvolumeclaims"]),
                rule(&["update"], &[""], &["pods/finalizers"]),
                events_rule(),
            ],
        ),
        (
            "ttl-controller",
            vec![
                rule(&["update", "patch", "list", "watch"], &[""], &["nodes"]),
                events_rule(),
            ],
        ),
        (
            "certificate-controller",
            vec![
                rule(
                    &["get", "list", "watch", "delete"],
                    &[CERTS],
                    &["certificatesigningrequests"],
                ),
                rule(
                    &["update"],
                    &[CERTS],
                    &[
                        "certificatesigningrequests/status",
                        "certificatesigningrequests/approval",
                    ],
                ),
                named(
                    &["approve"],
                    &[CERTS],
                    &["signers"],
                    &["kubernetes.io/kube-apiserver-client-kubelet"],
                ),
                named(
                    &["sign"],
                    &[CERTS],
                    &["signers"],
                    &[
                        "kubernetes.io/legacy-unknown",
                        "kubernetes.io/kube-apiserver-client",
                        "kubernetes.io/kube-apiserver-client-kubelet",
                        "kubernetes.io/kubelet-serving",
                    ],
                ),
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                ),
                events_rule(),
            ],
        ),
        (
            "pvc-protection-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &[""],
                    &["persistentvolumeclaims"],
                ),
                rule(GLR, &[""], &["pods"]),
                events_rule(),
            ],
        ),
        (
            "pv-protection-controller",
            vec![
                rule(
                    &["get", "list", "watch", "update"],
                    &[""],
                    &["persistentvolumes"],
                ),
                events_rule(),
            ],
        ),
        (
            "ttl-after-finished-controller",
            vec![
                rule(&["get", "list", "watch", "delete"], &["batch"], &["jobs"]),
                events_rule(),
            ],
        ),
        (
            "root-ca-cert-publisher",
            vec![
                rule(&["create", "update"], &[""], &["configmaps"]),
                events_rule(),
            ],
        ),
        (
            "validatingadmissionpolicy-status-controller",
            vec![
                rule(
                    GLR,
                    &["admissionregistration.k8s.io"],
                    &["validatingadmissionpolicies"],
                ),
                rule(
                    &["get", "patch", "update"],
                    &["admissionregistration.k8s.io"],
                    &["validatingadmissionpolicies/status"],
                ),
                events_rule(),
            ],
        ),
        (
            "legacy-service-account-token-cleaner",
            vec![
                named(
                    &["get"],
                    &[""],
                    &["configmaps"],
                    &["kube-apiserver-legacy-service-account-token-tracking"],
                ),
                rule(&["patch", "delete"], &[""], &["secrets"]),
            ],
        ),
        (
            "selinux-warning-controller",
            vec![
                events_rule(),
                rule(GLR, &[""], &["persistentvolumes"]),
                rule(GLR, &[""], &["persistentvolumeclaims"]),
                rule(GLR, &[""], &["pods"]),
                rule(GLR, &[STORAGE], &["csidrivers"]),
            ],
        ),
    ]
}

pub(super) fn roles() -> Vec<Value> {
    controllers()
        .into_iter()
        .map(|(name, rules)| role(&format!("{PREFIX}{name}"), &[], rules))
        .collect()
}

pub(super) fn bindings() -> Vec<Value> {
    controllers()
        .into_iter()
        .map(|(name, _)| {
            binding(
                &format!("{PREFIX}{name}"),
                vec![service_account("kube-system", name)],
            )
        })
        .collect()
}
