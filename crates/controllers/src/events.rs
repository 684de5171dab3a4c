//! core/v1 Events as kube-controller-manager's recorders write them: in
//! the involved object's namespace (`default` for cluster-scoped objects
//! such as Nodes and PersistentVolumes), named `<object>.<hex
//! nanoseconds>`, and a repeat of the same type, reason and message about
//! the same object counted on the event written before (client-go's
//! correlator) instead of a new one.
//!
//! This module owns only writing those events; skiff-client's recorder
//! takes pods only. It must not decide when an event is due.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Event, EventSource, Node, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client};

/// Where events about cluster-scoped objects go.
const CLUSTER_NAMESPACE: &str = "default";

/// Remembered events before the oldest are forgotten.
const MAX_REMEMBERED: usize = 4096;

/// An event write that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// POST failed.
    #[error("creating event {name}")]
    Create {
        /// The event's name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    kind: String,
    namespace: String,
    name: String,
    uid: String,
    type_: String,
    reason: String,
    message: String,
}

/// Writes events about any object from one component.
pub(crate) struct Events {
    client: Client,
    component: String,
    written: HashMap<Key, Event>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field("component", &self.component)
            .field("remembered", &self.written.len())
            .finish()
    }
}

impl Events {
    pub(crate) fn new(client: Client, component: &str) -> Self {
        Self {
            client,
            component: component.to_string(),
            written: HashMap::new(),
        }
    }

    /// Records `reason` with `message` about `regarding` (`type_` Normal
    /// or Warning), or counts a repeat of the same event.
    pub(crate) async fn record(
        &mut self,
        regarding: &ObjectReference,
        type_: &str,
        reason: &str,
        message: &str,
    ) -> Result<()> {
        let name = regarding.name.clone().unwrap_or_default();
        let namespace = regarding
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| CLUSTER_NAMESPACE.to_string());
        let key = Key {
            kind: regarding.kind.clone().unwrap_or_default(),
            namespace: namespace.clone(),
            name: name.clone(),
            uid: regarding.uid.clone().unwrap_or_default(),
            type_: type_.to_string(),
            reason: reason.to_string(),
            message: message.to_string(),
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let now = Time(Timestamp::now());
        if let Some(mut repeat) = self.written.remove(&key) {
            repeat.count = Some(repeat.count.unwrap_or(1).saturating_add(1));
            repeat.last_timestamp = Some(now.clone());
            // Events may be updated unconditionally, as upstream does.
            repeat.metadata.resource_version = None;
            let event_name = repeat.metadata.name.clone().unwrap_or_default();
            match api
                .replace(&event_name, &PostParams::default(), &repeat)
                .await
            {
                Ok(updated) => {
                    self.remember(key, updated);
                    return Ok(());
                }
                // Gone or changed: write a new one.
                Err(e) => {
                    tracing::debug!(event = %event_name, error = %e, "updating a repeated event")
                }
            }
        }
        let event = Event {
            metadata: ObjectMeta {
                name: Some(event_name(&name)),
                namespace: Some(namespace),
                ..Default::default()
            },
            involved_object: regarding.clone(),
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            type_: Some(type_.to_string()),
            source: Some(EventSource {
                component: Some(self.component.clone()),
                host: None,
            }),
            reporting_component: Some(self.component.clone()),
            reporting_instance: Some(String::new()),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            count: Some(1),
            ..Default::default()
        };
        let created = api
            .create(&PostParams::default(), &event)
            .await
            .map_err(|source| Error::Create {
                name: event.metadata.name.clone().unwrap_or_default(),
                source,
            })?;
        self.remember(key, created);
        Ok(())
    }

    fn remember(&mut self, key: Key, event: Event) {
        if self.written.len() >= MAX_REMEMBERED {
            // Forget everything rather than track recency: a forgotten
            // repeat only costs one more event object.
            self.written.clear();
        }
        self.written.insert(key, event);
    }
}

/// Writes events about nodes from one component.
#[derive(Debug)]
pub(crate) struct NodeEvents(Events);

impl NodeEvents {
    pub(crate) fn new(client: Client, component: &str) -> Self {
        Self(Events::new(client, component))
    }

    /// Records `reason` with `message` about `node` (`type_` Normal or
    /// Warning), or counts a repeat of the same event.
    pub(crate) async fn record(
        &mut self,
        node: &Node,
        type_: &str,
        reason: &str,
        message: &str,
    ) -> Result<()> {
        let regarding = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: node.metadata.name.clone(),
            uid: node.metadata.uid.clone(),
            ..Default::default()
        };
        self.0.record(&regarding, type_, reason, message).await
    }
}

/// `<object>.<hex nanoseconds since the epoch>`, client-go's event name.
fn event_name(object: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{object}.{nanos:x}")
}
