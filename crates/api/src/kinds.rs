//! Which built-in kinds share an object layout. Strategic merge patch
//! (`patch::merge_keys`) and server-side apply (`apply::schema`) each keep
//! their own per-field tables (their rules differ), but route kinds to
//! them through this one list, so a kind added here reaches both.

/// The object layouts that have tables of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    Pod,
    PodTemplate,
    /// Deployment, ReplicaSet, StatefulSet, DaemonSet, Job,
    /// ReplicationController: a pod template under `spec.template`.
    Workload,
    CronJob,
    Node,
    Service,
    /// Kinds whose only rule beyond metadata is `status.conditions`.
    WithStatusConditions,
    PodDisruptionBudget,
    ServiceAccount,
    ComponentStatus,
    WebhookConfiguration,
    ValidatingAdmissionPolicy,
    CsiNode,
    RoleBinding,
    NetworkPolicy,
    /// Another built-in kind: only the `metadata` rules.
    Plain,
}

/// Built-in kinds with only the `metadata` rules.
const PLAIN_KINDS: &[&str] = &[
    "APIService",
    "Binding",
    "ClusterRole",
    "ConfigMap",
    "ControllerRevision",
    "CSIDriver",
    "CSIStorageCapacity",
    "CustomResourceDefinition",
    "EndpointSlice",
    "Endpoints",
    "Event",
    "Eviction",
    "IngressClass",
    "IPAddress",
    "Lease",
    "LimitRange",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
    "PersistentVolume",
    "PriorityClass",
    "ResourceQuota",
    "Role",
    "RuntimeClass",
    "Scale",
    "Secret",
    "StorageClass",
    "ValidatingAdmissionPolicyBinding",
    "VolumeAttachment",
    "Ingress",
];

/// The layout of a built-in `kind`; `None` for kinds that are not built in
/// (custom resources).
pub(crate) fn layout(kind: &str) -> Option<Layout> {
    Some(match kind {
        "Pod" => Layout::Pod,
        "PodTemplate" => Layout::PodTemplate,
        "Deployment"
        | "ReplicaSet"
        | "StatefulSet"
        | "DaemonSet"
        | "Job"
        | "ReplicationController" => Layout::Workload,
        "CronJob" => Layout::CronJob,
        "Node" => Layout::Node,
        "Service" => Layout::Service,
        "Namespace"
        | "PersistentVolumeClaim"
        | "HorizontalPodAutoscaler"
        | "CertificateSigningRequest"
        | "FlowSchema"
        | "PriorityLevelConfiguration"
        | "ServiceCIDR" => Layout::WithStatusConditions,
        "PodDisruptionBudget" => Layout::PodDisruptionBudget,
        "ServiceAccount" => Layout::ServiceAccount,
        "ComponentStatus" => Layout::ComponentStatus,
        "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration" => {
            Layout::WebhookConfiguration
        }
        "ValidatingAdmissionPolicy" => Layout::ValidatingAdmissionPolicy,
        "CSINode" => Layout::CsiNode,
        "RoleBinding" | "ClusterRoleBinding" => Layout::RoleBinding,
        "NetworkPolicy" => Layout::NetworkPolicy,
        other if PLAIN_KINDS.contains(&other) => Layout::Plain,
        _ => return None,
    })
}

/// Whether `kind` is a built-in kind with a known object layout (patch
/// merge keys and server-side apply schemas reach it); the API server's
/// catalog test checks that every kind it serves is one.
pub fn has_layout(kind: &str) -> bool {
    layout(kind).is_some()
}
