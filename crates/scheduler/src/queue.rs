//! The scheduling queue: which pending pod to try next, and when.
//!
//! This module owns [`SchedulingQueue`], a pure state machine (upstream
//! `PriorityQueue`) over three sub-queues: *active* (highest
//! `spec.priority` first, then FIFO), *backoff* (pods waiting out
//! `initial · 2^(attempts-1)`, capped) and *unschedulable* (pods parked until
//! a [`ClusterEvent`] that concerns the plugins that rejected them, or until
//! they have waited `max_in_unschedulable`). A popped pod is *in flight*
//! until the caller reports the outcome. Time comes from an injected
//! [`Clock`]; the queue never sleeps, it tells the caller when the next
//! backoff expires. It does no I/O.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use crate::cluster_event::{is_relevant, ClusterEvent};
use crate::framework::pod_key;
use skiff_client::clock::Clock;

/// Queue timings (upstream defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueConfig {
    /// Backoff after the first failed attempt (1 s).
    pub initial_backoff: Duration,
    /// Backoff cap (10 s).
    pub max_backoff: Duration,
    /// Longest stay in the unschedulable sub-queue without a relevant
    /// event before the pod is retried anyway (5 min).
    pub max_in_unschedulable: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self {
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(10),
            max_in_unschedulable: Duration::from_secs(300),
        }
    }
}

/// Where a queued pod is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Ready to be popped.
    Active,
    /// Waiting for its backoff to expire.
    Backoff,
    /// Waiting for a relevant cluster event.
    Unschedulable,
    /// Popped; its outcome is not reported yet.
    InFlight,
}

/// A pod handed out by [`SchedulingQueue::pop`].
#[derive(Debug, Clone)]
pub struct PoppedPod {
    /// The pod as last seen (shared with the queue's copy).
    pub pod: Arc<Pod>,
    /// Attempts including this one.
    pub attempts: u32,
    /// When the pod first entered the queue.
    pub queued: Instant,
}

#[derive(Debug)]
struct Entry {
    pod: Arc<Pod>,
    place: Place,
    attempts: u32,
    /// When the pod first entered the queue.
    queued: Instant,
    /// When the pod last entered a sub-queue.
    timestamp: Instant,
    /// Position key in the sub-queue it is in.
    seq: u64,
    /// Backoff expiry while in the backoff sub-queue.
    expiry: Instant,
    rejected_by: BTreeSet<&'static str>,
}

/// Active, backoff and unschedulable sub-queues plus in-flight pods.
#[derive(Debug)]
pub struct SchedulingQueue<C: Clock> {
    clock: C,
    config: QueueConfig,
    entries: HashMap<String, Entry>,
    active: BTreeSet<(Reverse<i32>, u64, String)>,
    backoff: BTreeSet<(Instant, u64, String)>,
    unschedulable: BTreeSet<(u64, String)>,
    seq: u64,
}

fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// Whether an update can change the scheduling outcome (upstream
/// `isPodUpdated`: anything but status and bookkeeping metadata).
fn is_pod_updated(old: &Pod, new: &Pod) -> bool {
    old.spec != new.spec
        || old.metadata.labels != new.metadata.labels
        || old.metadata.annotations != new.metadata.annotations
}

impl<C: Clock> SchedulingQueue<C> {
    /// An empty queue.
    pub fn new(clock: C, config: QueueConfig) -> Self {
        Self {
            clock,
            config,
            entries: HashMap::new(),
            active: BTreeSet::new(),
            backoff: BTreeSet::new(),
            unschedulable: BTreeSet::new(),
            seq: 0,
        }
    }

