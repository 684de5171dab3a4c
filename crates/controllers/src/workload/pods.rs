//! Facts about pods that the workload controllers read the same way as
//! upstream's `podutil`: active, ready (and since when), available after
//! `minReadySeconds`; and a pod built from an owner's template.
//!
//! Pure functions; no I/O.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;

/// Running or about to: not Succeeded or Failed, and not being deleted
/// (upstream's `IsPodActive`).
pub fn is_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(phase, Some("Succeeded") | Some("Failed"))
        && pod.metadata.deletion_timestamp.is_none()
}

/// The phase, `Pending` when not reported yet.
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// When the `Ready` condition last became true, if it is true.
pub fn ready_since(pod: &Pod) -> Option<Option<Timestamp>> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .map(|c| c.last_transition_time.as_ref().map(|t| t.0))
}

/// The `Ready` condition is true.
pub fn is_ready(pod: &Pod) -> bool {
    ready_since(pod).is_some()
}

/// Ready for at least `min_ready_seconds` at `now` (upstream's
/// `IsPodAvailable`: with no transition time, ready counts as available).
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    match ready_since(pod) {
        None => false,
        Some(_) if min_ready_seconds <= 0 => true,
        Some(None) => true,
        Some(Some(since)) => {
            let min = Duration::from_secs(min_ready_seconds.unsigned_abs().into());
            now.duration_since(since).unsigned_abs() >= min && since <= now
        }
    }
}

/// When a ready pod with `min_ready_seconds` becomes available, counted
/// from `now` (`None`: already is, or is not ready).
pub fn available_in(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> Option<Duration> {
    let Some(Some(since)) = ready_since(pod) else {
        return None;
    };
    if min_ready_seconds <= 0 || is_available(pod, min_ready_seconds, now) {
        return None;
    }
    let min = Duration::from_secs(min_ready_seconds.unsigned_abs().into());
    let waited = now.duration_since(since).unsigned_abs();
    Some(min.saturating_sub(waited))
}

/// The most restarts of any of its containers.
pub fn max_restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).max().unwrap_or(0))
        .unwrap_or(0)
}

/// A pod from `template` in `namespace`, named by the server from
/// `generate_name` (upstream's `GetPodFromTemplate`: the template's
/// labels, annotations and finalizers, the owner's controller reference).
pub fn from_template(
    template: &PodTemplateSpec,
    namespace: &str,
    generate_name: &str,
    owner: Option<OwnerReference>,
) -> Pod {
    let meta = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(generate_name.to_string()),
            namespace: Some(namespace.to_string()),
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: owner.map(|o| vec![o]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn ready_at(t: Timestamp) -> Pod {
        Pod {
            status: Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(t)),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn available_after_min_ready_seconds() {
        let now = Timestamp::now();
        let pod = ready_at(now - Duration::from_secs(5));
        assert!(is_ready(&pod));
        assert!(is_available(&pod, 0, now));
        assert!(is_available(&pod, 5, now));
        assert!(!is_available(&pod, 10, now));
        let left = available_in(&pod, 10, now).unwrap();
        assert_eq!(left, Duration::from_secs(5));
        assert_eq!(available_in(&pod, 5, now), None);
        assert!(!is_available(&Pod::default(), 0, now));
    }

    #[test]
    fn finished_or_deleting_pods_are_not_active() {
        let mut pod = ready_at(Timestamp::now());
        assert!(is_active(&pod));
        pod.status.as_mut().unwrap().phase = Some("Succeeded".into());
        assert!(!is_active(&pod));
        let mut pod = Pod::default();
        assert!(is_active(&pod));
        assert_eq!(phase(&pod), "Pending");
        pod.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        assert!(!is_active(&pod));
    }
}
