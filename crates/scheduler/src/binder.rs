//! Binding: POST pods/NAME/binding from a pool of bind tasks, so the loop
//! schedules the next pod while the API calls are in flight.
//!
//! This module owns [`Binder`] (the queue of pods to bind and up to
//! [`MAX_BINDS_IN_FLIGHT`] tasks working it), the binding request and
//! [`BindOutcome`], the message a bind task sends back to the scheduling
//! loop (which then confirms or forgets the assumed pod and requeues on
//! failure). After reporting, the task records the `Scheduled` event, or a
//! `FailedScheduling` one for a rejected binding. It does not touch the
//! queue or the cache itself.

use std::sync::Arc;

use futures::FutureExt;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::{mpsc, Mutex};
use tokio::task::JoinSet;

use crate::framework::pod_key;
use skiff_client::recorder::{EventType, Recorder};

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

/// Most bindings in flight at once. A binding in flight is a task holding
/// its request's state (kilobytes); a pod waiting for one of the tasks is
/// only its queue entry. This many lets the store commit many bindings
/// together, and kept a burst of 10,000 pods from holding ~90 MB of
/// request state in a separate scheduler process.
pub const MAX_BINDS_IN_FLIGHT: usize = 128;

/// The pods waiting to be bound, worked by a pool of bind tasks.
#[derive(Debug)]
pub struct Binder {
    queue: mpsc::UnboundedSender<(Arc<Pod>, String)>,
}

impl Binder {
    /// Starts the bind tasks in `tasks` (aborted with them); each outcome
    /// goes to `outcomes`, then the task records the event.
    pub fn start(
        tasks: &mut JoinSet<()>,
        client: &Client,
        recorder: &Recorder,
        outcomes: &mpsc::UnboundedSender<BindOutcome>,
    ) -> Self {
        let (queue, rx) = mpsc::unbounded_channel::<(Arc<Pod>, String)>();
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..MAX_BINDS_IN_FLIGHT {
            let (rx, client, recorder, outcomes) = (
                rx.clone(),
                client.clone(),
                recorder.clone(),
                outcomes.clone(),
            );
            tasks.spawn(async move {
                loop {
                    let next = rx.lock().await.recv().await;
                    let Some((pod, node)) = next else { return };
                    let key = pod_key(&pod);
                    let job = bind_and_report(&client, &recorder, pod, node, &outcomes);
                    // A panic loses this binding (as a task per pod did),
                    // not the worker.
                    if std::panic::AssertUnwindSafe(job)
                        .catch_unwind()
                        .await
                        .is_err()
                    {
                        tracing::error!(pod = %key, "binding panicked");
                    }
                }
            });
        }
        Self { queue }
    }

    /// Queues the binding of `pod` to `node`.
    pub fn bind(&self, pod: Arc<Pod>, node: String) {
        // Closed only when the term's tasks are gone: nothing left to do.
        let _ = self.queue.send((pod, node));
    }
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
async fn bind_and_report(
    client: &Client,
    recorder: &Recorder,
    pod: Arc<Pod>,
    node: String,
    outcomes: &mpsc::UnboundedSender<BindOutcome>,
) {
    let key = pod_key(&pod);
    let result = bind(client.clone(), &pod, &node).await;
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
