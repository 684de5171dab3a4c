//! Binding: POST pods/NAME/binding, one spawned task per pod, so the loop
//! schedules the next pod while the API call is in flight.
//!
//! This module owns the binding request and [`BindOutcome`], the message a
//! bind task sends back to the scheduling loop (which then confirms or
//! forgets the assumed pod and requeues on failure). After reporting, the
//! task records the `Scheduled` event, or a `FailedScheduling` one for a
//! rejected binding. It does not touch the queue or the cache itself.

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::mpsc;

use crate::framework::pod_key;
use crate::recorder::{EventType, Recorder};

/// Errors binding a pod.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// The API server refused or the request failed.
    #[error("binding pod {pod} to node {node}")]
    Post {
        /// `namespace/name`.
        pod: String,
        /// The chosen node.
        node: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

impl BindError {
    /// What the FailedScheduling event says.
    pub fn event_message(&self) -> String {
        match self {
            Self::Post { source, .. } => match source {
                kube::Error::Api(s) => format!("Binding rejected: {}", s.message),
                other => format!("Binding rejected: {other}"),
            },
        }
    }
}

/// `Result` with [`BindError`].
pub type Result<T, E = BindError> = std::result::Result<T, E>;

/// What a bind task reports to the loop.
#[derive(Debug)]
pub struct BindOutcome {
    /// `namespace/name`.
    pub key: String,
    /// The chosen node.
    pub node: String,
    /// Whether the binding was accepted.
    pub result: Result<()>,
}

/// POSTs the binding of `pod` to `node`.
pub async fn bind(client: Client, pod: &Pod, node: &str) -> Result<()> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            uid: pod.metadata.uid.clone(),
            ..Default::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_string()),
            ..Default::default()
        },
    };
    let api: Api<Pod> = Api::namespaced(client, namespace);
    api.create_subresource::<_, serde_json::Value>(
        "binding",
        name,
        &PostParams::default(),
        &binding,
    )
    .await
    .map(|_| ())
    .map_err(|source| BindError::Post {
        pod: pod_key(pod),
        node: node.to_string(),
        source,
    })
}

/// Binds, reports the outcome on `outcomes`, then records the event.
pub async fn bind_and_report(
    client: Client,
    recorder: Recorder,
    pod: std::sync::Arc<Pod>,
    node: String,
    outcomes: mpsc::UnboundedSender<BindOutcome>,
) {
    let key = pod_key(&pod);
    let result = bind(client, &pod, &node).await;
    let event = match &result {
        Ok(()) => (
            EventType::Normal,
            "Scheduled",
            "Binding",
            format!("Successfully assigned {key} to {node}"),
        ),
        Err(e) => {
            tracing::info!(pod = %key, %node, error = %e, "binding failed");
            (
                EventType::Warning,
                "FailedScheduling",
                "Scheduling",
                e.event_message(),
            )
        }
    };
    // The loop may be gone (lost leadership): nothing left to tell.
    let _ = outcomes.send(BindOutcome {
        key: key.clone(),
        node,
        result,
    });
    let (type_, reason, action, message) = event;
    recorder.record(&pod, type_, reason, action, &message);
}
