//! core/v1 Events about any object, deduplicated like client-go's
//! correlator and written in the background like client-go's event
//! broadcaster.
//!
//! This module owns [`Recorder`]: it records events such as the
//! scheduler's `Scheduled` or a controller's `SuccessfulCreate` from
//! `source.component` = the component's name, named
//! `<object>.<hex nanoseconds>` like upstream. Recording only queues the
//! event (stamped with the time it happened); one sink task writes the
//! queue, a few events at a time and in order per key, so event writes
//! never hold up scheduling or binding.
//! As upstream, events are best effort: when more than
//! [`MAX_QUEUED_EVENTS`] wait, new ones are dropped and counted in a
//! warning. An event with the same object (and fieldPath), type, reason
//! and message as one the sink wrote before is not created again: its
//! `count` is incremented and `lastTimestamp` moved (a strategic-merge
//! PATCH of the remembered event, as client-go's sink does), falling back
//! to a new event if that one is gone. Only the name and count of a
//! written event are kept, for at most [`MAX_REMEMBERED`] keys.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::Client;
use tokio::sync::{mpsc, oneshot};

use crate::api_error::{is_conflict, is_not_found};
use crate::correlator::{Correlator, EventKey, Verdict, COMBINED_PREFIX};

/// How many event keys are remembered for deduplication (client-go's LRU).
pub const MAX_REMEMBERED: usize = 4096;

/// How many events may wait for the sink before new ones are dropped.
/// client-go's broadcaster holds 1,000; ours are cheaper to keep (about a
/// kilobyte each) and a burst of pods should keep its `Scheduled` events.
pub const MAX_QUEUED_EVENTS: usize = 20_000;

/// How many event writes the sink has in flight. Upstream writes one at a
/// time; a few let the store commit several together without letting
/// events crowd out bindings in a burst.
const MAX_IN_FLIGHT: usize = 4;

/// Errors writing events (logged by the sink).
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
    /// PATCH of a repeated event failed.
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
    /// `involvedObject.fieldPath`: events about two containers of one pod
    /// are two events.
    field_path: String,
    type_: EventType,
    reason: String,
    message: String,
}

/// What the sink is asked to do.
enum Item {
    /// Write (or count a repeat of) this event.
    Event(Box<(Key, Event)>),
    /// Answer once everything queued before has been written.
    Flush(oneshot::Sender<()>),
}

/// What is kept of a written event: enough to count a repeat.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Written {
    name: String,
    count: i32,
}

/// The last event written per key, least recently used key first out.
#[derive(Debug, Default)]
struct Remembered {
    events: HashMap<Key, Written>,
    order: VecDeque<Key>,
}

impl Remembered {
    /// Remembers `written` for `key` as the most recently used key.
    fn remember(&mut self, key: Key, written: Written) {
        if self.events.insert(key.clone(), written).is_some() {
            if let Some(at) = self.order.iter().position(|k| *k == key) {
                self.order.remove(at);
            }
        }
        self.order.push_back(key);
        while self.order.len() > MAX_REMEMBERED {
            if let Some(old) = self.order.pop_front() {
                self.events.remove(&old);
            }
        }
    }
}

/// Records deduplicated events about any object; cheap to clone.
#[derive(Clone)]
pub struct Recorder {
    component: String,
    instance: String,
    /// `source.host`: the node, for a kubelet's events.
    host: Option<String>,
    queue: mpsc::Sender<Item>,
    dropped: Arc<AtomicU64>,
    correlator: Arc<std::sync::Mutex<Correlator>>,
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
    /// from `instance` (reportingInstance). Starts its sink task, which
    /// ends once every clone is dropped and the queue is written.
    pub fn new(client: Client, component: &str, instance: &str) -> Self {
        let (queue, rx) = mpsc::channel(MAX_QUEUED_EVENTS);
        tokio::spawn(
            Sink {
                client,
                remembered: Remembered::default(),
            }
            .run(rx),
        );
        Self {
            component: component.to_string(),
            instance: instance.to_string(),
            host: None,
            queue,
            dropped: Arc::default(),
            correlator: Arc::default(),
        }
    }

    /// Names `host` as the events' `source.host`, as a kubelet does with
    /// its node name (`kubectl get events -o wide` shows "kubelet, NODE").
    pub fn with_host(mut self, host: &str) -> Self {
        self.host = Some(host.to_string());
        self
    }

    /// Queues an event about `pod` (or a repeat of one) for the sink.
    pub fn record(&self, pod: &Pod, type_: EventType, reason: &str, action: &str, message: &str) {
        self.record_for(&reference_to(pod), type_, reason, action, message);
    }

    /// Queues an event about the object `about` refers to (a Deployment,
    /// a ReplicaSet, a Job...): in its namespace (`default` for
    /// cluster-scoped objects), named after it.
    pub fn record_for(
        &self,
        about: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        message: &str,
    ) {
        self.record_annotated(about, type_, reason, action, message, &[]);
    }

