//! Server-side printing of `meta.k8s.io/v1` `Table`s, as kube-apiserver
//! does for `kubectl get`.
//!
//! This module owns the column definitions and row cells of every printed
//! kind (Pod, Node, Namespace, Event, ConfigMap, Secret, Service,
//! Endpoints, ServiceAccount, Lease, Deployment, ReplicaSet, Job,
//! PersistentVolume, PersistentVolumeClaim and StorageClass, plus
//! StatefulSet, DaemonSet and CronJob), the generic fallback table for
//! other kinds, the pod READY/STATUS/RESTARTS summaries and apimachinery's
//! `HumanDuration` used for AGE. It follows kubernetes 1.33
//! `pkg/printers/internalversion`; the apiserver always renders the wide
//! cell set and kubectl hides priority-1 columns unless `-o wide`.
//!
//! Objects are `serde_json::Value`s in wire form. Building the `Table`
//! envelope (list metadata, `object` of each row, `includeObject`) is the
//! caller's job.

mod cluster;
mod columns;
mod pod;
mod policy;
mod printers;
mod rbac;
mod storage;
mod util;
mod workloads;

#[cfg(test)]
mod pod_tests;
#[cfg(test)]
mod printer_tests;
#[cfg(test)]
mod storage_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod workload_tests;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Value};

pub use pod::{pod_ready, pod_restarts, pod_status};
pub use util::human_duration;

/// The `columnDefinitions` for `kind` (e.g. `"Pod"`): objects with `name`,
/// `type`, `format` (`"name"` on the name column, else `""`),
/// `description` and `priority` (1 for `-o wide` columns). Kinds without a
/// printer get the apiserver's default `Name` + `Created At` columns.
pub fn column_definitions(kind: &str) -> Vec<Value> {
    columns::definitions(kind)
}

/// Whether `kind` has a dedicated printer rather than the default table.
pub fn has_printer(kind: &str) -> bool {
    columns::has_printer(kind)
}

/// The `cells` of one object's row, matching [`column_definitions`] for
/// the same kind; durations (AGE, LAST SEEN, …) are measured up to `now`.
pub fn row_cells(kind: &str, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    match kind {
        "Pod" => pod::cells(obj, now),
        "Node" => printers::node(obj, now),
        "Namespace" => printers::namespace(obj, now),
        "Event" => printers::event(obj, now),
        "ConfigMap" => printers::config_map(obj, now),
        "Secret" => printers::secret(obj, now),
        "Service" => printers::service(obj, now),
        "Endpoints" => printers::endpoints(obj, now),
        "ServiceAccount" => printers::service_account(obj, now),
        "Lease" => printers::lease(obj, now),
        "Deployment" => printers::deployment(obj, now),
        "ReplicaSet" => printers::replica_set(obj, now),
        "Job" => printers::job(obj, now),
        "StatefulSet" => printers::stateful_set(obj, now),
        "DaemonSet" => printers::daemon_set(obj, now),
        "CronJob" => printers::cron_job(obj, now),
        "PersistentVolume" => storage::persistent_volume(obj, now),
        "PersistentVolumeClaim" => storage::persistent_volume_claim(obj, now),
        "StorageClass" => storage::storage_class(obj, now),
        "PriorityClass" => policy::priority_class(obj, now),
        "ResourceQuota" => policy::resource_quota(obj, now),
        "LimitRange" => policy::limit_range(obj, now),
        "PodDisruptionBudget" => policy::pod_disruption_budget(obj, now),
        "ServiceCIDR" => policy::service_cidr(obj, now),
        "IPAddress" => policy::ip_address(obj, now),
        "Ingress" => cluster::ingress(obj, now),
        "IngressClass" => cluster::ingress_class(obj, now),
        "NetworkPolicy" => cluster::network_policy(obj, now),
        "EndpointSlice" => cluster::endpoint_slice(obj, now),
        "CSIDriver" => cluster::csi_driver(obj, now),
        "CSINode" => cluster::csi_node(obj, now),
        "VolumeAttachment" => cluster::volume_attachment(obj, now),
        "CSIStorageCapacity" => cluster::csi_storage_capacity(obj, now),
        "RuntimeClass" => cluster::runtime_class(obj, now),
        "CertificateSigningRequest" => cluster::certificate_signing_request(obj, now),
        "FlowSchema" => cluster::flow_schema(obj, now),
        "PriorityLevelConfiguration" => cluster::priority_level_configuration(obj, now),
        "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration" => {
            cluster::webhook_configuration(obj, now)
        }
        "ValidatingAdmissionPolicy" => cluster::validating_admission_policy(obj, now),
        "ValidatingAdmissionPolicyBinding" => {
            cluster::validating_admission_policy_binding(obj, now)
        }
        "ReplicationController" => workloads::replication_controller(obj, now),
        "PodTemplate" => workloads::pod_template(obj, now),
        "ControllerRevision" => workloads::controller_revision(obj, now),
        "HorizontalPodAutoscaler" => workloads::horizontal_pod_autoscaler(obj, now),
        "ComponentStatus" => workloads::component_status(obj, now),
        "Role" | "ClusterRole" => rbac::role(obj, now),
        "RoleBinding" | "ClusterRoleBinding" => rbac::role_binding(obj, now),
        "APIService" => rbac::api_service(obj, now),
        _ => default_cells(obj),
    }
}

/// The row `conditions` upstream attaches: finished pods are marked
/// `{"type":"Completed","status":"True",…}`; empty for everything else.
pub fn row_conditions(kind: &str, obj: &Value) -> Vec<Value> {
    match kind {
        "Pod" => pod::row_conditions(obj),
        _ => Vec::new(),
    }
}

/// The default convertor's cells: the name and the creation time in
/// RFC 3339 (UTC, whole seconds; Go's zero time when unset).
fn default_cells(obj: &Value) -> Vec<Value> {
    let created = util::time_at(obj, &["metadata", "creationTimestamp"]).map_or_else(
        || "0001-01-01T00:00:00Z".to_string(),
        |t| t.to_rfc3339_opts(SecondsFormat::Secs, true),
    );
    vec![json!(util::name(obj)), json!(created)]
}