    /// The backoff after `attempts` failed attempts: `initial · 2^(n-1)`,
    /// capped at `max_backoff`.
    pub fn backoff_duration(&self, attempts: u32) -> Duration {
        let mut d = self.config.initial_backoff;
        for _ in 1..attempts {
            if d >= self.config.max_backoff {
                break;
            }
            d = d.saturating_mul(2);
        }
        d.min(self.config.max_backoff)
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Takes `key` out of whichever sub-queue holds it (not the map).
    fn unlink(&mut self, key: &str) {
        let Some(e) = self.entries.get(key) else {
            return;
        };
        let k = key.to_string();
        match e.place {
            Place::Active => {
                self.active.remove(&(Reverse(priority(&e.pod)), e.seq, k));
            }
            Place::Backoff => {
                self.backoff.remove(&(e.expiry, e.seq, k));
            }
            Place::Unschedulable => {
                self.unschedulable.remove(&(e.seq, k));
            }
            Place::InFlight => {}
        }
    }

    /// Puts `key` (already in the map, unlinked) into `place`.
    fn link(&mut self, key: &str, place: Place) {
        let seq = self.next_seq();
        let now = self.clock.now();
        let backoff = self
            .entries
            .get(key)
            .map(|e| self.backoff_duration(e.attempts))
            .unwrap_or_default();
        let Some(e) = self.entries.get_mut(key) else {
            return;
        };
        e.place = place;
        e.seq = seq;
        let k = key.to_string();
        match place {
            Place::Active => {
                self.active.insert((Reverse(priority(&e.pod)), seq, k));
            }
            Place::Backoff => {
                e.expiry = e.timestamp + backoff;
                self.backoff.insert((e.expiry, seq, k));
            }
            Place::Unschedulable => {
                e.timestamp = now;
                self.unschedulable.insert((seq, k));
            }
            Place::InFlight => {}
        }
    }

    /// Adds a pending pod, or updates the queued copy (a pod recreated
    /// under the same name starts afresh).
    pub fn add(&mut self, pod: impl Into<Arc<Pod>>) {
        let pod = pod.into();
        let key = pod_key(&pod);
        if let Some(e) = self.entries.get(&key) {
            if e.pod.metadata.uid == pod.metadata.uid {
                self.update(&key, pod);
                return;
            }
            self.delete(&key);
        }
        let now = self.clock.now();
        self.entries.insert(
            key.clone(),
            Entry {
                pod,
                place: Place::Active,
                attempts: 0,
                queued: now,
                timestamp: now,
                seq: 0,
                expiry: now,
                rejected_by: BTreeSet::new(),
            },
        );
        self.link(&key, Place::Active);
    }

    fn update(&mut self, key: &str, pod: Arc<Pod>) {
        let Some(e) = self.entries.get(key) else {
            return;
        };
        let place = e.place;
        let updated = is_pod_updated(&e.pod, &pod);
        match place {
            Place::Active => {
                self.unlink(key);
                if let Some(e) = self.entries.get_mut(key) {
                    e.pod = pod;
                }
                self.link(key, Place::Active);
            }
            Place::Unschedulable if updated => {
                if let Some(e) = self.entries.get_mut(key) {
                    e.pod = pod;
                }
                self.move_to_active_or_backoff(key);
            }
            _ => {
                if let Some(e) = self.entries.get_mut(key) {
                    e.pod = pod;
                }
            }
        }
    }

    /// Forgets a pod (deleted, or assigned by someone). True if it was known.
    pub fn delete(&mut self, key: &str) -> bool {
        self.unlink(key);
        self.entries.remove(key).is_some()
    }

    /// The next pod to schedule, if any is active; it is in flight until
    /// [`done`](Self::done) or a requeue.
    pub fn pop(&mut self) -> Option<PoppedPod> {
        let (_, _, key) = self.active.pop_first()?;
        let e = self.entries.get_mut(&key)?;
        e.place = Place::InFlight;
        e.attempts += 1;
        Some(PoppedPod {
            pod: e.pod.clone(),
            attempts: e.attempts,
            queued: e.queued,
        })
    }

    /// The queued copy of `key` and when it was first queued.
    pub fn queued_pod(&self, key: &str) -> Option<(Arc<Pod>, Instant)> {
        self.entries.get(key).map(|e| (e.pod.clone(), e.queued))
    }

    /// The pod was bound: forget it.
    pub fn done(&mut self, key: &str) {
        if self.place(key) == Some(Place::InFlight) {
            self.entries.remove(key);
        }
    }

    /// No node fits: park the in-flight pod until an event concerning one
    /// of `rejected_by` happens (empty: any event).
    pub fn requeue_unschedulable(&mut self, key: &str, rejected_by: BTreeSet<&'static str>) {
        let Some(e) = self.entries.get_mut(key) else {
            return;
        };
        if e.place != Place::InFlight {
            return;
        }
        e.rejected_by = rejected_by;
        self.link(key, Place::Unschedulable);
    }

    /// An error (plugin error, failed binding): retry after the backoff.
    pub fn requeue_backoff(&mut self, key: &str) {
        let now = self.clock.now();
        let Some(e) = self.entries.get_mut(key) else {
            return;
        };
        if e.place != Place::InFlight {
            return;
        }
        e.timestamp = now;
        self.link(key, Place::Backoff);
    }

    fn move_to_active_or_backoff(&mut self, key: &str) {
        let now = self.clock.now();
        let Some(e) = self.entries.get(key) else {
            return;
        };
        let place = if e.attempts > 0 && e.timestamp + self.backoff_duration(e.attempts) > now {
            Place::Backoff
        } else {
            Place::Active
        };
        self.unlink(key);
        self.link(key, place);
    }

    /// Moves unschedulable pods that `event` may help to active (or to
    /// backoff while their backoff lasts). Returns how many moved.
    pub fn on_event(&mut self, event: ClusterEvent) -> usize {
        let keys: Vec<String> = self
            .unschedulable
            .iter()
            .filter(|(_, k)| {
                self.entries
                    .get(k)
                    .is_some_and(|e| is_relevant(event, &e.rejected_by))
            })
            .map(|(_, k)| k.clone())
            .collect();
        for k in &keys {
            self.move_to_active_or_backoff(k);
        }
        keys.len()
    }

    /// Moves pods whose backoff has expired to active. Returns how many.
    pub fn flush_backoff_completed(&mut self) -> usize {
        let now = self.clock.now();
        let mut moved = 0;
        while let Some((expiry, _, _)) = self.backoff.first() {
            if *expiry > now {
                break;
            }
            if let Some((_, _, key)) = self.backoff.pop_first() {
                self.link(&key, Place::Active);
                moved += 1;
            }
        }
        moved
    }

    /// Retries pods parked longer than `max_in_unschedulable`.
    pub fn flush_unschedulable_leftover(&mut self) -> usize {
        let now = self.clock.now();
        let max = self.config.max_in_unschedulable;
        let keys: Vec<String> = self
            .unschedulable
            .iter()
            .filter(|(_, k)| {
                self.entries
                    .get(k)
                    .is_some_and(|e| now.saturating_duration_since(e.timestamp) >= max)
            })
            .map(|(_, k)| k.clone())
            .collect();
        for k in &keys {
            self.move_to_active_or_backoff(k);
        }
        keys.len()
    }

    /// When the earliest backoff expires, if any pod is backing off.
    pub fn next_backoff_expiry(&self) -> Option<Instant> {
        self.backoff.first().map(|(t, _, _)| *t)
    }

    /// Where a pod is, if queued.
    pub fn place(&self, key: &str) -> Option<Place> {
        self.entries.get(key).map(|e| e.place)
    }

    /// Attempts so far for a queued pod.
    pub fn attempts(&self, key: &str) -> Option<u32> {
        self.entries.get(key).map(|e| e.attempts)
    }

    /// Keys of every queued or in-flight pod.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// Pods known to the queue, in flight included.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no pod is known.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Pods ready to pop.
    pub fn active_len(&self) -> usize {
        self.active.len()
    }

    /// Pods backing off.
    pub fn backoff_len(&self) -> usize {
        self.backoff.len()
    }

    /// Pods parked as unschedulable.
    pub fn unschedulable_len(&self) -> usize {
        self.unschedulable.len()
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
