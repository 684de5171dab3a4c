//! core/v1 Events about pods, deduplicated like client-go's correlator.
//!
//! This module owns [`Recorder`]: it writes `Scheduled` and
//! `FailedScheduling` events from `source.component` = the scheduler name,
//! named `<pod>.<hex nanoseconds>` like upstream. An event with the same
//! pod, type, reason and message as one it wrote before is not created
//! again: its `count` is incremented and `lastTimestamp` moved (a PUT of
//! the remembered object), falling back to a new event if that one is gone.
//! Events for different keys are written concurrently; the same key is
//! serialized. It remembers at most [`MAX_REMEMBERED`] keys.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::Client;

use crate::api_error::{is_conflict, is_not_found};

/// How many event keys are remembered for deduplication (client-go's LRU).
pub const MAX_REMEMBERED: usize = 4096;

/// Errors writing events.
#[derive(Debug, thiserror::Error)]
pub enum RecorderError {
    /// POST failed.
    #[error("creating event {name}")]
    Create {
        /// The event's name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// PUT of a repeated event failed.
    #[error("updating event {name}")]
    Update {
        /// The event's name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// `Result` with [`RecorderError`].
pub type Result<T, E = RecorderError> = std::result::Result<T, E>;

/// The event's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Normal.
    Normal,
    /// Warning.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    namespace: String,
    name: String,
    uid: String,
    type_: EventType,
    reason: String,
    message: String,
}

type Slot = Arc<tokio::sync::Mutex<Option<Event>>>;

#[derive(Debug, Default)]
struct Remembered {
    slots: HashMap<Key, Slot>,
    order: VecDeque<Key>,
}

/// Writes deduplicated events about pods.
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    component: String,
    instance: String,
    remembered: Arc<Mutex<Remembered>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("component", &self.component)
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder reporting as `component` (source and reportingComponent)
    /// from `instance` (reportingInstance).
    pub fn new(client: Client, component: &str, instance: &str) -> Self {
        Self {
            client,
            component: component.to_string(),
            instance: instance.to_string(),
            remembered: Arc::default(),
        }
    }

    fn slot(&self, key: Key) -> Slot {
        let mut r = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = r.slots.get(&key) {
            return slot.clone();
        }
        while r.order.len() >= MAX_REMEMBERED {
            if let Some(old) = r.order.pop_front() {
                r.slots.remove(&old);
            }
        }
        let slot = Slot::default();
        r.slots.insert(key.clone(), slot.clone());
        r.order.push_back(key);
        slot
    }

    /// Records an event about `pod`, or counts a repeat of one.
    pub async fn record(
        &self,
        pod: &Pod,
        type_: EventType,
        reason: &str,
        action: &str,
        message: &str,
    ) -> Result<()> {
        let namespace = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let key = Key {
            namespace: namespace.clone(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            type_,
            reason: reason.to_string(),
            message: message.to_string(),
        };
        let slot = self.slot(key);
        let mut last = slot.lock().await;
        let now = Time(Timestamp::now());
        if let Some(prev) = last.as_ref() {
            let mut ev = prev.clone();
            ev.count = Some(ev.count.unwrap_or(1).saturating_add(1));
            ev.last_timestamp = Some(now.clone());
            // Events may be updated unconditionally (no resourceVersion),
            // as upstream allows for them.
            ev.metadata.resource_version = None;
            let name = ev.metadata.name.clone().unwrap_or_default();
            match self.send(&namespace, Some(&name), &ev).await {
                Ok(()) => {
                    *last = Some(ev);
                    return Ok(());
                }
                // Deleted by someone else: start a new event.
                Err(e) if is_not_found(&e) || is_conflict(&e) => {}
                Err(source) => return Err(RecorderError::Update { name, source }),
            }
        }
        let mut ev = self.new_event(pod, type_, reason, action, message, now);
        let mut tries = 0;
        loop {
            let name = ev.metadata.name.clone().unwrap_or_default();
            match self.send(&namespace, None, &ev).await {
                Ok(()) => break,
                Err(e) if is_conflict(&e) && tries < 3 => {
                    tries += 1;
                    ev.metadata.name = Some(event_name(pod));
                }
                Err(source) => return Err(RecorderError::Create { name, source }),
            }
        }
        *last = Some(ev);
        Ok(())
    }

    /// POSTs `ev` (or PUTs it over `name`), without decoding the answer:
    /// the recorder keeps its own copy, and reading back every event would
    /// cost as much as writing it.
    async fn send(
        &self,
        namespace: &str,
        name: Option<&str>,
        ev: &Event,
    ) -> std::result::Result<(), kube::Error> {
        let body = serde_json::to_vec(ev).map_err(kube::Error::SerdeError)?;
        let request = kube::core::Request::new(format!("/api/v1/namespaces/{namespace}/events"));
        let pp = PostParams::default();
        let request = match name {
            Some(name) => request.replace(name, &pp, body),
            None => request.create(&pp, body),
        }
        .map_err(kube::Error::BuildRequest)?;
        self.client.request_text(request).await.map(|_| ())
    }

    fn new_event(
        &self,
        pod: &Pod,
        type_: EventType,
        reason: &str,
        action: &str,
        message: &str,
        now: Time,
    ) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some(event_name(pod)),
                namespace: pod.metadata.namespace.clone(),
                ..Default::default()
            },
            involved_object: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                namespace: pod.metadata.namespace.clone(),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
                resource_version: pod.metadata.resource_version.clone(),
                field_path: None,
            },
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            type_: Some(type_.as_str().to_string()),
            action: Some(action.to_string()),
            source: Some(EventSource {
                component: Some(self.component.clone()),
                host: None,
            }),
            reporting_component: Some(self.component.clone()),
            reporting_instance: Some(self.instance.clone()),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            count: Some(1),
            ..Default::default()
        }
    }
}

/// `<pod>.<hex unix nanoseconds>`, as client-go names events.
fn event_name(pod: &Pod) -> String {
    let nanos = Timestamp::now().as_nanosecond();
    format!(
        "{}.{:x}",
        pod.metadata.name.as_deref().unwrap_or("pod"),
        nanos.max(0)
    )
}
