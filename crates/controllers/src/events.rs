//! core/v1 Events about Nodes, as kube-controller-manager's recorders
//! write them: in namespace `default` (a Node has none), named
//! `<node>.<hex nanoseconds>`, and a repeat of the same type, reason and
//! message counted on the event written before (client-go's correlator)
//! instead of a new one.
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
const NAMESPACE: &str = "default";

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
    node: String,
    uid: String,
    type_: String,
    reason: String,
    message: String,
}

/// Writes events about nodes from one component.
#[derive(Debug)]
pub(crate) struct NodeEvents {
    api: Api<Event>,
    component: String,
    written: HashMap<Key, Event>,
}

impl NodeEvents {
    pub(crate) fn new(client: Client, component: &str) -> Self {
        Self {
            api: Api::namespaced(client, NAMESPACE),
            component: component.to_string(),
            written: HashMap::new(),
        }
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
        let name = node.metadata.name.clone().unwrap_or_default();
        let key = Key {
            node: name.clone(),
            uid: node.metadata.uid.clone().unwrap_or_default(),
            type_: type_.to_string(),
            reason: reason.to_string(),
            message: message.to_string(),
        };
        let now = Time(Timestamp::now());
        if let Some(mut repeat) = self.written.remove(&key) {
            repeat.count = Some(repeat.count.unwrap_or(1).saturating_add(1));
            repeat.last_timestamp = Some(now.clone());
            // Events may be updated unconditionally, as upstream does.
            repeat.metadata.resource_version = None;
            let event_name = repeat.metadata.name.clone().unwrap_or_default();
            match self
                .api
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
                namespace: Some(NAMESPACE.to_string()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(name.clone()),
                uid: node.metadata.uid.clone(),
                ..Default::default()
            },
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
        let created = self
            .api
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

/// `<object>.<hex nanoseconds since the epoch>`, client-go's event name.
fn event_name(object: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{object}.{nanos:x}")
}