    /// As [`Recorder::record_for`], with `annotations` on the event (a
    /// machine-readable form of what the message says).
    pub fn record_annotated(
        &self,
        about: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        message: &str,
        annotations: &[(&str, &str)],
    ) {
        let key = Key {
            namespace: about.namespace.clone().unwrap_or_else(|| "default".into()),
            name: about.name.clone().unwrap_or_default(),
            uid: about.uid.clone().unwrap_or_default(),
            field_path: about.field_path.clone().unwrap_or_default(),
            type_,
            reason: reason.to_string(),
            message: message.to_string(),
        };
        let correlation = EventKey {
            aggregate: [
                self.component.as_str(),
                about.kind.as_deref().unwrap_or_default(),
                &key.namespace,
                &key.name,
                &key.uid,
                about.api_version.as_deref().unwrap_or_default(),
                type_.as_str(),
                reason,
            ]
            .join("\u{0}"),
            message: message.to_string(),
        };
        let verdict = self
            .correlator
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .observe(&correlation, std::time::Instant::now());
        let (key, message) = match verdict {
            Verdict::Drop => {
                tracing::debug!(pod = %key.name, reason, "event dropped by the spam filter");
                return;
            }
            Verdict::Write => (key, message.to_string()),
            // One combined event per source, object, type and reason.
            Verdict::Combine(combined) => (
                Key {
                    message: COMBINED_PREFIX.to_string(),
                    ..key
                },
                combined,
            ),
        };
        let mut ev = self.new_event(
            about,
            type_,
            reason,
            action,
            &message,
            Time(Timestamp::now()),
        );
        if !annotations.is_empty() {
            ev.metadata.annotations = Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            );
        }
        // Closed only when the runtime is going away: nothing to tell.
        if let Err(mpsc::error::TrySendError::Full(_)) =
            self.queue.try_send(Item::Event(Box::new((key, ev))))
        {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped.is_power_of_two() {
                tracing::warn!(
                    dropped,
                    queued = MAX_QUEUED_EVENTS,
                    "event queue full; dropping events"
                );
            }
        }
    }

    /// Waits until every event recorded before this call has been written
    /// (or failed).
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.queue.send(Item::Flush(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }

    fn new_event(
        &self,
        about: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        message: &str,
        now: Time,
    ) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some(event_name(about.name.as_deref().unwrap_or_default())),
                namespace: Some(about.namespace.clone().unwrap_or_else(|| "default".into())),
                ..Default::default()
            },
            involved_object: about.clone(),
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            type_: Some(type_.as_str().to_string()),
            action: Some(action.to_string()),
            source: Some(EventSource {
                component: Some(self.component.clone()),
                host: self.host.clone(),
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

/// A reference to any object for its events (`kind` and `apiVersion`
/// from its type, as client-go's `reference.GetReference`).
pub fn reference_to<K>(object: &K) -> ObjectReference
where
    K: kube::Resource<DynamicType = ()>,
{
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        namespace: object.meta().namespace.clone(),
        name: object.meta().name.clone(),
        uid: object.meta().uid.clone(),
        resource_version: object.meta().resource_version.clone(),
        field_path: None,
    }
}

/// The task that writes queued events: up to [`MAX_IN_FLIGHT`] at a time,
/// in order per key.
struct Sink {
    client: Client,
    remembered: Remembered,
}

impl Sink {
    async fn run(mut self, mut rx: mpsc::Receiver<Item>) {
        let mut pending: VecDeque<Item> = VecDeque::new();
        loop {
            if pending.is_empty() {
                match rx.recv().await {
                    Some(item) => pending.push_back(item),
                    None => return,
                }
            }
            while pending.len() < 4 * MAX_IN_FLIGHT {
                match rx.try_recv() {
                    Ok(item) => pending.push_back(item),
                    Err(_) => break,
                }
            }
            if let Some(Item::Flush(_)) = pending.front() {
                if let Some(Item::Flush(done)) = pending.pop_front() {
                    let _ = done.send(());
                }
                continue;
            }
            let batch = take_batch(&mut pending);
            // Boxed: a write's future holds the whole request future
            // (kilobytes), which join_all would otherwise move around.
            let writes = batch.into_iter().map(|(key, ev)| {
                let prev = self.remembered.events.get(&key).cloned();
                Box::pin(write(&self.client, prev, key, ev))
            });
            for (key, result) in futures::future::join_all(writes).await {
                match result {
                    Ok(ev) => self.remembered.remember(key, ev),
                    Err(e) => tracing::warn!(error = %e, "recording event"),
                }
            }
        }
    }
}

/// Takes up to [`MAX_IN_FLIGHT`] events with distinct keys from the front
/// of `pending`, stopping at a flush; a repeat of a key already taken
/// stays queued (in order) so it can be counted against the first.
fn take_batch(pending: &mut VecDeque<Item>) -> Vec<(Key, Event)> {
    let mut batch: Vec<(Key, Event)> = Vec::new();
    let mut kept = VecDeque::new();
    while let Some(item) = pending.pop_front() {
        match item {
            Item::Flush(done) => {
                kept.push_back(Item::Flush(done));
                break;
            }
            Item::Event(boxed) => {
                if batch.len() < MAX_IN_FLIGHT && !batch.iter().any(|(k, _)| *k == boxed.0) {
                    batch.push(*boxed);
                } else {
                    kept.push_back(Item::Event(boxed));
                }
            }
        }
    }
    kept.append(pending);
    *pending = kept;
    batch
}

/// Writes `ev`, or counts it as a repeat of `prev`, the event last
/// written for `key`; returns what to remember of it.
async fn write(
    client: &Client,
    prev: Option<Written>,
    key: Key,
    mut ev: Event,
) -> (Key, Result<Written>) {
    let namespace = key.namespace.clone();
    if let Some(prev) = prev {
        let count = prev.count.saturating_add(1);
        // client-go patches a repeat: its count, lastTimestamp and message.
        let patch = serde_json::json!({
            "count": count,
            "lastTimestamp": ev.last_timestamp,
            "message": ev.message,
        });
        match send_patch(client, &namespace, &prev.name, patch).await {
            Ok(()) => {
                let name = prev.name;
                return (key, Ok(Written { name, count }));
            }
            // Deleted by someone else: start a new event.
            Err(e) if is_not_found(&e) || is_conflict(&e) => {}
            Err(source) => {
                let name = prev.name;
                return (key, Err(RecorderError::Update { name, source }));
            }
        }
    }
    let mut tries = 0;
    loop {
        let name = ev.metadata.name.clone().unwrap_or_default();
        match send_create(client, &namespace, &ev).await {
            Ok(()) => return (key, Ok(Written { name, count: 1 })),
            Err(e) if is_conflict(&e) && tries < 3 => {
                tries += 1;
                ev.metadata.name = Some(event_name(&key.name));
            }
            Err(source) => return (key, Err(RecorderError::Create { name, source })),
        }
    }
}

/// POSTs `ev` without decoding the answer: the recorder keeps what it
/// needs, and reading back every event would cost as much as writing it.
async fn send_create(
    client: &Client,
    namespace: &str,
    ev: &Event,
) -> std::result::Result<(), kube::Error> {
    let body = serde_json::to_vec(ev).map_err(kube::Error::SerdeError)?;
    let request = kube::core::Request::new(format!("/api/v1/namespaces/{namespace}/events"))
        .create(&PostParams::default(), body)
        .map_err(kube::Error::BuildRequest)?;
    client.request_text(request).await.map(|_| ())
}

/// Strategic-merge PATCHes the event `name` with `patch`, without decoding
/// the answer.
async fn send_patch(
    client: &Client,
    namespace: &str,
    name: &str,
    patch: serde_json::Value,
) -> std::result::Result<(), kube::Error> {
    let request = kube::core::Request::new(format!("/api/v1/namespaces/{namespace}/events"))
        .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
        .map_err(kube::Error::BuildRequest)?;
    client.request_text(request).await.map(|_| ())
}

/// `<pod>.<hex unix nanoseconds>`, as client-go names events.
fn event_name(pod: &str) -> String {
    let nanos = Timestamp::now().as_nanosecond();
    let pod = if pod.is_empty() { "pod" } else { pod };
    format!("{pod}.{:x}", nanos.max(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(pod: &str, reason: &str) -> Item {
        let key = Key {
            namespace: "default".into(),
            name: pod.into(),
            uid: String::new(),
            field_path: String::new(),
            type_: EventType::Normal,
            reason: reason.into(),
            message: String::new(),
        };
        Item::Event(Box::new((key, Event::default())))
    }

    fn names(batch: &[(Key, Event)]) -> Vec<String> {
        batch
            .iter()
            .map(|(k, _)| format!("{}/{}", k.name, k.reason))
            .collect()
    }

    fn left(pending: &VecDeque<Item>) -> Vec<String> {
        pending
            .iter()
            .map(|i| match i {
                Item::Event(b) => format!("{}/{}", b.0.name, b.0.reason),
                Item::Flush(_) => "flush".into(),
            })
            .collect()
    }

    #[test]
    fn a_batch_takes_distinct_keys_and_leaves_repeats_in_order() {
        let mut pending: VecDeque<Item> = [
            item("a", "X"),
            item("b", "X"),
            item("a", "X"),
            item("a", "Y"),
            item("c", "X"),
        ]
        .into_iter()
        .collect();
        let batch = take_batch(&mut pending);
        assert_eq!(names(&batch), ["a/X", "b/X", "a/Y", "c/X"]);
        assert_eq!(left(&pending), ["a/X"]);
    }

    #[test]
    fn a_batch_stops_at_a_flush_and_at_the_in_flight_limit() {
        let (tx, _rx) = oneshot::channel();
        let mut pending: VecDeque<Item> = [item("a", "X"), Item::Flush(tx), item("b", "X")]
            .into_iter()
            .collect();
        assert_eq!(names(&take_batch(&mut pending)), ["a/X"]);
        assert_eq!(left(&pending), ["flush", "b/X"]);

        let mut pending: VecDeque<Item> = (0..MAX_IN_FLIGHT + 2)
            .map(|i| item(&format!("p{i}"), "X"))
            .collect();
        assert_eq!(take_batch(&mut pending).len(), MAX_IN_FLIGHT);
        assert_eq!(pending.len(), 2);
    }
}
