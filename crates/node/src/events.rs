//! Where the pod worker's and the prober's events go: the [`Events`]
//! trait, with the cluster's event recorder behind it in the agent and a
//! list in tests.
//! Reasons and messages are the kubelet's (users grep for them); an event
//! about one container names it in `involvedObject.fieldPath` as the
//! kubelet's do ([`field_path`]: `spec.containers{c}`,
//! `spec.initContainers{c}`, `spec.ephemeralContainers{c}`).

use k8s_openapi::api::core::v1::Pod;
pub use skiff_client::recorder::EventType;

/// A sink for events about pods.
pub trait Events: Send + Sync + std::fmt::Debug {
    fn event(&self, pod: &Pod, type_: EventType, reason: &str, message: &str);

    /// An event about container `container` of `pod` (upstream's
    /// `recordContainerEvent`).
    fn container_event(
        &self,
        pod: &Pod,
        container: &str,
        type_: EventType,
        reason: &str,
        message: &str,
    ) {
        let _ = container;
        self.event(pod, type_, reason, message);
    }

    /// An event carrying `annotations` (the startup timeline's JSON).
    fn annotated_event(
        &self,
        pod: &Pod,
        type_: EventType,
        reason: &str,
        message: &str,
        annotations: &[(&str, &str)],
    ) {
        let _ = annotations;
        self.event(pod, type_, reason, message);
    }
}

/// Where container `name` stands in `pod`'s spec, as the kubelet's
/// `fieldPath` names it (`spec.containers[2]` for a container without a
/// name); `None` if the spec has no such container.
pub fn field_path(pod: &Pod, name: &str) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let lists = [
        (
            "containers",
            spec.containers
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>(),
        ),
        (
            "initContainers",
            spec.init_containers
                .iter()
                .flatten()
                .map(|c| c.name.as_str())
                .collect(),
        ),
        (
            "ephemeralContainers",
            spec.ephemeral_containers
                .iter()
                .flatten()
                .map(|c| c.name.as_str())
                .collect(),
        ),
    ];
    lists.iter().find_map(|(list, names)| {
        let at = names.iter().position(|n| *n == name)?;
        Some(if name.is_empty() {
            format!("spec.{list}[{at}]")
        } else {
            format!("spec.{list}{{{name}}}")
        })
    })
}

impl Events for skiff_client::recorder::Recorder {
    fn event(&self, pod: &Pod, type_: EventType, reason: &str, message: &str) {
        self.record(pod, type_, reason, "", message);
    }

    fn container_event(
        &self,
        pod: &Pod,
        container: &str,
        type_: EventType,
        reason: &str,
        message: &str,
    ) {
        let mut about = skiff_client::recorder::reference_to(pod);
        // Upstream names a container it cannot find "implicitly required
        // container NAME".
        about.field_path = Some(
            field_path(pod, container)
                .unwrap_or_else(|| format!("implicitly required container {container}")),
        );
        self.record_for(&about, type_, reason, "", message);
    }

    fn annotated_event(
        &self,
        pod: &Pod,
        type_: EventType,
        reason: &str,
        message: &str,
        annotations: &[(&str, &str)],
    ) {
        let about = skiff_client::recorder::reference_to(pod);
        self.record_annotated(&about, type_, reason, "", message, annotations);
    }
}

/// Events kept in memory, for tests.
#[derive(Debug, Default)]
pub struct Recorded(pub std::sync::Mutex<Vec<(String, String)>>);

impl Events for Recorded {
    fn event(&self, _pod: &Pod, _type: EventType, reason: &str, message: &str) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((reason.to_string(), message.to_string()));
    }
}

impl Recorded {
    /// The reasons so far, in order.
    pub fn reasons(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(r, _)| r.clone())
            .collect()
    }

    /// The messages of the events with `reason`, in order.
    pub fn messages(&self, reason: &str) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(r, _)| r == reason)
            .map(|(_, m)| m.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_paths_are_the_kubelets() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "containers": [{"name": "app"}, {"name": ""}],
                "initContainers": [{"name": "setup"}],
                "ephemeralContainers": [{"name": "debugger"}]
            }
        }))
        .unwrap();
        assert_eq!(
            field_path(&pod, "app").as_deref(),
            Some("spec.containers{app}")
        );
        assert_eq!(field_path(&pod, "").as_deref(), Some("spec.containers[1]"));
        assert_eq!(
            field_path(&pod, "setup").as_deref(),
            Some("spec.initContainers{setup}")
        );
        assert_eq!(
            field_path(&pod, "debugger").as_deref(),
            Some("spec.ephemeralContainers{debugger}")
        );
        assert_eq!(field_path(&pod, "missing"), None);
    }
}
