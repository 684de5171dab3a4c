//! Pure helpers over a pod's spec and metadata that several modules read
//! the same way: how a pod is named in messages ([`pod_ref`]), its grace
//! period, restart policy, init containers and sidecars, ephemeral
//! containers as containers, a container's spec hash, and resource
//! quantities.
//!
//! Everything here is a pure function of the Pod (or one container): no
//! I/O, no runtime state, nothing about what the agent does with them.

use k8s_openapi::api::core::v1::{Container as SpecContainer, Pod};

/// `format.Pod`: `name_namespace(uid)`.
pub fn pod_ref(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.uid.as_deref().unwrap_or_default()
    )
}

/// Whether the pod uses the node's network namespace.
pub fn host_network(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false)
}

/// The grace period the pod's containers get when it is deleted.
pub fn grace_period(pod: &Pod) -> i64 {
    pod.metadata
        .deletion_grace_period_seconds
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
        })
        .unwrap_or(30)
        .max(0)
}

/// A container's requests or limits.
pub type Resources =
    std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>;

/// A resource's quantity, parsed with `parse` (milli-units or whole units).
fn quantity(
    resources: Option<&Resources>,
    name: &str,
    parse: fn(&str) -> skiff_api::quantity::Result<i64>,
) -> Option<i64> {
    resources?.get(name).and_then(|q| parse(&q.0).ok())
}

/// A resource in milli-units (CPU in millicores).
pub fn quantity_milli(resources: Option<&Resources>, name: &str) -> Option<i64> {
    quantity(resources, name, skiff_api::quantity::parse_milli)
}

/// A resource in whole units (bytes).
pub fn quantity_value(resources: Option<&Resources>, name: &str) -> Option<i64> {
    quantity(resources, name, skiff_api::quantity::parse_value)
}

/// The pod's restart policy, `Always` when unset.
pub fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}

/// The pod's init containers (sidecars among them).
pub fn init_containers(pod: &Pod) -> &[SpecContainer] {
    pod.spec
        .as_ref()
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or(&[])
}

/// The pod's ephemeral containers as containers (their common part,
/// which has the same fields: upstream converts them the same way), in
/// spec order; `targetContainerName` is read with [`ephemeral_target`].
pub fn ephemeral_containers(pod: &Pod) -> Vec<SpecContainer> {
    pod.spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_deref())
        .unwrap_or(&[])
        .iter()
        .filter_map(|ec| {
            let mut v = serde_json::to_value(ec).ok()?;
            if let Some(o) = v.as_object_mut() {
                o.remove("targetContainerName");
            }
            serde_json::from_value(v).ok()
        })
        .collect()
}

/// The container whose process namespace ephemeral container `name`
/// joins (its `targetContainerName`), if it names one.
pub fn ephemeral_target<'a>(pod: &'a Pod, name: &str) -> Option<&'a str> {
    pod.spec
        .as_ref()?
        .ephemeral_containers
        .as_ref()?
        .iter()
        .find(|ec| ec.name == name)?
        .target_container_name
        .as_deref()
        .filter(|t| !t.is_empty())
}

/// A sidecar: an init container with restartPolicy Always, which keeps
/// running beside the main containers.
pub fn is_sidecar(c: &SpecContainer) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// A stable hash of the parts of a container's spec that need a new
/// container when they change (as upstream's container hash).
pub fn container_hash(c: &SpecContainer) -> String {
    let mut c = c.clone();
    // Fields the kubelet may change in place (resources with in-place
    // resize) stay out of the hash.
    c.resources = None;
    c.resize_policy = None;
    let text = serde_json::to_string(&c).unwrap_or_default();
    // FNV-1a, 64 bits: stable across builds, unlike std's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}
