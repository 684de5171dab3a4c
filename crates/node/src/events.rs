//! Where the pod worker's and the prober's events go: the [`Events`]
//! trait, with the cluster's event recorder behind it in the agent and a
//! list in tests.
//! Reasons and messages are the kubelet's (users grep for them).

use k8s_openapi::api::core::v1::Pod;
pub use skiff_client::recorder::EventType;

/// A sink for events about pods.
pub trait Events: Send + Sync + std::fmt::Debug {
    fn event(&self, pod: &Pod, type_: EventType, reason: &str, message: &str);
}

impl Events for skiff_client::recorder::Recorder {
    fn event(&self, pod: &Pod, type_: EventType, reason: &str, message: &str) {
        self.record(pod, type_, reason, "", message);
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
}
